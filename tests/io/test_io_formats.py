"""Readers and writers: round trips, every accepted format, ir_datasets IDs offline."""

from __future__ import annotations

import gzip
import io
import re
import shutil
from pathlib import Path

import pytest

from exam_eval.errors import InputError
from exam_eval.grading.grade_files import iter_grades, read_grades
from exam_eval.io.grades import Grade, write_grades
from exam_eval.io.leaderboard import read_leaderboard, write_leaderboard
from exam_eval.io.outputs import atomic_output
from exam_eval.io.passages import read_passages
from exam_eval.io.topics import read_topics
from exam_eval.trec_eval.trec_files import ranked, read_qrels, read_run, write_qrels, write_run
from refusals import one_line_refusal


def test_run_and_qrels_round_trip(tmp_path):
    run = {"q1": {"d1": 1.5, "d2": 1.5, "d3": -0.25}, "q2": {"x": 3.0}}
    p = tmp_path / "r.run.gz"
    with atomic_output(p) as out:
        write_run(run, out, "mytag")
    assert gzip.open(p, "rt").readline() == "q1 Q0 d2 1 1.5 mytag\n"   # tie: docno descending
    assert read_run(p) == run
    qrels = {"q1": {"d1": 2, "d2": -1}, "q2": {"x": 0}}
    q = tmp_path / "q.txt"
    with atomic_output(q) as out:
        write_qrels(qrels, out)
    assert read_qrels(q) == qrels


def test_ranked_is_trec_eval_order():
    assert ranked({"a": 1.0, "b": 2.0, "c": 1.0, "d": 2.0}) == ["d", "b", "c", "a"]


def test_grades_round_trip_last_line_wins(tmp_path):
    g1 = Grade("1", "a", "1/x", "question", 3, {"0": 0.1, "3": 0.9}, "3", True, "m", "p", "h")
    g2 = Grade("1", "a", "1/x", "question", None, None, "???", False, "m", "p", "h")
    g3 = Grade("1", "b", None, None, 1, None, "yes", True, "m", "p", "h")
    p = tmp_path / "g.jsonl"
    with atomic_output(p) as out:
        write_grades([g1, g3, g2], out)
    assert [g for _, g in iter_grades(p)] == [g1, g3, g2]
    latest = read_grades(p)
    assert g2 in latest and g1 not in latest and len(latest) == 2
    # shards merge by concatenation
    shard = tmp_path / "g2.jsonl"
    with atomic_output(shard) as out:
        write_grades([g1], out)
    assert g1 in read_grades([p, shard]) and g2 not in read_grades([p, shard])


def test_grade_filters(tmp_path):
    gs = [Grade("1", "a", "1/x", "question", 3, None, None, True, "m1", "p", None),
          Grade("1", "a", "1/y", "nugget", 2, None, None, True, "m1", "p", None),
          Grade("1", "a", "1/x", "question", 1, None, None, True, "m2", "p", None)]
    p = tmp_path / "g.jsonl"
    with atomic_output(p) as out:
        write_grades(gs, out)
    assert read_grades(p, model="m2") == [gs[2]]
    assert read_grades(p, model="m1", kind="nugget") == [gs[1]]
    with pytest.raises(InputError, match="no grades matching model=zzz"):
        read_grades(p, model="zzz")


def test_topics_formats(tmp_path):
    tsv = tmp_path / "t.tsv"
    tsv.write_text("1\tdo goldfish grow\n2\twhat is wifi\n")
    assert {q: t.text for q, t in read_topics(tsv).items()} == {"1": "do goldfish grow", "2": "what is wifi"}
    jl = tmp_path / "t.jsonl"
    jl.write_text('{"query_id": "c1", "text": "Geology", "subtopics": ["Plates", {"facet_id": "T9", "text": "Rocks"}]}\n')
    assert read_topics(jl)["c1"].subtopics == [("f1", "Plates"), ("T9", "Rocks")]
    # a null facet id is numbered like a string facet's (it used to become "None"), 7 is "7"
    jl.write_text('{"query_id": "c1", "text": "G", "subtopics": [{"facet_id": null, "text": "A"}, '
                  '{"facet_id": 7, "text": "B"}, {"text": "C"}]}\n')
    assert read_topics(jl)["c1"].subtopics == [("f1", "A"), ("7", "B"), ("f3", "C")]
    for sub, why in (('{"facet_id": [1], "text": "A"}', "'facet_id' must be a string or null"),
                     ('{"facet_id": "T1", "text": 5}', "subtopic 1: 'text' must be a non-empty string"),
                     ('{"facet_id": "T1", "text": " "}', "subtopic 1: 'text' must be a non-empty string")):
        jl.write_text('{"query_id": "c1", "text": "G", "subtopics": [' + sub + ']}\n')
        with pytest.raises(InputError, match=r"t.jsonl:1: " + re.escape(why)):
            read_topics(jl)
    trec = tmp_path / "t.trec"
    trec.write_text("<top>\n<num> Number: 301\n<title> International Organized\nCrime\n<desc> Description:\nx\n</top>\n"
                    "<top><num> Number: 302 <title> Poliomyelitis <desc> y </top>\n")
    topics = read_topics(trec)
    assert topics["301"].text == "International Organized Crime" and topics["302"].text == "Poliomyelitis"
    bad = tmp_path / "bad.tsv"
    bad.write_text("1\tok\n2 no tab\n")
    with pytest.raises(InputError, match=r"bad.tsv:2: expected 'qid<TAB>text'"):
        read_topics(bad)


def test_passages_formats(tmp_path):
    jl = tmp_path / "p.jsonl"
    jl.write_text('{"doc_id": "a", "text": "alpha"}\n{"doc_id": "b", "text": "beta", "query_id": "1"}\n')
    assert read_passages(jl) == {"a": "alpha", "b": "beta"}
    assert read_passages(jl, wanted={"b"}) == {"b": "beta"}
    tsv = tmp_path / "p.tsv"
    tsv.write_text("a\talpha one\nb\tbeta\n")
    assert read_passages(tsv)["a"] == "alpha one"
    clash = tmp_path / "c.jsonl"
    clash.write_text('{"doc_id": "a", "text": "x"}\n{"doc_id": "a", "text": "y"}\n')
    with pytest.raises(InputError, match="c.jsonl:2: doc_id a has a different text on line 1"):
        read_passages(clash)


def test_leaderboard_round_trip_and_errors(tmp_path):
    p = tmp_path / "lb.tsv"
    with atomic_output(p) as out:
        write_leaderboard({"r1": {"m": 0.5, "n": 3}, "r2": {"m": None, "n": 1}}, ["m", "n"], out)
    lb = read_leaderboard(p)
    assert lb.rows == {"r1": {"m": 0.5, "n": 3.0}, "r2": {"m": None, "n": 1.0}}
    p.write_text("run\tm\nr1\t0.5\nr1\t0.6\n")
    with pytest.raises(InputError, match="lb.tsv:3: duplicate run r1"):
        read_leaderboard(p)


def test_atomic_output_leaves_nothing_on_error(tmp_path):
    p = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with atomic_output(p) as out:
            out.write("half")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_stdin_input(monkeypatch):
    import sys

    data = gzip.compress(b"1 0 a 1\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
    assert read_qrels("-") == {"1": {"a": 1}}


@pytest.mark.shared
def test_ir_datasets_id_with_pre_placed_files(shared_data, tmp_path, run_cli):
    # the shared qrels are byte-identical to the file ir_datasets verifies for this ID
    home = tmp_path / "irds"
    target = home / "msmarco-passage" / "trec-dl-2019" / "qrels"
    target.parent.mkdir(parents=True)
    shutil.copy(shared_data / "dl19" / "qrels.txt", target)
    res = run_cli("exam-qrels", "msmarco-passage/trec-dl-2019/judged", env={"IR_DATASETS_HOME": str(home)})
    assert res.returncode == 0, res.stderr
    expected = read_qrels(shared_data / "dl19" / "qrels.txt")
    got = {}
    for line in res.stdout.splitlines():
        q, _, d, lab = line.split()
        got.setdefault(q, {})[d] = int(lab)
    assert got == expected


def test_ir_datasets_offline_fails_fast_with_hint(tmp_path, run_cli):
    # a dead local proxy makes "offline" true on any machine, connected or not
    dead = "http://127.0.0.1:9"
    res = run_cli("exam-qrels", "msmarco-passage/trec-dl-2019/judged", timeout=120,
                  env={"IR_DATASETS_HOME": str(tmp_path), "HTTPS_PROXY": dead, "HTTP_PROXY": dead,
                       "https_proxy": dead, "http_proxy": dead})
    line = one_line_refusal(res)
    assert "ir_datasets" in line and "local file" in line
    unknown = run_cli("exam-qrels", "no-such/dataset")
    assert unknown.returncode == 2 and "not a known ir_datasets ID" in unknown.stderr


def test_ir_datasets_passages_offline_are_one_line_without_its_progress_bar(tmp_path, run_cli):
    """The passages of an ID are its docs store, which ir_datasets builds behind a tqdm bar:
    on a stderr that is not a terminal that bar would be text before the one line."""
    dead = "http://127.0.0.1:9"
    demo = Path(__file__).resolve().parents[2] / "exam_eval" / "demo_data"
    out = tmp_path / "g.jsonl"
    res = run_cli("exam-grade", "--backend", "scripted", "--prompt", "question-selfrating", "--bank",
                  demo / "questions.jsonl", "--passages", "msmarco-passage/trec-dl-2019/judged", demo / "good.run",
                  "--no-cache", "-o", out, timeout=120,
                  env={"IR_DATASETS_HOME": str(tmp_path / "irds"), "HTTPS_PROXY": dead, "HTTP_PROXY": dead,
                       "https_proxy": dead, "http_proxy": dead})
    assert one_line_refusal(res).startswith("exam-grade: msmarco-passage/trec-dl-2019/judged: ir_datasets could not "
                                            "provide documents")
    assert not out.exists()


def test_atomic_output_gets_umask_mode(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        p = tmp_path / "o.txt"
        with atomic_output(p) as out:
            out.write("x")
        assert (p.stat().st_mode & 0o777) == 0o644
    finally:
        os.umask(old)
