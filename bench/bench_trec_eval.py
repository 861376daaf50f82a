#!/usr/bin/env python3
"""Benchmark: exam-qrels against the real trec_eval 9.0.8 binary, at scale.

1. A synthetic run of --queries x --depth lines (default 2,000 x 1,000 = 2 M lines, about
   77 MB, MS MARCO-like ids and 4-decimal scores) with --qrels-lines judgments (default
   100,000: half of each query's judged documents from its run, more of them near the
   top), seeded; scored with the default measures and with ``-q -m all_trec``.
2. A leaderboard at TREC depth: the 37 DL19 runs of ../shared/data/dl19 (top-20 judged
   passages only there) padded to 1,000 documents per query with seeded unjudged
   documents below their own scores (37 x 43 x 1,000 = 1.6 M lines), DL19 qrels, default
   measures: one exam-qrels call against 37 trec_eval processes, one after the other.

Each case runs --repeat times, trec_eval, exam-qrels (as a user runs it: forked workers
for the cores idle when it starts), exam-qrels in one process (EXAM_EVAL_WORKERS=1) and
exam-qrels with a worker per core whatever the load (EXAM_EVAL_WORKERS=cores) in turn
(which one goes first rotates), every command a fresh process under /usr/bin/time (wall time and peak
resident memory; GNU time reports the largest of the process and its children). Figures
are medians; the ratio is exam-qrels over trec_eval (below 1: exam-qrels is faster).
Outputs must be byte-identical (case 1); in case 2 every leaderboard cell must be the
value trec_eval prints for that run. The JSON (bench-out/trec_eval.json) records the
CPU, the load average, the library versions and the inputs' sizes too.

The binary: --trec-eval, else $EXAM_EVAL_TREC_EVAL, else built by
../shared/tools/build-trec-eval; without any of them the benchmark says so and stops.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
import common  # noqa: E402

SHARED = ROOT.parent / "shared"
DL19 = SHARED / "data" / "dl19"
BUILD = SHARED / "tools" / "build-trec-eval"
TIME = "/usr/bin/time"


def find_trec_eval(given: str | None) -> str | None:
    for cand in (given, os.environ.get("EXAM_EVAL_TREC_EVAL")):
        if cand and os.access(cand, os.X_OK):
            return cand
    if BUILD.is_file() and shutil.which("cc") and shutil.which("make"):
        res = subprocess.run(["sh", str(BUILD)], capture_output=True, text=True)
        if res.returncode == 0 and os.access(res.stdout.strip(), os.X_OK):
            return res.stdout.strip()
    return None


# ----------------------------------------------------------------------------- inputs

def write_synthetic(run_path: Path, qrels_path: Path, queries: int, depth: int, qrels_lines: int, seed: int) -> None:
    import numpy as np

    rng = np.random.default_rng(seed)
    qids = np.sort(rng.choice(np.arange(1, 2_000_000), queries, replace=False))
    per_q = max(qrels_lines // queries, 1)
    with open(run_path, "w") as run, open(qrels_path, "w") as qrels:
        for qid in qids:
            docs = rng.choice(8_841_823, depth + per_q, replace=False)   # MS MARCO passage ids
            ranked = docs[:depth]
            scores = np.sort(rng.gamma(2.0, 3.0, depth))[::-1]
            run.write("".join(f"{qid} Q0 {d} {r} {s:.4f} synthetic\n"
                              for r, (d, s) in enumerate(zip(ranked.tolist(), scores.tolist()), 1)))
            in_run = ranked[np.unique(np.minimum(rng.geometric(0.01, per_q // 2), depth) - 1)]
            judged = np.concatenate([in_run, docs[depth:depth + per_q - len(in_run)]])
            labels = rng.choice(4, len(judged), p=[0.56, 0.17, 0.195, 0.075])   # DL19's label mix
            qrels.write("".join(f"{qid} 0 {d} {lab}\n" for d, lab in zip(judged.tolist(), labels.tolist())))


def write_padded_dl19(out_dir: Path, depth: int, seed: int) -> list[Path]:
    """Each DL19 run to ``depth`` documents per query: its own lines, then unjudged
    documents (ids no qrels line has) with scores below its lowest, in rank order."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for src in sorted((DL19 / "runs").glob("*.run")):
        rnd = random.Random(f"{seed}:{src.name}")
        by_q: dict[str, list[list[str]]] = {}
        for line in src.read_text().splitlines():
            f = line.split()
            if f:
                by_q.setdefault(f[0], []).append(f)
        lines = []
        for qid, rows in by_q.items():
            rows.sort(key=lambda f: -float(f[4]))
            tag, low = rows[0][5], min(float(f[4]) for f in rows)
            lines += [" ".join(f) for f in rows]
            for rank in range(len(rows) + 1, depth + 1):
                low -= rnd.uniform(0.0001, 0.01)
                lines.append(f"{qid} Q0 pad{rnd.randrange(10**9)}-{rank} {rank} {low:.6f} {tag}")
        path = out_dir / src.name
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


# ----------------------------------------------------------------------------- timing

def timed(cmd: list[str], stdout_path: Path, env: dict | None = None) -> tuple[float, int]:
    """(wall seconds, peak RSS in KiB) of one command run as a fresh process."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf, open(stdout_path, "wb") as out:
        t = time.perf_counter()
        res = subprocess.run([TIME, "-f", "%M", "-o", tf.name, *cmd], stdout=out, stderr=subprocess.PIPE, env=env)
        wall = time.perf_counter() - t
        if res.returncode != 0:
            raise SystemExit(f"failed ({res.returncode}): {' '.join(cmd)}\n{res.stderr.decode()[-2000:]}")
        return wall, int(tf.read().strip().splitlines()[-1])


def exam_qrels_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "exam_eval.commands.qrels", *map(str, args)]


def alternated(repeat: int, *fns) -> list[list]:
    """Each fn in turn, repeat rounds; the one that goes first rotates."""
    out: list[list] = [[] for _ in fns]
    for i in range(repeat):
        for k in range(len(fns)):
            j = (i + k) % len(fns)
            out[j].append(fns[j]())
    return out


def checked(sample, ours: Path, theirs: Path, same: list[bool]):
    same.append(ours.read_bytes() == theirs.read_bytes())
    return sample


def checked_lb(sample, tsv: Path, te_outs: dict, agree: list[bool]):
    agree.append(leaderboard_agrees(tsv, te_outs))
    return sample


def summary(samples: list[tuple[float, int]]) -> dict:
    walls = [w for w, _ in samples]
    return {"wall_s_median": statistics.median(walls), "wall_s": walls,
            "peak_rss_mib_median": statistics.median(m for _, m in samples) / 1024,
            "peak_rss_mib_max": max(m for _, m in samples) / 1024}


def _arms(samples: list[list]) -> dict:
    """The three exam-qrels arms' summaries: as a user runs it, one process, a worker per core."""
    return dict(zip(("exam_qrels", "exam_qrels_one_process", "exam_qrels_forked_all_cores"), map(summary, samples)))


def machine() -> dict:
    """The machine (common.machine) and the versions that matter here."""
    import numpy
    import pytrec_eval

    return {**common.machine(), "numpy": numpy.__version__, "pytrec_eval": getattr(pytrec_eval, "__version__", "?")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--qrels-lines", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--trec-eval", default=None, help="trec_eval 9.0.8 binary (else built from ../shared/tools)")
    ap.add_argument("--skip-leaderboard", action="store_true")
    args = ap.parse_args()

    binary = find_trec_eval(args.trec_eval)
    if binary is None:
        print("bench_trec_eval: no trec_eval binary (--trec-eval, $EXAM_EVAL_TREC_EVAL or "
              "../shared/tools/build-trec-eval with cc and make); nothing to compare", file=sys.stderr)
        return 0
    if not os.access(TIME, os.X_OK):
        print(f"bench_trec_eval: {TIME} (GNU time) is needed for the peak memory", file=sys.stderr)
        return 1
    out = Path(args.out)
    data = out / "trec_eval-data"
    scratch = out / "trec_eval-outputs"
    data.mkdir(parents=True, exist_ok=True)
    scratch.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cores = len(os.sched_getaffinity(0))
    # exam-qrels forks workers only for the cores idle when it starts (see exam_eval/trec_eval/parallel.py);
    # the third arm forks one per core whatever the load, to show what the fork gives here
    forked_env = dict(env, EXAM_EVAL_WORKERS=str(cores))
    single_env = dict(env, EXAM_EVAL_WORKERS="1")

    run = data / f"synthetic-{args.queries}x{args.depth}-s{args.seed}.run"
    qrels = data / f"synthetic-{args.queries}x{args.qrels_lines}-s{args.seed}.qrels"
    if not (run.exists() and qrels.exists()):
        print(f"writing {run} and {qrels}", file=sys.stderr)
        write_synthetic(run, qrels, args.queries, args.depth, args.qrels_lines, args.seed)
    report: dict = {"machine": machine(), "trec_eval": binary, "repeat": args.repeat,
                    "loadavg_before": os.getloadavg(), "cases": []}
    report["synthetic"] = {"run": str(run), "run_lines": args.queries * args.depth, "run_bytes": run.stat().st_size,
                           "queries": args.queries, "depth": args.depth, "qrels_lines": args.qrels_lines,
                           "qrels_bytes": qrels.stat().st_size, "seed": args.seed}

    rows = []
    for label, flags in (("default measures", []), ("-q -m all_trec", ["-q", "-m", "all_trec"])):
        te_out, ours_out = scratch / "trec_eval.out", scratch / "exam-qrels.out"
        identical: list[bool] = []
        te_samples, *arms = alternated(
            args.repeat, lambda f=flags, o=te_out: timed([binary, *f, str(qrels), str(run)], o),
            *(lambda f=flags, o=ours_out, t=te_out, same=identical, e=e: checked(
                timed(exam_qrels_cmd(*f, qrels, run), o, e), o, t, same) for e in (env, single_env, forked_env)))
        case = {"case": f"{args.queries} x {args.depth} run, {label}", "flags": flags,
                "trec_eval": summary(te_samples), **_arms(arms),
                "byte_identical": all(identical), "output_bytes": te_out.stat().st_size}
        case["ratio_wall"] = case["exam_qrels"]["wall_s_median"] / case["trec_eval"]["wall_s_median"]
        case["ratio_peak"] = case["exam_qrels"]["peak_rss_mib_median"] / case["trec_eval"]["peak_rss_mib_median"]
        report["cases"].append(case)
        rows.append(case)
        print(f"{case['case']}: done", file=sys.stderr)

    if not args.skip_leaderboard and (DL19 / "runs").is_dir():
        runs = write_padded_dl19(data / "dl19-depth1000", 1000, args.seed)
        dl19_qrels = DL19 / "qrels.txt"
        lb_out = scratch / "leaderboard.tsv"
        te_outs = {p: scratch / f"{p.stem}.trec_eval" for p in runs}

        def te_all():
            t = time.perf_counter()
            peaks = [timed([binary, str(dl19_qrels), str(p)], te_outs[p])[1] for p in runs]
            return time.perf_counter() - t, max(peaks)

        agree = []
        te_samples, *arms = alternated(
            args.repeat, te_all,
            *(lambda e=e: checked_lb(timed(exam_qrels_cmd(dl19_qrels, *runs), lb_out, e), lb_out, te_outs, agree)
              for e in (env, single_env, forked_env)))
        case = {"case": f"leaderboard: {len(runs)} DL19 runs x 43 queries x 1000 (one exam-qrels call vs "
                        f"{len(runs)} trec_eval processes)",
                "run_lines": sum(sum(1 for _ in open(p)) for p in runs), "runs": len(runs),
                "trec_eval": summary(te_samples), **_arms(arms), "values_agree": all(agree)}
        case["ratio_wall"] = case["exam_qrels"]["wall_s_median"] / case["trec_eval"]["wall_s_median"]
        case["ratio_peak"] = case["exam_qrels"]["peak_rss_mib_median"] / case["trec_eval"]["peak_rss_mib_median"]
        report["cases"].append(case)
        rows.append(case)

    report["loadavg_after"] = os.getloadavg()
    path = out / "trec_eval.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    m = report["machine"]
    print(f"CPU: {m['cpu']} ({m['cores']} cores; {' '.join(m['cpu_flags'])}); python {m['python']}, "
          f"numpy {m['numpy']}, pytrec_eval {m['pytrec_eval']}; load {report['loadavg_before'][0]:.2f} "
          f"-> {report['loadavg_after'][0]:.2f}")
    print(f"{'case':<44} {'trec_eval s':>11} {'ours s':>7} {'ratio':>6} {'1 proc s':>8} {'ratio':>6} "
          f"{'forked s':>8} {'ratio':>6} {'te MiB':>7} {'ours MiB':>8} {'ratio':>6} same")
    for c in rows:
        same = c.get("byte_identical", c.get("values_agree"))
        te = c["trec_eval"]["wall_s_median"]
        one, forked = (c[k]["wall_s_median"] for k in ("exam_qrels_one_process", "exam_qrels_forked_all_cores"))
        print(f"{c['case'][:44]:<44} {te:11.2f} {c['exam_qrels']['wall_s_median']:7.2f} "
              f"{c['ratio_wall']:6.2f} {one:8.2f} {one / te:6.2f} {forked:8.2f} {forked / te:6.2f} "
              f"{c['trec_eval']['peak_rss_mib_median']:7.0f} "
              f"{c['exam_qrels']['peak_rss_mib_median']:8.0f} {c['ratio_peak']:6.2f} {same}")
    print(f"written {path}")
    return 0 if all(c.get("byte_identical", c.get("values_agree")) for c in rows) else 1


def leaderboard_agrees(tsv: Path, te_outs: dict[Path, Path]) -> bool:
    """Every cell of the leaderboard is the value trec_eval prints on the run's 'all' line."""
    lines = tsv.read_text().splitlines()
    header = lines[0].split("\t")
    rows = {f[0]: dict(zip(header[1:], f[1:])) for f in (line.split("\t") for line in lines[1:])}
    for path, te_out in te_outs.items():
        theirs = {}
        for line in te_out.read_text().splitlines():
            name, qid, value = line.split("\t")
            if qid == "all" and name.strip() != "runid":
                theirs[name.strip()] = value.strip()
        if rows.get(path.stem) != theirs:
            return False
    return True


if __name__ == "__main__":
    sys.exit(main())
