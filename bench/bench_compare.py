#!/usr/bin/env python3
"""Validation of exam-correlate compare on TREC DL 2019: which run differences hold when only
n queries carry human labels, human labels alone against PPI with LLM labels on the rest.

Truth: NIST's qrels on all 43 judged queries. The 37 submitted runs give 666 pairs; a
pair's true difference is its mean nDCG@10 difference over the 43 queries, and the pairs
"that differ" are those the paired t-test with Holm over the 666 pairs calls different on
all 43 queries. For each n (default 10, 20, 30) and each of --draws seeded draws (draw i
labels the n queries `exam-correlate compare ... --n-labelled n --seed i` labels):

- t (human only): the paired t-test on the n labelled queries' NIST labels;
- ppi, ppi_tuned: PPI on the per-query differences, NIST labels on the n labelled queries
  and the LLM qrels (default: the reference workbench's flan-t5-large question
  self-ratings, mapped onto NIST's scale as exam-correlate calibrates them on the labelled
  queries) on the other 43 - n,

each with Holm over the 666 pairs. Measured: coverage of the true difference by each
pair's interval (mean over pairs, and the worst pair), family-wise (every pair covered
in one draw; also with Bonferroni-wide intervals at alpha / 666), power (the share of the
reference's pairs called different), sign errors (pairs called different with the sign
of the true difference reversed) and the calls made.

The randomization test is not in the loop: one draw of it over 666 pairs with 100,000
sign patterns takes about 4 s here (hours for 3,000 draws), and with fewer patterns its
smallest p-value times 666 leaves Holm almost nothing to call.

The per-query values come from exam_eval (human values once; the LLM-predicted values
per draw by the same formula as stats/predicted.py, in arrays: the calibrated mapping is
linear in the LLM label distributions); before the loop the array path is checked against
exam_eval's own path (stats.sources, as the command runs it) on --check draws. Writes
OUT/compare.json (default bench/results/compare.json) with the machine and a table on
stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
import common  # noqa: E402

from exam_eval.io.leaderboard import run_name  # noqa: E402
from exam_eval.stats.interval_table import choose_labelled, open_source  # noqa: E402
from exam_eval.stats.metrics import ideal_dcg  # noqa: E402
from exam_eval.stats.paired import adjust, pairs, ppi_test, t_test  # noqa: E402
from exam_eval.trec_eval.trec_files import ranked, read_run  # noqa: E402

DL19 = ROOT.parent / "shared" / "data" / "dl19"
LLM = "QuestionSelfRatedUnanswerablePromptWithChoices.qrels"
METHODS = ("t", "ppi", "ppi_tuned")


class Predicted:
    """The LLM-predicted per-query metric of every run under the calibrated mapping of any
    labelled set, as arrays: U(r, q) = sum_top-k w * (p_d @ M @ gain(h)); nDCG divides by
    the ideal DCG of the query's LLM-labelled passages under the same mapping."""

    def __init__(self, source, runs, queries):
        self.metric, dists, human = source.metric, source.dists, source.human
        labels = len(dists.values)
        self.hfull = sorted({max(v, 0) for q in queries for v in human.get(q, {}).values()} | {0})
        self.top = np.zeros((len(runs), len(queries), labels))   # sum of rank weights x label distribution
        self.pool = [np.array(list(dists.dists.get(q, {}).values())).reshape(-1, labels) for q in queries]
        self.conf = np.zeros((len(queries), labels, len(self.hfull)))  # LLM distribution x human label, judged
        for j, q in enumerate(queries):
            for doc, label in human.get(q, {}).items():
                self.conf[j, :, self.hfull.index(max(label, 0))] += dists.get(q, doc)
            for r, run in enumerate(runs):
                top = ranked(run.get(q, {}))[: self.metric.k]
                w = self.metric.weights(len(top))
                for d, wd in zip(top, w):
                    self.top[r, j] += wd * dists.get(q, d)

    def __call__(self, lab: np.ndarray) -> np.ndarray:
        counts = self.conf[lab].sum(axis=0)
        keep = [i for i, h in enumerate(self.hfull) if h == 0 or counts[:, i].any()]  # the labels seen, and 0
        mapping = counts[:, keep] + 1.0  # calibrated()'s one per cell
        mapping /= mapping.sum(axis=1, keepdims=True)
        g = mapping @ self.metric.gain(np.array([self.hfull[i] for i in keep], dtype=float))
        values = self.top @ g
        if self.metric.normalised:
            ideal = np.array([ideal_dcg(self.metric, p @ g) if len(p) else 0.0 for p in self.pool])
            values = np.where(ideal > 0, values / np.where(ideal > 0, ideal, 1.0), 0.0)
        return values


def library_predictions(args, names_paths, queries, labelled) -> np.ndarray:
    """The command's own path: a fresh source, calibrated on ``labelled``, one run at a time."""
    source = open_source(str(args.qrels), str(args.llm), args.metric, 1, 4)
    source.prepare(labelled, "calibrated")
    return np.array([source.build(read_run(path), queries, labelled)[0](0.0) for _, path in names_paths])


def evaluate(args) -> dict:
    started = time.perf_counter()
    paths = sorted(args.runs.glob("*.run"))
    names_paths = [(run_name(p), str(p)) for p in paths]
    source = open_source(str(args.qrels), str(args.llm), args.metric, 1, 4)
    queries = sorted(source.human_queries)
    runs = [read_run(p) for _, p in names_paths]
    human = np.array([source.human_values(run, queries) for run in runs])
    names = [n for n, _ in names_paths]
    idx = pairs(names)
    a, b = np.array([i for i, _ in idx]), np.array([j for _, j in idx])
    d = human[a] - human[b]
    truth = d.mean(axis=1)
    reference = adjust(t_test(d, args.alpha).p, "holm") < args.alpha
    predicted = Predicted(source, runs, queries)
    position = {q: i for i, q in enumerate(queries)}

    worst = 0.0
    for seed in range(args.check):  # the array path against the library's, on the command's draws
        labelled = choose_labelled(queries, None, args.n[0], seed, str(args.qrels), lambda msg: None)
        lab = np.array([position[q] for q in labelled])
        worst = max(worst, float(np.abs(predicted(lab) - library_predictions(args, names_paths, queries,
                                                                              labelled)).max()))
    assert worst < 1e-9, f"array path differs from exam_eval's by {worst}"

    m = len(idx)
    results = {}
    for n in args.n:
        tally = {k: {"covered": np.zeros(m), "family": 0, "family_bonferroni": 0, "power": [], "calls": [],
                     "sign_errors": [], "width": [], "lambda": []} for k in METHODS}
        for seed in range(args.draws):
            labelled = choose_labelled(queries, None, n, seed, str(args.qrels), lambda msg: None)
            lab = np.array([position[q] for q in labelled])
            unl = np.setdiff1d(np.arange(len(queries)), lab)
            dp = None
            for method in METHODS:
                if method == "t":
                    res, wide = t_test(d[:, lab], args.alpha), t_test(d[:, lab], args.alpha / m)
                else:
                    if dp is None:
                        p_all = predicted(lab)
                        dp = p_all[a] - p_all[b]
                    parts = (d[:, lab], dp[:, lab], dp[:, unl])
                    res = ppi_test(*parts, args.alpha, method == "ppi_tuned")
                    wide = ppi_test(*parts, args.alpha / m, method == "ppi_tuned")
                    tally[method]["lambda"].append(float(np.mean(res.lam)))
                t = tally[method]
                covered = (res.lower <= truth) & (truth <= res.upper)
                t["covered"] += covered
                t["family"] += bool(covered.all())
                t["family_bonferroni"] += bool(((wide.lower <= truth) & (truth <= wide.upper)).all())
                called = adjust(res.p, "holm") < args.alpha
                t["power"].append(float((called & reference).sum() / max(1, reference.sum())))
                t["calls"].append(int(called.sum()))
                t["sign_errors"].append(int((called & (np.sign(res.difference) != np.sign(truth))).sum()))
                t["width"].append(float(np.mean(res.upper - res.lower)))
        results[str(n)] = {method: _summary(t, args.draws, [f"{names[i]} - {names[j]}" for i, j in idx])
                           for method, t in tally.items()}
    return {"machine": common.machine(), "numpy": np.__version__, "seconds": round(time.perf_counter() - started, 1),
            "inputs": {"qrels": str(args.qrels), "llm": str(args.llm), "runs": len(runs), "queries": len(queries),
                       "pairs": m, "metric": args.metric, "mapping": "calibrated"},
            "alpha": args.alpha, "draws": args.draws, "correction": "holm",
            "reference": {"test": "t on all queries, holm", "pairs_differ": int(reference.sum()),
                          "identical_pairs": int((truth == 0).sum())},
            "check": {"draws": args.check, "max_abs_difference": worst},
            "results": results}


def _summary(t: dict, draws: int, pair_names: list[str]) -> dict:
    calls, errors = np.array(t["calls"]), np.array(t["sign_errors"])
    per_pair = t["covered"] / draws
    return {"coverage_per_pair": round(float(per_pair.mean()), 4), "coverage_worst_pair": round(float(per_pair.min()), 4),
            "worst_pair": pair_names[int(np.argmin(per_pair))],
            "pairs_covered_below_0.90": round(float((per_pair < 0.9).mean()), 4),
            "coverage_family_wise": round(t["family"] / draws, 4),
            "coverage_family_wise_bonferroni": round(t["family_bonferroni"] / draws, 4),
            "power": round(float(np.mean(t["power"])), 4), "calls_per_draw": round(float(calls.mean()), 2),
            "sign_errors_per_draw": round(float(errors.mean()), 4),
            "sign_error_share_of_calls": round(float(errors.sum() / max(1, calls.sum())), 5),
            "draws_with_a_sign_error": round(float((errors > 0).mean()), 4),
            "mean_width": round(float(np.mean(t["width"])), 4),
            "mean_lambda": round(float(np.mean(t["lambda"])), 4) if t["lambda"] else None}


def table(res: dict) -> str:
    lines = ["| n | method | coverage per pair (worst) | family-wise (Bonferroni) | power | calls | sign errors per draw "
             "(share of calls) | mean width |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for n, by in res["results"].items():
        for method, s in by.items():
            lines.append(f"| {n} | {method} | {s['coverage_per_pair']:.3f} ({s['coverage_worst_pair']:.3f}) | "
                         f"{s['coverage_family_wise']:.3f} ({s['coverage_family_wise_bonferroni']:.3f}) | "
                         f"{s['power']:.3f} | {s['calls_per_draw']:.1f} | {s['sign_errors_per_draw']:.3f} "
                         f"({s['sign_error_share_of_calls']:.4f}) | {s['mean_width']:.3f} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"), help="Folder of compare.json.")
    ap.add_argument("--draws", type=int, default=1000, help="Seeded draws of the labelled queries per n.")
    ap.add_argument("--n", type=lambda s: [int(x) for x in s.split(",")], default=[10, 20, 30],
                    help="Labelled queries, comma-separated.")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--metric", default="ndcg@10")
    ap.add_argument("--llm", type=Path, default=DL19 / "llm-qrels" / LLM, help="LLM qrels.")
    ap.add_argument("--qrels", type=Path, default=DL19 / "qrels.txt", help="Human qrels (the truth).")
    ap.add_argument("--runs", type=Path, default=DL19 / "runs", help="Folder of *.run files.")
    ap.add_argument("--check", type=int, default=3, help="Draws on which the array path is checked.")
    args = ap.parse_args()
    if not args.qrels.is_file():
        print(f"skipped: needs {args.qrels} (../shared/data/dl19)")
        return 0
    res = evaluate(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(res, indent=2) + "\n")
    print(common.machine_line(res["machine"]))
    print(f"{res['inputs']['runs']} runs, {res['inputs']['pairs']} pairs, {res['reference']['pairs_differ']} differ "
          f"on all {res['inputs']['queries']} queries (t, holm); {res['draws']} draws per n; {res['seconds']} s")
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
