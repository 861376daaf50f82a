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
  model costs it (the most favourable case for the reference).
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
- peak resident memory of the exam-grade process (``wait4`` rusage);
- achieved GFLOP/s: FLOPs counted with ``torch.utils.flop_counter`` on a sample of pairs
  (useful FLOPs, no padding) times the pairs graded, over the grading time; the CPU's peak
  is estimated from ``lscpu`` (see ``cpu_peak``).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "dl19"
PROMPT = "question-selfrating"

# Published configurations of google/flan-t5-small, -base and -large (config.json on the
# hub), typed in here so nothing is downloaded.
CONFIGS = {
    "flan-t5-small": dict(d_model=512, d_ff=1024, d_kv=64, num_layers=8, num_decoder_layers=8, num_heads=6),
    "flan-t5-base": dict(d_model=768, d_ff=2048, d_kv=64, num_layers=12, num_decoder_layers=12, num_heads=12),
    "flan-t5-large": dict(d_model=1024, d_ff=2816, d_kv=64, num_layers=24, num_decoder_layers=24, num_heads=16),
    # the host-cost probe: flan-t5-base's widths and vocabulary, one layer each side
    "t5-1-layer": dict(d_model=768, d_ff=2048, d_kv=64, num_layers=1, num_decoder_layers=1, num_heads=12),
}
T5_COMMON = dict(vocab_size=32128, feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                 relative_attention_num_buckets=32, relative_attention_max_distance=128,
                 dropout_rate=0.1, layer_norm_epsilon=1e-6)


# -- inputs ---------------------------------------------------------------------------------------
def write_pool(work: Path, chosen: dict[str, list[str]], texts: dict[str, str], bank: dict) -> list:
    """What exam-grade reads of a pool (pool.run, passages.jsonl, bank.jsonl), queries in
    ``chosen``'s order; the bank items written."""
    from exam_eval.io.banks import write_bank

    with open(work / "pool.run", "w", encoding="utf-8") as fh:
        for q, ds in chosen.items():
            for rank, d in enumerate(ds, 1):
                fh.write(f"{q} Q0 {d} {rank} {len(ds) - rank + 1} bench\n")
    with open(work / "passages.jsonl", "w", encoding="utf-8") as fh:
        for d in sorted(texts):
            fh.write(json.dumps({"doc_id": d, "text": texts[d]}) + "\n")
    items = [i for q in chosen for i in bank[q]]
    write_bank(items, work / "bank.jsonl")
    return items


def build_pool(data: Path, work: Path, queries: int, per_query: int, seed: int) -> dict:
    """A run file, passages and bank restricted to a seeded subsample of the DL19 pool."""
    from exam_eval.io.banks import items_by_query, read_bank, write_bank
    from exam_eval.io.trec import ranked, read_run

    bank = items_by_query(read_bank(data / "banks" / "questions.jsonl.gz"))
    pool: dict[str, set[str]] = {}
    for run_file in sorted((data / "runs").glob("*.run")):
        for qid, docs in read_run(run_file).items():
            pool.setdefault(qid, set()).update(ranked(docs)[:20])
    rng = random.Random(seed)
    qids = rng.sample(sorted(q for q in pool if q in bank), queries)
    chosen = {q: rng.sample(sorted(pool[q]), min(per_query, len(pool[q]))) for q in sorted(qids)}
    wanted = {d for ds in chosen.values() for d in ds}
    texts = {}
    with gzip.open(data / "passages.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            if obj["doc_id"] in wanted:
                texts[obj["doc_id"]] = obj["text"]
    items = write_pool(work, chosen, texts, bank)
    edited = edit_one_per_query(items)
    write_bank(edited, work / "bank-edited.jsonl")
    return {"chosen": chosen, "texts": texts, "items": items_by_query(items)}


def build_judged_pool(data: Path, work: Path, queries: int = 0, per_query: int = 0) -> dict:
    """Every judged DL19 passage against its query's questions (92,600 pairs with the
    current bank): the job the reference workbench's own graded file is, and a pool large
    enough that a GPU run's start-up weighs little. The same files as ``build_pool``;
    ``queries`` / ``per_query`` (0: all) cut it to the first ones, for a rehearsal on a CPU."""
    from exam_eval.io.banks import items_by_query, read_bank

    bank = items_by_query(read_bank(data / "banks" / "questions.jsonl.gz"))
    chosen: dict[str, list[str]] = {}
    texts = {}
    with gzip.open(data / "passages.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            if obj["query_id"] in bank:
                chosen.setdefault(obj["query_id"], []).append(obj["doc_id"])
                texts[obj["doc_id"]] = obj["text"]
    chosen = {q: chosen[q][:per_query or None] for q in sorted(chosen)[:queries or None]}
    texts = {d: texts[d] for ds in chosen.values() for d in ds}
    items = write_pool(work, chosen, texts, bank)
    return {"chosen": chosen, "texts": texts, "items": items_by_query(items)}


def edit_one_per_query(items):
    """Change the first question of every query, as a human editing the bank would."""
    from exam_eval.io.banks import BankItem, make_item_id

    out, seen = [], set()
    for item in items:
        if item.query_id not in seen:
            seen.add(item.query_id)
            text = item.text.rstrip("?") + ", according to the passage?"
            item = BankItem(item.query_id, make_item_id(item.query_id, text), item.kind, text)
        out.append(item)
    return out


def train_tokenizer(data: Path):
    """A T5-style tokenizer (Metaspace BPE, <pad>=0 </s>=1 <unk>=2, '</s>' appended)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    def corpus():
        with gzip.open(data / "passages.jsonl.gz", "rt", encoding="utf-8") as fh:
            for line in fh:
                yield json.loads(line)["text"]

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=16000, special_tokens=["<pad>", "</s>", "<unk>"], show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                   model_max_length=512)


def build_model(name: str, tokenizer, path: Path, seed: int = 0) -> Path:
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    config = T5Config(**T5_COMMON, **CONFIGS[name], pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    model = T5ForConditionalGeneration(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# -- measurements ---------------------------------------------------------------------------------
def run_cli(args: list[str], root: Path = ROOT, check: bool = True, path: tuple[str, ...] = ()) -> dict:
    """exam-grade as a user runs it (the code of checkout ``root``, then the folders ``path``
    on PYTHONPATH); wall time, peak RSS of that process, its summary. A failure ends the bench,
    or with ``check=False`` comes back as the exit code and the last line exam-grade printed."""
    # peak RSS from the child's own VmHWM at exit: wait4's ru_maxrss starts a forked child
    # at its parent's high-water mark (Linux copies it through fork and exec), so it would
    # report this (large) bench process for any smaller exam-grade
    code = ("import atexit, sys\n"
            "def hwm():\n"
            "    for line in open('/proc/self/status'):\n"
            "        if line.startswith('VmHWM:'):\n"
            "            sys.stderr.write('BENCH_VMHWM_KB ' + line.split()[1] + '\\n')\n"
            "atexit.register(hwm)\n"
            "from exam_eval.commands.grade import main; main()")
    cmd = [sys.executable, "-c", code, *args]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=os.pathsep.join([str(root), *path]))
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        if not check:
            last = [line for line in err.splitlines() if line.strip() and not line.startswith("BENCH_VMHWM_KB")]
            return {"wall_s": wall, "returncode": proc.returncode, "message": last[-1] if last else ""}
        sys.stderr.write(err)
        raise SystemExit(f"bench: exam-grade failed ({proc.returncode})")
    m = re.search(r"(\d+) pairs: (\d+) graded, (\d+) from cache, (\d+) deduplicated", err)
    pairs, graded, cached, dedup = map(int, m.groups()) if m else (0, 0, 0, 0)
    note = re.search(r"(\d+) of (\d+) scored model calls .* regraded in float32", err)
    rechecked = [int(note.group(1)), int(note.group(2))] if note else None
    hwm = re.search(r"BENCH_VMHWM_KB (\d+)", err)
    rss = int(hwm.group(1)) / 1024 if hwm else usage.ru_maxrss / 1024
    return {"wall_s": wall, "peak_rss_mib": rss, "pairs": pairs, "graded": graded,
            "from_cache": cached, "deduplicated": dedup, "rechecked": rechecked}


def engine_seconds(cache: Path) -> float:
    """The engine's own timing of its last grading loop (model calls and writes, no
    start-up or model load), which exam-grade records in its cache for --dry-run ETAs."""
    import sqlite3

    db = sqlite3.connect(cache)
    try:
        row = db.execute("SELECT seconds FROM throughput ORDER BY updated DESC LIMIT 1").fetchone()
    finally:
        db.close()
    return float(row[0]) if row else float("nan")


def sample_requests(pool: dict, n: int, seed: int):
    """n (passage, question) pairs, passage by passage as the reference walks them."""
    from exam_eval.backends.base import GradeRequest
    from exam_eval.grading.prompts import get_prompt

    prompt = get_prompt(PROMPT)
    pairs = [(q, d, item) for q, ds in pool["chosen"].items() for d in ds if d in pool["texts"]
             for item in pool["items"][q]]
    rng = random.Random(seed)
    start = rng.randrange(0, max(1, len(pairs) - n))
    return [GradeRequest(prompt, "", item.text, pool["texts"][d]) for q, d, item in pairs[start:start + n]]


def reference_loop(model_dir: Path, requests, count_flops: bool = False) -> dict:
    """Batch 1, beam search 5, one request at a time; the prompt rendered and cut as exam-grade does."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    texts = [r.prompt.render(query=r.query, item=r.item_text, context=r.context) for r in requests]

    def one(text):
        enc = tok(text, return_tensors="pt", truncation=True, max_length=512)
        with torch.inference_mode():
            out = model.generate(**enc, num_beams=5, max_new_tokens=2, min_new_tokens=2, do_sample=False)
        return tok.decode(out[0], skip_special_tokens=True)

    one(texts[0])  # warm-up (first-call allocations), not timed
    t0 = time.perf_counter()
    for text in texts:
        one(text)
    secs = time.perf_counter() - t0
    flops = None
    if count_flops:
        from torch.utils.flop_counter import FlopCounterMode

        sub = texts[: min(8, len(texts))]
        with FlopCounterMode(display=False) as fc:
            for text in sub:
                one(text)
        flops = fc.get_total_flops() / len(sub)
    return {"pairs": len(texts), "seconds": secs, "pairs_per_s": len(texts) / secs, "flops_per_pair": flops}


def scoring_loop(model_dir: Path, requests, batch_size: int, count_flops: bool = False) -> dict:
    """exam-grade's back end in scoring mode, ``batch_size`` requests per call, in the
    engine's order (longest first)."""
    from exam_eval.backends.hf_seq2seq import Seq2SeqBackend

    backend = Seq2SeqBackend(model=str(model_dir), device="cpu", batch_size=batch_size)
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


def cpu_peak() -> dict:
    """Peak fp32 FLOP/s from lscpu: cores x FMA units x SIMD lanes x 2 x clock.

    Lanes: 16 with avx512f, 8 with avx2/fma, 4 otherwise. FMA units: 2 per core (every
    x86 server core since Haswell/Zen 2; Zen 4 executes 512-bit FMAs as two 256-bit
    halves, which halves the AVX-512 figure there: we name the CPU family so the reader
    can tell). Clock: lscpu's "CPU max MHz", else the BogoMIPS / 2 (the TSC rate, about the
    base clock, under a hypervisor). An upper bound; sustained clocks are lower.
    """
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except FileNotFoundError:  # a bare container image: the figures fall back to the defaults below
        out = ""
    field = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines())}
    flags = set(field.get("Flags", "").split())
    cores = os.cpu_count() or 1
    lanes = 16 if "avx512f" in flags else 8 if ("avx2" in flags and "fma" in flags) else 4
    fma = 2
    if field.get("CPU max MHz"):
        ghz, source = float(field["CPU max MHz"]) / 1000, "CPU max MHz"
    else:
        ghz, source = float(field.get("BogoMIPS", "2000")) / 2000, "BogoMIPS/2"
    zen4 = field.get("Vendor ID") == "AuthenticAMD" and field.get("CPU family") == "25"
    if zen4 and lanes == 16:
        lanes = 8  # double-pumped AVX-512
    peak = cores * fma * lanes * 2 * ghz
    # int8 multiply-adds per fp32 lane and instruction: 4 with VNNI (vpdpbusd), else 2
    # (vpmaddubsw + vpmaddwd). AMX tiles (amx_int8) are not counted: CTranslate2's CPU
    # kernels are AVX-512/AVX2 (oneDNN, MKL), so this is the peak they can reach.
    vnni = 4 if {"avx512_vnni", "avx_vnni"} & flags else 2
    simd = sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "f16c")))
    return {"int8_per_fp32_lane": vnni, "peak_int8_gops": round(peak * vnni, 1), "simd_flags": simd,"model": field.get("Model name"), "cpu_family": field.get("CPU family"), "cores": cores,
            "simd_fp32_lanes": lanes, "fma_units": fma, "ghz": round(ghz, 3), "clock_source": source,
            "peak_gflops": round(peak, 1)}


# -- the benchmark --------------------------------------------------------------------------------
def bench_model(name: str, model_dir: Path, work: Path, pool: dict, args) -> dict:
    run = str(work / "pool.run")
    inputs = ["--backend", "hf-seq2seq", "--model", str(model_dir), "--device", "cpu", "--prompt", PROMPT,
              "--passages", str(work / "passages.jsonl"), run]
    common = ["--engine", "torch", *inputs]
    cache = work / f"cache-{name}.sqlite"
    print(f"[{name}] exam-grade, full pool ...", file=sys.stderr, flush=True)
    full = run_cli(["--bank", str(work / "bank.jsonl"), "--cache", str(cache), "-o", str(work / f"{name}-full.jsonl"),
                    *common])
    full["grading_s"] = engine_seconds(cache)
    print(f"[{name}] exam-grade, rerun after editing 1 of 10 questions per query ...", file=sys.stderr, flush=True)
    rerun = run_cli(["--bank", str(work / "bank-edited.jsonl"), "--cache", str(cache),
                     "-o", str(work / f"{name}-rerun.jsonl"), *common])
    rerun["grading_s"] = engine_seconds(cache)
    bf16 = None
    if args.bf16:
        print(f"[{name}] exam-grade --dtype bfloat16, full pool ...", file=sys.stderr, flush=True)
        cache16 = work / f"cache-{name}-bf16.sqlite"
        bf16 = run_cli(["--bank", str(work / "bank.jsonl"), "--cache", str(cache16), "--dtype", "bfloat16",
                        "-o", str(work / f"{name}-bf16.jsonl"), *common])
        bf16["grading_s"] = engine_seconds(cache16)
    ct2 = bench_ct2(name, model_dir, work, inputs) if args.ct2 else None
    requests = sample_requests(pool, args.sample_pairs, args.seed)
    print(f"[{name}] reference loop on {len(requests)} pairs ...", file=sys.stderr, flush=True)
    ref = reference_loop(model_dir, requests, count_flops=True)
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
        ct2["agreement_ct2_float32_vs_torch"] = agreement(work / f"{name}-ct2-float32.jsonl", torch_out)
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


def bench_ct2(name: str, model_dir: Path, work: Path, inputs: list[str]) -> dict:
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
        r = run_cli(["--bank", str(work / "bank.jsonl"), "--cache", str(cache), "--engine", "ctranslate2",
                     *flags, "-o", str(work / f"{name}-ct2-{key}.jsonl"), *inputs])
        r["grading_s"] = engine_seconds(cache)
        runs[key] = {"flags": flags, "conversion_s": conversion[flags[1]], "wall_s": r["wall_s"],
                     "grading_s": r["grading_s"], "pairs": r["pairs"],
                     "pairs_per_s_end_to_end": r["pairs"] / r["wall_s"],
                     "pairs_per_s_grading": r["pairs"] / r["grading_s"], "peak_rss_mib": r["peak_rss_mib"],
                     "rechecked_in_float32": r["rechecked"], "engine": _engine(work / f"{name}-ct2-{key}.jsonl")}
    import ctranslate2

    f32 = work / f"{name}-ct2-float32.jsonl"
    return {"version": ctranslate2.__version__, "runs": runs,
            "agreement_int8_vs_float32": agreement(work / f"{name}-ct2-int8.jsonl", f32),
            "agreement_int8_only_vs_float32": agreement(work / f"{name}-ct2-int8-only.jsonl", f32)}


def _engine(path: Path) -> str:
    from exam_eval.io.grades import read_grades

    return ",".join(sorted({g.engine or "" for g in read_grades(str(path))}))


def agreement(a: Path, b: Path) -> dict:
    """Same argmax grade on how many of the same pairs; every disagreement counted."""
    from exam_eval.io.grades import read_grades

    def by_pair(path):
        return {(g.query_id, g.doc_id, g.item_id): g for g in read_grades(str(path))}

    ga, gb = by_pair(a), by_pair(b)
    common = sorted(set(ga) & set(gb))
    differ = [k for k in common if ga[k].grade != gb[k].grade]
    dprob = max((abs(ga[k].probs[lab] - gb[k].probs[lab]) for k in common if ga[k].probs and gb[k].probs
                 for lab in ga[k].probs), default=float("nan"))
    return {"pairs": len(common), "same_grade": len(common) - len(differ), "disagreements": len(differ),
            "share_same": (len(common) - len(differ)) / len(common) if common else float("nan"),
            "max_abs_prob_difference": dprob, "examples": [list(k) for k in differ[:10]]}


def print_table(results: dict, peak: dict) -> None:
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
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the DL19 folder of shared/data")
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
        pool = build_pool(args.data, work, args.queries, args.per_query, args.seed)
        tok = train_tokenizer(args.data)
        results = {}
        for name in args.models.split(","):
            model_dir = build_model(name, tok, work / name)
            results[name] = bench_model(name, model_dir, work, pool, args)
        peak = cpu_peak()
        table = io.StringIO()
        with contextlib.redirect_stdout(table):
            print_table(results, peak)
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
