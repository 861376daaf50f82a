#!/usr/bin/env python
"""Grading at the device's limit: exam-grade against the reference loop and against a
plain batched loop over the same pairs, on one device, in one run.

    .venv/bin/python bench/bench_pipeline.py --ct2-alone --out bench-out     # `make bench`: CPU
    .venv/bin/python bench/bench_pipeline.py --device cuda --models flan-t5-base,flan-t5-large \\
        --queries 30 --per-query 40 --out bench-out                          # on a GPU
    bash bench/device_run.sh      # the GPU run as one call of the device tool (bench/README.md)

Rows (pairs/s, and ratios against the reference and against the plain loop), per model in
this order, the table and the JSON in ``--out`` rewritten after each (a run stopped at a
time limit keeps the rows it finished; ``"complete": false`` in the JSON says so):

- **reference**: the workbench's way (batch 1, beam search 5, 2 new tokens, float32) on
  ``--sample-pairs`` pairs (common.reference_loop, here on ``--device``);
- **plain loop** (the ceiling): the same model, dtype and attention as exam-grade's
  default; the rendered prompts tokenized before the clock starts (one batched call of the
  fast tokenizer), sorted by token count and padded per batch; timed: the copies to the
  device, one encoder pass and one decoder step, label probabilities read once per batch;
  at each of ``--plain-batches`` and the best kept;
- **exam-grade**: the real command (a subprocess) with its defaults on ``--device``, end to
  end (process start, load, grading, writing) and grading only (the engine's own timing);
  on CUDA also ``--dtype float32``, with the share of pairs whose grade equals float32's;
- **host cost per pair**: exam-grade's engine in-process on one thread (torch, tokenizers
  and BLAS limited to one) with a 1-layer T5 whose forward is replaced by a stub returning
  zero logits (:class:`StubT5`, the same for every checkout compared): everything but
  the model (planning aside): tokenizing, batching, the back end's bookkeeping, writing
  the grades. Both ways of making prompt ids: from token
  ids (default) and the string path (every prompt rendered and tokenized whole);
- **CTranslate2** (CPU): exam-grade --engine ctranslate2 (int8 with float32 rechecks, the
  CPU default), with ``--ct2-alone`` also int8 alone (``--recheck-margin 0``); with
  ``--compare-code DIR`` (repeatable) the same commands, and the host cost, from other
  checkouts too, run back to back with this one (before/after a change).

Models: random weights in the published flan-t5 configurations (common.CONFIGS)
and the BPE tokenizer common.train_tokenizer trains on the DL19 passages; pool: a seeded sample of
the DL19 judged pool with the DL19 question bank (``--data``: ``../shared/data/dl19``, or
the copy bench/device_stage.sh makes in ``.device/dl19`` for a machine without ../shared).
Everything goes to ``--out``/bench_pipeline.{txt,json} with the device, CPU and library
versions.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import platform
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
import device_sim  # noqa: E402

PROMPT = common.PROMPT
#: issue 47's goal, set where 1e392f8 gave 0.09-0.10 ms (a 2-core AMD EPYC): compare checkouts
#: in one run (``--compare-code``) on another CPU, whose Python runs at another speed
HOST_GOAL_MS = 0.1


# -- in-process pieces ------------------------------------------------------------------------------
def plain_loop(model_dir: Path, requests, device: str, batches: list[int]) -> dict:
    """The ceiling: what the same model does on these pairs with nothing around it."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from exam_eval.backends.hf_common import label_token_ids, model_kwargs, pick_dtype

    dtype = pick_dtype(None, device)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir, dtype=dtype, **model_kwargs(device, str(model_dir)))
    model = model.to(device).eval()
    labels = list(requests[0].prompt.labels)
    ids = label_token_ids(tok, labels)
    texts = [r.prompt.render(query=r.query, item=r.item_text, context=r.context) for r in requests]
    # tokenized before the clock starts, in one batched call, and sorted by token count:
    # the timed part is the model alone (a loop that tokenized in it ran slower than
    # exam-grade's grading on an H200, which prepares prompts ahead of the GPU)
    t0 = time.perf_counter()
    rows = tok(texts, truncation=True, max_length=512)["input_ids"]
    tokenize_s = time.perf_counter() - t0
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]), reverse=True)
    start = model.config.decoder_start_token_id or 0

    def padded(idx):
        enc = tok.pad({"input_ids": [rows[i] for i in idx]}, return_tensors="pt")
        return enc["input_ids"], enc["attention_mask"]

    def batch(enc, mask):
        enc, mask = enc.to(device), mask.to(device)
        dec = torch.full((len(enc), 1), start, dtype=torch.long, device=device)
        with torch.inference_mode():
            logits = model(input_ids=enc, attention_mask=mask, decoder_input_ids=dec).logits[:, 0, :].float()
        return torch.softmax(logits[:, ids], dim=-1).cpu()

    runs = {}
    for size in batches:
        prepared = [padded(order[b:b + size]) for b in range(0, len(order), size)]
        batch(*prepared[0])  # warm-up
        common.sync(device)
        t0 = time.perf_counter()
        for enc, mask in prepared:
            batch(enc, mask)
        secs = time.perf_counter() - t0
        runs[size] = {"seconds": secs, "pairs_per_s": len(texts) / secs,
                      "padded_tokens": sum(e.numel() for e, _ in prepared)}
    best = max(runs, key=lambda k: runs[k]["pairs_per_s"])
    return {"pairs": len(texts), "dtype": str(dtype).replace("torch.", ""), "batches": runs, "best_batch": best,
            "pairs_per_s": runs[best]["pairs_per_s"], "tokens": sum(map(len, rows)), "tokenize_s": tokenize_s}


#: a child process timing what exam-grade does before its first batch (the end-to-end
#: rows minus grading only): interpreter and imports, CUDA's start, tokenizer and model load
STARTUP_CHILD = """
import json, sys, time
t0 = time.perf_counter()
import torch, transformers  # noqa: E401
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
from exam_eval.backends.hf_common import model_kwargs, pick_dtype
t1 = time.perf_counter()
path, device = sys.argv[1], sys.argv[2]
if device.startswith("cuda"):
    torch.zeros(1, device=device)
    torch.cuda.synchronize()
t2 = time.perf_counter()
tok = AutoTokenizer.from_pretrained(path)
t3 = time.perf_counter()
model = AutoModelForSeq2SeqLM.from_pretrained(path, dtype=pick_dtype(None, device), **model_kwargs(device, path))
model = model.to(device).eval()
if device.startswith("cuda"):
    torch.cuda.synchronize()
t4 = time.perf_counter()
print(json.dumps({"imports_s": t1 - t0, "device_init_s": t2 - t1, "tokenizer_s": t3 - t2, "model_load_s": t4 - t3}))
"""


def startup(model_dir: Path, device: str, root: Path = ROOT) -> dict:
    """What exam-grade's start costs, piece by piece, in a fresh process (with the
    interpreter's own start, ``wall_s``), so the gap between the end-to-end and
    grading-only rows can be read."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(root))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", STARTUP_CHILD, str(model_dir), device],
                          capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    return {"wall_s": wall, **json.loads(proc.stdout.strip().splitlines()[-1])}


class StubT5:
    """A seq2seq model's call replaced: zero logits over the vocabulary, at once. The
    zeros are made once (for the largest batch yet) and handed out as views: a model's
    own output costs the model, and a fresh 1 MB zeroed tensor a batch cost this stub
    0.3 ms on the Xeon of 2026-12-05, more than the rest of a batch's host work. The
    engine only reads the logits it is given (hf_common.label_columns makes new tensors)."""

    def __init__(self, model):
        self.config = model.config
        self.vocab = model.config.vocab_size
        self.zeros = None

    def __call__(self, input_ids, attention_mask=None, decoder_input_ids=None, **_):
        import torch
        from types import SimpleNamespace

        rows = input_ids.shape[0]
        if self.zeros is None or self.zeros.shape[0] < rows or self.zeros.device != input_ids.device:
            self.zeros = torch.zeros((rows, 1, self.vocab), device=input_ids.device)
        return SimpleNamespace(logits=self.zeros[:rows])


def host_cost_child(args) -> dict:
    """In a process limited to one thread: the engine with a stubbed forward, both ways."""
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, args.host_cost_code)  # the checkout being measured, before any exam_eval import
    from exam_eval.backends.hf_seq2seq import Seq2SeqBackend

    work = Path(args.host_cost_child)
    out = {}
    # a checkout from before prompts were made from token ids has the string path only
    ways = (("prompt_ids", True), ("string_path", False)) if hasattr(Seq2SeqBackend, "use_prompt_ids") \
        else (("string_path", False),)
    for way, use_ids in ways:
        backend = Seq2SeqBackend(model=str(work / "t5-1-layer"), device=args.device)
        backend.use_prompt_ids = use_ids
        backend.min_label_mass = common.MIN_LABEL_MASS  # the stub's zero logits: scored, never generated
        backend.load()
        backend.model = StubT5(backend.model)
        stats, npairs, secs = common.engine_run(backend, work, work / f"host-{way}.jsonl")
        enc = getattr(backend, "_prompt_ids", None)
        out[way] = {"pairs": npairs, "units": stats.graded, "seconds": secs, "ms_per_pair": 1000 * secs / npairs,
                    "pairs_per_s": npairs / secs,
                    "composed": enc.composed if enc else 0, "tokenized_whole": enc.whole if enc else stats.graded}
    return out


def host_cost(work: Path, pool: dict, device: str, root: Path = ROOT) -> dict:
    """One child process measuring the code of checkout ``root``."""
    (work / "pool.json").write_text(json.dumps({"chosen": pool["chosen"], "texts": pool["texts"]}))
    env = dict(os.environ, RAYON_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(root))
    proc = subprocess.run([sys.executable, __file__, "--host-cost-child", str(work), "--host-cost-code", str(root),
                           "--device", device], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit("bench: the host-cost run failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def checkouts(args) -> list[tuple[str, Path]]:
    """(label, root) of every checkout measured: the ``--compare-code`` ones (labelled by
    their folder's name) in the order given, then this one."""
    return [(Path(d).name, Path(d)) for d in args.compare_code] + [("this", ROOT)]


def host_costs(work: Path, pool: dict, args) -> dict:
    """The host cost of each checkout (``checkouts``), one after the other in every one of
    ``--host-rounds`` rounds; the best round of each kept (every round in "rounds")."""
    rounds = [{label: host_cost(work, pool, args.device, root) for label, root in checkouts(args)}
              for _ in range(args.host_rounds)]
    best = {}
    for label in rounds[0]:
        for way in rounds[0][label]:
            best[way if label == "this" else f"{way} ({label})"] = min(
                (r[label][way] for r in rounds), key=lambda h: h["ms_per_pair"])
    return {**best, "rounds": rounds}


# -- the rows ---------------------------------------------------------------------------------------
def environment(device: str) -> dict:
    import tokenizers
    import torch
    import transformers

    env = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
           "tokenizers": tokenizers.__version__, "device": device, "cpu": common.cpu_peak(),
           "torch_threads": torch.get_num_threads(), "load_average_before": os.getloadavg()}
    try:
        import ctranslate2

        env["ctranslate2"] = ctranslate2.__version__
        env["ctranslate2_cuda_devices"] = ctranslate2.get_cuda_device_count()
    except ImportError:
        env["ctranslate2"] = None
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(torch.device(device))
        env["cuda"] = torch.version.cuda
        env["gpu_memory_gib"] = torch.cuda.get_device_properties(torch.device(device)).total_memory / 2**30
    return env


def model_rows(name: str, model_dir: Path, work: Path, pool: dict, args, res: dict | None = None,
                saved=lambda: None) -> dict:
    """The rows of one model into ``res``, cheapest and most needed first; ``saved()`` after
    each, so a run stopped at its time limit (the GPU run's ``timeout``) keeps what it finished."""
    requests = common.pool_requests(pool)
    res = {} if res is None else res
    res["pairs"] = len(requests)
    say = lambda msg: print(f"[{name}] {msg} ...", file=sys.stderr, flush=True)  # noqa: E731
    sample = common.sample_requests(pool, args.sample_pairs, args.seed)
    say(f"reference loop on {len(sample)} pairs")
    res["reference"] = common.reference_loop(model_dir, sample, args.device)
    common.release(args.device)
    saved()
    if args.only_ct2:
        return res
    say(f"plain loop on {min(len(requests), args.plain_pairs)} pairs, batches {args.plain_batches}")
    res["plain"] = plain_loop(model_dir, requests[: args.plain_pairs], args.device,
                              [int(b) for b in args.plain_batches.split(",")])
    res["plain"]["vs_reference"] = res["plain"]["pairs_per_s"] / res["reference"]["pairs_per_s"]
    common.release(args.device)
    saved()
    say(f"exam-grade (defaults) on {args.device}")
    res["exam_grade"] = with_ratios(common.exam_grade(name, model_dir, work, args.device, [], "default"), res)
    saved()
    if args.float32_row or (args.float32_row is None and args.device.startswith("cuda")):
        say("exam-grade --dtype float32")
        res["exam_grade_float32"] = with_ratios(
            common.exam_grade(name, model_dir, work, args.device, ["--dtype", "float32"], "fp32"), res)
        res["agreement_default_vs_float32"] = common.agreement(Path(res["exam_grade"]["output"]),
                                                           Path(res["exam_grade_float32"]["output"]))
        saved()
    say("start-up, piece by piece")
    res["startup"] = startup(model_dir, args.device)
    saved()
    return res


def with_ratios(r: dict, res: dict) -> dict:
    """An exam-grade row with its ratios to the reference and plain loops of ``res``."""
    ref, plain = res["reference"]["pairs_per_s"], res["plain"]["pairs_per_s"]
    r["vs_reference_end_to_end"] = r["pairs_per_s_end_to_end"] / ref
    r["vs_reference_grading"] = r["pairs_per_s_grading"] / ref
    r["vs_plain_end_to_end"] = r["pairs_per_s_end_to_end"] / plain
    r["vs_plain_grading"] = r["pairs_per_s_grading"] / plain
    return r


def ct2_rows(name: str, model_dir: Path, work: Path, args, reference: float) -> dict:
    """exam-grade --engine ctranslate2 with the CPU defaults; with --compare-code, that
    checkouts' exam-grade right before this one's, on the same pool; with --ct2-alone, int8
    alone (--recheck-margin 0) the same way after it."""
    from exam_eval.backends.ct2_convert import converted_model

    converted_model(str(model_dir), name, "int8")
    converted_model(str(model_dir), name, "float32")
    runs = {}
    codes = checkouts(args)
    variants = [("", [])] + ([("alone", ["--recheck-margin", "0"])] if args.ct2_alone else [])
    for suffix, flags in variants:
        for code, root in codes:
            label = f"{code} {suffix}".strip()
            print(f"[{name}] exam-grade --engine ctranslate2 {' '.join(flags)} ({code}: {root})", file=sys.stderr,
                  flush=True)
            r = common.exam_grade(name, model_dir, work, "cpu", ["--engine", "ctranslate2", *flags],
                           f"ct2-{label.replace(' ', '-')}", root=Path(root))
            r["vs_reference_end_to_end"] = r["pairs_per_s_end_to_end"] / reference
            r["vs_reference_grading"] = r["pairs_per_s_grading"] / reference
            runs[label] = r
        this = Path(runs[f"this {suffix}".strip()]["output"])
        for code, _ in codes[:-1]:
            runs[f"same_grades {code} this {suffix}".strip()] = common.agreement(
                Path(runs[f"{code} {suffix}".strip()]["output"]), this)
    return runs


# -- output -----------------------------------------------------------------------------------------
def pipeline_table(results: dict, host: dict | None, env: dict, sim: dict | None = None) -> None:
    where = env.get("gpu") or env["cpu"].get("model")
    print(f"device: {env['device']} ({where}); torch {env['torch']}, transformers {env['transformers']}, "
          f"tokenizers {env['tokenizers']}, ctranslate2 {env.get('ctranslate2')}; load {env['load_average_before'][0]:.1f}")
    for name, r in results.items():
        ref, plain = r.get("reference"), r.get("plain")
        print(f"\n{name}: {r['pairs']} pairs" + ("" if ref else " (no row finished)"))
        if ref:
            print(f"  reference loop (batch 1, beam 5, fp32)       {ref['pairs_per_s']:10.2f} pairs/s  1x")
        if "reference_after" in r:
            print(f"  reference loop again, after the rows below   {r['reference_after']['pairs_per_s']:10.2f} pairs/s")
        if plain:
            print(f"  plain loop, {plain['dtype']}, best batch {plain['best_batch']:<4}       "
                  f"{plain['pairs_per_s']:10.2f} pairs/s  {plain['vs_reference']:.1f}x reference")
        for key, label in (("exam_grade", "exam-grade defaults"), ("exam_grade_float32", "exam-grade --dtype float32")):
            if key in r:
                e = r[key]
                print(f"  {label:<27} end to end   {e['pairs_per_s_end_to_end']:10.2f} pairs/s  "
                      f"{e['vs_reference_end_to_end']:.1f}x reference, {100 * e['vs_plain_end_to_end']:.0f}% of plain")
                print(f"  {label:<27} grading only {e['pairs_per_s_grading']:10.2f} pairs/s  "
                      f"{e['vs_reference_grading']:.1f}x reference, {100 * e['vs_plain_grading']:.0f}% of plain")
        if "agreement_default_vs_float32" in r:
            a = r["agreement_default_vs_float32"]
            print(f"  defaults' grades equal to float32's: {a['same_grade']}/{a['pairs']} = {100 * a['share_same']:.1f}%")
        if "startup" in r:
            st = r["startup"]
            print("  start-up in a fresh process: " + (st["error"] if "error" in st else
                  f"{st['wall_s']:.1f} s = imports {st['imports_s']:.1f} + device {st['device_init_s']:.1f} + "
                  f"tokenizer {st['tokenizer_s']:.1f} + model load {st['model_load_s']:.1f} + interpreter"))
        for label, c in r.get("ctranslate2", {}).items():
            if label.startswith("same_grades "):
                _, code, _, *alone = label.split()
                print(f"  CTranslate2 grades{' (int8 alone)' if alone else ''}, {code} = this: "
                      f"{c['same_grade']}/{c['pairs']}")
                continue
            what = "int8 alone  " if label.endswith("alone") else "int8 default"
            print(f"  CTranslate2 {what} ({label.split()[0]:<8}) e2e {c['pairs_per_s_end_to_end']:8.2f} pairs/s "
                  f"{c['vs_reference_end_to_end']:.1f}x, grading {c['pairs_per_s_grading']:8.2f} pairs/s "
                  f"{c['vs_reference_grading']:.1f}x reference")
    if host:
        print("\nhost cost per pair, 1-layer T5 with a stubbed forward, one thread "
              f"(goal <= {HOST_GOAL_MS} ms, >= {1 / HOST_GOAL_MS * 1000:.0f} pairs/s):")
        for way, h in host.items():
            if way == "rounds":
                continue
            print(f"  {way:<21} {h['ms_per_pair']:.3f} ms/pair = {h['pairs_per_s']:8.0f} pairs/s "
                  f"({h['pairs']} pairs; prompts composed {h['composed']}, tokenized whole {h['tokenized_whole']})")
        rounds = host.get("rounds") or []
        if len(rounds) > 1 or (rounds and len(rounds[0]) > 1):
            print(f"  (the best of {len(rounds)} rounds above; each round's checkouts run back to back)")
        for label in (rounds[0] if rounds else {}):
            for way in rounds[0][label]:
                ms = [r[label][way]["ms_per_pair"] for r in rounds]
                line = f"  {way} ({label}): median {statistics.median(ms):.3f} ms/pair of {len(ms)} rounds"
                if label != "this" and way in rounds[0]["this"]:
                    ratio = [r["this"][way]["ms_per_pair"] / r[label][way]["ms_per_pair"] for r in rounds]
                    line += (f"; this checkout / {label}, round by round: median {statistics.median(ratio):.2f} "
                             f"({', '.join(f'{x:.2f}' for x in ratio)})")
                print(line)
    if sim:
        print("\nthe grading loop on a simulated GPU at an H100's plain-loop rate (bench/device_sim.py), one thread:")
        for label, r in sim.items():
            print(f"  {label:<50} device busy {100 * r['device_busy_share']:5.1f}% of {r['seconds']:6.2f} s, "
                  f"{r['pairs_per_s']:7.0f} pairs/s of the device's {r['device_pairs_per_s']:7.0f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]")
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA, help="the DL19 folder of shared/data")
    ap.add_argument("--models", default="flan-t5-base", help="of " + ", ".join(common.CONFIGS))
    ap.add_argument("--queries", type=int, default=6)
    ap.add_argument("--per-query", type=int, default=10)
    ap.add_argument("--sample-pairs", type=int, default=20, help="pairs of the reference loop")
    ap.add_argument("--plain-pairs", type=int, default=None, help="pairs of the plain loop (default: CPU 160, GPU all)")
    ap.add_argument("--plain-batches", default=None, help="batch sizes of the plain loop (default: CPU 8,32; GPU 32,128,512)")
    ap.add_argument("--no-host-cost", dest="host_cost", action="store_false")
    ap.add_argument("--no-sim-device", dest="sim_device", action="store_false",
                    help="skip the simulated-GPU rows that follow the host cost (bench/device_sim.py)")
    ap.add_argument("--host-queries", type=int, default=30, help="queries of the host-cost pool")
    ap.add_argument("--host-per-query", type=int, default=40, help="passages per query of the host-cost pool")
    ap.add_argument("--no-ct2", dest="ct2", action="store_false", help="skip the CTranslate2 rows (CPU only)")
    ap.add_argument("--compare-code", type=Path, action="append", default=[], metavar="DIR",
                    help="another checkout (repeatable) whose host cost and exam-grade --engine ctranslate2 "
                         "run right before this one's")
    ap.add_argument("--float32-row", action=argparse.BooleanOptionalAction, default=None,
                    help="also exam-grade --dtype float32 and its agreement (default: on CUDA only; on a "
                         "CPU to try the GPU run's code path; --no-float32-row where another run has it)")
    ap.add_argument("--only-ct2", action="store_true",
                    help="the reference loop (before and after) and the CTranslate2 rows only")
    ap.add_argument("--ct2-alone", action="store_true",
                    help="also int8 alone (--recheck-margin 0), after the default, for each checkout")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="folder for bench_pipeline.txt and .json")
    ap.add_argument("--keep", type=Path, default=None, help="keep the work folder here")
    ap.add_argument("--host-rounds", type=int, default=1, help="host-cost runs per checkout (the best kept)")
    ap.add_argument("--no-models", dest="models_arm", action="store_false",
                    help="the host cost alone: no model rows (reference, plain loop, exam-grade, CTranslate2)")
    ap.add_argument("--host-cost-child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--host-cost-code", default=str(ROOT), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.host_cost_child:
        print(json.dumps(host_cost_child(args)))
        return 0
    if not args.data.is_dir():
        print(f"bench: {args.data} not found (the benchmark needs shared/data/dl19)", file=sys.stderr)
        return 2
    gpu = args.device.startswith("cuda")
    args.plain_pairs = args.plain_pairs or (10**9 if gpu else 160)
    args.plain_batches = args.plain_batches or ("32,128,512" if gpu else "8,32")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if gpu:
        import torch

        if not torch.cuda.is_available():
            print(f"bench: --device {args.device}: torch sees no CUDA device", file=sys.stderr)
            return 2
    if args.ct2 and (gpu or not importlib.util.find_spec("ctranslate2")):
        args.ct2 = False
    work = Path(tempfile.mkdtemp(prefix="exam-pipeline-")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    os.environ["EXAM_EVAL_CT2_CACHE"] = str(work / "ct2-models")
    try:
        t0 = time.perf_counter()
        env = environment(args.device)
        results: dict = {}
        host = sim = None

        def save(final: bool = False) -> None:
            """The table and every figure so far into --out (each file replaced whole)."""
            if final:
                env["load_average_after"] = os.getloadavg()
            table = io.StringIO()
            with contextlib.redirect_stdout(table):
                pipeline_table(results, host, env, sim)
            if final:
                print(table.getvalue(), end="")
            else:
                print("\n(partial: saved after the rows above, before the run's end)", file=table)
            payload = {"environment": env, "results": results, "host_cost": host, "device_sim": sim,
                       "total_s": time.perf_counter() - t0, "complete": final,
                       "settings": json.loads(json.dumps(vars(args), default=str))}
            if args.out:
                args.out.mkdir(parents=True, exist_ok=True)
                for path, text in ((args.out / "bench_pipeline.txt", table.getvalue()),
                                   (args.out / "bench_pipeline.json", json.dumps(payload, indent=1) + "\n")):
                    part = path.with_name(path.name + ".part")
                    part.write_text(text, encoding="utf-8")
                    part.replace(path)

        pool = common.build_pool(args.data, work, args.queries, args.per_query, args.seed)
        tok = common.train_tokenizer(args.data)
        if args.host_cost:
            # a pool of the size (the stubbed model makes it cheap): the first pair of
            # each passage and question is tokenized whole, a share that shrinks as pools grow
            hwork = work / "host"
            hwork.mkdir()
            hpool = common.build_pool(args.data, hwork, args.host_queries, args.host_per_query, args.seed)
            print(f"[host cost] 1-layer T5, stubbed forward, one thread, {args.host_queries} queries x "
                  f"{args.host_per_query} passages ...", file=sys.stderr, flush=True)
            common.build_model("t5-1-layer", tok, hwork / "t5-1-layer")
            host = host_costs(hwork, hpool, args)
            save()
            if args.sim_device:
                print("[simulated GPU] the grading loop at an H100's plain-loop rates, one thread ...",
                      file=sys.stderr, flush=True)
                sim = device_sim.run(hwork)
                save()
        for name in args.models.split(",") if args.models_arm else []:
            t1 = time.perf_counter()
            model_dir = common.build_model(name, tok, work / name)
            results[name] = {"build_s": time.perf_counter() - t1}  # random weights, saved in float32
            model_rows(name, model_dir, work, pool, args, results[name], save)
            if args.ct2:
                results[name]["ctranslate2"] = ct2_rows(name, model_dir, work, args,
                                                         results[name]["reference"]["pairs_per_s"])
                save()
            if args.only_ct2:  # the reference again: how far the machine's load moved meanwhile
                sample = common.sample_requests(pool, args.sample_pairs, args.seed)
                results[name]["reference_after"] = common.reference_loop(model_dir, sample, args.device)
        save(final=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
