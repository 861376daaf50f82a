"""Hostile inputs of a fourth sweep (2026-11-26): a file that is not a grades file given to
exam-grade as -o (it was cut by a line, or emptied, as if it were a torn batch), messages
that named a temp file, stderr lines before the one line of a refusal, leaderboards without
their header, an empty passages file, model answers that state two ratings or digits of
other scripts, and a value quoted whole from a 10 MB field. Each case: one line naming what
is wrong (file and line where there is one), exit status 2, nothing written or changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exam_eval.grading.prompts import get_prompt
from exam_eval.io.banks import make_item_id
from inproc import run

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "exam_eval" / "demo_data"


def _one_line(res, prog: str, code: int = 2) -> str:
    assert res.escaped is None, res.escaped
    assert "Traceback" not in res.stderr
    assert res.code == code, (res.code, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"exam-{prog}: "), res.stderr
    return lines[0]


def _grading_world(tmp_path: Path, answer: str = "4") -> list:
    bank = tmp_path / "bank.jsonl"
    text = "What do bees collect?"
    bank.write_text(json.dumps({"query_id": "101", "item_id": make_item_id("101", text), "kind": "question",
                                "text": text}) + "\n")
    passages = tmp_path / "passages.jsonl"
    passages.write_text(json.dumps({"doc_id": "d1", "text": "Bees collect nectar."}) + "\n")
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"match": ["What do bees collect?"], "output": answer}) + "\n")
    good = tmp_path / "r.run"
    good.write_text("101 Q0 d1 1 2.0 r\n")
    return ["--backend", "scripted", "-O", f"script={script}", "--prompt", "question-selfrating",
            "--generate-ratings", "--no-cache", "--bank", bank, "--passages", passages, good]


# ---- -o onto a file that is not grades ---------------------------------------------------

@pytest.mark.parametrize("content, line", [
    ((DEMO / "qrels.txt").read_text().rstrip("\n"), None),  # qrels, its final newline missing
    ("important notes, no newline", 1),
])
@pytest.mark.parametrize("dry_run", [False, True])
def test_grading_into_a_file_that_is_not_grades_leaves_it_unchanged(tmp_path, content, line, dry_run):
    """Its last line, having no newline, was taken for a batch torn by a kill and cut (the
    notes file: emptied, then filled with grades, exit 0); --dry-run named a temp file."""
    target = tmp_path / "notes.txt"
    target.write_text(content)
    res = run("grade", *_grading_world(tmp_path), "-o", target, *(["--dry-run"] if dry_run else []))
    msg = _one_line(res, "grade")
    lineno = line or content.count("\n") + 1
    assert msg.startswith(f"exam-grade: {target}:{lineno}: the last line has no newline and is not a grade line")
    assert target.read_text() == content


def test_a_torn_grades_file_is_still_repaired_and_resumed(tmp_path):
    args = _grading_world(tmp_path)
    out = tmp_path / "grades.jsonl"
    assert run("grade", *args, "-o", out).code == 0
    whole = out.read_text()
    out.write_text(whole[:-25])  # the kill came while the only line was written
    res = run("grade", *args, "-o", out)
    assert res.code == 0, res.stderr
    assert "removed a torn last batch" in res.stderr
    assert out.read_text() == whole


def test_dry_run_names_the_grades_file_itself_not_a_copy(tmp_path):
    args = _grading_world(tmp_path)
    out = tmp_path / "grades.jsonl"
    out.write_text('{"query_id": "101"}\n{"query_id": "101", "doc')  # a torn tail after a bad line
    msg = _one_line(run("grade", *args, "-o", out, "--dry-run"), "grade")
    assert msg.startswith(f"exam-grade: {out}:1: missing fields"), msg


# ---- model answers --------------------------------------------------------------------------

@pytest.mark.parametrize("answer", ["2/5 3/5", "Rating: 4 out of 5. I'd say 3/5 though", "3/5 or 4/5",
                                    "\uff14", "Grade: \u0664", "\U0001d7d3"])
def test_an_answer_with_two_ratings_or_other_digits_is_unparsed_not_a_grade(tmp_path, answer):
    prompt = get_prompt("question-selfrating")
    assert not prompt.parse(answer).parse_ok
    out = tmp_path / "g.jsonl"
    res = run("grade", *_grading_world(tmp_path, answer), "-o", out)
    assert res.code == 0, res.stderr
    [line] = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["grade"] is None and line["parse_ok"] is False and line["answer"] == answer


@pytest.mark.parametrize("answer, grade", [("4/5", 4), ("04/5 - good. Score 4/5", 4), ("0/5", 0),
                                           ("2: partially 2/5", 2)])
def test_a_rating_repeated_alike_is_still_read(answer, grade):
    parsed = get_prompt("question-selfrating").parse(answer)
    assert parsed.parse_ok and parsed.grade == grade


# ---- exam-correlate interval ----------------------------------------------------------------

def test_interval_refusals_are_one_line_on_a_real_stderr(tmp_path, run_cli):
    """rich's own bar, entered before the inputs were read, left a blank line on a stderr
    that is no terminal; the bar is now the shared one, entered after them."""
    bad = tmp_path / "llm.qrels"
    data = (DEMO / "qrels.txt").read_bytes()
    bad.write_bytes(data[:50] + b"\0" + data[50:])
    res = run_cli("correlate", "interval", DEMO / "qrels.txt", bad, DEMO / "good.run", env={"EXAM_EVAL_PROGRESS": "1"})
    assert res.returncode == 2
    assert res.stderr.splitlines() == [f"exam-correlate: {bad}:4: NUL byte in the line (binary data, not text)"]


@pytest.mark.parametrize("content, expect", [
    ("101 102\n", ":1: expected one query id per line, got 2 fields"),
    ("101\n102\n101\n", ":3: query 101 is listed again (first on line 1)"),
    ("101\n", ": 1 labelled query (101): the intervals need at least 2"),
])
def test_a_labelled_file_that_says_something_else_than_it_seems_is_refused(tmp_path, content, expect):
    """"101 102" was one labelled query (then every method failed, one line each)."""
    labelled = tmp_path / "labelled.txt"
    labelled.write_text(content)
    out = tmp_path / "int.tsv"
    res = run("correlate", "interval", DEMO / "qrels.txt", DEMO / "qrels.txt", DEMO / "good.run",
              "--labelled", labelled, "-o", out)
    assert _one_line(res, "correlate").startswith(f"exam-correlate: {labelled}{expect}")
    assert not out.exists()


# ---- leaderboards -----------------------------------------------------------------------

def test_a_tsv_leaderboard_without_its_header_is_refused_not_read_as_trec_eval(tmp_path):
    truth = tmp_path / "truth.tsv"
    truth.write_text("run\tP_5\tndcg_cut_10\n" + "".join(f"r{i}\t0.{i}1\t0.{i}5\n" for i in range(5)))
    headless = tmp_path / "pred.tsv"
    headless.write_text(truth.read_text().split("\n", 1)[1])
    for extra in ([], ["--truth-column", "ndcg_cut_10", "--pred-column", "ndcg_cut_10"]):
        msg = _one_line(run("correlate", "leaderboard", truth, headless, *extra), "correlate")
        assert msg.startswith(f"exam-correlate: {headless}:1: every line is a name and then numbers"), msg
    out = tmp_path / "report.html"
    grades = tmp_path / "grades.jsonl"
    assert run("grade", *_grading_world(tmp_path), "-o", grades).code == 0
    run_file = tmp_path / "r.run"
    msg = _one_line(run("verify", "report", grades, run_file, "--qrels", DEMO / "qrels.txt", "--official", headless,
                        "-o", out), "verify")
    assert msg.startswith(f"exam-verify: {headless}:1: the first line holds numbers where the header's column"), msg
    assert not out.exists()


# ---- passages -----------------------------------------------------------------------------

def test_an_empty_passages_file_is_refused_in_one_line(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    grades = tmp_path / "grades.jsonl"
    assert run("grade", *_grading_world(tmp_path, "0"), "-o", grades).code == 0
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("101 0 d1 2\n")  # judged relevant, answering nothing: its text is wanted
    msg = _one_line(run("verify", "uncovered", grades, qrels, "--passages", empty), "verify")
    assert msg == f"exam-verify: {empty}: no passages: the file is empty"
    res = run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache", "--dry-run",
              "--bank", DEMO / "questions.jsonl", "--passages", empty, DEMO / "good.run")
    assert _one_line(res, "grade") == f"exam-grade: {empty}: no passages: the file is empty"
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"doc_id": "zz", "text": "x"}) + "\n")
    res = run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache", "--dry-run",
              "--bank", DEMO / "questions.jsonl", "--passages", other, DEMO / "good.run")
    assert _one_line(res, "grade").startswith(f"exam-grade: {other}: no pooled passage has text (none of ")


# ---- messages -------------------------------------------------------------------------------

def test_a_huge_field_is_cut_in_the_middle_of_its_one_line(tmp_path):
    qrels = tmp_path / "q.txt"
    qrels.write_text("101 0 p001 3" + "A" * 1_000_000 + "\n")
    msg = _one_line(run("qrels", qrels, DEMO / "good.run"), "qrels")
    assert len(msg) < 1200 and "characters left out" in msg
    assert msg.startswith(f"exam-qrels: {qrels}:1: ")


def test_exact_repeats_in_a_bank_are_noted_by_qrels_and_cover_too(tmp_path):
    grades = tmp_path / "grades.jsonl"
    assert run("grade", *_grading_world(tmp_path), "-o", grades).code == 0
    bank = tmp_path / "repeated.jsonl"
    bank.write_text((tmp_path / "bank.jsonl").read_text() * 2)
    for prog, args in (("qrels", ["-m", "map", grades, tmp_path / "r.run"]), ("cover", [grades, tmp_path / "r.run"])):
        res = run(prog, "--bank", bank, *args)
        assert res.code == 0, res.stderr
        assert f"exam-{prog}: {bank}: 1 exact repeats of an item (same query, id and text) dropped; e.g. line 2: " \
            in res.stderr
