"""Hostile reports (RAG answers with their citations, one JSON object a line, alone or in a
folder), passages and topics: citations that are true/false or point past the references,
NaN confidences, ids that cannot be TREC fields, blank sentences, two texts for one
document, hidden files in a reports folder, an empty passages file, a TREC topic file cut
inside its last topic; and the nugget scores of a report set where a topic or a value is
missing.

Every refusal here: one line naming the file and line, exit 2, no traceback, nothing
written. A score that is undefined is left out (an empty cell, no "all" row), never shown
as 0."""

from __future__ import annotations

import json
import math

import pytest

from exam_eval.errors import InputError
from inproc import run
from refusals import one_line_refusal
from tests.hostile_inputs._worlds import (DEMO, grade_json, item_json, nugget_world, refused, report_json,
                                          report_line, scripted_grading_args, write, write_jsonl)


# ---- reports --------------------------------------------------------------------------------

@pytest.mark.parametrize("cites", [[True], [0, False], {"p064": True}], ids=["true", "false", "confidence"])
def test_boolean_citations_are_refused(tmp_path, cites):
    r = write(tmp_path / "r.jsonl", [report_json(sentences=[{"text": "Bees.", "citations": cites}])])
    b = write(tmp_path / "b.jsonl", [item_json()])
    refused(run("nuggets", "score", "--reports", r, "--bank", b, write(tmp_path / "g.jsonl", [grade_json()])), r, 1,
            "responses[0].citations holds true/false")


def test_non_finite_confidences_from_python_callers():
    from exam_eval.api import as_reports

    for bad in (math.nan, math.inf, "nan"):
        with pytest.raises(InputError, match="NaN and infinities are not allowed"):
            as_reports([json.loads(report_json(sentences=[{"text": "a", "citations": {"p064": 0.5}}]))
                        | {"responses": [{"text": "a", "citations": {"p064": bad}}]}])


def test_report_messages_say_what_is_missing(tmp_path):
    b = write(tmp_path / "b.jsonl", [item_json()])
    g = write(tmp_path / "g.jsonl", [grade_json()])
    cases = [
        (report_json(md={"topic_id": "101", "team_id": "t"}), "missing metadata.run_id"),
        ('"good"', "expected a JSON object (one report per line: metadata, responses or answer, references)"),
        (report_json(sentences=[{"text": "a", "citations": {"p064": "NaN"}}]), "confidence \"NaN\": NaN and infinities"),
        ('{"metadata": {"run_id": "r", "topic_id": "1", "team_id": "t"}, '
         '"responses": [{"text": "a", "citations": {"d": NaN}}]}', "NaN is not allowed in JSON"),
    ]
    for i, (line, cause) in enumerate(cases):
        r = write(tmp_path / f"r{i}.jsonl", [report_json(), line] if i else [line])
        refused(run("nuggets", "score", "--reports", r, "--bank", b, g), r, 2 if i else 1, cause)


def test_report_ids_that_cannot_be_trec_fields(tmp_path):
    b = write(tmp_path / "b.jsonl", [item_json()])
    g = write(tmp_path / "g.jsonl", [grade_json()])
    for i, (line, cause) in enumerate([
            (report_json(sentences=[{"text": "a", "citations": ["p 064"]}]), "cites the document id 'p 064'"),
            (report_json(sentences=[{"text": "a", "citations": [0]}], references=[""]), "cites the document id ''"),
            (report_json(md={"run_id": "r\u0000", "topic_id": "101", "team_id": "t"}), "contains control characters")]):
        r = write(tmp_path / f"r{i}.jsonl", [line])
        refused(run("nuggets", "score", "--reports", r, "--bank", b, g), r, 1, cause)


def test_blank_sentence_refused_as_autojudge_base_does_unless_the_spec_allows_it(tmp_path):
    """Decided from autojudge-base 1.0.0 (the reference validator): a blank sentence among
    others is an error of category blank_sentence unless the track spec lists it among its
    smells; then it is a warning and the sentence is not graded (man exam-grade)."""
    (tmp_path / "runs").mkdir()
    r = write(tmp_path / "runs" / "r.jsonl", [report_json(sentences=[{"text": "Bees make honey.", "citations": []},
                                                                     {"text": "  ", "citations": []}], references=[])])
    b = write(tmp_path / "b.jsonl", [item_json()])
    base = ["grade", "--backend", "scripted", "--prompt", "nugget-selfrating", "--no-cache", "--bank", b,
            "--reports", r]
    refused(run(*base, "-o", tmp_path / "g.jsonl"), r, 1, "responses[1].text is blank",
            "lists blank_sentence among its smells")
    out = tmp_path / "g2.jsonl"
    res = run(*base, "--track-spec", "ragtime26", "-o", out)
    assert res.code == 0, res.stderr
    graded = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g["doc_id"].split("/")[2][:2] for g in graded] == ["1-"]  # the first sentence only


@pytest.mark.parametrize("spec", ["rag25-autojudge", "ragtime25"])
@pytest.mark.parametrize("citations, references", [([7], ["msmarco_v2.1_doc_00_1#0_1"]),
                                                   ([-1], ["msmarco_v2.1_doc_00_1#0_1"]),
                                                   ([0], None)])
def test_a_blank_report_citing_no_reference_is_refused_under_every_spec(tmp_path, spec, citations, references):
    """A spec that takes an all-blank answer as a smell returned before the index check:
    IndexError (TypeError without references) as a traceback, and -1 read as the last."""
    reports = tmp_path / "reports.jsonl"
    extra = {} if references is None else {"references": references}
    reports.write_text(report_line("r1", [{"text": " ", "citations": citations}], **extra))
    grades = tmp_path / "grades.jsonl"
    grades.write_text("")
    res = run("nuggets", "score", "--track-spec", spec, "--reports", reports, "--bank", DEMO / "nuggetized.jsonl",
              grades, "-o", tmp_path / "out.tot")
    msg = one_line_refusal(res, "exam-nuggets")
    assert msg.startswith(f"exam-nuggets: {reports}:1: ") and f"cites reference index {citations[0]}" in msg
    assert not (tmp_path / "out.tot").exists()


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
        assert one_line_refusal(res, "exam-nuggets").startswith(f"exam-nuggets: {expect}"), res.stderr
        assert not out.exists()


def test_hidden_files_in_a_reports_folder_are_no_reports(tmp_path):
    w = nugget_world(tmp_path)
    (w["reports"] / "._r.jsonl").write_bytes(b"\0\x05\x16\x07")  # macOS AppleDouble
    (w["reports"] / ".r.jsonl").write_bytes((w["reports"] / "r.jsonl").read_bytes())  # an editor's copy
    (w["reports"] / ".hidden").mkdir()
    (w["reports"] / ".hidden" / "r.jsonl").write_bytes((w["reports"] / "r.jsonl").read_bytes())
    res = run("nuggets", "score", "--reports", w["reports"], "--bank", w["bank"], w["grades"], "--format", "table")
    assert res.code in (0, None), res.stderr
    assert [x.split("\t")[0] for x in res.stdout.splitlines()[1:]] == ["runA", "runB", "runC"]


# ---- nugget scores of reports --------------------------------------------------------------

def test_a_measure_named_twice_is_one_column(tmp_path):
    w = nugget_world(tmp_path)
    res = run("nuggets", "score", "--reports", w["reports"], "--bank", w["bank"], w["grades"],
              "-m", "nugget_all", "-m", "nugget_all", "--format", "table")
    assert res.code in (0, None), res.stderr
    assert res.stdout.splitlines()[0] == "run\tnugget_all"


def test_complete_normalized_cover_counts_no_undefined_topic_as_zero():
    """-c averaged n_exam_cover 0 in for a run lacking a topic where it is undefined for
    every run: runC, best on the only topic with a value, ranked below runA."""
    from exam_eval.measures.nugget_scores import average_runs

    per = {("runA", "101"): {"n_exam_cover": 2 / 3}, ("runA", "102"): {"n_exam_cover": None},
           ("runC", "101"): {"n_exam_cover": 1.0}}
    got = average_runs(per, ["n_exam_cover"], ["101", "102"])
    assert got["runC"]["n_exam_cover"] == (1.0, 0.0, 1) and got["runA"]["n_exam_cover"][2] == 1
    # a measure with a value there still counts the absent topic as 0
    per = {("runA", "101"): {"exam_cover": 0.5}, ("runA", "102"): {"exam_cover": 0.5}, ("runC", "101"): {"exam_cover": 1.0}}
    assert average_runs(per, ["exam_cover"], ["101", "102"])["runC"]["exam_cover"][0] == 0.5


def test_an_undefined_normalized_nugget_cover_has_no_all_row(tmp_path):
    w = nugget_world(tmp_path, runs=(("runA", 0),))
    res = run("nuggets", "score", "--reports", w["reports"], "--bank", w["bank"], w["grades"], "-m", "exam_cover",
              "-m", "n_exam_cover")
    assert res.code in (0, None), res.stderr
    assert [x.split("\t")[1:3] for x in res.stdout.splitlines()] == [["exam_cover", "101"], ["exam_cover", "all"]]


def test_a_run_with_no_scored_topic_keeps_its_row(tmp_path):
    """Run B's only report is on a topic the bank lacks: with -c its mean is 0 (it lacks
    topic 101), without it has no mean (an empty cell); its row had vanished."""
    from exam_eval.io.reports import sentence_id

    sentence = "Bees make honey."
    reports = write_jsonl(tmp_path / "reports.jsonl", [
        {"metadata": {"run_id": run, "topic_id": topic, "team_id": "x"},
         "responses": [{"text": sentence, "citations": []}], "references": []}
        for run, topic in (("A", "101"), ("B", "999"))])
    bank = write_jsonl(tmp_path / "bank.jsonl", [{"query_id": "101", "kind": "nugget", "text": "bees"}])
    import hashlib

    item = "101/" + hashlib.md5(b"bees").hexdigest()
    grades = write_jsonl(tmp_path / "g.jsonl", [{"query_id": "101", "doc_id": sentence_id("A", "101", 1, sentence),
                                                 "item_id": item, "kind": "nugget", "grade": 2, "parse_ok": True,
                                                 "model": "m", "prompt": "nuggetizer-assign"}])
    base = ["nuggets", "score", "-m", "nugget_all", "--reports", reports, "--bank", bank, grades]
    table = run(*base[:2], "-c", "--format", "table", *base[2:])
    assert table.code == 0 and table.stdout == "run\tnugget_all\nA\t1.0000\nB\t0.0000\n", table.stdout
    tot = run(*base[:2], "-c", *base[2:])
    assert tot.stdout.splitlines()[-1] == "B\tnugget_all\tall\t0.0000", tot.stdout
    table = run(*base[:2], "--format", "table", *base[2:])
    assert table.stdout == "run\tnugget_all\nA\t1.0000\nB\t\n", table.stdout


# ---- passages and topics ---------------------------------------------------------------------

def test_an_empty_passages_file_is_refused_in_one_line(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    grades = tmp_path / "grades.jsonl"
    assert run("grade", *scripted_grading_args(tmp_path, "0"), "-o", grades).code == 0
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("101 0 d1 2\n")  # judged relevant, answering nothing: its text is wanted
    msg = one_line_refusal(run("verify", "uncovered", grades, qrels, "--passages", empty), "exam-verify")
    assert msg == f"exam-verify: {empty}: no passages: the file is empty"
    res = run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache", "--dry-run",
              "--bank", DEMO / "questions.jsonl", "--passages", empty, DEMO / "good.run")
    assert one_line_refusal(res, "exam-grade") == f"exam-grade: {empty}: no passages: the file is empty"
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"doc_id": "zz", "text": "x"}) + "\n")
    res = run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache", "--dry-run",
              "--bank", DEMO / "questions.jsonl", "--passages", other, DEMO / "good.run")
    assert one_line_refusal(res, "exam-grade").startswith(f"exam-grade: {other}: no pooled passage has text (none of ")


def test_truncated_trec_topics_lose_no_topic_silently(tmp_path):
    """A TREC topic file cut inside its last topic read fine, one topic short."""
    topics = [line.split("\t", 1) for line in (DEMO / "topics.tsv").read_text().splitlines()]
    whole = "".join(f"<top>\n<num> Number: {q}\n<title> {t}\n\n<desc> Description:\nd\n</top>\n\n" for q, t in topics)
    good = tmp_path / "topics.trec"
    good.write_text(whole)
    res = run("genq", "--dry-run", good)
    assert res.code == 0 and f"# {len(topics)} calls" in res.stdout, res.stderr
    cut = tmp_path / "cut.trec"
    cut.write_text(whole[:whole.rindex("</top>")])
    last = whole[:whole.rindex("<top>")].count("\n") + 1
    line = one_line_refusal(run("genq", "--dry-run", cut), "exam-genq", 2)
    assert line == f"exam-genq: {cut}:{last}: <top> without its </top> (a truncated file?)"
