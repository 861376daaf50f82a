"""The shipped demo collection: complete, consistent, reproducible, and of the promised shape."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import pytest

from exam_eval.io.banks import read_bank
from exam_eval.trec_eval.trec_files import read_qrels, read_run

DATA = Path(str(resources.files("exam_eval") / "demo_data"))
RUNS = ("good", "mediocre", "poor", "random")
FILES = (["topics.tsv", "passages.jsonl", "qrels.txt", "questions.jsonl", "nuggets.jsonl", "nuggetize-script.jsonl"]
         + [f"{r}.run" for r in RUNS])


def _topics() -> dict[str, str]:
    return dict(line.rstrip("\n").split("\t", 1) for line in (DATA / "topics.tsv").open(encoding="utf-8"))


def _passages() -> list[dict]:
    return [json.loads(line) for line in (DATA / "passages.jsonl").open(encoding="utf-8")]


def test_every_file_is_shipped_and_the_readme_states_the_origin():
    for name in FILES + ["README.md"]:
        assert (DATA / name).is_file(), name
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    assert "Written by the exam_eval authors" in readme
    assert "Nothing is copied from MS MARCO" in readme


def test_shape_topics_passages_qrels():
    topics = _topics()
    assert len(topics) == 10
    passages = _passages()
    ids = [p["doc_id"] for p in passages]
    assert len(ids) == 100 and len(set(ids)) == 100
    assert all(p["text"].strip() and len(p["text"].split()) >= 12 for p in passages)
    texts = [p["text"] for p in passages]
    assert len(set(texts)) == 100
    qrels = read_qrels(DATA / "qrels.txt")
    assert set(qrels) == set(topics)
    judged = {d for docs in qrels.values() for d in docs}
    assert judged == set(ids)  # every passage judged, for the topic it was written for
    for qid, docs in qrels.items():
        labels = sorted(docs.values())
        assert len(labels) == 10
        assert set(labels) <= {0, 1, 2, 3}
        assert labels.count(0) >= 1 and max(labels) == 3, qid
        owner = {p["doc_id"]: p["query_id"] for p in passages}
        assert all(owner[d] == qid for d in docs)


def test_banks_ids_are_the_workbench_md5_and_counts_match():
    questions = read_bank(DATA / "questions.jsonl")
    nuggets = read_bank(DATA / "nuggets.jsonl")
    for item in questions + nuggets:
        digest = hashlib.md5(item.text.strip().encode("utf-8")).hexdigest()
        assert item.item_id == f"{item.query_id}/{digest}"
    per_q: dict[str, int] = {}
    for item in questions:
        assert item.kind == "question"
        per_q[item.query_id] = per_q.get(item.query_id, 0) + 1
    assert per_q == {q: 10 for q in _topics()}
    assert {i.kind for i in nuggets} == {"nugget"}
    assert len(nuggets) == 50
    keyed = [i for i in questions if i.answers]
    assert 20 <= len(keyed) < len(questions)  # "a few with answer keys" per topic
    assert {i.query_id for i in keyed} == set(_topics())


def test_answer_keys_are_stated_by_a_judged_relevant_passage():
    """Relevant passages really answer the questions: every answer key occurs verbatim in a
    passage of its topic that the human judged >= 1, and no off-topic passage holds
    a key of a question whose key is longer than one word."""
    qrels = read_qrels(DATA / "qrels.txt")
    text = {p["doc_id"]: p["text"].lower() for p in _passages()}
    for item in read_bank(DATA / "questions.jsonl"):
        if not item.answers:
            continue
        holders = [d for d, lab in qrels[item.query_id].items() if any(a.lower() in text[d] for a in item.answers)]
        assert holders, item.text
        assert max(qrels[item.query_id][d] for d in holders) >= 1
        if all(len(a.split()) > 1 for a in item.answers):
            assert all(qrels[item.query_id][d] > 0 for d in holders), item.text


def test_runs_are_valid_and_of_clearly_different_quality():
    import numpy as np
    import pytrec_eval

    qrels = read_qrels(DATA / "qrels.txt")
    ids = {p["doc_id"] for p in _passages()}
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"})
    score = {}
    for name in RUNS:
        run = read_run(DATA / f"{name}.run")
        assert set(run) == set(qrels)
        assert all(d in ids for docs in run.values() for d in docs)
        assert all(len(docs) == 6 for docs in run.values())
        res = ev.evaluate(run)
        score[name] = float(np.mean([res[q]["ndcg_cut_10"] for q in qrels]))
    assert score["good"] > score["mediocre"] > score["random"] > score["poor"]
    assert score["good"] - score["poor"] > 0.5


def test_build_reproduces_the_shipped_files(tmp_path):
    from exam_eval.demo_data.build import build

    build(tmp_path)
    for name in FILES:
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name


@pytest.mark.parametrize("name", FILES)
def test_files_end_with_newline_and_have_no_blank_lines(name):
    raw = (DATA / name).read_text(encoding="utf-8")
    assert raw.endswith("\n") and "\n\n" not in raw


def test_the_readme_command_makes_the_shipped_nuggetized_bank(tmp_path, run_cli):
    import shlex

    readme = (DATA / "README.md").read_text(encoding="utf-8")
    command = readme.split("<!-- nuggetize-command -->\n```sh\n", 1)[1].split("\n```", 1)[0]
    argv = shlex.split(command)
    assert argv[:2] == ["exam-genq", "nuggetize"] and argv[argv.index("-o") + 1] == "nuggetized.jsonl"
    argv[argv.index("-o") + 1] = str(tmp_path / "bank.jsonl")
    res = run_cli(*argv, cwd=DATA)
    assert res.returncode == 0, res.stderr
    assert "creation: 10 prompts: 10 calls" in res.stderr and "importance: 10 prompts: 10 calls" in res.stderr
    assert (tmp_path / "bank.jsonl").read_bytes() == (DATA / "nuggetized.jsonl").read_bytes()
    items = [json.loads(x) for x in (DATA / "nuggetized.jsonl").read_text(encoding="utf-8").splitlines()]
    # the same nuggets as the hand-written bank, now with the author's importance, vital first per topic
    plain = {json.loads(x)["item_id"] for x in (DATA / "nuggets.jsonl").read_text(encoding="utf-8").splitlines()}
    assert {i["item_id"] for i in items} == plain
    for qid in {i["query_id"] for i in items}:
        labels = [i["importance"] for i in items if i["query_id"] == qid]
        assert labels == sorted(labels, key=lambda x: x != "vital") and "vital" in labels and "okay" in labels
    assert all(i["query_text"] == _topics()[i["query_id"]] for i in items)
