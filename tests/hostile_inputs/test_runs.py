"""Hostile run files (TREC runs, as exam-qrels and exam-cover read them and exam-grade
pools them): lines of the wrong number of fields, scores that are no finite number, a
document ranked twice, white space that trec_eval does not split at (a rule of the TREC
line that qrels share), a file name that would break a leaderboard's columns, a run that
shares no query with the labels; and depths cut in trec_eval's order of C float scores.

Every refusal here: one line naming the file and line, exit 2 (1 for the file name, a
usage error), no traceback, nothing written. Where trec_eval reads the input, the result
is trec_eval's."""

from __future__ import annotations

import json
import os

import pytest

from exam_eval.errors import InputError
from exam_eval.trec_eval.trec_files import ranked, read_qrels, read_run_table
from inproc import run
from refusals import one_line_refusal
from tests.hostile_inputs._worlds import DEMO, GOOD_RUN, grade_obj, refused_located, write_jsonl


# ---- lines a run file must not hold ---------------------------------------------------------

RUN_CASES = [
    ("run 5 fields", "exam-qrels", "run", GOOD_RUN + "2 Q0 d 2 1.0\n", ":4:", "expected 6 fields"),
    ("run bad score", "exam-qrels", "run", "1 Q0 a 1 high t\n", ":1:", "not a number"),
    ("run nan score", "exam-qrels", "run", GOOD_RUN + "2 Q0 e 3 nan t\n", ":4:", "not finite"),
    ("run inf score", "exam-qrels", "run", "1 Q0 a 1 inf t\n", ":1:", "not finite"),
    ("run duplicate", "exam-qrels", "run", GOOD_RUN + "1 Q0 a 9 0.5 t\n", ":4:", "first on line 1"),
    ("run empty", "exam-qrels", "run", "", None, "empty"),
    ("run no common query", "exam-qrels", "run", "9 Q0 a 1 1.0 t\n", None, "no queries in common"),
    ("cover run bad score", "exam-cover", "run", GOOD_RUN + "2 Q0 x 2 1,0 t\n", ":4:", "not a number"),
    ("cover run duplicate", "exam-cover", "run", "1 Q0 a 1 1 t\n1 Q0 a 2 1 t\n", ":2:", "duplicate"),
    # fields after the sixth are ignored (as trec_eval does), so five is the bad count
    ("cover run 5 fields", "exam-cover", "run", GOOD_RUN + "2 Q0 c 1 1.0\n", ":4:", "expected 6 fields"),
    ("cover run not utf8", "exam-cover", "run", b"1 Q0 \xff\xfe 1 1 t\n", ":1:", "UTF-8"),
]


@pytest.mark.parametrize("case", RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_a_bad_run_file_is_refused_naming_its_line(tmp_path, run_cli, case):
    """The run among a good qrels and grades file: one line naming it (and its line)."""
    refused_located(tmp_path, run_cli, case)


ODD_SPACES = ["\xa0", "\u2028", "\u3000", "\x85", "\x1c", "\x1f"]


@pytest.mark.parametrize("char", ODD_SPACES)
def test_a_trec_line_with_white_space_trec_eval_does_not_split_at_is_refused(char, tmp_path):
    """str.split() split "d1<NBSP>junk" into two fields where trec_eval reads one docno:
    map 0.5 where trec_eval says 0, and a 5-field line trec_eval refuses was scored."""
    run_file = tmp_path / "r.run"
    run_file.write_text(f"101 Q0 d2 2 3 t\n101 Q0 d1{char}junk 1 5 t\n", encoding="utf-8")
    qrels = tmp_path / "q.txt"
    qrels.write_text(f"101 0 d2 0\n101 0 d1{char}x 1\n", encoding="utf-8")
    for read, path in ((read_run_table, run_file), (read_qrels, qrels)):
        with pytest.raises(InputError) as err:
            read(path)
        assert (err.value.path, err.value.line) == (str(path), 2)
        assert err.value.reason.startswith(f"holds U+{ord(char):04X} ")


def test_trec_eval_reads_such_a_character_as_part_of_an_id(trec_eval_binary, tmp_path):
    """Why exam-qrels refuses rather than splits: trec_eval keeps it in the docno."""
    import subprocess

    (tmp_path / "q.txt").write_text("101 0 d1 1\n101 0 d2 0\n")
    (tmp_path / "r.run").write_text("101 Q0 d1\xa0junk 1 5 t\n101 Q0 d2 2 3 t\n", encoding="utf-8")
    out = subprocess.run([str(trec_eval_binary), "-m", "num_rel_ret", str(tmp_path / "q.txt"), str(tmp_path / "r.run")],
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["num_rel_ret", "all", "0"]


def test_a_run_file_name_that_would_break_the_leaderboard_is_refused(tmp_path):
    bad = tmp_path / "ta\tb.run"
    bad.write_text("101 Q0 p001 1 2.0 r\n")
    res = run("qrels", "-m", "P.1", DEMO / "qrels.txt", bad, DEMO / "good.run")
    assert res.escaped is None and res.code == 1 and res.stdout == ""
    assert "holds a tab, newline or control character: rename the file" in res.last_line


# ---- runs the labels do not cover: refused before any notice -------------------------------

@pytest.fixture
def two_runs(tmp_path):
    grades = write_jsonl(tmp_path / "g.jsonl", [grade_obj("1", "a", "1/x", 5), grade_obj("1", "b", "1/x", None, parse_ok=False)])
    ok, other = tmp_path / "ok.run", tmp_path / "other.run"
    ok.write_text("1 Q0 a 1 2 A\n1 Q0 z 2 1 A\n")  # z: ungraded, a notice
    other.write_text("2 Q0 c 1 1 B\n")
    return grades, ok, other


def test_exam_cover_refuses_a_run_before_any_notice(two_runs):
    grades, ok, other = two_runs
    msg = one_line_refusal(run("cover", grades, ok, other), "exam-cover")
    assert msg == f"exam-cover: {other}: no query of this run has graded items in {grades}"
    good = run("cover", grades, ok)  # the notices are still said when nothing is refused
    assert good.code == 0 and "1 unparsed grades" in good.stderr and "have no grades" in good.stderr


def test_exam_qrels_refuses_before_the_labels_notices(two_runs, tmp_path):
    grades, ok, other = two_runs
    msg = one_line_refusal(run("qrels", grades, other), "exam-qrels")
    assert msg.startswith(f"exam-qrels: {other}: no queries in common")
    unparsed = write_jsonl(tmp_path / "u.jsonl", [grade_obj("1", "b", "1/x", None, parse_ok=False)])
    msg = one_line_refusal(run("qrels", unparsed), "exam-qrels")
    assert msg == f"exam-qrels: {unparsed}: no passage has a parsed grade (1 unparsed grades)"
    good = run("qrels", grades, ok)
    assert good.code == 0 and "1 unparsed grades ignored" in good.stderr


# ---- depths cut in trec_eval's order ----------------------------------------------------------

def test_depths_cut_in_trec_evals_order_of_c_float_scores(tmp_path):
    """1.00000001 and 1.0 are one C float: trec_eval ties them and ranks z9 first (docno
    descending); exam-grade -k 1 pooled a1 and exam-cover -k 1 counted a1."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    docs = {"a1": 1.00000001, "z9": 1.0}
    evaluator = pytrec_eval.RelevanceEvaluator({"101": {"a1": 1, "z9": 0}}, {"P.1"})
    credited = evaluator.evaluate({"101": docs})["101"]["P_1"]
    assert ranked(docs) == ["z9", "a1"] and credited == 0.0  # pytrec_eval (trec_eval's C) puts z9 first
    run_file = tmp_path / "r.run"
    run_file.write_text("101 Q0 a1 1 1.00000001 t\n101 Q0 z9 2 1.0 t\n")
    bank = tmp_path / "bank.jsonl"
    bank.write_text(json.dumps({"query_id": "101", "kind": "question", "text": "What do bees collect?"}) + "\n")
    passages = tmp_path / "passages.jsonl"
    passages.write_text("".join(json.dumps({"doc_id": d, "text": f"text {d}"}) + "\n" for d in docs))
    res = run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache", "-k", "1",
              "--bank", bank, "--passages", passages, run_file, "-o", tmp_path / "g.jsonl")
    assert res.code == 0, res.stderr
    assert [json.loads(x)["doc_id"] for x in (tmp_path / "g.jsonl").read_text().splitlines()] == ["z9"]


def test_the_cut_is_the_same_for_exam_cover(tmp_path):
    grades = tmp_path / "g.jsonl"
    lines = []
    for doc, grade in (("a1", 5), ("z9", 0)):
        lines.append(json.dumps({"query_id": "101", "doc_id": doc, "item_id": "101/q1", "kind": "question",
                                 "grade": grade, "parse_ok": True, "model": "m", "prompt": "question-selfrating"}))
    grades.write_text("\n".join(lines) + "\n")
    run_file = tmp_path / "r.run"
    run_file.write_text("101 Q0 a1 1 1.00000001 t\n101 Q0 z9 2 1.0 t\n")
    res = run("cover", "-q", "-k", "1", grades, run_file)
    assert res.escaped is None and res.code in (0, None), res.stderr
    per_query = [x.split() for x in res.stdout.splitlines() if x.split()[1:2] == ["101"]]
    assert per_query and all(float(v) == 0.0 for _, _, v in per_query), res.stdout
    assert os.path.exists(run_file)


def test_ranked_equals_numpys_c_float_order_on_random_rankings():
    """ranked (array('f'), also the measures' trec_ranked) against scores cast to float32
    by numpy, ties by docno: descending for ranked, ascending for preferences."""
    import random

    import numpy as np

    from exam_eval.io.trec_rules import trec_ranked

    def as_c_float(v):
        with np.errstate(over="ignore"):
            return float(np.float32(v))

    rnd = random.Random(3)
    values = [1.0, 1.00000001, 0.99999999, 0.0, -0.0, 3.4028235e38, 3.40282356e38, -1e39]
    for _ in range(2000):
        docs = {f"d{rnd.randint(0, 60)}": rnd.choice([rnd.random(), rnd.uniform(-1e39, 1e39), *values])
                for _ in range(rnd.randint(1, 50))}
        assert ranked(docs) == sorted(docs, key=lambda d: (as_c_float(docs[d]), d), reverse=True), docs
        assert trec_ranked(docs, docno_ascending=True) == sorted(docs, key=lambda d: (-as_c_float(docs[d]), d))
