#!/usr/bin/env python3
"""Where a GPU's time goes in one batch of T5 scoring (issue 22), in one short run.

bench_pipeline.py measures exam-grade against a plain loop; both ran at about a tenth of
an H200's bf16 peak on flan-t5-large (572 and 467 pairs/s, 222 tokens a prompt). This
script says why, on the model alone, with nothing of exam-grade around it:

- the GPU's own matrix-product rate (bf16 8192^3, and the shape of T5's feed-forward
  layer at the batch measured), the ceiling of any model call;
- one scoring call (encoder, one decoder step, the logits) of random-weight flan-t5-large
  at several batch sizes, with its FLOPs counted by ``torch.utils.flop_counter`` and the
  TFLOP/s that makes;
- the same call with eager attention instead of SDPA, the encoder alone, and
  ``torch.compile``-d (its compile time apart);
- a ``torch.profiler`` table of one call: the kernels that take the time.

Every step saves ``--json`` at once, so a run stopped at its limit keeps what it did;
a step that fails is recorded and the next one runs.

    python bench/device_profile.py --device cuda --json $OUT/profile.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_grading import CONFIGS, T5_COMMON  # noqa: E402


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, device: str, reps: int, warm: int = 2) -> float:
    """Seconds per call, the mean of ``reps`` after ``warm`` warm-ups."""
    for _ in range(warm):
        fn()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync(device)
    return (time.perf_counter() - t0) / reps


def gemm(device: str, m: int, k: int, n: int, dtype, reps: int) -> dict:
    import torch

    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    s = timed(lambda: a @ b, device, reps)
    return {"shape": [m, k, n], "seconds": s, "tflops": 2 * m * k * n / s / 1e12}


def build(name: str, device: str, dtype):
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    config = T5Config(**T5_COMMON, **CONFIGS[name], pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    with torch.device(device):
        model = T5ForConditionalGeneration(config)
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
    ap.add_argument("--model", default="flan-t5-large", choices=sorted(CONFIGS))
    ap.add_argument("--tokens", type=int, default=222, help="prompt tokens (the DL19 pool's mean: 222)")
    ap.add_argument("--batches", default="128,512")
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
    cfg = CONFIGS[args.model]
    step("gemm feed-forward shape", lambda: gemm(args.device, args.profile_batch * args.tokens, cfg["d_model"],
                                                 cfg["d_ff"], dtype, args.reps * 2))
    model = build(args.model, args.device, dtype)
    res["attention"] = model.config._attn_implementation

    def rate(batch, encoder_only=False, m=None):
        ids, mask, dec = inputs(batch, args.tokens, args.device)
        m = model if m is None else m  # a compiled module has no truth value
        f = flops(model, ids, mask, dec) if not encoder_only else None
        s = timed(score_call(m, ids, mask, dec, encoder_only), args.device, args.reps)
        out = {"batch": batch, "seconds_per_batch": s, "pairs_per_s": batch / s}
        if f:
            out |= {"gflop_per_pair": f / batch / 1e9, "tflops": f / s / 1e12}
        return out

    for b in [int(x) for x in args.batches.split(",")]:
        step(f"model {res['attention']} batch {b}", lambda b=b: rate(b))
    pb = args.profile_batch
    step(f"encoder alone batch {pb}", lambda: rate(pb, encoder_only=True))

    def eager():
        model.set_attn_implementation("eager")
        try:
            return rate(pb)
        finally:
            model.set_attn_implementation(res["attention"])
    step(f"model eager batch {pb}", eager)

    def profile():
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as prof

        ids, mask, dec = inputs(pb, args.tokens, args.device)
        call = score_call(model, ids, mask, dec)
        call()
        sync(args.device)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
        with prof(activities=acts) as p:
            call()
            sync(args.device)
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
            sync(args.device)
            first = time.perf_counter() - t0
            out = rate(pb, m=cm)
            return out | {"compile_and_first_call_s": first}
        run_step(f"model torch.compile batch {pb}", compiled)
    res["total_s"] = time.perf_counter() - start
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
