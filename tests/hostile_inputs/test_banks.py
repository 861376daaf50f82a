"""Hostile banks (questions and nuggets: our JSONL, and the nuggetizer's, AutoJudge's and
the workbench's shapes) and the nugget-assignment files scored against a bank: an item id
used again for another text, one text both a question and a nugget, a text that is a
number or blank, one nugget with two importances or assigned twice with two labels, a
bank that leaves no grade standing.

Every refusal here: one line naming the file and line, exit 2, no traceback, nothing
written. An exact repeat of an item (same query, id and text) is no error: every command
that reads a bank drops it with a notice."""

from __future__ import annotations

import json

import pytest

from exam_eval.errors import InputError
from inproc import run
from refusals import one_line_refusal
from tests.hostile_inputs._worlds import (DEMO, grade_json, grade_obj, item_json, located_grade, refused,
                                          refused_located, report_json, scripted_grading_args, write, write_jsonl)


# ---- items ----------------------------------------------------------------------------------

BANK_CASES = [
    ("cover bank bad kind", "exam-cover", "bank", json.dumps({"query_id": "1", "item_id": "1/x", "kind": "essay", "text": "q?"}) + "\n", ":1:", "kind must be"),
    ("cover bank empty text", "exam-cover", "bank", json.dumps({"query_id": "1", "item_id": "1/x", "kind": "question", "text": " "}) + "\n", ":1:", "empty item text"),
]


@pytest.mark.parametrize("case", BANK_CASES, ids=[c[0] for c in BANK_CASES])
def test_a_bad_bank_is_refused_naming_its_line(tmp_path, run_cli, case):
    """exam-cover --bank: one line naming the bank and its line."""
    refused_located(tmp_path, run_cli, case)


def test_numeric_bank_text_says_so(tmp_path):
    for i, (line, cause) in enumerate([(item_json(text=5), "text must be a string, got int"),
                                       (json.dumps({"qid": "1", "nuggets": [{"text": 5}]}), "'text' must be a string"),
                                       (item_json(text="  "), "empty item text")]):
        b = write(tmp_path / f"b{i}.jsonl", [line])
        refused(run("nuggets", "bank", "--to", "ours", b), b, 1, cause)


def test_duplicate_item_ids(tmp_path):
    """Decided: an exact repeat (same query, id and text) is dropped with a notice by every
    command that reads a bank; the same id for another text is an error naming both lines;
    ids are unique per query (AutoJudge ids are md5(text), without the query)."""
    from exam_eval.io.reports import sentence_id

    # a grade of the report's one sentence: grades of none of its documents are refused
    g = write(tmp_path / "g.jsonl", [grade_json(kind="nugget", prompt="nugget-selfrating",
                                                doc_id=sentence_id("r", "101", 1, "Bees."))])
    (tmp_path / "runs").mkdir()
    r = write(tmp_path / "runs" / "r.jsonl", [report_json()])
    exact = write(tmp_path / "exact.jsonl", [item_json(), item_json(importance="vital")])
    for argv in (["nuggets", "bank", "--to", "ours", exact],
                 ["nuggets", "score", "--reports", r, "--bank", exact, g],
                 ["grade", "--dry-run", "--backend", "scripted", "--prompt", "nugget-selfrating", "--no-cache",
                  "--bank", exact, "--reports", r]):
        res = run(*argv)
        assert res.code == 0 and res.escaped is None, (argv, res.stderr)
        assert f"{exact}: 1 exact repeats of an item (same query, id and text) dropped; e.g. line 2: 101/x" \
            in res.stderr, (argv[0], res.stderr)
    other = write(tmp_path / "other.jsonl", [item_json(), item_json(text="another text")])
    for argv in (["nuggets", "bank", "--to", "ours", other], ["nuggets", "score", "--reports", r, "--bank", other, g]):
        refused(run(*argv), other, 2, "item_id 101/x of query 101 already used for another text on line 1")
    aj = write(tmp_path / "aj.jsonl", [json.dumps({"query_id": q, "claim_bank": {"c": {"claim": "bees", "claim_id": "c1"}}})
                                       for q in ("101", "102")])
    res = run("nuggets", "bank", "--to", "ours", aj)
    assert res.code == 0 and [json.loads(x)["query_id"] for x in res.stdout.splitlines()] == ["101", "102"]


def test_exact_repeats_in_a_bank_are_noted_by_qrels_and_cover_too(tmp_path):
    grades = tmp_path / "grades.jsonl"
    assert run("grade", *scripted_grading_args(tmp_path), "-o", grades).code == 0
    bank = tmp_path / "repeated.jsonl"
    bank.write_text((tmp_path / "bank.jsonl").read_text() * 2)
    for prog, args in (("qrels", ["-m", "map", grades, tmp_path / "r.run"]), ("cover", [grades, tmp_path / "r.run"])):
        res = run(prog, "--bank", bank, *args)
        assert res.code == 0, res.stderr
        assert f"exam-{prog}: {bank}: 1 exact repeats of an item (same query, id and text) dropped; e.g. line 2: " \
            in res.stderr


def test_one_nugget_listed_twice_with_two_importances_is_refused(tmp_path):
    """It was an "exact repeat" (same id and text), dropped with a notice, the first
    importance kept."""
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join(json.dumps({"query_id": "101", "item_id": "n1", "kind": "nugget", "text": "A thing.",
                                        "importance": imp}) + "\n" for imp in ("vital", "okay")))
    out = tmp_path / "out.jsonl"
    msg = one_line_refusal(run("nuggets", "bank", "--to", "ours", bank, "-o", out), "exam-nuggets")
    assert msg == f"exam-nuggets: {bank}:2: item_id n1 of query 101 is vital on line 1 and okay here (the same " \
                  "text): keep one line"
    assert not out.exists()
    # a repeat that only adds the importance is a repeat, and the importance is kept
    bank.write_text("".join(json.dumps({"query_id": "101", "item_id": "n1", "kind": "nugget", "text": "A thing.",
                                        **extra}) + "\n" for extra in ({}, {"importance": "okay"})))
    res = run("nuggets", "bank", "--to", "ours", bank, "-o", out)
    assert res.code == 0 and "1 exact repeats of an item" in res.stderr, res.stderr
    [kept] = [json.loads(x) for x in out.read_text().splitlines()]
    assert kept["importance"] == "okay"


def test_a_bank_with_one_text_as_a_question_and_a_nugget_is_refused(tmp_path):
    from exam_eval.io.banks import read_bank

    bank = tmp_path / "bank.jsonl"
    bank.write_text(json.dumps({"query_id": "101", "kind": "question", "text": "Bees make honey."}) + "\n"
                    + json.dumps({"query_id": "101", "kind": "nugget", "text": "Bees make honey."}) + "\n")
    with pytest.raises(InputError) as err:
        read_bank(bank, kind="nugget")
    assert err.value.line == 2 and "is a question on line 1 and a nugget here" in err.value.reason


def test_verify_needs_ids_unique_across_queries(tmp_path):
    bank = write(tmp_path / "b.jsonl", [item_json(item_id="q1", text="first"), item_json(query_id="102", item_id="q1", text="other")])
    g = write(tmp_path / "g.jsonl", [grade_json(item_id="q1")])
    refused(run("verify", "grading", g, "--bank", bank), bank, None, "item_id q1 names different texts")


def test_bank_filter_matches_ids_per_query(tmp_path):
    """The same id in two queries (a user's own names) is two items; each query's grades
    stay with its own item, none is taken for a stale grade of the other's text."""
    from exam_eval.io.bank_items import text_hash

    bank = write(tmp_path / "b.jsonl", [item_json(item_id="q1", text="first", kind="question"),
                                        item_json(query_id="102", item_id="q1", text="other", kind="question")])
    g = write(tmp_path / "g.jsonl", [grade_json(item_id="q1", item_hash=text_hash("first"), grade=5),
                                     grade_json(query_id="102", doc_id="p071", item_id="q1", item_hash=text_hash("other"),
                                                grade=3)])
    res = run("qrels", "--bank", bank, g)
    assert (res.code, res.stdout) == (0, "101 0 p064 5\n102 0 p071 3\n"), res.stderr


# ---- a bank and the grades it keeps ------------------------------------------------------------

def test_a_bank_that_leaves_no_grade_is_one_line_that_says_why(tmp_path):
    grades = write_jsonl(tmp_path / "g.jsonl", [grade_obj("1", "a", "1/x", 5)])
    bank = write_jsonl(tmp_path / "b.jsonl", [{"query_id": "1", "kind": "question", "text": "Another question?"}])
    msg = one_line_refusal(run("qrels", "--bank", bank, grades), "exam-qrels")
    assert msg == (f"exam-qrels: {grades}: no grade is of an item of the bank as it is now (1 of items not in "
                   "it, 0 of an edited item's older text)")


def test_qrels_bank_drops_grades_of_deleted_items(tmp_path, run_cli):
    g = tmp_path / "g.jsonl"
    g.write_text(located_grade(item_id="1/old", grade=5) + "\n" + located_grade(item_id="1/new", grade=2) + "\n")
    bank = tmp_path / "b.jsonl"
    bank.write_text(json.dumps({"query_id": "1", "item_id": "1/new", "kind": "question", "text": "q?"}) + "\n")
    assert run_cli("exam-qrels", g).stdout == "1 0 a 5\n"
    res = run_cli("exam-qrels", "--bank", bank, g)
    assert res.returncode == 0 and res.stdout == "1 0 a 2\n"
    assert "1 grades of items not in the bank left out" in res.stderr


@pytest.mark.parametrize("case", ["old-text grade", "kept id, current text"])
def test_exam_nuggets_score_takes_the_banks_current_grades_as_exam_cover_does(tmp_path, case):
    """score read every grade of an item's id: one given for the text before a hand edit
    counted (1 where exam-cover --bank says 0), and one under the kept id of an edited
    item (exam-grade --keep-edited-ids) did not (0 where exam-cover says 1)."""
    import hashlib

    from exam_eval.io.reports import sentence_id

    def md5(t):
        return hashlib.md5(t.encode()).hexdigest()

    sentence = "Bees make honey."
    reports = write_jsonl(tmp_path / "reports.jsonl", [{"metadata": {"run_id": "A", "topic_id": "101", "team_id": "x"},
                                                        "responses": [{"text": sentence, "citations": []}],
                                                        "references": []}])
    item_id, hashed, want = (("101/n1", "old text", "0.0000") if case == "old-text grade"
                             else ("101/" + md5("old text"), "new text", "1.0000"))
    bank = write_jsonl(tmp_path / "bank.jsonl", [{"query_id": "101", "item_id": item_id, "kind": "nugget",
                                                  "text": "new text", "importance": "vital"}])
    doc = sentence_id("A", "101", 1, sentence)
    grades = write_jsonl(tmp_path / "g.jsonl", [{"query_id": "101", "doc_id": doc, "item_id": item_id, "kind": "nugget",
                                                 "grade": 2, "parse_ok": True, "model": "m", "prompt": "nuggetizer-assign",
                                                 "item_hash": md5(hashed)}])
    res = run("nuggets", "score", "--reports", reports, "--bank", bank, "-m", "exam_cover", "-m", "nugget_all", grades)
    assert res.code == 0, res.stderr
    assert res.stdout.splitlines() == [f"A\texam_cover\t101\t{want}", f"A\texam_cover\tall\t{want}",
                                       f"A\tnugget_all\t101\t{want}", f"A\tnugget_all\tall\t{want}"]
    run_file = tmp_path / "r.run"
    run_file.write_text(f"101 Q0 {doc} 1 1.0 A\n")
    cover = run("cover", "-q", "--min-grade", "2", "--bank", bank, grades, run_file)
    assert f"exam_cover            \t101\t{want}" in cover.stdout, (cover.stdout, cover.stderr)


# ---- nugget assignments -----------------------------------------------------------------------

def test_an_assignment_file_that_assigns_one_nugget_twice_is_refused(tmp_path):
    """The best of the two labels was scored, silently."""
    bank = [json.loads(x) for x in (DEMO / "nuggetized.jsonl").read_text().splitlines()]
    topic = bank[0]["query_id"]
    nuggets = [b for b in bank if b["query_id"] == topic]
    reports = tmp_path / "reports.jsonl"
    reports.write_text(json.dumps({"metadata": {"team_id": "t", "run_id": "r1", "topic_id": topic},
                                   "responses": [{"text": "Some answer.", "citations": []}]}) + "\n")
    line = {"qid": topic, "run_id": "r1", "nuggets": [{"text": n["text"], "importance": "vital",
                                                       "assignment": "support"} for n in nuggets]}
    again = dict(line, nuggets=[dict(line["nuggets"][0], assignment="not_support")])
    twice_in_one = dict(line, nuggets=line["nuggets"] + [dict(line["nuggets"][0], assignment="not_support")])
    assignments = tmp_path / "assign.jsonl"
    for content, lineno, first in (([line, again], 2, 1), ([twice_in_one], 1, 1)):
        assignments.write_text("".join(json.dumps(x) + "\n" for x in content))
        msg = one_line_refusal(run("nuggets", "score", "--reports", reports, "--bank", DEMO / "nuggetized.jsonl",
                                   assignments), "exam-nuggets")
        assert msg == (f"exam-nuggets: {assignments}:{lineno}: nugget {nuggets[0]['text']!r} of run r1 is assigned "
                       f"again (first on line {first})")
    assignments.write_text(json.dumps(line) + "\n")
    assert run("nuggets", "score", "--reports", reports, "--bank", DEMO / "nuggetized.jsonl", assignments).code == 0


@pytest.mark.parametrize("second, ok", [("support", True), ("not_support", False)])
def test_the_nuggetizers_output_for_a_bank_with_a_repeated_nugget(tmp_path, second, ok):
    """The bank lists "n one" twice (its reader drops the repeat); the nuggetizer assigns it
    twice in one line. Alike, that is one assignment; two labels contradict each other."""
    reports = write_jsonl(tmp_path / "reports.jsonl", [{"metadata": {"run_id": "A", "topic_id": "101", "team_id": "x"},
                                                        "responses": [{"text": "Bees.", "citations": []}],
                                                        "references": []}])
    bank = write_jsonl(tmp_path / "bank.jsonl", [{"qid": "101", "query": "q", "nuggets": [
        {"text": "n one", "importance": "vital"}, {"text": "n one", "importance": "vital"},
        {"text": "n two", "importance": "okay"}]}])
    assigned = write_jsonl(tmp_path / "assign.jsonl", [{"qid": "101", "query": "q", "candidate": {}, "nuggets": [
        {"text": "n one", "importance": "vital", "assignment": "support"},
        {"text": "n one", "importance": "vital", "assignment": second},
        {"text": "n two", "importance": "okay", "assignment": "not_support"}]}])
    res = run("nuggets", "score", "--reports", reports, "--bank", bank, "-m", "nugget_all", assigned)
    if ok:
        assert res.code == 0 and res.stdout == "A\tnugget_all\t101\t0.5000\nA\tnugget_all\tall\t0.5000\n", res.stderr
    else:
        msg = one_line_refusal(res, "exam-nuggets")
        assert "nugget 'n one' of run A is assigned again (first on line 1)" in msg
