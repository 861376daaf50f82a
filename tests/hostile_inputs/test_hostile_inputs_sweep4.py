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
from exam_eval.io.bank_items import make_item_id
from inproc import run

ROOT = Path(__file__).resolve().parents[2]
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


# ---- RAG reports, nugget outputs (the sweep's second half) ----------------------------------

def _report_line(run_id: str, sentences: list[dict], **extra) -> str:
    return json.dumps({"metadata": {"team_id": "t", "run_id": run_id, "topic_id": "101", "narrative_id": "101"},
                       "answer": sentences, **extra}) + "\n"


@pytest.mark.parametrize("spec", ["rag25-autojudge", "ragtime25"])
@pytest.mark.parametrize("citations, references", [([7], ["msmarco_v2.1_doc_00_1#0_1"]),
                                                   ([-1], ["msmarco_v2.1_doc_00_1#0_1"]),
                                                   ([0], None)])
def test_a_blank_report_citing_no_reference_is_refused_under_every_spec(tmp_path, spec, citations, references):
    """A spec that takes an all-blank answer as a smell returned before the index check:
    IndexError (TypeError without references) as a traceback, and -1 read as the last."""
    reports = tmp_path / "reports.jsonl"
    extra = {} if references is None else {"references": references}
    reports.write_text(_report_line("r1", [{"text": " ", "citations": citations}], **extra))
    grades = tmp_path / "grades.jsonl"
    grades.write_text("")
    res = run("nuggets", "score", "--track-spec", spec, "--reports", reports, "--bank", DEMO / "nuggetized.jsonl",
              grades, "-o", tmp_path / "out.tot")
    msg = _one_line(res, "nuggets")
    assert msg.startswith(f"exam-nuggets: {reports}:1: ") and f"cites reference index {citations[0]}" in msg
    assert not (tmp_path / "out.tot").exists()


def test_a_run_id_that_is_no_file_name_is_refused_by_score_into_a_folder(tmp_path):
    """--format trec_eval -o DIR wrote DIR/../evil.txt for run id '../evil'."""
    reports = tmp_path / "reports.jsonl"
    reports.write_text("".join(_report_line(r, [{"text": "Bees make honey.", "citations": []}])
                               for r in ("../evil", "ok")))
    grades = tmp_path / "grades.jsonl"
    grades.write_text("")  # refused before the grades are read
    out = tmp_path / "folder"
    out.mkdir()
    res = run("nuggets", "score", "--reports", reports, "--bank", DEMO / "nuggetized.jsonl", grades,
              "--format", "trec_eval", "-o", out)
    msg = _one_line(res, "nuggets")
    assert msg.startswith(f"exam-nuggets: {reports}:1: run id '../evil' holds '/'"), msg
    assert list(out.iterdir()) == [] and not (tmp_path / "evil.txt").exists()


@pytest.mark.parametrize("existing", [None, "a grades file of an earlier run\n"])
def test_assign_and_nuggetize_leave_the_output_alone_when_every_call_fails(tmp_path, existing):
    """Every call failing (HTTP 500 after the retries) replaced -o with an empty file."""
    from openai_stub import OpenAIStub, Reply

    reports = tmp_path / "reports.jsonl"
    reports.write_text(_report_line("r1", [{"text": "Bees make honey.", "citations": []}]))
    out = tmp_path / "out.jsonl"
    if existing is not None:
        out.write_text(existing)
    with OpenAIStub(lambda req: Reply(500, text="down")) as stub:
        common = ["--model", "m", "--base-url", stub.url, "--max-retries", "0", "--no-cache", "-o", out]
        res = run("nuggets", "assign", "--reports", reports, "--bank", DEMO / "nuggetized.jsonl",
                  "--topics", DEMO / "topics.tsv", *common)
        assert res.code == 3 and "(nothing written)" in res.stderr, res.stderr
        assert (out.read_text() if out.exists() else None) == existing
        res = run("genq", "nuggetize", DEMO / "topics.tsv", "--run", DEMO / "good.run", "--depth", "2",
                  "--passages", DEMO / "passages.jsonl", *common, "--force")
        assert res.code == 3 and "(nothing written)" in res.stderr, res.stderr
        assert (out.read_text() if out.exists() else None) == existing


def test_two_reports_embedding_two_texts_for_one_document_are_refused(tmp_path):
    """One report's sentences were graded against the other report's text of p1."""
    def line(run_id, doc_key, doc_id, text):
        return json.dumps({"metadata": {"team_id": "t", "run_id": run_id, "topic_id": "101"},
                           "responses": [{"text": "Bees collect nectar.", "citations": ["p1"]}],
                           "documents": {doc_key: {"id": doc_id, "text": text}}}) + "\n"

    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"match": [""], "output": "['support']"}) + "\n")
    reports = tmp_path / "reports.jsonl"
    out = tmp_path / "support.jsonl"
    cases = [(line("r1", "p1", "p1", "Bees collect nectar.") + line("r2", "p1", "p1", "Cars."),
              f"{reports}:2: document p1 has another text here than in the report at {reports}:1"),
             (line("r1", "p1", "p2", "Bees collect nectar."), f"{reports}:1: documents['p1'] holds the document 'p2'")]
    for content, expect in cases:
        reports.write_text(content)
        res = run("nuggets", "support", "--reports", reports, "--backend", "scripted", "-O", f"script={script}",
                  "--no-cache", "-o", out)
        assert _one_line(res, "nuggets").startswith(f"exam-nuggets: {expect}"), res.stderr
        assert not out.exists()


def test_one_nugget_listed_twice_with_two_importances_is_refused(tmp_path):
    """It was an "exact repeat" (same id and text), dropped with a notice, the first
    importance kept."""
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join(json.dumps({"query_id": "101", "item_id": "n1", "kind": "nugget", "text": "A thing.",
                                        "importance": imp}) + "\n" for imp in ("vital", "okay")))
    out = tmp_path / "out.jsonl"
    msg = _one_line(run("nuggets", "bank", "--to", "ours", bank, "-o", out), "nuggets")
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
        msg = _one_line(run("nuggets", "score", "--reports", reports, "--bank", DEMO / "nuggetized.jsonl",
                            assignments), "nuggets")
        assert msg == (f"exam-nuggets: {assignments}:{lineno}: nugget {nuggets[0]['text']!r} of run r1 is assigned "
                       f"again (first on line {first})")
    assignments.write_text(json.dumps(line) + "\n")
    assert run("nuggets", "score", "--reports", reports, "--bank", DEMO / "nuggetized.jsonl", assignments).code == 0


# ---- option values (the sweep's third part) -------------------------------------------------

def test_a_relevance_level_below_0_is_scored_as_trec_eval_scores_it(tmp_path):
    """trec_eval counts a retrieved document the qrels do not judge as relevant there
    (m_map.c compares each ranked label, -1 for such a document, with the level), but not
    in num_rel: map 1.0 here where level 0 gives 0.25. It was refused; trec_eval's output
    is well defined, so exam-qrels now gives it (tests/trec_eval/test_trec_eval_departures.py holds
    it to the binary)."""
    qrels, run_file = tmp_path / "q", tmp_path / "r"
    qrels.write_text("1 0 a 1\n1 0 b 0\n")
    run_file.write_text("1 Q0 z 1 2 t\n1 Q0 a 2 1 t\n")
    for level in ("-1", "-5"):
        res = run("qrels", "-l", level, "-m", "map", "-m", "num_rel", qrels, run_file)
        assert res.code == 0 and res.stdout == "num_rel               \tall\t2\nmap                   \tall\t1.0000\n"
    res = run("qrels", "-l", "0", "-m", "map", qrels, run_file)
    assert res.code == 0 and res.stdout == "map                   \tall\t0.2500\n"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_timeout_that_is_no_finite_number_is_a_usage_error(tmp_path, value):
    """A socket timeout of nan or inf was a traceback (ValueError, OverflowError)."""
    topics = DEMO / "topics.tsv"
    endpoint = ["--backend", "endpoint", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--timeout", value]
    for args in (["genq", topics, *endpoint, "-o", tmp_path / "x.jsonl"],
                 ["genq", "nuggetize", topics, "--qrels", DEMO / "qrels.txt", "--passages", DEMO / "passages.jsonl",
                  *endpoint, "--no-cache", "-o", tmp_path / "x.jsonl"]):
        msg = _one_line(run(*args), "genq", code=1)
        assert "'--timeout'" in msg and ("not a finite number" in msg or "range" in msg), msg
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize("value", ["-1", "99", "nan"])
def test_a_temperature_off_the_apis_range_is_a_usage_error(value):
    msg = _one_line(run("genq", "--dry-run", DEMO / "topics.tsv", "--temperature", value), "genq", code=1)
    assert "'--temperature'" in msg


def test_a_near_constant_leaderboard_leaves_no_python_warning_on_stderr(tmp_path, run_cli):
    """Means of 0.1 and 0.5 (0.30000000000000004) against 0.3: scipy's
    NearConstantInputWarning went to stderr, a raw Python line among ours."""
    truth, pred = tmp_path / "t.tot", tmp_path / "p.tot"
    truth.write_text("a m 1 0.1\na m 2 0.5\nb m 1 0.2\nb m 2 0.4\nc m 1 0.3\nc m 2 0.3\n")
    pred.write_text("a m 1 0.3\na m 2 0.1\nb m 1 0.2\nb m 2 0.3\nc m 1 0.1\nc m 2 0.2\n")
    res = run_cli("correlate", "leaderboard", truth, pred)
    assert res.returncode == 0, res.stderr
    assert "Warning" not in res.stderr
    assert all(line.startswith("exam-correlate: ") for line in res.stderr.splitlines()), res.stderr
