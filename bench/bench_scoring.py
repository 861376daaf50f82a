#!/usr/bin/env python3
"""Benchmark: scoring the 37 DL19 runs (exam-qrels) and EXAM-Cover from the graded file.

Compares our trec_eval-identical path against pytrec_eval alone on the same inputs, and
times the whole commands as a user runs them. Needs ../shared/data/dl19 (skips without).
Prints a table and writes bench-out/scoring.json (with the machine: common.machine). Figures
are medians of --repeat runs; "cpu" is process time (the compute the issue's target is
about), "wall" includes I/O. The ratios compare two commands timed alternately in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
import common  # noqa: E402

DL19 = ROOT.parent / "shared" / "data" / "dl19"


def measure(fn, repeat):
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    if not DL19.is_dir():
        print("bench_scoring: ../shared/data/dl19 not found; nothing to measure", file=sys.stderr)
        return 0

    import pytrec_eval

    machine = common.machine()

    from exam_eval.grading.grade_files import read_grades
    from exam_eval.trec_eval.trec_files import read_qrels, read_run
    from exam_eval.measures.exam_cover import build_index, exam_cover
    from exam_eval.trec_eval.registry import parse_measures
    from exam_eval.trec_eval.evaluate import evaluate

    run_paths = sorted((DL19 / "runs").glob("*.run"))
    graded = DL19 / "graded-flan-t5-large.jsonl.gz"
    qrels = read_qrels(DL19 / "qrels.txt")
    runs = [read_run(p) for p in run_paths]
    requests = parse_measures(["ndcg_cut.10"])
    rows = []

    def ours_scoring():
        for run in runs:
            evaluate(qrels, run, requests, complete=True)

    def pytrec_only():
        ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})
        for run in runs:
            res = ev.evaluate(run)
            sum(v["ndcg_cut_10"] for v in res.values()) / len(qrels)

    def read_inputs():
        read_qrels(DL19 / "qrels.txt")
        for p in run_paths:
            read_run(p)

    grades = read_grades(graded)

    def cover_compute():
        index = build_index(grades, 4)
        for run in runs:
            exam_cover(index, run)

    rows.append(("score 37 runs, ndcg_cut.10 -c (ours, in memory)", *measure(ours_scoring, args.repeat)))
    rows.append(("score 37 runs, pytrec_eval alone (in memory)", *measure(pytrec_only, args.repeat)))
    rows.append(("read qrels + 37 runs", *measure(read_inputs, args.repeat)))
    rows.append(("read graded file (92,600 grades)", *measure(lambda: read_grades(graded), args.repeat)))
    rows.append(("EXAM-Cover 37 runs (in memory)", *measure(cover_compute, args.repeat)))

    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def cli(module, *cli_args):
        def go():
            subprocess.run([sys.executable, "-m", f"exam_eval.commands.{module}", *map(str, cli_args)],
                           check=True, stdout=subprocess.DEVNULL, env=env)
        return go

    # The same job as a whole process with pytrec_eval alone (its own file parsers, no
    # checks, no trec_eval rules): the yardstick issue 12 asks not to fall behind.
    pytrec_script = (
        "import sys, pytrec_eval\n"
        "qrels = pytrec_eval.parse_qrel(open(sys.argv[1]))\n"
        "ev = pytrec_eval.RelevanceEvaluator(qrels, {sys.argv[2]})\n"
        "key = sys.argv[2].replace('.', '_')\n"
        "for path in sys.argv[3:]:\n"
        "    res = ev.evaluate(pytrec_eval.parse_run(open(path)))\n"
        "    print(path, sum(v[key] for v in res.values()) / len(qrels))\n"
    )

    def pytrec_process(measure, *paths):
        def go():
            subprocess.run([sys.executable, "-c", pytrec_script, str(DL19 / "qrels.txt"), measure, *map(str, paths)],
                           check=True, stdout=subprocess.DEVNULL, env=env)
        return go

    one_run = run_paths[0]
    ratios = []
    for label, ours, theirs in (
        ("37 runs, -c -m ndcg_cut.10", cli("qrels", "-c", "-m", "ndcg_cut.10", DL19 / "qrels.txt", *run_paths),
         pytrec_process("ndcg_cut.10", *run_paths)),
        ("1 run, -q (official measures)", cli("qrels", "-q", DL19 / "qrels.txt", one_run),
         pytrec_process("map", one_run)),
    ):
        # interleaved, so that load on a shared machine hits both alike
        ours_w, theirs_w = [], []
        for _ in range(args.repeat):
            ours_w.append(measure(ours, 1)[0])
            theirs_w.append(measure(theirs, 1)[0])
        o, t = statistics.median(ours_w), statistics.median(theirs_w)
        rows.append((f"exam-qrels {label} (whole process)", o, None))
        rows.append((f"pytrec_eval {label.split(',')[0]} (whole process, parse + score)", t, None))
        ratios.append((label, o / t))

    # process time of a child is not ours; wall time is what a user sees
    for label, fn in (
        ("exam-qrels -c -m P.20 -l 3 GRADED runs/*.run (command)", cli("qrels", "-c", "-m", "P.20", "-l", "3", graded, *run_paths)),
        ("exam-cover GRADED runs/*.run (command)", cli("cover", graded, *run_paths)),
        ("python startup + imports only", lambda: subprocess.run([sys.executable, "-c", "import exam_eval.commands.qrels"], check=True, env=env)),
    ):
        wall, _ = measure(fn, args.repeat)
        rows.append((label, wall, None))

    width = max(len(r[0]) for r in rows)
    print(common.machine_line(machine))
    print(f"{'what':<{width}}  {'wall s':>8}  {'cpu s':>8}")
    for label, wall, cpu in rows:
        print(f"{label:<{width}}  {wall:8.3f}  {'' if cpu is None else f'{cpu:8.3f}':>8}")
    for label, ratio in ratios:
        print(f"whole-process ratio exam-qrels / pytrec_eval, {label}: {ratio:.2f}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "scoring.json"), "w") as fh:
        json.dump([{"what": r[0], "wall_s": r[1], "cpu_s": r[2]} for r in rows]
                  + [{"what": f"ratio exam-qrels / pytrec_eval, {label}", "ratio": ratio} for label, ratio in ratios]
                  + [{"what": "machine", **machine}],
                  fh, indent=2)
    print(f"written {os.path.join(args.out, 'scoring.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
