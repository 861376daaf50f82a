#!/usr/bin/env python
"""One `exam-grade --engine ctranslate2` attempt on a device, for the GPU run (bench/device_run.sh).

    python3 bench/studies/device_ct2.py --device cuda --site /tmp/site --json OUT/ct2_cuda.json

CTranslate2's PyPI wheel travels to the GPU machine as a wheel (bench/device_stage.sh --ct2)
and is installed in ``--site``, which only this attempt puts on PYTHONPATH: where
ctranslate2 is importable, exam-grade's ``--engine auto`` picks it, and the torch rows of
bench_pipeline.py must stay torch. The wheel is built for the CUDA 12 libraries (cuBLAS 12);
where they are missing exam-grade says so in one line, which is recorded as it is. Where it
runs, the same pool is graded by the torch engine too (defaults), for the rates side by side
and the share of equal grades. Random weights in a published flan-t5 configuration and the
DL19 pool, as in bench_pipeline.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
import common  # noqa: E402


def grade(model_dir: Path, work: Path, device: str, engine: str, site: tuple[str, ...]) -> dict:
    cache, out = work / f"cache-{engine}.sqlite", work / f"{engine}.jsonl"
    r = common.run_cli(["--backend", "hf-seq2seq", "--model", str(model_dir), "--device", device, "--engine", engine,
                    "--prompt", common.PROMPT, "--passages", str(work / "passages.jsonl"), "--bank",
                    str(work / "bank.jsonl"), "--cache", str(cache), "-o", str(out), *common.label_mass_flags(),
                    str(work / "pool.run")],
                   check=False, path=site)
    if "returncode" not in r:
        r["grading_s"] = common.engine_seconds(cache)
        r["pairs_per_s_end_to_end"] = r["pairs"] / r["wall_s"]
        r["pairs_per_s_grading"] = r["pairs"] / r["grading_s"]
        r["output"] = str(out)
    return r


def ct2_facts(site: tuple[str, ...], device: str) -> dict:
    """ctranslate2's version and what it sees, from ``site`` (or the message it fails with)."""
    sys.path[:0] = list(site)
    try:
        import ctranslate2

        facts = {"version": ctranslate2.__version__, "cuda_devices": ctranslate2.get_cuda_device_count()}
        facts["compute_types"] = sorted(ctranslate2.get_supported_compute_types(device.partition(":")[0]))
    except Exception as exc:  # recorded, not raised: the message is the finding
        facts = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        del sys.path[: len(site)]
    return facts


def save(path: Path, result: dict, t0: float) -> None:
    """The result so far (the torch row may not finish inside the run's time limit)."""
    result["total_s"] = time.perf_counter() - t0
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    part.replace(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--site", action="append", default=[], help="folder holding the installed wheel (repeatable)")
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA, help="the DL19 folder of shared/data")
    ap.add_argument("--model", default="flan-t5-small", help="of " + ", ".join(common.CONFIGS))
    ap.add_argument("--queries", type=int, default=6)
    ap.add_argument("--per-query", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, required=True, help="where the result goes")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        print(f"bench: {args.data} not found (the benchmark needs shared/data/dl19)", file=sys.stderr)
        return 2
    site = tuple(args.site)
    work = Path(tempfile.mkdtemp(prefix="exam-ct2-device-"))
    os.environ["EXAM_EVAL_CT2_CACHE"] = str(work / "ct2-models")
    try:
        t0 = time.perf_counter()
        common.build_pool(args.data, work, args.queries, args.per_query, args.seed)
        model_dir = common.build_model(args.model, common.train_tokenizer(args.data), work / args.model)
        result = {"device": args.device, "model": args.model, "ctranslate2": ct2_facts(site, args.device)}
        print(f"[ctranslate2] exam-grade --engine ctranslate2 --device {args.device} ({args.model}) ...",
              file=sys.stderr, flush=True)
        result["ctranslate2_run"] = ct2 = grade(model_dir, work, args.device, "ctranslate2", site)
        save(args.json, result, t0)
        if "returncode" in ct2:
            print(f"[ctranslate2] exit {ct2['returncode']}: {ct2['message']}", file=sys.stderr, flush=True)
        else:
            print(f"[ctranslate2] {ct2['pairs_per_s_end_to_end']:.1f} pairs/s end to end, "
                  f"{ct2['pairs_per_s_grading']:.1f} grading only ({ct2['pairs']} pairs)", file=sys.stderr, flush=True)
            result["torch_run"] = torch_run = grade(model_dir, work, args.device, "torch", site)
            if "returncode" not in torch_run:
                result["agreement_ct2_vs_torch"] = common.agreement(Path(ct2["output"]), Path(torch_run["output"]))
                print(f"[ctranslate2] torch defaults {torch_run['pairs_per_s_end_to_end']:.1f} pairs/s end to end; "
                      f"same grade {result['agreement_ct2_vs_torch']['same_grade']}/"
                      f"{result['agreement_ct2_vs_torch']['pairs']}", file=sys.stderr, flush=True)
        save(args.json, result, t0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
