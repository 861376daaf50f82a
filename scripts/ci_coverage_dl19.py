#!/usr/bin/env python3
"""Empirical width and coverage of the interval methods on TREC DL 2019.

For each of --splits random splits, --n-labelled of the 43 judged queries keep their
human judgments (the rest only have LLM labels); every method builds its interval for
each run's mean metric; the interval "covers" when it contains the metric computed
with the human judgments of all 43 queries. CRC per query is scored as the fraction
of unlabelled queries whose human value lies in their per-query interval.

``outside`` is the fraction of splits whose printed point estimate lies outside the
method's own interval (issue 11: CRC's used to be the unshifted LLM mean).

    .venv/bin/python scripts/ci_coverage_dl19.py                     # defaults below
    .venv/bin/python scripts/ci_coverage_dl19.py --llm ../shared/data/dl19/llm-qrels/HELM.qrels
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from exam_eval.trec_eval.trec_files import read_qrels, read_run  # noqa: E402
from exam_eval.stats import label_dists  # noqa: E402
from exam_eval.stats.crc import CoverageError  # noqa: E402
from exam_eval.stats.intervals import METHODS, human_values, run_intervals, run_per_query  # noqa: E402
from exam_eval.stats.metrics import parse_metric, value_range  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "dl19"
RUNS = ["idst_bert_p1", "p_bert", "TUW19-p3-f", "ICT-CKNRM_B", "ms_duet_passage", "bm25base_p", "UNH_bm25"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--llm", type=Path, default=None,
                    help="LLM qrels (default: llm-qrels/QuestionSelfRatedUnanswerablePromptWithChoices.qrels)")
    ap.add_argument("--runs", nargs="+", default=RUNS)
    ap.add_argument("--metric", default="dcg@10")
    ap.add_argument("--n-labelled", type=int, default=30)
    ap.add_argument("--splits", type=int, default=100)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--correction", choices=["paper", "crc"], default="paper")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    human = read_qrels(args.data / "qrels.txt")
    llm_path = args.llm or args.data / "llm-qrels" / "QuestionSelfRatedUnanswerablePromptWithChoices.qrels"
    llm = label_dists.from_qrels(read_qrels(llm_path))
    runs = {name: read_run(args.data / "runs" / f"{name}.run") for name in args.runs}
    metric = parse_metric(args.metric)
    queries = sorted(set(llm.dists) & set(human))
    truth = {name: float(np.mean(human_values(metric, run, human, queries))) for name, run in runs.items()}
    # as exam-correlate interval prints them: clipped to the metric's range
    bounds = value_range(metric, max(max(docs.values()) for docs in human.values() if docs))

    methods = list(METHODS) + ["crc_per_query"]
    width = {(r, m): [] for r in runs for m in methods}
    cover = {(r, m): [] for r in runs for m in methods}
    refused = {(r, m): 0 for r in runs for m in methods}
    outside = {(r, m): [] for r in runs for m in methods}
    t0 = time.time()
    for split in range(args.splits):
        labelled = sorted(random.Random(args.seed * 100003 + split).sample(queries, args.n_labelled))
        unlabelled = [q for q in queries if q not in set(labelled)]
        mapped = label_dists.calibrated(llm, human, labelled)
        for name, run in runs.items():
            results, predicted = run_intervals(metric, run, human, mapped, queries, labelled, args.alpha,
                                               args.samples, seed=split, correction=args.correction,
                                               bounds=bounds)
            for r in results:
                width[name, r.method].append(r.width)
                cover[name, r.method].append(r.lower <= truth[name] <= r.upper)
                outside[name, r.method].append(not r.lower <= r.estimate <= r.upper)
            try:
                pq = run_per_query(metric, run, human, mapped, queries, labelled, args.alpha, predicted,
                                   correction=args.correction)
            except CoverageError:
                refused[name, "crc_per_query"] += 1
                continue
            pos = {q: i for i, q in enumerate(queries)}
            idx = np.array([pos[q] for q in unlabelled])
            hv = human_values(metric, run, human, unlabelled)
            width[name, "crc_per_query"].append(float(np.mean(pq.upper[idx] - pq.lower[idx])))
            cover[name, "crc_per_query"].append(float(np.mean((pq.lower[idx] <= hv) & (hv <= pq.upper[idx]))))
    print(f"# {args.data.name}: {len(queries)} queries, {args.n_labelled} labelled, {args.splits} splits, "
          f"metric {metric.name}, 1-alpha = {1 - args.alpha:g}, LLM labels {llm_path.name} (calibrated), "
          f"{args.samples} bootstrap samples, CRC correction {args.correction}; {time.time() - t0:.0f} s",
          file=sys.stderr)
    print("run\ttruth\tmethod\tmean_width\tcoverage\trefused\toutside")

    def frac(xs):
        return f"{np.mean(xs):.3f}" if xs else "nan"

    for name in runs:
        for m in methods:
            w, c = width[name, m], cover[name, m]
            print(f"{name}\t{truth[name]:.4f}\t{m}\t{np.mean(w) if w else float('nan'):.4f}\t"
                  f"{frac(c)}\t{refused[name, m]}\t{frac(outside[name, m])}")
    for m in methods:
        w = [x for r in runs for x in width[r, m]]
        c = [x for r in runs for x in cover[r, m]]
        o = [x for r in runs for x in outside[r, m]]
        print(f"ALL\t\t{m}\t{np.mean(w) if w else float('nan'):.4f}\t{frac(c)}\t"
              f"{sum(refused[r, m] for r in runs)}\t{frac(o)}")


if __name__ == "__main__":
    main()
