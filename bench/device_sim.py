#!/usr/bin/env python
"""How far exam-grade's host side keeps a GPU busy, measured on a CPU: the grading loop
(engine.execute: prefetch thread, batches by tokens, the back end, the writer thread) on
a simulated device.

The device runs the batches it is given in order, on its own, at a fixed rate of padded
prompt tokens a second, as a GPU runs queued kernels: a batch's launch returns at once
and its read-back waits until the device is through with it. The host still does all of
its real work: tokenizing and assembling prompts, padding, the back end's bookkeeping,
writing the grades, and, per batch, the Python dispatch of a real forward pass (a T5 of
the simulated model's depth, 64 wide, on one token: every layer's modules called under
the GIL, as a CUDA launch calls them; the arithmetic is what the device does).

Rates (``--rates``): the issue's plain-loop ceilings on one H100, bf16, 224-token prompts:
flan-t5-large 1,328 pairs/s (297k tokens/s) and flan-t5-base 3,719 pairs/s (833k). Each
rate is run with the engine's overlapped loop (the next batch launched before this one is
read back: torch on CUDA); with that loop and the 2D attention mask exam-grade passed
before (transformers then reads back from the device whether anything is padded: a wait
before the encoder and one before the decoder, see :class:`SimModel`); and with the plain
loop (launch, wait, read back), all on one thread for torch and the tokenizer. For the
first rate, two more rows add ``--setup-ms`` of host time the first time a batch shape is
seen (a cuDNN attention graph's build; a guess, not measured), with the key mask and with
the 2D mask. Reported: the device's busy share of the loop's wall time and the pairs per
second against the device's own rate.

    .venv/bin/python bench/device_sim.py --work DIR     # DIR: bench_pipeline's host-cost folder

``bench_pipeline.py`` runs it after the host cost (``--no-sim-device`` skips it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
import common  # noqa: E402

#: (name, padded prompt tokens a second, layers each side): the issue's H100 ceilings
RATES = {"flan-t5-large": (1328 * 224, 24), "flan-t5-base": (3719 * 224, 12)}
#: a new batch shape's set-up on the host, for the set-up rows: a guess within the tens to
#: hundreds of milliseconds public reports give for a cuDNN attention graph (not measured)
SETUP_MS = 100.0


class SimDevice:
    """Runs what it is given in order, on its own, at ``tokens_per_s``."""

    def __init__(self, tokens_per_s: float):
        self.rate = tokens_per_s
        self.free_at = 0.0  # when the queued work ends
        self.busy = 0.0  # seconds of work queued in all
        self.tokens = 0

    def launch(self, tokens: float) -> float:
        secs = tokens / self.rate
        self.free_at = max(time.perf_counter(), self.free_at) + secs
        self.busy += secs
        self.tokens += tokens
        return self.free_at

    @staticmethod
    def wait(until: float) -> None:
        left = until - time.perf_counter()
        if left > 0:
            time.sleep(left)  # the GIL is free meanwhile, as in a CUDA sync


#: the encoder's share of a T5 scoring call's device work; the rest is the decoder step,
#: mostly its cross-attention projecting every encoder state to keys and values (per token
#: and layer: 4d^2 + 3 d d_ff in the encoder, 2 d^2 in the decoder: 0.86 for flan-t5-large,
#: 0.85 for base)
ENCODER_SHARE = 0.85


class SimModel:
    """The model's call: a real forward's Python dispatch, encoder then decoder, each part
    queued on the device after its dispatch; logits are zeros (a view, so no host memory
    is filled for them).

    Where the back end hands the model a 2D attention mask, transformers' mask builder
    reads back whether anything is padded: the host waits for the device there, before the
    encoder (all work queued so far) and before the decoder (this batch's encoder). A
    4D mask or None: no wait. ``setup_s``: host time spent the first time a (batch, width)
    shape is seen, before its encoder is queued (cuDNN builds an attention graph per shape)."""

    def __init__(self, config, device: SimDevice, layers: int, setup_s: float = 0.0):
        import torch
        from transformers import T5Config, T5ForConditionalGeneration

        self.config = config
        self.device = device
        self.vocab = config.vocab_size
        narrow = T5Config(vocab_size=256, d_model=64, d_ff=128, d_kv=16, num_heads=4, num_layers=layers,
                          num_decoder_layers=layers, feed_forward_proj="gated-gelu", decoder_start_token_id=0)
        self.dispatch = T5ForConditionalGeneration(narrow).eval()
        self.one = torch.zeros((1, 1), dtype=torch.long)
        self.done_at = 0.0
        self.setup_s = setup_s
        self.shapes: set = set()
        self.waits = 0

    def __call__(self, input_ids, attention_mask=None, decoder_input_ids=None, **_):
        import torch

        reads_back = attention_mask is not None and attention_mask.dim() == 2
        tokens = int(input_ids.numel())
        if reads_back:
            self.waits += 2
            self.device.wait(self.device.free_at)
        if self.setup_s and tuple(input_ids.shape) not in self.shapes:
            self.shapes.add(tuple(input_ids.shape))
            time.sleep(self.setup_s)
        with torch.inference_mode():
            states = self.dispatch.encoder(input_ids=self.one).last_hidden_state
            encoded = self.device.launch(tokens * ENCODER_SHARE)
            if reads_back:
                self.device.wait(encoded)
            self.dispatch(encoder_outputs=(states,), decoder_input_ids=self.one)
        self.done_at = self.device.launch(tokens * (1 - ENCODER_SHARE))
        return SimpleNamespace(logits=torch.zeros((1, 1, self.vocab)).expand(input_ids.shape[0], 1, self.vocab))


def sim_backend(model_dir: Path, device: SimDevice, layers: int, overlap: bool, mask2d: bool = False,
                setup_s: float = 0.0):
    """hf-seq2seq on the simulated device, batching by the GPU token budget and padding
    to CUDA_PAD_MULTIPLE as on a GPU; ``mask2d``: the 2D attention mask of before (the
    device waits above)."""
    from exam_eval.backends.hf_common import CUDA_MAX_TOKENS, CUDA_PAD_MULTIPLE
    from exam_eval.backends.hf_seq2seq import Seq2SeqBackend

    class SimSeq2Seq(Seq2SeqBackend):
        overlaps = overlap

        def _encode(self, requests, key_mask=False):
            return super()._encode(requests, key_mask and not mask2d)

        def read_back(self, probs, labels):
            rows, until = probs.tolist(), self.model.done_at

            def collect():
                device.wait(until)
                return [dict(zip(labels, row)) for row in rows]

            return collect

    backend = SimSeq2Seq(model=str(model_dir), device="cpu")
    backend.min_label_mass = common.MIN_LABEL_MASS  # zero logits: scored, never generated
    backend.load()
    backend.model = SimModel(backend.model.config, device, layers, setup_s)
    backend.token_budget = CUDA_MAX_TOKENS
    backend.pad_multiple = CUDA_PAD_MULTIPLE
    return backend


#: (label, overlapped, 2D mask, seconds of set-up per new batch shape), per rate; the
#: set-up rows for the first rate only
LOOPS = [("overlapped", True, False, 0.0), ("overlapped, 2D mask", True, True, 0.0), ("plain loop", False, False, 0.0)]
SETUP_LOOPS = [("overlapped, shape set-up {ms} ms", True, False), ("overlapped, 2D mask, set-up {ms} ms", True, True)]


def child(work: Path, rates: list[str], setup_ms: float = 0.0) -> dict:
    import torch

    torch.set_num_threads(1)
    out: dict = {}
    for n, name in enumerate(rates):
        tokens_per_s, layers = RATES[name]
        loops = LOOPS + ([(label.format(ms=f"{setup_ms:g}"), o, m, setup_ms / 1000) for label, o, m in SETUP_LOOPS]
                         if setup_ms and n == 0 else [])
        for label, overlap, mask2d, setup_s in loops:
            device = SimDevice(tokens_per_s)
            backend = sim_backend(work / "t5-1-layer", device, layers, overlap, mask2d, setup_s)
            stats, npairs, wall = common.engine_run(backend, work, work / f"sim-{name}-{len(out)}.jsonl")
            out[f"{name} {label}"] = {
                "pairs": npairs, "units": stats.graded, "tokens": device.tokens, "seconds": wall,
                "device_busy_s": device.busy, "device_busy_share": device.busy / wall,
                "pairs_per_s": npairs / wall, "device_pairs_per_s": npairs / device.busy,
                "device_tokens_per_s": tokens_per_s, "layers": layers, "device_waits": backend.model.waits,
                "shape_setup_s": setup_s, "shapes": len(backend.model.shapes) if setup_s else None}
    return out


def run(work: Path, rates: list[str] | None = None, root: Path = ROOT, setup_ms: float = SETUP_MS) -> dict:
    """The simulation in a child process on one thread (as the host cost is measured)."""
    env = dict(os.environ, RAYON_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(root))
    proc = subprocess.run([sys.executable, __file__, "--child", "--work", str(work), "--setup-ms", str(setup_ms),
                           "--rates", ",".join(rates or RATES)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit("bench: the simulated-device run failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="a folder with pool.json, bank.jsonl and t5-1-layer/")
    ap.add_argument("--rates", default=",".join(RATES), help="of " + ", ".join(RATES))
    ap.add_argument("--setup-ms", type=float, default=SETUP_MS,
                    help="host time a new batch shape costs, for two more rows of the first rate (0: none)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    rates = [r for r in args.rates.split(",") if r]
    result = child(args.work, rates, args.setup_ms) if args.child else run(args.work, rates, setup_ms=args.setup_ms)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
