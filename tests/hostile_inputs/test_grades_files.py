"""Hostile grades files (exam-grade's JSONL and the EXAM workbench's lines, plain or gzip)
as exam-qrels, exam-cover, exam-verify and exam-nuggets read them, and the grades file
exam-grade resumes (-o): JSON of the wrong types, grades off their prompt's scale, a grade
that says both "graded" and "unparsed", grades of no bank item, damaged gzip members, a
file of the other form than its name says, a file that is no grades file at all.

Every refusal here: one line naming the file and line, exit 2, no traceback, nothing
written and the file left as it was. Grades that are merely unparsed, or of several
graders, are said (or need --model), not refused."""

from __future__ import annotations

import gzip
import json

import pytest

from exam_eval.errors import InputError
from exam_eval.grading.output import existing_keys, repair
from inproc import run
from refusals import one_line_refusal
from tests.hostile_inputs._worlds import (DEMO, GOOD_GRADES, grade_json, grade_obj, grades_file, item_json,
                                          located_grade, nugget_world, refused, refused_located,
                                          run_file,  # noqa: F401 (a fixture)
                                          scripted_grading_args, write, write_jsonl)


# ---- lines a grades file must not hold ---------------------------------------------------------

GRADES_CASES = [
    ("grades bad json", "exam-qrels", "grades", GOOD_GRADES + "{not json\n", ":3:", "invalid JSON"),
    ("grades missing field", "exam-qrels", "grades", GOOD_GRADES + json.dumps({"query_id": "1"}) + "\n", ":3:", "missing field"),
    ("grades float grade", "exam-qrels", "grades", located_grade(grade=3.5) + "\n", ":1:", "'grade' must be an integer"),
    ("grades null but ok", "exam-qrels", "grades", GOOD_GRADES + located_grade(grade=None) + "\n", ":3:", "null"),
    ("grades bad probs", "exam-qrels", "grades", located_grade(probs=[0.1]) + "\n", ":1:", "'probs'"),
    ("grades scalar line", "exam-qrels", "grades", GOOD_GRADES + "[1]\n", ":3:", "workbench line"),
    ("cover grades bad json", "exam-cover", "grades", "{\n", ":1:", "invalid JSON"),
    ("cover grades truncated gzip", "exam-cover", "grades.gz", gzip.compress(GOOD_GRADES.encode())[:-12], None, "cannot read"),
]


@pytest.mark.parametrize("case", GRADES_CASES, ids=[c[0] for c in GRADES_CASES])
def test_a_bad_grades_file_is_refused_naming_its_line(tmp_path, run_cli, case):
    """The grades among a good run (and qrels): one line naming them (and their line)."""
    refused_located(tmp_path, run_cli, case)


def test_wrong_json_types_name_the_field(tmp_path):
    g = write(tmp_path / "g.jsonl", [grade_json(), grade_json(query_id=["101"])])
    refused(run("qrels", g), g, 2, "'query_id' must be a string", "list")
    g = write(tmp_path / "g2.jsonl", [grade_json(doc_id="p 064")])
    refused(run("qrels", g), g, 1, "white space")
    g = write(tmp_path / "g3.jsonl", [grade_json(model=5)])
    refused(run("qrels", g), g, 1, "'model' must be a non-empty string")
    g = write(tmp_path / "g4.jsonl", [grade_json(probs={"4": 1.5})])
    refused(run("qrels", g), g, 1, "'probs'", "0 to 1")
    wb = write(tmp_path / "wb.jsonl", [json.dumps(["101", [{"paragraph_id": "p1", "exam_grades": [5]}]])])
    refused(run("qrels", wb), wb, 1, "'exam_grades' must be a list of objects")
    b = write(tmp_path / "b.jsonl", [item_json(query_id={"q": 1})])
    refused(run("nuggets", "bank", "--to", "ours", b), b, 1, "'query_id' must be a string")


def test_grade_outside_the_prompts_scale_is_refused(tmp_path):
    g = write(tmp_path / "g.jsonl", [grade_json(), grade_json(doc_id="p092", grade=9)])
    for argv in (["qrels", g], ["cover", g, DEMO / "good.run"]):
        refused(run(*argv), g, 2, "grade 9 is outside the 0-5 scale of prompt question-selfrating")
    g = write(tmp_path / "umb.jsonl", [grade_json(prompt="umbrela", item_id=None, kind=None, grade=4)])
    refused(run("qrels", g), g, 1, "0-3 scale of prompt umbrela")
    ok = write(tmp_path / "custom.jsonl", [grade_json(prompt="file:my.prompt", grade=9)])  # scale unknown here
    assert run("qrels", ok).code == 0
    wb = write(tmp_path / "wb.jsonl", [json.dumps(["101", [{"paragraph_id": "p1", "exam_grades": [
        {"llm": "flan", "prompt_info": {"prompt_class": "QuestionSelfRatedUnanswerablePromptWithChoices"},
         "self_ratings": [{"question_id": "101/x", "self_rating": 7}]}]}]])])
    refused(run("qrels", wb), wb, 1, "grade 7 is outside the 0-5 scale of the workbench's self-ratings")


def _wb_line(rating) -> str:
    return json.dumps(["101", [{"paragraph_id": "p1", "exam_grades": [{
        "llm": "google/flan-t5-large", "prompt_info": {"prompt_class": "QuestionSelfRatedUnanswerablePromptWithChoices"},
        "self_ratings": [{"question_id": "101/a", "self_rating": 5}, {"question_id": "101/b", "self_rating": rating}]}]}]])


@pytest.mark.parametrize("rating", [4.5, "4", True])
def test_a_workbench_rating_that_is_no_integer_is_refused(rating, tmp_path):
    """Counted as "unparsed" before, so a damaged file gave qrels with exit 0."""
    wb = tmp_path / "wb.jsonl"
    wb.write_text(_wb_line(rating) + "\n")
    res = run("qrels", wb)
    assert res.escaped is None and res.code == 2 and res.stdout == ""
    assert res.last_line == f"exam-qrels: {wb}:1: 'self_rating' must be an integer or null, got {rating!r}"
    wb.write_text(_wb_line(None) + "\n")  # the workbench's unparsed rating stays one
    res = run("qrels", wb)
    assert res.code in (0, None) and res.stdout == "101 0 p1 5\n", res.stderr


def test_a_grade_of_an_unknown_kind_is_refused(tmp_path):
    g = tmp_path / "g.jsonl"
    g.write_text(json.dumps({"query_id": "101", "doc_id": "d1", "item_id": "101/a", "kind": "banana", "grade": 5,
                             "parse_ok": True, "model": "m", "prompt": "question-selfrating"}) + "\n")
    res = run("qrels", g)
    assert res.code == 2 and res.last_line == (f"exam-qrels: {g}:1: 'kind' must be question, nugget, statement or "
                                               "null, got 'banana'")


def test_probs_over_labels_the_prompt_does_not_have_are_refused(tmp_path):
    from exam_eval.grading.grade_files import read_grades

    g = tmp_path / "g.jsonl"
    line = {"query_id": "101", "doc_id": "d1", "item_id": "101/a", "kind": "question", "grade": 5,
            "probs": {"5": 0.5, "9": 0.5}, "answer": "5", "parse_ok": True, "model": "m", "prompt": "question-selfrating"}
    g.write_text(json.dumps({**line, "probs": {"5": 1.0}}) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(InputError) as err:
        read_grades(g)
    assert err.value.line == 2 and err.value.reason.startswith("'probs' holds label '9', which prompt question-selfrating")


def test_a_grade_that_is_also_unparsed_is_refused(tmp_path):
    """exam-grade writes null for an output it could not parse; a line with both a grade
    and parse_ok false was shown as the grade by exam-verify and as unparsed elsewhere."""
    grades = write_jsonl(tmp_path / "g.jsonl", [grade_obj("1", "a", "1/x", 4), grade_obj("1", "b", "1/x", 5, parse_ok=False)])
    for prog, args in (("qrels", [grades]), ("verify", ["grid", grades]), ("verify", ["grading", grades])):
        msg = one_line_refusal(run(prog, *args), f"exam-{prog}")
        assert f"{grades}:2:" in msg and "'grade' is 5 but 'parse_ok' is false" in msg


def test_support_grades_that_hold_no_support_grade_are_refused(tmp_path):
    w = nugget_world(tmp_path)
    res = run("nuggets", "score", "--reports", w["reports"], "--bank", w["bank"], w["grades"],
              "--support-grades", w["grades"])
    assert res.escaped is None and res.code == 2
    assert res.last_line == f"exam-nuggets: {w['grades']}: holds no citation-support grades (exam-nuggets support writes them)"


# ---- grades that leave nothing to score -------------------------------------------------------

def test_grades_without_bank_items_are_bad_input_to_every_command(tmp_path):
    """Only direct relevance grades: exam-cover said exit 2 (bad input), exam-verify 1."""
    direct = dict(grade_obj("1", "a", None, 2), kind=None, prompt="umbrela")
    grades = write_jsonl(tmp_path / "g.jsonl", [direct])
    qrels = tmp_path / "q.txt"
    qrels.write_text("1 0 a 1\n")
    run_file = tmp_path / "r.run"
    run_file.write_text("1 Q0 a 1 1.0 r\n")
    for prog, args in (("cover", [grades, run_file]), ("verify", ["grid", grades]), ("verify", ["grading", grades]),
                       ("verify", ["spurious", grades, qrels]), ("verify", ["uncovered", grades, qrels])):
        msg = one_line_refusal(run(prog, *args), f"exam-{prog}")
        assert msg.startswith(f"exam-{prog}: {grades}: no grades ") and "direct relevance grades" in msg


def test_exam_cover_refuses_in_one_line_without_notes_first(tmp_path, run_file):
    """Grades without bank items, some unparsed: the unparsed note came before the refusal."""
    grades = tmp_path / "grades.jsonl"
    grades.write_text(grades_file(tmp_path, item=False).read_text()
                      + grades_file(tmp_path, parsed=False, item=False).read_text())
    res = run("cover", grades, run_file)
    assert "no grades for bank items" in one_line_refusal(res)


def test_exam_cover_counts_the_unparsed_grades_of_items_only(tmp_path):
    direct = dict(grade_obj("1", "a", None, None, parse_ok=False), kind=None)  # no item: a passage's own grade
    grades = write_jsonl(tmp_path / "g.jsonl", [direct, grade_obj("1", "a", "1/x", 5), grade_obj("1", "b", "1/x", None, False)])
    run_file = tmp_path / "r.run"
    run_file.write_text("1 Q0 a 1 2.0 r\n1 Q0 b 2 1.0 r\n")
    res = run("cover", grades, run_file)
    assert res.code == 0 and f"{grades}: 1 unparsed grades (they count as not answering)" in res.stderr, res.stderr


def test_unparsed_grades_are_reported_not_counted(tmp_path, run_cli):
    g = tmp_path / "g.jsonl"
    g.write_text(located_grade(grade=None, parse_ok=False) + "\n" + located_grade(doc_id="b", grade=5) + "\n")
    r = tmp_path / "r.txt"
    r.write_text("1 Q0 a 1 2.0 t\n")
    res = run_cli("exam-cover", g, r)
    assert res.returncode == 0
    assert "1 unparsed grades" in res.stderr
    assert "exam_cover            \tall\t0.0000" in res.stdout   # a's only grade is unparsed
    labels = run_cli("exam-qrels", g)
    assert labels.stdout == "1 0 b 5\n" and "1 passages had no parsed grade" in labels.stderr


def test_several_graders_must_be_chosen(tmp_path, run_cli):
    g = tmp_path / "g.jsonl"
    g.write_text(located_grade() + "\n" + located_grade(model="other") + "\n")
    res = run_cli("exam-qrels", g)
    assert res.returncode == 1 and "--model 'm'" in res.stderr and "--model 'other'" in res.stderr
    ok = run_cli("exam-qrels", "--model", "other", g)
    assert ok.returncode == 0 and ok.stdout == "1 0 a 4\n"


# ---- the grades file exam-grade resumes (-o) ----------------------------------------------------

def _members(*texts: str) -> list[bytes]:
    return [gzip.compress(t.encode(), mtime=0) for t in texts]


def test_a_gzip_output_damaged_before_its_end_is_refused_not_cut(tmp_path):
    """A torn shard concatenated before another (the man page's shard recipe), or one
    flipped byte in the first member: repair cut at the damage, dropping every intact
    member after it (all of shard 2 regraded, or the whole file)."""
    one, two, three = _members('{"a": 1}\n{"b": 2}\n', '{"c": 3}\n', '{"d": 4}\n')
    torn_then_whole = tmp_path / "merged.jsonl.gz"
    torn_then_whole.write_bytes(one + two[:-6] + three)
    flipped = tmp_path / "flipped.jsonl.gz"
    bad = bytearray(one + two + three)
    bad[len(one) + 12] ^= 0xFF
    flipped.write_bytes(bytes(bad))
    for path, line in ((torn_then_whole, 3), (flipped, 3)):
        before = path.read_bytes()
        with pytest.raises(InputError) as err:
            repair(str(path))
        assert err.value.path == str(path) and err.value.line == line
        assert f"the gzip member at byte {len(one)} is damaged" in err.value.reason
        assert path.read_bytes() == before
        with pytest.raises(InputError):
            existing_keys(str(path), read_only=True)  # --dry-run says the same


def test_a_torn_or_zero_filled_last_gzip_member_is_still_cut(tmp_path):
    from exam_eval.io.grades import Grade, grade_line

    a, b = (grade_line(Grade(query_id="q", doc_id=d, item_id="q/i", kind="question", grade=3, probs=None,
                             answer="3", parse_ok=True, model="m", prompt="question-selfrating")) for d in ("d1", "d2"))
    one, two = _members(a, b)
    for tail in (two[:-6], b"\0" * 64, two[:5]):
        path = tmp_path / "g.jsonl.gz"
        path.write_bytes(one + two + tail)
        assert repair(str(path)) == len(tail)
        assert gzip.decompress(path.read_bytes()) == (a + b).encode()


def test_a_grades_file_of_the_other_form_than_its_name_is_refused_unchanged(tmp_path):
    """exam-grade appends gzip members to a .gz output and plain lines otherwise, while
    readers go by content: plain text named .gz got gzip members after it (unreadable),
    and a rerun cut the "torn" tail out of the gzip data."""
    docs = DEMO / "good.run"
    for name, data in (("plain.jsonl.gz", b'{"a": 1}\n'), ("zipped.jsonl", gzip.compress(b'{"a": 1}\n'))):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(InputError) as err:
            repair(str(path))
        assert ("holds plain text but its name ends in .gz" if name.endswith(".gz")
                else "holds gzip data but its name does not end in .gz") in err.value.reason
        assert path.read_bytes() == data
    res = run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache", "-k", "1",
              "--bank", DEMO / "questions.jsonl", "--passages", DEMO / "passages.jsonl", docs,
              "-o", tmp_path / "plain.jsonl.gz")
    line = one_line_refusal(res, "exam-grade", 2)
    assert line.startswith(f"exam-grade: {tmp_path / 'plain.jsonl.gz'}: holds plain text")
    assert (tmp_path / "plain.jsonl.gz").read_bytes() == b'{"a": 1}\n'


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
    res = run("grade", *scripted_grading_args(tmp_path), "-o", target, *(["--dry-run"] if dry_run else []))
    msg = one_line_refusal(res, "exam-grade")
    lineno = line or content.count("\n") + 1
    assert msg.startswith(f"exam-grade: {target}:{lineno}: the last line has no newline and is not a grade line")
    assert target.read_text() == content


def test_a_torn_grades_file_is_still_repaired_and_resumed(tmp_path):
    args = scripted_grading_args(tmp_path)
    out = tmp_path / "grades.jsonl"
    assert run("grade", *args, "-o", out).code == 0
    whole = out.read_text()
    out.write_text(whole[:-25])  # the kill came while the only line was written
    res = run("grade", *args, "-o", out)
    assert res.code == 0, res.stderr
    assert "removed a torn last batch" in res.stderr
    assert out.read_text() == whole


def test_dry_run_names_the_grades_file_itself_not_a_copy(tmp_path):
    args = scripted_grading_args(tmp_path)
    out = tmp_path / "grades.jsonl"
    out.write_text('{"query_id": "101"}\n{"query_id": "101", "doc')  # a torn tail after a bad line
    msg = one_line_refusal(run("grade", *args, "-o", out, "--dry-run"), "exam-grade")
    assert msg.startswith(f"exam-grade: {out}:1: missing fields"), msg
