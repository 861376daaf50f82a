#!/usr/bin/env python3
"""Where a GPU's time goes in one batch of T5 scoring (issue 22), in one short run.

bench_pipeline.py measures exam-grade against a plain loop; on an H200 both ran
flan-t5-large at a tenth of the GPU's bf16 peak (572 and 467 pairs/s at 222 tokens a
prompt). This script says why, on the model alone, with nothing of exam-grade around it:

- the GPU's own matrix-product rate (bf16 8192^3, and the shape of T5's feed-forward
  layer at the batch measured), the ceiling of any model call;
- one scoring call (encoder, one decoder step, the logits) of random-weight flan-t5-large,
  its FLOPs counted by ``torch.utils.flop_counter`` and the TFLOP/s that makes, with each
  attention of ``--attention``: transformers' SDPA, eager, and exam-grade's
  (:mod:`exam_eval.backends.hf_attention`: the same SDPA, its position bias contiguous);
- a ``torch.profiler`` table of one call with exam-grade's attention: the kernels that
  take the time; and, unless ``--no-compile``, that model ``torch.compile``-d (compile time
  apart).

Every step saves ``--json`` at once, so a run stopped at its limit keeps what it did;
a step that fails is recorded and the next one runs.

    python bench/studies/device_profile.py --device cuda --json $OUT/profile.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
import common  # noqa: E402


def timed(fn, device: str, reps: int, warm: int = 2) -> float:
    """Seconds per call, the mean of ``reps`` after ``warm`` warm-ups."""
    for _ in range(warm):
        fn()
    common.sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    common.sync(device)
    return (time.perf_counter() - t0) / reps


def gemm(device: str, m: int, k: int, n: int, dtype, reps: int) -> dict:
    import torch

    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    s = timed(lambda: a @ b, device, reps)
    return {"shape": [m, k, n], "seconds": s, "tflops": 2 * m * k * n / s / 1e12}


def build(name: str, device: str, dtype, attention: str | None = None):
    """Random weights on ``device``; ``attention`` asked for at construction, since T5's
    stacks copy the config (``set_attn_implementation`` afterwards does not reach them)."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, T5Config

    torch.manual_seed(0)
    config = T5Config(**common.T5_COMMON, **common.CONFIGS[name], pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    with torch.device(device):
        model = AutoModelForSeq2SeqLM.from_config(config, attn_implementation=attention)
    return model.to(dtype).eval()


def inputs(batch: int, tokens: int, device: str, vocab: int = 32128):
    import torch

    g = torch.Generator().manual_seed(batch)
    ids = torch.randint(3, vocab, (batch, tokens), generator=g).to(device)
    mask = torch.ones_like(ids)
    dec = torch.zeros((batch, 1), dtype=torch.long, device=device)
    return ids, mask, dec


def flops(model, ids, mask, dec) -> int:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.inference_mode(), counter:
        model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec)
    return counter.get_total_flops()


def score_call(model, ids, mask, dec, encoder_only: bool = False):
    import torch

    def call():
        with torch.inference_mode():
            if encoder_only:
                return model.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
            return model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits[:, 0, :].float()
    return call


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default="flan-t5-large", choices=sorted(common.CONFIGS))
    ap.add_argument("--tokens", type=int, default=222, help="prompt tokens (the DL19 pool's mean: 222)")
    ap.add_argument("--batches", default="512")
    ap.add_argument("--attention", default="sdpa,eager,sdpa_contiguous_bias",
                    help="attention implementations, in order (the last is profiled when it is exam-grade's)")
    ap.add_argument("--encoder-alone", action="store_true")
    ap.add_argument("--profile-batch", type=int, default=512)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--gemm-size", type=int, default=8192)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--only-compile", action="store_true", help="the torch.compile step alone (its own time limit)")
    ap.add_argument("--budget", type=float, default=240, help="seconds; a step that would start after it is skipped")
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args(argv)

    import torch
    import transformers

    start = time.perf_counter()
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    res: dict = {"torch": torch.__version__, "transformers": transformers.__version__, "device": args.device,
                 "gpu": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else None,
                 "dtype": str(dtype), "model": args.model, "tokens": args.tokens, "steps": {}}

    def save():
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(res, indent=1))

    def run_step(label, fn):
        if time.perf_counter() - start > args.budget:
            res["steps"][label] = {"skipped": "budget"}
            print(f"{label}: skipped (budget)", flush=True)
            save()
            return None
        t0 = time.perf_counter()
        try:
            out = fn()
        except Exception as exc:  # a variant that breaks is a finding, not the end of the run
            out = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]}
        out = dict(out or {}, step_s=time.perf_counter() - t0)
        res["steps"][label] = out
        print(f"{label}: {json.dumps({k: v for k, v in out.items() if k != 'table'})}", flush=True)
        save()
        return out

    n = args.gemm_size
    step = (lambda label, fn: None) if args.only_compile else run_step
    step("gemm bf16 square", lambda: gemm(args.device, n, n, n, dtype, args.reps * 2))
    cfg = common.CONFIGS[args.model]
    step("gemm feed-forward shape", lambda: gemm(args.device, args.profile_batch * args.tokens, cfg["d_model"],
                                                 cfg["d_ff"], dtype, args.reps * 2))
    from exam_eval.backends.hf_attention import NAME, register

    register()
    variants = [a for a in args.attention.split(",") if a]
    res["attention"] = variants

    def rate(model, batch, encoder_only=False):
        ids, mask, dec = inputs(batch, args.tokens, args.device)
        f = flops(model, ids, mask, dec) if not encoder_only else None
        s = timed(score_call(model, ids, mask, dec, encoder_only), args.device, args.reps)
        out = {"batch": batch, "seconds_per_batch": s, "pairs_per_s": batch / s}
        if f:
            out |= {"gflop_per_pair": f / batch / 1e9, "tflops": f / s / 1e12}
        return out

    pb = args.profile_batch
    model = None
    for attention in [] if args.only_compile else variants:
        model = None
        common.release(args.device)
        model = build(args.model, args.device, dtype, attention)
        for b in [int(x) for x in args.batches.split(",")]:
            step(f"model {attention} batch {b}", lambda b=b, m=model: rate(m, b))
        if args.encoder_alone:
            step(f"encoder alone {attention} batch {pb}", lambda m=model: rate(m, pb, encoder_only=True))
    if model is None or variants[-1] != NAME:  # the profile and compile are of exam-grade's attention
        model = None
        common.release(args.device)
        model = build(args.model, args.device, dtype, NAME)

    def profile():
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as prof

        ids, mask, dec = inputs(pb, args.tokens, args.device)
        call = score_call(model, ids, mask, dec)
        call()
        common.sync(args.device)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
        with prof(activities=acts) as p:
            call()
            common.sync(args.device)
        key = "cuda_time_total" if args.device.startswith("cuda") else "cpu_time_total"
        table = p.key_averages().table(sort_by=key, row_limit=18, max_name_column_width=60)
        print(table, flush=True)
        return {"table": table}
    step(f"profile batch {pb}", profile)

    if not args.no_compile:
        def compiled():
            cm = torch.compile(model)
            ids, mask, dec = inputs(pb, args.tokens, args.device)
            t0 = time.perf_counter()
            score_call(cm, ids, mask, dec)()
            common.sync(args.device)
            first = time.perf_counter() - t0
            out = rate(cm, pb)
            return out | {"compile_and_first_call_s": first}
        run_step(f"model torch.compile batch {pb}", compiled)
    res["total_s"] = time.perf_counter() - start
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
