"""Findings of a sixth sweep (2026-11-26): exam-cover, exam-qrels' labels and exam-verify
against an independent computation on random grades. A grade line that says both "graded
5" and "unparsed", a normalized cover shown as 0 where it is undefined, and notices
printed before a refusal (exit 2 is one line on stderr)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exam_eval.verify.report import ReportOptions, compute, render
from inproc import run
from tiny_models import tiny_llama, tiny_t5  # noqa: F401 (fixtures)


def _grade(qid, doc, item, grade, parse_ok=True):
    return {"query_id": qid, "doc_id": doc, "item_id": item, "kind": "question", "grade": grade, "probs": None,
            "answer": str(grade), "parse_ok": parse_ok, "model": "m", "prompt": "question-selfrating",
            "prompt_hash": None}


def _jsonl(path: Path, objs) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def _one_line(res, prog: str, code: int = 2) -> str:
    assert res.escaped is None, res.escaped
    assert res.code == code, (res.code, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: "), res.stderr
    return lines[0]


def test_a_grade_that_is_also_unparsed_is_refused(tmp_path):
    """exam-grade writes null for an output it could not parse; a line with both a grade
    and parse_ok false was shown as the grade by exam-verify and as unparsed elsewhere."""
    grades = _jsonl(tmp_path / "g.jsonl", [_grade("1", "a", "1/x", 4), _grade("1", "b", "1/x", 5, parse_ok=False)])
    for prog, args in (("qrels", [grades]), ("verify", ["grid", grades]), ("verify", ["grading", grades])):
        msg = _one_line(run(prog, *args), f"exam-{prog}")
        assert f"{grades}:2:" in msg and "'grade' is 5 but 'parse_ok' is false" in msg


def test_the_report_leaves_an_undefined_normalized_cover_out(tmp_path):
    """runB's only query has no item any passage answers: exam-cover leaves its
    n_exam_cover out; the report showed 0.0000 and counted it in the correlation."""
    grades = _jsonl(tmp_path / "g.jsonl", [_grade("1", "a", "1/x", 5), _grade("1", "b", "1/x", 1),
                                           _grade("2", "c", "2/y", 1)])
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 a 1\n1 0 b 0\n2 0 c 1\n")
    run_a, run_b = tmp_path / "runA.run", tmp_path / "runB.run"
    run_a.write_text("1 Q0 a 1 2 A\n1 Q0 b 2 1 A\n")
    run_b.write_text("2 Q0 c 1 1 B\n")
    cover = run("cover", grades, run_a, run_b)
    assert cover.code == 0 and cover.stdout.splitlines()[2].split("\t")[3:] == ["", ""], cover.stdout
    data = compute(str(grades), str(qrels), [str(run_a), str(run_b)], opts=ReportOptions(relevant_min=1))
    rows = {r.run: r for r in data.rows}
    assert rows["runA"].ncover_mean == 1.0 and rows["runB"].ncover_mean is None and rows["runB"].ncover_se is None
    assert data.correlations["EXAM-Cover@20 normalized"]["n"] == 1
    assert data.correlations["EXAM-Cover@20"]["n"] == 2
    html = render(data)
    assert "&ndash; &plusmn;" not in html and "runB" in html


@pytest.fixture
def two_runs(tmp_path):
    grades = _jsonl(tmp_path / "g.jsonl", [_grade("1", "a", "1/x", 5), _grade("1", "b", "1/x", None, parse_ok=False)])
    ok, other = tmp_path / "ok.run", tmp_path / "other.run"
    ok.write_text("1 Q0 a 1 2 A\n1 Q0 z 2 1 A\n")  # z: ungraded, a notice
    other.write_text("2 Q0 c 1 1 B\n")
    return grades, ok, other


def test_exam_cover_refuses_a_run_before_any_notice(two_runs):
    grades, ok, other = two_runs
    msg = _one_line(run("cover", grades, ok, other), "exam-cover")
    assert msg == f"exam-cover: {other}: no query of this run has graded items in {grades}"
    good = run("cover", grades, ok)  # the notices are still said when nothing is refused
    assert good.code == 0 and "1 unparsed grades" in good.stderr and "have no grades" in good.stderr


def test_exam_qrels_refuses_before_the_labels_notices(two_runs, tmp_path):
    grades, ok, other = two_runs
    msg = _one_line(run("qrels", grades, other), "exam-qrels")
    assert msg.startswith(f"exam-qrels: {other}: no queries in common")
    unparsed = _jsonl(tmp_path / "u.jsonl", [_grade("1", "b", "1/x", None, parse_ok=False)])
    msg = _one_line(run("qrels", unparsed), "exam-qrels")
    assert msg == f"exam-qrels: {unparsed}: no passage has a parsed grade (1 unparsed grades)"
    good = run("qrels", grades, ok)
    assert good.code == 0 and "1 unparsed grades ignored" in good.stderr


def test_a_bank_that_leaves_no_grade_is_one_line_that_says_why(tmp_path):
    grades = _jsonl(tmp_path / "g.jsonl", [_grade("1", "a", "1/x", 5)])
    bank = _jsonl(tmp_path / "b.jsonl", [{"query_id": "1", "kind": "question", "text": "Another question?"}])
    msg = _one_line(run("qrels", "--bank", bank, grades), "exam-qrels")
    assert msg == (f"exam-qrels: {grades}: no grade is of an item of the bank as it is now (1 of items not in "
                   "it, 0 of an edited item's older text)")


def test_grades_without_bank_items_are_bad_input_to_every_command(tmp_path):
    """Only direct relevance grades: exam-cover said exit 2 (bad input), exam-verify 1."""
    direct = dict(_grade("1", "a", None, 2), kind=None, prompt="umbrela")
    grades = _jsonl(tmp_path / "g.jsonl", [direct])
    qrels = tmp_path / "q.txt"
    qrels.write_text("1 0 a 1\n")
    run_file = tmp_path / "r.run"
    run_file.write_text("1 Q0 a 1 1.0 r\n")
    for prog, args in (("cover", [grades, run_file]), ("verify", ["grid", grades]), ("verify", ["grading", grades]),
                       ("verify", ["spurious", grades, qrels]), ("verify", ["uncovered", grades, qrels])):
        msg = _one_line(run(prog, *args), f"exam-{prog}")
        assert msg.startswith(f"exam-{prog}: {grades}: no grades ") and "direct relevance grades" in msg


def test_exam_cover_counts_the_unparsed_grades_of_items_only(tmp_path):
    direct = dict(_grade("1", "a", None, None, parse_ok=False), kind=None)  # no item: a passage's own grade
    grades = _jsonl(tmp_path / "g.jsonl", [direct, _grade("1", "a", "1/x", 5), _grade("1", "b", "1/x", None, False)])
    run_file = tmp_path / "r.run"
    run_file.write_text("1 Q0 a 1 2.0 r\n1 Q0 b 2 1.0 r\n")
    res = run("cover", grades, run_file)
    assert res.code == 0 and f"{grades}: 1 unparsed grades (they count as not answering)" in res.stderr, res.stderr


@pytest.mark.parametrize("backend, model", [("hf-seq2seq", "tiny_t5"), ("hf-causal", "tiny_llama")])
def test_a_rating_rule_on_a_local_model_that_scores_is_refused(tmp_path, request, backend, model):
    """The check asked the back end before its tokenizer had loaded, which then said "does
    not score": the grades were scored, the rule never applied, the lines said
    question-selfrating/workbench, exit 0."""
    bank = _jsonl(tmp_path / "bank.jsonl", [{"query_id": "q1", "item_id": "q1/i1", "kind": "question", "text": "What?"}])
    passages = _jsonl(tmp_path / "p.jsonl", [{"doc_id": "d1", "text": "Bees."}])
    run_file = tmp_path / "r.run"
    run_file.write_text("q1 Q0 d1 1 1.0 r\n")
    out = tmp_path / "g.jsonl"
    args = ["--backend", backend, "--model", request.getfixturevalue(model), "--device", "cpu", "--prompt",
            "question-selfrating", "--bank", bank, "--passages", passages, "--no-cache", run_file, "-o", out]
    msg = _one_line(run("grade", *args, "--rating-rule", "workbench"), "exam-grade", code=1)
    assert msg == (f"exam-grade: --rating-rule workbench reads generated ratings, and back end '{backend}' scores the "
                   "labels' probabilities: add --generate-ratings")
    assert not out.exists()
    ok = run("grade", *args, "--rating-rule", "workbench", "--generate-ratings")
    assert ok.code == 0, ok.stderr
    assert {json.loads(x)["prompt"] for x in out.read_text().splitlines()} == {
        "question-selfrating/generate/workbench"}


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
    reports = _jsonl(tmp_path / "reports.jsonl", [{"metadata": {"run_id": "A", "topic_id": "101", "team_id": "x"},
                                                   "responses": [{"text": sentence, "citations": []}],
                                                   "references": []}])
    item_id, hashed, want = (("101/n1", "old text", "0.0000") if case == "old-text grade"
                             else ("101/" + md5("old text"), "new text", "1.0000"))
    bank = _jsonl(tmp_path / "bank.jsonl", [{"query_id": "101", "item_id": item_id, "kind": "nugget",
                                             "text": "new text", "importance": "vital"}])
    doc = sentence_id("A", "101", 1, sentence)
    grades = _jsonl(tmp_path / "g.jsonl", [{"query_id": "101", "doc_id": doc, "item_id": item_id, "kind": "nugget",
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


@pytest.mark.parametrize("shape", ["tot", "ir_measures", "table"])
def test_exam_nuggets_score_refuses_a_folder_for_a_one_file_format(tmp_path, shape):
    """-o out/ (a folder: what the trec_eval shape takes) wrote a file named out."""
    reports = _jsonl(tmp_path / "reports.jsonl", [{"metadata": {"run_id": "A", "topic_id": "101", "team_id": "x"},
                                                   "responses": [{"text": "Bees make honey.", "citations": []}],
                                                   "references": []}])
    bank = _jsonl(tmp_path / "bank.jsonl", [{"query_id": "101", "kind": "nugget", "text": "bees"}])
    grades = _jsonl(tmp_path / "g.jsonl", [{"query_id": "101", "doc_id": "x", "item_id": "101/x", "kind": "nugget",
                                            "grade": 2, "parse_ok": True, "model": "m", "prompt": "nuggetizer-assign"}])
    out = tmp_path / "out"
    msg = _one_line(run("nuggets", "score", "--format", shape, "--reports", reports, "--bank", bank, "-o",
                        f"{out}/", grades), "exam-nuggets")
    assert msg == f"exam-nuggets: {out}/: cannot write: names a folder (it ends with a separator); give a file name"
    assert not out.exists()


def test_a_run_with_no_scored_topic_keeps_its_row(tmp_path):
    """Run B's only report is on a topic the bank lacks: with -c its mean is 0 (it lacks
    topic 101), without it has no mean (an empty cell); its row had vanished."""
    from exam_eval.io.reports import sentence_id

    sentence = "Bees make honey."
    reports = _jsonl(tmp_path / "reports.jsonl", [
        {"metadata": {"run_id": run, "topic_id": topic, "team_id": "x"},
         "responses": [{"text": sentence, "citations": []}], "references": []}
        for run, topic in (("A", "101"), ("B", "999"))])
    bank = _jsonl(tmp_path / "bank.jsonl", [{"query_id": "101", "kind": "nugget", "text": "bees"}])
    import hashlib

    item = "101/" + hashlib.md5(b"bees").hexdigest()
    grades = _jsonl(tmp_path / "g.jsonl", [{"query_id": "101", "doc_id": sentence_id("A", "101", 1, sentence),
                                            "item_id": item, "kind": "nugget", "grade": 2, "parse_ok": True,
                                            "model": "m", "prompt": "nuggetizer-assign"}])
    base = ["nuggets", "score", "-m", "nugget_all", "--reports", reports, "--bank", bank, grades]
    table = run(*base[:2], "-c", "--format", "table", *base[2:])
    assert table.code == 0 and table.stdout == "run\tnugget_all\nA\t1.0000\nB\t0.0000\n", table.stdout
    tot = run(*base[:2], "-c", *base[2:])
    assert tot.stdout.splitlines()[-1] == "B\tnugget_all\tall\t0.0000", tot.stdout
    table = run(*base[:2], "--format", "table", *base[2:])
    assert table.stdout == "run\tnugget_all\nA\t1.0000\nB\t\n", table.stdout


@pytest.mark.parametrize("target", ["ours", "autojudge"])
def test_bank_conversion_names_the_one_target_default_importance_applies_to(tmp_path, target):
    bank = _jsonl(tmp_path / "bank.jsonl", [{"query_id": "101", "kind": "nugget", "text": "bees"}])
    res = run("nuggets", "bank", "--to", target, "--default-importance", "okay", bank)
    assert _one_line(res, "exam-nuggets", code=1) == "exam-nuggets: --default-importance applies to --to nuggetizer"


@pytest.mark.parametrize("second, ok", [("support", True), ("not_support", False)])
def test_the_nuggetizers_output_for_a_bank_with_a_repeated_nugget(tmp_path, second, ok):
    """The bank lists "n one" twice (its reader drops the repeat); the nuggetizer assigns it
    twice in one line. Alike, that is one assignment; two labels contradict each other."""
    reports = _jsonl(tmp_path / "reports.jsonl", [{"metadata": {"run_id": "A", "topic_id": "101", "team_id": "x"},
                                                   "responses": [{"text": "Bees.", "citations": []}],
                                                   "references": []}])
    bank = _jsonl(tmp_path / "bank.jsonl", [{"qid": "101", "query": "q", "nuggets": [
        {"text": "n one", "importance": "vital"}, {"text": "n one", "importance": "vital"},
        {"text": "n two", "importance": "okay"}]}])
    assigned = _jsonl(tmp_path / "assign.jsonl", [{"qid": "101", "query": "q", "candidate": {}, "nuggets": [
        {"text": "n one", "importance": "vital", "assignment": "support"},
        {"text": "n one", "importance": "vital", "assignment": second},
        {"text": "n two", "importance": "okay", "assignment": "not_support"}]}])
    res = run("nuggets", "score", "--reports", reports, "--bank", bank, "-m", "nugget_all", assigned)
    if ok:
        assert res.code == 0 and res.stdout == "A\tnugget_all\t101\t0.5000\nA\tnugget_all\tall\t0.5000\n", res.stderr
    else:
        msg = _one_line(res, "exam-nuggets")
        assert "nugget 'n one' of run A is assigned again (first on line 1)" in msg


@pytest.mark.parametrize("backend", ["hf-seq2seq", "embedding"])
def test_a_device_torch_does_not_know_is_one_line(tmp_path, request, backend):
    """--device bogus reached torch's parser at the model load: a RuntimeError traceback."""
    bank = _jsonl(tmp_path / "bank.jsonl", [{"query_id": "q1", "item_id": "q1/i1", "kind": "question", "text": "What?"}])
    passages = _jsonl(tmp_path / "p.jsonl", [{"doc_id": "d1", "text": "Bees."}])
    run_file = tmp_path / "r.run"
    run_file.write_text("q1 Q0 d1 1 1.0 r\n")
    out = tmp_path / "g.jsonl"
    model = ["--model", request.getfixturevalue("tiny_t5"), "--engine", "torch"] if backend == "hf-seq2seq" else []
    msg = _one_line(run("grade", "--backend", backend, *model, "--device", "bogus", "--prompt", "question-selfrating",
                        "--bank", bank, "--passages", passages, "--no-cache", run_file, "-o", out), "exam-grade", code=1)
    assert msg.startswith("exam-grade: --device bogus: not a device torch knows (")
    assert not out.exists()


@pytest.mark.parametrize("case", ["a 240-byte run id", "a folder in the way"])
def test_run_out_files_are_refused_before_the_load_and_none_is_left(tmp_path, case):
    """The run id fit NAME_MAX but its temp file's name did not, and a folder named as a run
    file was met only when written: after the model load, leaving the other run's file."""
    long_id = "x" * 240
    other = long_id if case == "a 240-byte run id" else "zzz"
    resp = _jsonl(tmp_path / "resp.jsonl", [{"query_id": "t1", "run_id": "aaa", "text": "Other text about one."},
                                            {"query_id": "t1", "run_id": other, "text": "Some text about one."}])
    bank = _jsonl(tmp_path / "bank.jsonl", [{"query_id": "t1", "kind": "nugget", "text": "fact one"}])
    out = tmp_path / "out"
    out.mkdir()
    if case == "a folder in the way":
        (out / "zzz.run").mkdir()
    grades = tmp_path / "g.jsonl"
    res = run("grade", "--responses", resp, "--responses-run-out", f"{out}/", "--bank", bank, "--prompt",
              "nugget-selfrating", "--backend", "scripted", "-O", "load_delay=30", "--no-cache", "-o", grades)
    msg = _one_line(res, "exam-grade")
    if case == "a 240-byte run id":
        assert msg.startswith(f"exam-grade: {resp}:2: run id '{long_id}' is too long for a file name (241 bytes")
    else:
        assert msg == f"exam-grade: {out}/zzz.run: cannot write: is a directory"
    assert not grades.exists() and [p.name for p in out.iterdir()] == ([] if other == long_id else ["zzz.run"])
