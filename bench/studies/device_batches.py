#!/usr/bin/env python3
"""exam-grade's own batches on a GPU (issue 22): where the time between its grading loop
and the bare model call goes, and what each of the loop's choices is worth, in one run.

On an H200 exam-grade graded flan-t5-large at 894 pairs/s where one bare model call (512
unpadded prompts of 222 tokens, warm) ran at 1,509. This script runs exam-grade's engine
(``engine.execute``, the loop exam-grade runs, with the back end loaded the way exam-grade
loads it: token budget, pad multiple, attention) in a fresh process per variant, so that
the device's one-time set-ups (CUDA libraries, cuDNN's attention graph for each new
batch shape) count as they do in a real run, over the pool twice: cold, then with every
batch shape seen. Per batch it records the units, the padded width, the host's time in
``submit`` (the launch), the device waits inside it (``torch.cuda.set_sync_debug_mode``),
and two CUDA events around the batch's work: the device's span for the batch, and its idle
gap before it (waiting for the host). Steps (``--steps``), most needed first:

- ``default``: the code as it is (also: the bare call, unpadded and padded, in that process);
- ``big``: exam-grade itself (the command, end to end) on a larger pool (``--big-queries``
  x ``--big-per-query``), where its start-up weighs less;
- ``judged``: the same on every judged DL19 passage against its query's questions (92,600
  pairs: the reference workbench's own DL19 job), where the start-up weighs less again;
- ``mask2d``: the 2D attention mask (transformers asks the device whether anything is
  padded: a wait before the encoder and another before the cross-attention);
- ``pad1``: no rounding of a batch's width (one shape per prompt length);
- ``nocudnn``: SDPA's cuDNN kernel off (no per-shape graph; the memory-efficient kernel);
- ``pad32``: widths rounded to 32 (fewer shapes, more padding);
- ``recompile``: PyTorch's ``TORCH_CUDNN_SDPA_AVOID_RECOMPILE=1`` (cuDNN attention's
  variable-length path, meant to build no graph per new length);
- ``oom``: the process's GPU memory capped (``torch.cuda.set_per_process_memory_fraction``)
  so that a quarter of a full-budget batch fits above the weights: real CUDA out-of-memory
  errors, which the engine must survive by grading batches in halves (grading.fitting),
  with the grades of ``default`` (the share equal is recorded).

Everything goes to ``--json`` after each step; a step that would start too late for
``--budget`` is recorded as skipped.

    python bench/studies/device_batches.py --device cuda --model-dir DIR --json $OUT/batches.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
import common  # noqa: E402

VARIANTS = ("default", "mask2d", "oom", "pad1", "nocudnn", "pad32", "recompile")
#: the run's order, most needed first: the defaults, exam-grade end to end on the larger
#: pool (the goals are read there), then the variants that each undo or try one thing
STEPS = ("default", "big", "judged", "mask2d", "oom", "pad1", "nocudnn", "pad32", "recompile")


# -- the child: one variant in a fresh process ---------------------------------------------------------
def apply_variant(backend, variant: str) -> None:
    import torch

    from exam_eval.backends import hf_seq2seq

    if variant == "mask2d":
        real = hf_seq2seq.Seq2SeqBackend._encode
        backend._encode = lambda requests, key_mask=False: real(backend, requests, False)
    elif variant == "pad1":
        backend.pad_multiple = 1
    elif variant == "pad32":
        backend.pad_multiple = 32
    elif variant == "nocudnn":
        torch.backends.cuda.enable_cudnn_sdp(False)
    elif variant == "recompile":
        pass  # TORCH_CUDNN_SDPA_AVOID_RECOMPILE=1, set in the process's environment (run_child)
    elif variant == "oom":
        pass  # the memory is capped in child(), once the model is loaded
    elif variant != "default":
        raise SystemExit(f"device_batches: unknown variant {variant}")


class Timeline:
    """Wraps a back end's submit() and batch_tensors() to record each batch."""

    def __init__(self, backend, device: str):
        self.backend, self.cuda = backend, device.startswith("cuda")
        self.batches: list[dict] = []
        self._submit, self._tensors = backend.submit, backend.batch_tensors
        backend.submit, backend.batch_tensors = self.submit, self.tensors

    def tensors(self, rows, *a, **k):
        out = self._tensors(rows, *a, **k)
        self.batches[-1]["width"] = int(out["input_ids"].shape[1])
        self.batches[-1]["tokens"] = int(sum(len(r) for r in rows))
        return out

    def submit(self, requests):
        rec = {"units": len(requests)}
        self.batches.append(rec)
        try:
            return self._timed_submit(requests, rec)
        except Exception:
            self.batches.pop()  # a batch that did not start (out of memory: the engine splits it)
            self.failed_starts += 1
            raise

    failed_starts = 0

    def _timed_submit(self, requests, rec):
        import warnings

        import torch

        t0 = time.perf_counter()
        if self.cuda:
            rec["_start"] = torch.cuda.Event(enable_timing=True)
            rec["_start"].record()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            if self.cuda:
                torch.cuda.set_sync_debug_mode("warn")
            try:
                collect = self._submit(requests)
            finally:
                if self.cuda:
                    torch.cuda.set_sync_debug_mode(0)
        rec["syncs"] = sum("synchroniz" in str(w.message) for w in seen)
        if self.cuda:
            rec["_end"] = torch.cuda.Event(enable_timing=True)
            rec["_end"].record()
        rec["submit_s"] = time.perf_counter() - t0
        return collect

    def summary(self, wall: float, pairs: int) -> dict:
        """Per pass: the device's span and idle time, from the events (read once the pass is over)."""
        seen_shapes: set = set()
        prev = None
        for rec in self.batches:
            shape = (rec["units"], rec.get("width"))
            rec["new_shape"] = shape not in seen_shapes
            seen_shapes.add(shape)
            if self.cuda:
                rec["span_s"] = rec["_start"].elapsed_time(rec["_end"]) / 1000
                rec["gap_before_s"] = prev["_end"].elapsed_time(rec["_start"]) / 1000 if prev else 0.0
            prev = rec
        out = {"pairs": pairs, "wall_s": wall, "pairs_per_s": pairs / wall, "batches": len(self.batches),
               "shapes": len(seen_shapes), "syncs_in_submit": sum(r["syncs"] for r in self.batches),
               "submit_s": sum(r["submit_s"] for r in self.batches),
               "padded_tokens": sum(r["units"] * r.get("width", 0) for r in self.batches),
               "tokens": sum(r.get("tokens", 0) for r in self.batches)}
        if self.cuda and self.batches:
            spans = [r["span_s"] for r in self.batches]
            out["device_span_s"] = sum(spans)
            out["device_idle_between_s"] = sum(r["gap_before_s"] for r in self.batches)
            for kind, pick in (("new_shape", True), ("seen_shape", False)):
                rs = [r for r in self.batches if r["new_shape"] is pick]
                toks = sum(r["units"] * r.get("width", 0) for r in rs)
                out[f"{kind}_batches"] = len(rs)
                out[f"{kind}_us_per_padded_token"] = 1e6 * sum(r["span_s"] for r in rs) / toks if toks else None
        out["per_batch"] = [{k: (round(v, 5) if isinstance(v, float) else v) for k, v in r.items()
                             if not k.startswith("_")} for r in self.batches]
        self.batches = []
        return out


def bare_calls(backend, device: str, batch: int, reps: int = 5) -> dict:
    """The model alone, warm: ``batch`` prompts of 222 tokens unpadded, and the same width
    with the rows' lengths spread over 180-222 (padding, so the folded mask of hf_attention)."""
    import numpy as np
    import torch

    rng = np.random.default_rng(0)
    out = {}
    spread = [222] + list(rng.integers(180, 223, batch - 1))  # the same width: the longest row is 222
    for label, lengths in (("unpadded", [222] * batch), ("padded", spread)):
        rows = [rng.integers(3, backend.model.config.vocab_size, n) for n in lengths]
        enc = backend.batch_tensors(rows, key_mask=True)
        dec = torch.zeros((batch, 1), dtype=torch.long, device=device)

        def call(enc=enc, dec=dec):
            with torch.inference_mode():
                return backend.model(**enc, decoder_input_ids=dec, use_cache=False).logits[:, 0, :].float()
        for _ in range(2):
            call()
        torch.cuda.synchronize() if device.startswith("cuda") else None
        t0 = time.perf_counter()
        for _ in range(reps):
            call()
        torch.cuda.synchronize() if device.startswith("cuda") else None
        s = (time.perf_counter() - t0) / reps
        out[label] = {"batch": batch, "width": int(enc["input_ids"].shape[1]), "seconds_per_batch": s,
                      "pairs_per_s": batch / s}
    return out


def cap_memory(backend, device: str) -> dict:
    """Cap this process's GPU memory at the weights plus a quarter of what a batch of the
    whole token budget takes (measured on a warm batch of 64 prompts of 222 tokens)."""
    import torch

    if not device.startswith("cuda"):
        return {"skipped": "no CUDA: nothing to cap"}
    bare_calls(backend, device, 64, reps=1)  # warm: the kernels' own workspaces are allocated
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    bare_calls(backend, device, 64, reps=1)
    torch.cuda.synchronize()
    per_token = (torch.cuda.max_memory_allocated() - base) / (64 * 222)
    total = torch.cuda.get_device_properties(torch.device(device)).total_memory
    cap = base + per_token * backend.token_budget / 4
    torch.cuda.empty_cache()
    # the call wants an index: "cuda" alone is refused (the H100 run of 2026-11-26)
    index = torch.device(device).index
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total),
                                               torch.cuda.current_device() if index is None else index)
    return {"weights_and_kept_bytes": base, "bytes_per_token": per_token, "cap_bytes": cap,
            "fraction": cap / total, "tokens_that_fit": int((cap - base) / per_token) if per_token else 0}


def child(args) -> dict:
    from exam_eval.backends.hf_seq2seq import Seq2SeqBackend

    t0 = time.perf_counter()
    backend = Seq2SeqBackend(model=str(args.model_dir), device=args.device)
    backend.min_label_mass = common.MIN_LABEL_MASS
    backend.load()
    res = {"variant": args.child, "load_s": time.perf_counter() - t0, "token_budget": backend.token_budget,
           "pad_multiple": backend.pad_multiple}
    apply_variant(backend, args.child)
    res["pad_multiple_used"] = backend.pad_multiple
    if args.child == "oom":
        res["memory_cap"] = cap_memory(backend, args.device)
    timeline = Timeline(backend, args.device)
    for n in range(args.passes):
        stats, pairs, secs = common.engine_run(backend, args.work, args.work / f"{args.child}-{n}.jsonl")
        res[f"pass{n + 1}"] = timeline.summary(secs, pairs)
        res[f"pass{n + 1}"]["failed_starts"], timeline.failed_starts = timeline.failed_starts, 0
        res[f"pass{n + 1}"]["device_memory"] = stats.device_memory
        print(f"[{args.child}] pass {n + 1}: {pairs / secs:.0f} pairs/s", file=sys.stderr, flush=True)
    if args.child == "default":
        backend.submit, backend.batch_tensors = timeline._submit, timeline._tensors
        res["bare"] = bare_calls(backend, args.device, args.bare_batch)
    return res


# -- the parent ------------------------------------------------------------------------------------
def run_child(variant: str, args, cap: float) -> dict:
    cmd = [sys.executable, __file__, "--child", variant, "--device", args.device, "--model-dir", str(args.model_dir),
           "--work", str(args.work), "--passes", str(args.passes), "--bare-batch", str(args.bare_batch)]
    t0 = time.perf_counter()
    try:
        # recompile: PyTorch's opt-in to cuDNN attention's variable-length path, which is
        # meant to build no graph per new sequence length (read when torch loads)
        extra = {"TORCH_CUDNN_SDPA_AVOID_RECOMPILE": "1"} if variant == "recompile" else {}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=cap,
                              env=dict(os.environ, PYTHONPATH=str(ROOT), **extra))
    except subprocess.TimeoutExpired:
        return {"variant": variant, "error": f"stopped at {cap:.0f}s"}
    sys.stderr.write(proc.stderr[-2000:] if proc.returncode else "")
    if proc.returncode != 0:
        return {"variant": variant, "error": (proc.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "process_s": time.perf_counter() - t0}


def big_pool(args, judged: bool = False) -> dict:
    """exam-grade itself, end to end, on a larger pool (where its start-up weighs less):
    the top-20 pool of ``--big-queries`` x ``--big-per-query``, or every judged passage."""
    name = "judged" if judged else "big"
    big = args.work / name
    big.mkdir(exist_ok=True)
    if judged:
        common.build_judged_pool(args.data, big, args.judged_queries, args.judged_per_query)
        what = "every judged passage"
    else:
        common.build_pool(args.data, big, args.big_queries, args.big_per_query, args.seed)
        what = f"{args.big_queries} x {args.big_per_query}"
    print(f"[batches] exam-grade end to end, {what}", file=sys.stderr, flush=True)
    try:
        return {"pool": name, **common.exam_grade(args.model, args.model_dir, big, args.device, [], name)}
    except (SystemExit, Exception) as exc:  # a failure is a finding, recorded
        return {"pool": name, "error": str(exc)[:300]}


def grades_equal(a: Path, b: Path) -> dict | None:
    """How many pairs got the same grade in two passes' outputs (None: one is missing)."""
    if not (a.is_file() and b.is_file()):
        return None

    def grades(path):
        return {(g["query_id"], g["doc_id"], g["item_id"]): g["grade"] for g in map(json.loads, path.open())}

    ga, gb = grades(a), grades(b)
    return {"pairs": len(ga), "same_pairs": ga.keys() == gb.keys(),
            "equal": sum(ga[k] == gb.get(k) for k in ga)}


def line(r: dict) -> str:
    if "variant" not in r:  # an end-to-end run on a larger pool
        label = "judged pool" if r.get("pool") == "judged" else "big pool"
        if "error" in r:
            return f"{label}: {r['error']}"
        return (f"{label}: {r['pairs']} pairs, {r['pairs_per_s_end_to_end']:.0f} pairs/s end to end "
                f"({r['wall_s']:.1f}s), {r['pairs_per_s_grading']:.0f} grading only")
    if "error" in r:
        return f"{r['variant']:8s} {r['error']}"
    parts = [f"{r['variant']:8s} pad {r['pad_multiple_used']:>2}"]
    for p in ("pass1", "pass2"):
        if p in r:
            s = r[p]
            idle = f", idle between {s['device_idle_between_s']:.2f}s" if "device_idle_between_s" in s else ""
            parts.append(f"{p} {s['pairs_per_s']:.0f}/s ({s['batches']} batches, {s['shapes']} shapes, "
                         f"{s['syncs_in_submit']} waits{idle})")
    if "bare" in r:
        parts.append("bare " + ", ".join(f"{k} {v['pairs_per_s']:.0f}/s" for k, v in r["bare"].items()))
    if "memory_cap" in r:
        cap = r["memory_cap"]
        parts.append(cap["skipped"] if "skipped" in cap else
                     f"capped at {cap['cap_bytes'] / 2**30:.1f} GiB ({cap['tokens_that_fit']} tokens above the weights)")
        p1 = r.get("pass1", {})
        parts.append(f"{p1.get('failed_starts', 0)} starts out of memory: {p1.get('device_memory') or 'no split'}")
        same = r.get("grades_equal_default")
        if same:
            parts.append(f"grades equal to default's {same['equal']}/{same['pairs']}")
    return "; ".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--model", default="flan-t5-large", choices=sorted(common.CONFIGS))
    ap.add_argument("--model-dir", type=Path, default=None,
                    help="a saved model with its tokenizer (bench_pipeline --keep's); built here if absent")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--per-query", type=int, default=40)
    ap.add_argument("--big-queries", type=int, default=43)
    ap.add_argument("--big-per-query", type=int, default=400, help="0: no end-to-end run on the larger pool")
    ap.add_argument("--judged-min", type=float, default=120,
                    help="seconds of the budget the judged pool needs left to start")
    ap.add_argument("--judged-queries", type=int, default=0, help="the judged pool's first queries (0: all)")
    ap.add_argument("--judged-per-query", type=int, default=0, help="their first judged passages (0: all)")
    ap.add_argument("--steps", default=",".join(STEPS),
                    help="in order: variants of " + ", ".join(VARIANTS) + ", big (the larger pool) and judged "
                         "(every judged passage)")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--bare-batch", type=int, default=512, help="prompts of the bare model call")
    ap.add_argument("--variant-cap", type=float, default=60, help="seconds a variant's process may take")
    ap.add_argument("--budget", type=float, default=240, help="seconds; a step that would start after it is skipped")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--json", default=None, help="where the figures go (required but with --summary)")
    ap.add_argument("--summary", type=Path, default=None, metavar="JSON", help="print a saved run's lines and stop")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.summary:
        for step in json.loads(args.summary.read_text())["steps"].values():
            print(line(step))
        return 0
    if args.child:
        print(json.dumps(child(args)))
        return 0
    if not args.json:
        ap.error("--json is required")

    import tempfile

    start = time.perf_counter()
    args.work = args.work or Path(tempfile.mkdtemp(prefix="exam-batches-"))
    args.work.mkdir(parents=True, exist_ok=True)
    res: dict = {"device": args.device, "model": args.model, "steps": {}}

    def save():
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")

    pool = common.build_pool(args.data, args.work, args.queries, args.per_query, args.seed)
    (args.work / "pool.json").write_text(json.dumps({"chosen": pool["chosen"], "texts": pool["texts"]}))
    if args.model_dir is None or not (args.model_dir / "config.json").is_file():
        t0 = time.perf_counter()
        args.model_dir = common.build_model(args.model, common.train_tokenizer(args.data), args.work / args.model)
        res["build_s"] = time.perf_counter() - t0
    res["model_dir"] = str(args.model_dir)
    save()
    for step in [v for v in args.steps.split(",") if v]:
        left = args.budget - (time.perf_counter() - start)
        if step == "big":
            if args.big_per_query:
                res["steps"]["big_pool"] = big_pool(args) if left >= 30 else {"error": "skipped (budget)"}
                print(line(res["steps"]["big_pool"]), flush=True)
        elif step == "judged":
            # 92,600 pairs: about 90 s on an H100 at the default's warm rate, with its start
            res["steps"]["judged_pool"] = (big_pool(args, judged=True) if left >= args.judged_min
                                           else {"pool": "judged", "error": "skipped (budget)"})
            print(line(res["steps"]["judged_pool"]), flush=True)
        elif left < 20:
            res["steps"][step] = {"variant": step, "error": "skipped (budget)"}
            print(line(res["steps"][step]), flush=True)
        else:
            print(f"[batches] variant {step} (at most {min(left, args.variant_cap):.0f}s)", file=sys.stderr, flush=True)
            res["steps"][step] = run_child(step, args, min(left, args.variant_cap))
            if step == "oom":
                res["steps"][step]["grades_equal_default"] = grades_equal(args.work / "default-0.jsonl",
                                                                       args.work / "oom-0.jsonl")
            print(line(res["steps"][step]), flush=True)
        save()
    res["total_s"] = time.perf_counter() - start
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
