#!/usr/bin/env python
"""Grading speed: exam-grade against a reference-style grading loop, on the same model.

    .venv/bin/python bench/bench_grading.py --out bench-out     # `make bench`: bench-out/bench_grading.{txt,json}

What is compared, on one machine in one run (so the ratio is fair):

- **reference**: the way the EXAM/RUBRIC workbench grades with FLAN-T5: one passage at a
  time, each of its questions in turn, ``model.generate(num_beams=5)`` with batch 1, no
  dedup, no cache. (The workbench calls the Hugging Face ``text2text-generation``
  pipeline; transformers 5 no longer has that task, so the loop calls ``generate``
  directly, which is what the pipeline did inside.) Generation is capped at 2 new tokens:
  a trained flan-t5-large answers these prompts with one digit and ``</s>``, whereas a
  random model never emits ``</s>``; the cap charges the reference only what the real
  model costs it (the most favourable case for the reference). ``common.reference_loop``.
- **exam-grade**: the real command (a subprocess), hf-seq2seq back end, the EXAM++
  question self-rating prompt in scoring mode (one encoder pass and one decoder step,
  label probabilities), default batch size, length-sorted batches, dedup, cache.

Models: random weights with the published flan-t5-small and flan-t5-base
configurations (speed does not depend on the weights), and a BPE tokenizer trained here
on the DL19 passages (T5's own sentencepiece model would need a download; the token
counts per passage are similar). Pool: a seeded subsample of the DL19 judged pool
(union of the top 20 of the 37 submitted runs), with the DL19 question bank.

Figures (table on stdout, everything in ``--json``):

- pairs/s of both, and the end-to-end ratio (exam-grade wall time including process start
  and model load, against the reference's grading time without its model load);
- the parts: scoring instead of generating (both batch 1, no dedup), batching (the engine's
  batches against batch 1, per unit) and dedup (pairs per graded unit);
- a rerun after changing 1 of the 10 questions of every query, against the full run;
- peak resident memory of the exam-grade process (its own ``VmHWM`` at exit);
- achieved GFLOP/s: FLOPs counted with ``torch.utils.flop_counter`` on a sample of pairs
  (useful FLOPs, no padding) times the pairs graded, over the grading time; the CPU's peak
  is estimated from ``lscpu`` (see ``common.cpu_peak``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
import common  # noqa: E402

PROMPT = common.PROMPT


# -- measurements ---------------------------------------------------------------------------------
def scoring_loop(model_dir: Path, requests, batch_size: int, count_flops: bool = False) -> dict:
    """exam-grade's back end in scoring mode, ``batch_size`` requests per call, in the
    engine's order (longest first)."""
    from exam_eval.backends.hf_seq2seq import Seq2SeqBackend

    backend = Seq2SeqBackend(model=str(model_dir), device="cpu", batch_size=batch_size)
    backend.min_label_mass = common.MIN_LABEL_MASS
    t0 = time.perf_counter()
    backend.load()
    load_s = time.perf_counter() - t0
    order = sorted(requests, key=lambda r: -(len(r.context) + len(r.item_text or "")))
    backend.grade(order[:1])  # warm-up
    t0 = time.perf_counter()
    for b in range(0, len(order), batch_size):
        backend.grade(order[b:b + batch_size])
    secs = time.perf_counter() - t0
    flops = None
    if count_flops:
        from torch.utils.flop_counter import FlopCounterMode

        sub = order[: min(8, len(order))]
        with FlopCounterMode(display=False) as fc:
            for r in sub:
                backend.grade([r])
        flops = fc.get_total_flops() / len(sub)
    return {"pairs": len(order), "seconds": secs, "pairs_per_s": len(order) / secs, "load_s": load_s,
            "flops_per_pair": flops}


# -- the benchmark --------------------------------------------------------------------------------
def grade_model(name: str, model_dir: Path, work: Path, pool: dict, args) -> dict:
    run = str(work / "pool.run")
    inputs = ["--backend", "hf-seq2seq", "--model", str(model_dir), "--device", "cpu", "--prompt", PROMPT,
              "--passages", str(work / "passages.jsonl"), *common.label_mass_flags(), run]
    torch_flags = ["--engine", "torch", *inputs]
    cache = work / f"cache-{name}.sqlite"
    print(f"[{name}] exam-grade, full pool ...", file=sys.stderr, flush=True)
    full = common.run_cli(["--bank", str(work / "bank.jsonl"), "--cache", str(cache), "-o", str(work / f"{name}-full.jsonl"),
                    *torch_flags])
    full["grading_s"] = common.engine_seconds(cache)
    print(f"[{name}] exam-grade, rerun after editing 1 of 10 questions per query ...", file=sys.stderr, flush=True)
    rerun = common.run_cli(["--bank", str(work / "bank-edited.jsonl"), "--cache", str(cache),
                     "-o", str(work / f"{name}-rerun.jsonl"), *torch_flags])
    rerun["grading_s"] = common.engine_seconds(cache)
    bf16 = None
    if args.bf16:
        print(f"[{name}] exam-grade --dtype bfloat16, full pool ...", file=sys.stderr, flush=True)
        cache16 = work / f"cache-{name}-bf16.sqlite"
        bf16 = common.run_cli(["--bank", str(work / "bank.jsonl"), "--cache", str(cache16), "--dtype", "bfloat16",
                        "-o", str(work / f"{name}-bf16.jsonl"), *torch_flags])
        bf16["grading_s"] = common.engine_seconds(cache16)
    ct2 = grade_ct2(name, model_dir, work, inputs) if args.ct2 else None
    requests = common.sample_requests(pool, args.sample_pairs, args.seed)
    print(f"[{name}] reference loop on {len(requests)} pairs ...", file=sys.stderr, flush=True)
    ref = common.reference_loop(model_dir, requests, count_flops=True)
    print(f"[{name}] scoring, batch 1 ...", file=sys.stderr, flush=True)
    score1 = scoring_loop(model_dir, requests, 1, count_flops=True)

    units = full["graded"]
    grading_s = full["grading_s"]
    engine_pps = full["pairs"] / grading_s
    e2e_pps = full["pairs"] / full["wall_s"]
    dedup = full["pairs"] / units if units else 1.0
    batching = (units / grading_s) / score1["pairs_per_s"]
    flops_total = score1["flops_per_pair"] * units
    extra = {}
    if bf16 is not None:
        extra = {
            "exam_grade_bf16": {"wall_s": bf16["wall_s"], "grading_s": bf16["grading_s"],
                                "pairs_per_s_end_to_end": bf16["pairs"] / bf16["wall_s"],
                                "pairs_per_s_grading": bf16["pairs"] / bf16["grading_s"],
                                "peak_rss_mib": bf16["peak_rss_mib"]},
            "ratio_end_to_end_bf16": bf16["pairs"] / bf16["wall_s"] / ref["pairs_per_s"],
            "ratio_grading_bf16": bf16["pairs"] / bf16["grading_s"] / ref["pairs_per_s"],
        }
    if ct2 is not None:
        torch_out = work / f"{name}-full.jsonl"
        for r in ct2["runs"].values():
            r["ratio_end_to_end"] = r["pairs_per_s_end_to_end"] / ref["pairs_per_s"]
            r["ratio_grading"] = r["pairs_per_s_grading"] / ref["pairs_per_s"]
            r["ratio_end_to_end_vs_torch"] = r["pairs_per_s_end_to_end"] / e2e_pps
            r["ratio_grading_vs_torch"] = r["pairs_per_s_grading"] / engine_pps
            # the same useful FLOPs as torch's (same model, same pairs), over CTranslate2's time
            r["gflops"] = flops_total / r["grading_s"] / 1e9
        ct2["agreement_ct2_float32_vs_torch"] = common.agreement(work / f"{name}-ct2-float32.jsonl", torch_out)
        extra["ctranslate2"] = ct2
    return {
        **extra,
        "pairs": full["pairs"], "units_graded": units, "deduplicated": full["deduplicated"],
        "exam_grade": {"wall_s": full["wall_s"], "overhead_s": full["wall_s"] - grading_s,
                       "grading_s": grading_s, "pairs_per_s_end_to_end": e2e_pps,
                       "pairs_per_s_grading": engine_pps, "peak_rss_mib": full["peak_rss_mib"]},
        "reference": ref,
        "scoring_batch1": score1,
        "ratio_end_to_end": e2e_pps / ref["pairs_per_s"],
        "ratio_grading": engine_pps / ref["pairs_per_s"],
        "part_scoring_vs_generating": score1["pairs_per_s"] / ref["pairs_per_s"],
        "part_batching": batching,
        "part_dedup": dedup,
        "rerun": {"wall_s": rerun["wall_s"], "grading_s": rerun["grading_s"], "graded": rerun["graded"],
                  "from_cache": rerun["from_cache"], "peak_rss_mib": rerun["peak_rss_mib"],
                  "fraction_of_full_wall": rerun["wall_s"] / full["wall_s"],
                  "fraction_of_full_grading": rerun["grading_s"] / grading_s},
        "gflops_exam_grade": flops_total / grading_s / 1e9,
        "gflops_reference": ref["flops_per_pair"] * ref["pairs_per_s"] / 1e9,
        "flops_per_pair_scoring": score1["flops_per_pair"],
        "flops_per_pair_reference": ref["flops_per_pair"],
    }


#: (key, exam-grade flags): the default (int8, close calls regraded in float32), int8 alone, float32
CT2_RUNS = (("int8", ["--compute-type", "int8"]),
            ("int8-only", ["--compute-type", "int8", "--recheck-margin", "0"]),
            ("float32", ["--compute-type", "float32"]))


def grade_ct2(name: str, model_dir: Path, work: Path, inputs: list[str]) -> dict:
    """exam-grade --engine ctranslate2 on the same pool: int8 as users get it (close calls
    regraded in float32), int8 without rechecks, float32. The one-time conversions are
    timed on their own (a user pays each once per checkpoint and compute type); the runs
    then load converted models as every later run does."""
    from exam_eval.backends.ct2_convert import converted_model

    conversion = {}
    for ct in ("int8", "float32"):
        t0 = time.perf_counter()
        converted_model(str(model_dir), name, ct)
        conversion[ct] = time.perf_counter() - t0
    runs = {}
    for key, flags in CT2_RUNS:
        print(f"[{name}] exam-grade --engine ctranslate2 {' '.join(flags)}, full pool ...", file=sys.stderr, flush=True)
        cache = work / f"cache-{name}-ct2-{key}.sqlite"
        r = common.run_cli(["--bank", str(work / "bank.jsonl"), "--cache", str(cache), "--engine", "ctranslate2",
                     *flags, "-o", str(work / f"{name}-ct2-{key}.jsonl"), *inputs])
        r["grading_s"] = common.engine_seconds(cache)
        runs[key] = {"flags": flags, "conversion_s": conversion[flags[1]], "wall_s": r["wall_s"],
                     "grading_s": r["grading_s"], "pairs": r["pairs"],
                     "pairs_per_s_end_to_end": r["pairs"] / r["wall_s"],
                     "pairs_per_s_grading": r["pairs"] / r["grading_s"], "peak_rss_mib": r["peak_rss_mib"],
                     "rechecked_in_float32": r["rechecked"], "engine": common.grade_engines(work / f"{name}-ct2-{key}.jsonl")}
    import ctranslate2

    f32 = work / f"{name}-ct2-float32.jsonl"
    return {"version": ctranslate2.__version__, "runs": runs,
            "agreement_int8_vs_float32": common.agreement(work / f"{name}-ct2-int8.jsonl", f32),
            "agreement_int8_only_vs_float32": common.agreement(work / f"{name}-ct2-int8-only.jsonl", f32)}


def grading_table(results: dict, peak: dict) -> None:
    rows = [
        ("pairs in pool (units graded)", lambda r: f"{r['pairs']} ({r['units_graded']})"),
        ("reference pairs/s (beam 5, batch 1)", lambda r: f"{r['reference']['pairs_per_s']:.2f}"),
        ("exam-grade pairs/s, end to end", lambda r: f"{r['exam_grade']['pairs_per_s_end_to_end']:.2f}"),
        ("exam-grade pairs/s, grading only", lambda r: f"{r['exam_grade']['pairs_per_s_grading']:.2f}"),
        ("RATIO end to end (goal >= 10x)", lambda r: f"{r['ratio_end_to_end']:.1f}x"),
        ("ratio, grading only", lambda r: f"{r['ratio_grading']:.1f}x"),
        ("  part: scoring vs generating", lambda r: f"{r['part_scoring_vs_generating']:.2f}x"),
        ("  part: batching", lambda r: f"{r['part_batching']:.2f}x"),
        ("  part: dedup (pairs/unit)", lambda r: f"{r['part_dedup']:.3f}x"),
        ("exam-grade wall s (of it grading)", lambda r: f"{r['exam_grade']['wall_s']:.1f} "
                                                       f"({r['exam_grade']['grading_s']:.1f})"),
        ("rerun after 1/10 edit: s (graded)", lambda r: f"{r['rerun']['wall_s']:.1f} ({r['rerun']['graded']})"),
        ("rerun / full, wall (goal <= 12%)", lambda r: f"{100 * r['rerun']['fraction_of_full_wall']:.1f}%"),
        ("rerun / full, grading only", lambda r: f"{100 * r['rerun']['fraction_of_full_grading']:.1f}%"),
        ("exam-grade peak RSS MiB", lambda r: f"{r['exam_grade']['peak_rss_mib']:.0f}"),
        ("GFLOP/s exam-grade (useful)", lambda r: f"{r['gflops_exam_grade']:.1f}"),
        ("GFLOP/s reference", lambda r: f"{r['gflops_reference']:.1f}"),
        (f"  % of CPU peak {peak['peak_gflops']:.0f} GFLOP/s", lambda r: f"{100 * r['gflops_exam_grade'] / peak['peak_gflops']:.1f}%"),
        ("  reference % of CPU peak", lambda r: f"{100 * r['gflops_reference'] / peak['peak_gflops']:.1f}%"),
    ]
    if all("exam_grade_bf16" in r for r in results.values()):
        rows += [
            ("exam-grade --dtype bfloat16 pairs/s", lambda r: f"{r['exam_grade_bf16']['pairs_per_s_end_to_end']:.2f}"),
            ("RATIO bf16 end to end (vs fp32 ref)", lambda r: f"{r['ratio_end_to_end_bf16']:.1f}x"),
            ("ratio bf16, grading only", lambda r: f"{r['ratio_grading_bf16']:.1f}x"),
        ]
    if all("ctranslate2" in r for r in results.values()):
        labels = {"int8": "int8 (default: + float32 recheck)", "int8-only": "int8, no recheck", "float32": "float32"}
        for key, _ in CT2_RUNS:
            ct = "float32" if key == "float32" else "int8"
            peak_ct = peak["peak_int8_gops"] if ct == "int8" else peak["peak_gflops"]
            goal = key == "int8"
            rows += [
                (f"CTranslate2 {labels[key]} pairs/s e2e", lambda r, c=key: f"{_c(r, c)['pairs_per_s_end_to_end']:.2f}"),
                ("  pairs/s, grading only", lambda r, c=key: f"{_c(r, c)['pairs_per_s_grading']:.2f}"),
                ("  RATIO e2e vs reference" + (" (>= 4x)" if goal else ""),
                 lambda r, c=key: f"{_c(r, c)['ratio_end_to_end']:.1f}x"),
                ("  ratio grading vs reference", lambda r, c=key: f"{_c(r, c)['ratio_grading']:.1f}x"),
                ("  RATIO e2e vs torch fp32" + (" (>= 1.6x)" if goal else ""),
                 lambda r, c=key: f"{_c(r, c)['ratio_end_to_end_vs_torch']:.2f}x"),
                ("  ratio grading vs torch fp32", lambda r, c=key: f"{_c(r, c)['ratio_grading_vs_torch']:.2f}x"),
                ("  peak RSS MiB", lambda r, c=key: f"{_c(r, c)['peak_rss_mib']:.0f}"),
                (f"  G(FL)OP/s, % of {ct} peak {peak_ct:.0f}",
                 lambda r, c=key, p=peak_ct: f"{_c(r, c)['gflops']:.0f} = {100 * _c(r, c)['gflops'] / p:.1f}%"),
                ("  one-time conversion s", lambda r, c=key: f"{_c(r, c)['conversion_s']:.1f}"),
            ]
            if key == "int8":
                rows.append(("  pairs rechecked in float32", lambda r: _rechecked(_c(r, "int8"))))
        for key, label in (("agreement_int8_vs_float32", "int8 (default)"), ("agreement_int8_only_vs_float32", "int8, no recheck")):
            rows += [
                (f"{label} vs float32: same grade", lambda r, k=key: _agree(r["ctranslate2"][k])),
                ("  disagreements", lambda r, k=key: str(r["ctranslate2"][k]["disagreements"])),
                ("  max |dp|", lambda r, k=key: f"{r['ctranslate2'][k]['max_abs_prob_difference']:.4f}"),
            ]
        rows += [
            ("CT2 float32 vs torch: same grade", lambda r: _agree(r["ctranslate2"]["agreement_ct2_float32_vs_torch"])),
            ("  CT2 float32 vs torch: max |dp|", lambda r: f"{r['ctranslate2']['agreement_ct2_float32_vs_torch']['max_abs_prob_difference']:.1e}"),
        ]
    names = list(results)
    width = max(len(label) for label, _ in rows)
    print(f"{'':<{width}}  " + "  ".join(f"{n:>16}" for n in names))
    for label, fn in rows:
        print(f"{label:<{width}}  " + "  ".join(f"{fn(results[n]):>16}" for n in names))
    print(f"CPU: {peak['model']} (family {peak['cpu_family']}), {peak['cores']} cores, {peak['simd_fp32_lanes']} fp32 lanes x "
          f"{peak['fma_units']} FMA x 2 x {peak['ghz']} GHz ({peak['clock_source']}) = {peak['peak_gflops']} GFLOP/s peak; "
          f"int8: x{peak['int8_per_fp32_lane']} = {peak['peak_int8_gops']} GOP/s")
    print(f"CPU flags (SIMD): {' '.join(peak['simd_flags'])}")


def _c(r: dict, ct: str) -> dict:
    return r["ctranslate2"]["runs"][ct]


def _rechecked(run: dict) -> str:
    n = run["rechecked_in_float32"]
    return f"{n[0]}/{n[1]} = {100 * n[0] / n[1]:.1f}%" if n else "-"


def _agree(a: dict) -> str:
    return f"{a['same_grade']}/{a['pairs']} = {100 * a['share_same']:.1f}%"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA, help="the DL19 folder of shared/data")
    ap.add_argument("--models", default="flan-t5-small,flan-t5-base")
    ap.add_argument("--queries", type=int, default=6, help="DL19 queries in the pool")
    ap.add_argument("--per-query", type=int, default=10, help="pooled passages per query")
    ap.add_argument("--sample-pairs", type=int, default=30, help="pairs timed in the batch-1 loops")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-bf16", dest="bf16", action="store_false",
                    help="skip the extra exam-grade run with --dtype bfloat16")
    ap.add_argument("--no-ct2", dest="ct2", action="store_false",
                    help="skip the exam-grade --engine ctranslate2 runs (int8 with and without float32 rechecks, float32)")
    ap.add_argument("--json", type=Path, default=None, help="write every figure to this JSON file")
    ap.add_argument("--out", type=Path, default=None,
                    help="folder for the results: bench_grading.json and bench_grading.txt (the table)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the work folder here (models, pool, grades)")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        print(f"bench: {args.data} not found (the benchmark needs shared/data/dl19)", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    if args.ct2:
        try:
            import ctranslate2  # noqa: F401
        except ImportError:
            print("bench: ctranslate2 is not installed; skipping its rows (pip install 'exam_eval[models]')",
                  file=sys.stderr)
            args.ct2 = False

    work = Path(tempfile.mkdtemp(prefix="exam-bench-")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    os.environ["EXAM_EVAL_CT2_CACHE"] = str(work / "ct2-models")  # converted here, removed with the work folder
    try:
        t0 = time.perf_counter()
        load_before = os.getloadavg()
        pool = common.build_pool(args.data, work, args.queries, args.per_query, args.seed)
        tok = common.train_tokenizer(args.data)
        results = {}
        for name in args.models.split(","):
            model_dir = common.build_model(name, tok, work / name)
            results[name] = grade_model(name, model_dir, work, pool, args)
        peak = common.cpu_peak()
        table = io.StringIO()
        with contextlib.redirect_stdout(table):
            grading_table(results, peak)
        print(table.getvalue(), end="")
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "bench_grading.txt").write_text(table.getvalue(), encoding="utf-8")
            args.json = args.json or args.out / "bench_grading.json"
        payload = {"results": results, "cpu": peak, "torch_threads": torch.get_num_threads(),
                   "load_average_before": load_before,
                   "torch": torch.__version__, "load_average_after": os.getloadavg(),
                   "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                   "bench_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                   "total_s": time.perf_counter() - t0}
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
