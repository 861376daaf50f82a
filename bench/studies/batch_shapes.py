#!/usr/bin/env python3
"""How exam-grade cuts a pool into GPU batches, without a GPU: batches, distinct (pairs,
width) shapes and the share of padded tokens that are prompt, for pad multiples and
prefetch chunk sizes (issue 22; the figures behind CUDA_PAD_MULTIPLE and LOOKAHEAD).

The prompts' token counts come from exam-grade's own back end (flan-t5 layout, the BPE
tokenizer common.train_tokenizer trains on the DL19 passages, the question self-rating prompt);
the batches from ``engine.batches`` with the GPU's token budget, as on a GPU.

    .venv/bin/python bench/studies/batch_shapes.py --queries 43 --per-query 400
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
import common  # noqa: E402


class Lengths:
    """Stands in for the back end in ``engine.batches``: the prompts' real token counts."""

    def __init__(self, lengths: dict, pad_multiple: int):
        self.lengths, self.pad_multiple = lengths, pad_multiple

    def prepare(self, requests):
        return [self.lengths[id(r)] for r in requests]


def token_counts(data: Path, queries: int, per_query: int, seed: int, work: Path):
    """The plan's units (in the engine's order) and each unit's prompt token count."""
    from exam_eval.backends.hf_seq2seq import Seq2SeqBackend
    from exam_eval.grading import engine
    from exam_eval.grading.cache import NullCache
    from exam_eval.grading.prompts import get_prompt
    from exam_eval.io.banks import items_by_query, read_bank

    pool = common.build_pool(data, work, queries, per_query, seed)
    model_dir = common.build_model("t5-1-layer", common.train_tokenizer(data), work / "t5-1-layer")
    backend = Seq2SeqBackend(model=str(model_dir), device="cpu")
    backend.load()
    prompt = get_prompt(common.PROMPT)
    units, npairs = engine.build_units(docs=pool["chosen"], texts=pool["texts"],
                                       items=items_by_query(read_bank(work / "bank.jsonl")),
                                       queries={q: "" for q in pool["chosen"]}, prompt=prompt,
                                       identity=backend.cache_identity)
    plan = engine.plan_work(units, npairs, set(), NullCache(), backend.model_id, prompt)
    todo = plan.units_todo
    counts = backend.prepare([u.request for u in todo])
    return todo, {id(u.request): n for u, n in zip(todo, counts)}, npairs


def cut(todo, lengths: dict, pad_multiple: int, lookahead: int, budget: int, size: int) -> dict:
    from exam_eval.grading import engine
    from exam_eval.grading.types import padded_width

    saved = engine.LOOKAHEAD
    engine.LOOKAHEAD = lookahead
    try:
        got = list(engine.batches(todo, Lengths(lengths, pad_multiple), size, budget))
    finally:
        engine.LOOKAHEAD = saved
    shapes = [(len(b), padded_width(max(lengths[id(u.request)] for u in b), pad_multiple)) for b in got]
    padded = sum(n * w for n, w in shapes)
    return {"pad_multiple": pad_multiple, "lookahead": lookahead, "batches": len(got), "shapes": len(set(shapes)),
            "prompt_share_of_padded": sum(lengths.values()) / padded, "padded_tokens": padded}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--per-query", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget", type=int, default=131072, help="padded tokens a batch (the GPU's default ceiling)")
    ap.add_argument("--pad-multiples", default="1,8,16,32")
    ap.add_argument("--lookaheads", default="2048,8192")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if not args.data.is_dir():
        print(f"batch_shapes: {args.data} not found (shared/data/dl19)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        todo, lengths, npairs = token_counts(args.data, args.queries, args.per_query, args.seed, Path(tmp))
    counts = sorted(lengths.values())
    print(f"{npairs} pairs, {len(todo)} prompts of {counts[0]}-{counts[-1]} tokens "
          f"(mean {sum(counts) / len(counts):.1f}), budget {args.budget:,} padded tokens a batch")
    rows = [cut(todo, lengths, m, look, args.budget, 32)
            for look in map(int, args.lookaheads.split(",")) for m in map(int, args.pad_multiples.split(","))]
    for r in rows:
        print(f"  chunk {r['lookahead']:>6,}  pad multiple {r['pad_multiple']:>2}: {r['batches']:3d} batches, "
              f"{r['shapes']:3d} shapes, {100 * r['prompt_share_of_padded']:.1f}% of padded tokens are prompt")
    if args.json:
        args.json.write_text(json.dumps({"pairs": npairs, "prompts": len(todo), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
