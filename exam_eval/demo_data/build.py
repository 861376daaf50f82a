"""Write the demo collection's files from the hand-written content in source_*.py.

    python -m exam_eval.demo_data.build     # rewrites the files next to this module

The content (topics, passages with their author's label, questions, answer keys,
nuggets) is authored in ``source_a.py`` / ``source_b.py``; this script only lays it out in
the project's file formats, ranks the passages into four runs of deliberately
different quality, and writes the author's answers to the AutoNuggetizer's prompts
(``nuggetize-script.jsonl``, for the RAG demo's ``exam-genq nuggetize --backend scripted``). Everything is seeded, so rebuilding gives identical bytes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from exam_eval.io.bank_items import make_item_id

from .source_a import TOPICS as _A
from .source_b import TOPICS as _B

HERE = Path(__file__).resolve().parent
TOPICS = _A + _B
RUN_DEPTH = 6  # passages per query and run; fewer than a topic's 10, so runs differ in what they find
SEED = 20261121

# How each run orders a topic's passages: a sort key from (author label, rng). The good
# run is nearly the label order, the mediocre one is noisy, the poor one prefers the
# off-topic passages, the random one ignores the label. Poor and random runs also pick up
# passages written for other topics (off-topic for this query, hence unjudged here).
RUNS = {
    "good": dict(weight=1.0, noise=0.6, foreign=0),
    "mediocre": dict(weight=1.0, noise=2.2, foreign=1),
    "poor": dict(weight=-0.7, noise=1.0, foreign=2),
    "random": dict(weight=0.0, noise=1.0, foreign=2),
}


def doc_ids() -> dict[tuple[str, int], str]:
    """Opaque passage ids (``p001``..), in a shuffled order so an id says nothing of its topic."""
    keys = [(t["query_id"], i) for t in TOPICS for i in range(len(t["passages"]))]
    order = keys[:]
    random.Random(SEED).shuffle(order)
    return {key: f"p{n + 1:03d}" for n, key in enumerate(order)}


def build(out: Path = HERE) -> None:
    ids = doc_ids()
    lines = {name: [] for name in ("topics", "passages", "qrels", "questions", "nuggets")}
    for t in TOPICS:
        qid = t["query_id"]
        lines["topics"].append(f"{qid}\t{t['text']}\n")
        for i, (label, _) in enumerate(t["passages"]):
            lines["qrels"].append(f"{qid} 0 {ids[(qid, i)]} {label}\n")
        for text, answers in t["questions"]:
            item = {"query_id": qid, "item_id": make_item_id(qid, text), "kind": "question", "text": text}
            if answers:
                item["answers"] = answers
            lines["questions"].append(json.dumps(item, ensure_ascii=False) + "\n")
        for text in t["nuggets"]:
            item = {"query_id": qid, "item_id": make_item_id(qid, text), "kind": "nugget", "text": text}
            lines["nuggets"].append(json.dumps(item, ensure_ascii=False) + "\n")
    passages = sorted(((ids[(t["query_id"], i)], t["query_id"], text) for t in TOPICS
                       for i, (_, text) in enumerate(t["passages"])))
    for doc_id, qid, text in passages:
        lines["passages"].append(json.dumps({"doc_id": doc_id, "query_id": qid, "text": text},
                                            ensure_ascii=False) + "\n")
    files = {"topics": "topics.tsv", "passages": "passages.jsonl", "qrels": "qrels.txt",
             "questions": "questions.jsonl", "nuggets": "nuggets.jsonl"}
    for key, name in files.items():
        (out / name).write_text("".join(lines[key]), encoding="utf-8")
    for name, text in make_runs(ids).items():
        (out / f"{name}.run").write_text(text, encoding="utf-8")
    (out / "nuggetize-script.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n"
                                                        for r in nuggetize_script()), encoding="utf-8")


def nuggetize_script() -> list[dict]:
    """The author's answers to the AutoNuggetizer's creation and importance prompts, as
    rules for ``exam-genq nuggetize --backend scripted``: the topic's nuggets as the
    created list, and vital / okay as the author marked them (``vital_nuggets``)."""
    rules = []
    for t in TOPICS:
        query = f"Search Query: {t['text']}\n"
        labels = ["vital" if i in t["vital_nuggets"] else "okay" for i in range(len(t["nuggets"]))]
        rules.append({"match": ["You are NuggetizeLLM,", query], "output": repr(list(t["nuggets"]))})
        rules.append({"match": ["You are NuggetizeScoreLLM,", query], "output": repr(labels)})
    return rules


def make_runs(ids: dict[tuple[str, int], str]) -> dict[str, str]:
    rng = random.Random(SEED)
    runs = {}
    for name, spec in RUNS.items():
        rows = []
        for t in TOPICS:
            qid = t["query_id"]
            keyed = [(spec["weight"] * label + rng.gauss(0.0, spec["noise"]), ids[(qid, i)])
                     for i, (label, _) in enumerate(t["passages"])]
            keyed.sort(reverse=True)
            picked = [doc for _, doc in keyed[: RUN_DEPTH - spec["foreign"]]]
            others = [ids[(o["query_id"], i)] for o in TOPICS if o is not t for i in range(len(o["passages"]))]
            for doc in rng.sample(others, spec["foreign"]):
                picked.insert(rng.randrange(len(picked) + 1), doc)
            for rank, doc in enumerate(picked, start=1):
                rows.append(f"{qid} Q0 {doc} {rank} {RUN_DEPTH + 1 - rank:.1f} {name}\n")
        runs[name] = "".join(rows)
    return runs


if __name__ == "__main__":
    build()
