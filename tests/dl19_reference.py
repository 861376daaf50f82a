"""nDCG@10 per query on TREC DL 2019 by pytrec_eval (trec_eval's own C code): the independent
reference the paired tests and the compare bench are checked against."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def ndcg10_per_query(dl19: Path, runs: list[Path]) -> np.ndarray:
    """One row per run, one column per query NIST's qrels judge (sorted by id); a query a
    run lacks counts 0, as trec_eval -c."""
    import pytrec_eval

    qrels: dict = {}
    for line in (dl19 / "qrels.txt").read_text().splitlines():
        q, _, doc, lab = line.split()
        qrels.setdefault(q, {})[doc] = int(lab)
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})
    rows = []
    for path in runs:
        run: dict = {}
        for line in path.read_text().splitlines():
            q, _, doc, _, s, _ = line.split()
            run.setdefault(q, {})[doc] = float(s)
        res = ev.evaluate(run)
        rows.append([res.get(q, {}).get("ndcg_cut_10", 0.0) for q in sorted(qrels)])
    return np.array(rows)
