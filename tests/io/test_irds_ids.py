"""ir_datasets IDs are recognised by ir_datasets' registry, not by a slash: the README's
``--passages msmarco-passage`` (a top-level ID) goes to ir_datasets wherever an input may
be a file or an ID, and an existing path of the same name still wins. No network: loading
is replaced, or the dataset's own refusal is what is checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from exam_eval.errors import InputError
from exam_eval.io import irds
from exam_eval.io.passages import read_passages
from exam_eval.io.topics import read_topics
from refusals import one_line_refusal

DEMO = Path(__file__).resolve().parents[2] / "exam_eval" / "demo_data"


class FakeDataset:
    """What ir_datasets.load gives, with texts of our own (nothing downloaded)."""

    def __init__(self, docs=(), queries=(), qrels=()):
        from collections import namedtuple

        self.Doc = namedtuple("GenericDoc", "doc_id text")
        self.Query = namedtuple("GenericQuery", "query_id text")
        self.Qrel = namedtuple("TrecQrel", "query_id doc_id relevance iteration")
        self.docs, self.queries, self.qrels = docs, queries, qrels

    def has_docs(self):
        return bool(self.docs)

    def has_queries(self):
        return bool(self.queries)

    def has_qrels(self):
        return bool(self.qrels)

    def docs_store(self):
        docs = {d: self.Doc(d, t) for d, t in self.docs}

        class Store:
            def get_many(self, ids):
                return {i: docs[i] for i in ids if i in docs}

        return Store()

    def docs_iter(self):
        return (self.Doc(d, t) for d, t in self.docs)

    def queries_iter(self):
        return (self.Query(q, t) for q, t in self.queries)

    def qrels_iter(self):
        return (self.Qrel(q, d, r, "0") for q, d, r in self.qrels)


@pytest.fixture
def loads(monkeypatch):
    """ir_datasets.load replaced: records the IDs asked for, answers with a FakeDataset."""
    asked = []
    dataset = FakeDataset(docs=[("d1", "the passage text")], queries=[("q1", "the query")],
                          qrels=[("q1", "d1", 2)])

    def load(spec):
        asked.append(spec)
        return dataset

    monkeypatch.setattr(irds, "load_dataset", load)
    return asked


def test_top_level_ids_are_recognised_by_the_registry(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for spec in ("msmarco-passage", "vaswani", "msmarco-passage/trec-dl-2019/judged",
                 "clirmatrix/en/bi139-base/de/test1"):  # the last one registered by pattern
        assert irds.looks_like_irds_id(spec), spec
    for spec in ("no-such/dataset", "passages.jsonl", "msmarco-passages", "runs/x.run", "-", ""):
        assert not irds.looks_like_irds_id(spec), spec


def test_an_existing_path_wins_over_an_id_of_the_same_name(tmp_path, monkeypatch, loads):
    monkeypatch.chdir(tmp_path)
    Path("msmarco-passage").write_text("d9\ta passage from the file\n")
    Path("vaswani").write_text("q9\ta topic from the file\n")
    assert not irds.looks_like_irds_id("msmarco-passage")
    assert read_passages("msmarco-passage") == {"d9": "a passage from the file"}
    assert {q: t.text for q, t in read_topics("vaswani").items()} == {"q9": "a topic from the file"}
    assert loads == []  # ir_datasets never asked


def test_ids_without_a_slash_are_read_through_ir_datasets(tmp_path, monkeypatch, loads):
    monkeypatch.chdir(tmp_path)  # no file of these names here
    assert read_passages("msmarco-passage", {"d1"}) == {"d1": "the passage text"}
    assert {q: t.text for q, t in read_topics("vaswani").items()} == {"q1": "the query"}
    from exam_eval.measures.grade_labels import read_human_qrels

    assert read_human_qrels("cranfield") == {"q1": {"d1": 2}}
    assert loads == ["msmarco-passage", "vaswani", "cranfield"]


def test_exam_grade_passages_msmarco_passage_goes_to_ir_datasets(tmp_path, run_cli, loads):
    """The README's flag as written: the pooled passages' texts come from the ID's docs store."""
    run = tmp_path / "r.run"
    run.write_text("q1 Q0 d1 1 9.0 r\n")
    bank = tmp_path / "bank.jsonl"
    bank.write_text(json.dumps({"query_id": "q1", "item_id": "q1/x", "kind": "question", "text": "Why?"}) + "\n")
    out = tmp_path / "g.jsonl"
    res = run_cli("exam-grade", "--backend", "scripted", "--prompt", "question-selfrating", "--bank", bank,
                  "--passages", "msmarco-passage", run, "--no-cache", "-o", out, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert loads == ["msmarco-passage"]
    (line,) = out.read_text().splitlines()
    assert json.loads(line)["doc_id"] == "d1"


def test_an_id_without_qrels_says_so_and_not_no_such_file(tmp_path, run_cli):
    """msmarco-passage is registered and has no qrels: ir_datasets' own answer (read from
    its registry, offline), where the slash rule said 'no such file'."""
    run = tmp_path / "r.run"
    run.write_text("q1 Q0 d1 1 9.0 r\n")
    res = run_cli("exam-qrels", "-m", "P.10", "msmarco-passage", run, cwd=tmp_path)
    assert one_line_refusal(res) == "exam-qrels: msmarco-passage: this ir_datasets dataset has no qrels"


def test_passages_of_a_top_level_id_offline_are_ir_datasets_refusal(tmp_path, run_cli):
    """--passages msmarco-passage with the docs absent: ir_datasets tries its download and
    fails (a dead local proxy makes that so on any machine): its one line, not 'no such file'."""
    dead = "http://127.0.0.1:9"
    out = tmp_path / "g.jsonl"
    res = run_cli("exam-grade", "--backend", "scripted", "--prompt", "question-selfrating", "--bank",
                  DEMO / "questions.jsonl", "--passages", "msmarco-passage", DEMO / "good.run",
                  "--no-cache", "-o", out, timeout=120, cwd=tmp_path,
                  env={"IR_DATASETS_HOME": str(tmp_path / "irds"), "HTTPS_PROXY": dead, "HTTP_PROXY": dead,
                       "https_proxy": dead, "http_proxy": dead})
    line = one_line_refusal(res)
    assert line.startswith("exam-grade: msmarco-passage: ir_datasets could not provide documents"), line
    assert "no such file" not in line
    assert not out.exists()


def test_a_name_that_is_neither_says_what_was_tried(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="not an existing file, and not a known ir_datasets ID"):
        read_passages("no-such/dataset")
    with pytest.raises(InputError, match="not an existing file, and not a known ir_datasets ID"):
        read_topics("no-such/dataset")
    Path("folder").mkdir()
    with pytest.raises(InputError, match="no such file"):  # a path in a folder that is there: a missing file
        read_passages("folder/passages.jsonl")
    shutil.rmtree("folder")
