"""What the benchmarks and studies share: the DL19 pool, the tokenizer and random-weight
flan-t5 models, exam-grade run as a user runs it, the reference loop, grade agreement,
and the description of the machine every result records.

Every script imports it the same way, which works when it is run as ``python bench/x.py``
(or ``python bench/studies/x.py``) from the repository root::

    ROOT = Path(__file__).resolve().parents[1]          # parents[2] in bench/studies/
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    import common  # noqa: E402
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import platform
import random
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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


# -- the machine ----------------------------------------------------------------------------------
def _lscpu() -> dict:
    """lscpu's fields; /proc/cpuinfo's where lscpu is missing (a bare container image)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except FileNotFoundError:
        out = ""
    field = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines())}
    if not field.get("Model name"):
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                k, _, v = line.partition(":")
                k = k.strip()
                if k == "model name":
                    field.setdefault("Model name", v.strip())
                elif k == "flags":
                    field.setdefault("Flags", v.strip())
                elif k == "cpu family":
                    field.setdefault("CPU family", v.strip())
                elif k == "vendor_id":
                    field.setdefault("Vendor ID", v.strip())
                elif not k:
                    break  # the first processor is enough
        except OSError:
            pass
    return field


def _simd(flags: set[str]) -> list[str]:
    return sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "f16c", "sse4")))


def machine() -> dict:
    """The machine a result was measured on: CPU model, family, usable cores, SIMD flags,
    python, platform, load average. Every benchmark records it in its JSON."""
    field = _lscpu()
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return {"cpu": field.get("Model name") or platform.processor(), "cpu_vendor": field.get("Vendor ID"),
            "cpu_family": field.get("CPU family"), "cores": cores,
            "cpu_flags": _simd(set(field.get("Flags", "").split())), "python": platform.python_version(),
            "platform": platform.platform(), "load_average": list(os.getloadavg())}


def cpu_peak() -> dict:
    """The machine (:func:`machine`'s CPU) and its peak fp32 FLOP/s from lscpu: cores x FMA
    units x SIMD lanes x 2 x clock.

    Lanes: 16 with avx512f, 8 with avx2/fma, 4 otherwise. FMA units: 2 per core (every
    x86 server core since Haswell/Zen 2; Zen 4 executes 512-bit FMAs as two 256-bit
    halves, which halves the AVX-512 figure there: we name the CPU family so the reader
    can tell). Clock: lscpu's "CPU max MHz", else the BogoMIPS / 2 (the TSC rate, about the
    base clock, under a hypervisor). An upper bound; sustained clocks are lower.
    """
    field = _lscpu()
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
    return {"int8_per_fp32_lane": vnni, "peak_int8_gops": round(peak * vnni, 1), "simd_flags": _simd(flags),
            "model": field.get("Model name"), "cpu_family": field.get("CPU family"), "cores": cores,
            "simd_fp32_lanes": lanes, "fma_units": fma, "ghz": round(ghz, 3), "clock_source": source,
            "peak_gflops": round(peak, 1)}


def machine_line(m: dict) -> str:
    """One line of :func:`machine` for a benchmark's printed table."""
    load = m.get("load_average") or [float("nan")]
    return f"machine: {m['cpu']} ({m['cores']} cores; {' '.join(m['cpu_flags'])}); python {m['python']}; load {load[0]:.2f}"


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
    """A run file, passages and bank restricted to a seeded subsample of the DL19 pool (the
    union of the top 20 of the submitted runs), and bank-edited.jsonl: the first question of
    every query changed."""
    from exam_eval.io.banks import items_by_query, read_bank, write_bank
    from exam_eval.trec_eval.trec_files import ranked, read_run

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
    from exam_eval.io.bank_items import make_item_id, BankItem

    out, seen = [], set()
    for item in items:
        if item.query_id not in seen:
            seen.add(item.query_id)
            text = item.text.rstrip("?") + ", according to the passage?"
            item = BankItem(item.query_id, make_item_id(item.query_id, text), item.kind, text)
        out.append(item)
    return out


def train_tokenizer(data: Path):
    """A T5-style tokenizer (Metaspace BPE, <pad>=0 </s>=1 <unk>=2, '</s>' appended),
    trained on the DL19 passages (T5's sentencepiece model would be a download)."""
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
    """Random weights in the published configuration ``name`` (of CONFIGS), saved with the tokenizer."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(seed)
    config = T5Config(**T5_COMMON, **CONFIGS[name], pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    model = T5ForConditionalGeneration(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def sample_requests(pool: dict, n: int, seed: int):
    """n (passage, question) pairs, passage by passage as the reference walks them."""
    from exam_eval.grading.types import GradeRequest
    from exam_eval.grading.prompts import get_prompt

    prompt = get_prompt(PROMPT)
    pairs = [(q, d, item) for q, ds in pool["chosen"].items() for d in ds if d in pool["texts"]
             for item in pool["items"][q]]
    rng = random.Random(seed)
    start = rng.randrange(0, max(1, len(pairs) - n))
    return [GradeRequest(prompt, "", item.text, pool["texts"][d]) for q, d, item in pairs[start:start + n]]


def pool_requests(pool: dict):
    """Every (passage, question) pair of the pool, as grade requests."""
    from exam_eval.grading.types import GradeRequest
    from exam_eval.grading.prompts import get_prompt

    prompt = get_prompt(PROMPT)
    return [GradeRequest(prompt, "", item.text, pool["texts"][d]) for q, ds in pool["chosen"].items() for d in ds
            if d in pool["texts"] for item in pool["items"][q]]


# -- devices --------------------------------------------------------------------------------------
def sync(device: str) -> None:
    """Wait for the device's queued work (CUDA); nothing on a CPU."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def release(device: str) -> None:
    """Give the device memory of an in-process loop back: exam-grade, a child process, sizes
    its batches on CUDA from the memory free when it starts."""
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


# -- the reference loop ---------------------------------------------------------------------------
def reference_loop(model_dir: Path, requests, device: str = "cpu", count_flops: bool = False) -> dict:
    """The reference workbench's way of grading: one request at a time, batch 1, beam search
    5, float32, on ``device``; the prompt rendered and cut as exam-grade does.

    The workbench calls the Hugging Face ``text2text-generation`` pipeline; transformers 5
    no longer has that task, so the loop calls ``generate``, which is what the pipeline did
    inside. Generation is capped at 2 new tokens: a trained flan-t5-large answers with one
    digit and ``</s>``, a random model never emits ``</s>`` (the most favourable case for the
    reference). Timed after a warm-up call, model load excluded. ``count_flops``: FLOPs per
    pair counted with ``torch.utils.flop_counter`` on the first 8 pairs."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).to(device).eval()
    texts = [r.prompt.render(query=r.query, item=r.item_text, context=r.context) for r in requests]

    def one(text):
        enc = tok(text, return_tensors="pt", truncation=True, max_length=512).to(device)
        with torch.inference_mode():
            out = model.generate(**enc, num_beams=5, max_new_tokens=2, min_new_tokens=2, do_sample=False)
        return tok.decode(out[0], skip_special_tokens=True)

    one(texts[0])  # warm-up (first-call allocations), not timed
    sync(device)
    t0 = time.perf_counter()
    for text in texts:
        one(text)
    sync(device)
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


# -- exam-grade -----------------------------------------------------------------------------------
#: Random weights put little of the first token's probability on the labels (about 0.06),
#: where exam-grade's label-mass rule (``--min-label-mass``, default 0.5) reads the grade from
#: generated text instead; a trained FLAN-T5 puts nearly all of it there and is scored. The
#: benchmarks measure scoring, as a trained FLAN-T5 gets it: the rule off (0), on the command
#: line (``label_mass_flags``) and on in-process back ends (``backend.min_label_mass``).
MIN_LABEL_MASS = 0.0


def label_mass_flags(root: Path = ROOT) -> list[str]:
    """``--min-label-mass 0`` for exam-grade of checkout ``root``; none where that checkout
    predates the option (``--compare-code`` of an older commit, which has no rule)."""
    options = root / "exam_eval" / "commands" / "_options.py"
    known = options.is_file() and "--min-label-mass" in options.read_text(encoding="utf-8")
    return ["--min-label-mass", f"{MIN_LABEL_MASS:g}"] if known else []


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


def exam_grade(name: str, model_dir: Path, work: Path, device: str, extra: list[str], tag: str,
               root: Path = ROOT) -> dict:
    """exam-grade (hf-seq2seq, the question self-rating prompt) on the pool in ``work``, every
    passage of it, with ``extra`` flags: end to end and grading-only rates, its output file."""
    cache = work / f"cache-{name}-{tag}.sqlite"
    out = work / f"{name}-{tag}.jsonl"
    # a kept work folder (--keep) holds the last run's grades and cache: a rerun would find
    # every pair done and time nothing but its start
    for old in (out, cache):
        old.unlink(missing_ok=True)
    # --depth: every passage of the pool (exam-grade's default pools a run's top 20 alone, which
    # graded 6,000 of the 11,970 pairs of a GPU run at --per-query 40)
    depth = max(collections.Counter(line.split()[0] for line in open(work / "pool.run", encoding="utf-8")).values())
    r = run_cli(["--backend", "hf-seq2seq", "--model", str(model_dir), "--device", device, "--prompt", PROMPT,
                 "--depth", str(depth),
                 "--passages", str(work / "passages.jsonl"), "--bank", str(work / "bank.jsonl"),
                 "--cache", str(cache), "-o", str(out), *label_mass_flags(root), *extra, str(work / "pool.run")],
                root=root)
    r["grading_s"] = engine_seconds(cache)
    r["pairs_per_s_end_to_end"] = r["pairs"] / r["wall_s"]
    r["pairs_per_s_grading"] = r["pairs"] / r["grading_s"]
    r["flags"] = extra
    r["code"] = str(root)
    r["output"] = str(out)
    return r


def engine_run(backend, work: Path, out: Path):
    """exam-grade's engine in this process, without a cache, over the pool in ``work``
    (pool.json, bank.jsonl) into ``out``: (stats, pairs, seconds of the grading loop)."""
    from exam_eval.grading import engine
    from exam_eval.grading.cache import NullCache
    from exam_eval.grading.output import GradesAppender
    from exam_eval.grading.prompts import get_prompt
    from exam_eval.io.banks import items_by_query, read_bank

    pool = json.loads((work / "pool.json").read_text())
    items = items_by_query(read_bank(work / "bank.jsonl"))
    prompt = get_prompt(PROMPT)
    units, npairs = engine.build_units(docs=pool["chosen"], texts=pool["texts"], items=items,
                                       queries={q: "" for q in pool["chosen"]}, prompt=prompt,
                                       identity=backend.cache_identity)
    plan = engine.plan_work(units, npairs, set(), NullCache(), backend.model_id, prompt)
    out.unlink(missing_ok=True)  # this run's grades alone (they are compared across runs)
    sink = GradesAppender(str(out))
    t0 = time.perf_counter()
    stats = engine.execute(plan, backend, prompt, sink)
    secs = time.perf_counter() - t0
    sink.close()
    return stats, npairs, secs


# -- grades ---------------------------------------------------------------------------------------
def grade_engines(path: Path) -> str:
    """The engines named in a grades file."""
    from exam_eval.grading.grade_files import read_grades

    return ",".join(sorted({g.engine or "" for g in read_grades(str(path))}))


def agreement(a: Path, b: Path) -> dict:
    """Same argmax grade on how many of the same pairs; every disagreement counted."""
    from exam_eval.grading.grade_files import read_grades

    def by_pair(path):
        return {(g.query_id, g.doc_id, g.item_id): g for g in read_grades(str(path))}

    ga, gb = by_pair(a), by_pair(b)
    both = sorted(set(ga) & set(gb))
    differ = [k for k in both if ga[k].grade != gb[k].grade]
    dprob = max((abs(ga[k].probs[lab] - gb[k].probs[lab]) for k in both if ga[k].probs and gb[k].probs
                 for lab in ga[k].probs), default=float("nan"))
    return {"pairs": len(both), "same_grade": len(both) - len(differ), "disagreements": len(differ),
            "share_same": (len(both) - len(differ)) / len(both) if both else float("nan"),
            "max_abs_prob_difference": dprob, "examples": [list(k) for k in differ[:10]]}
