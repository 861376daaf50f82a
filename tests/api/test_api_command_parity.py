"""api.nugget_scores and exam-nuggets score go through one scoring call: on the same
inputs they give the same scores or the same refusal (grades of two kinds of bank item;
grades of an edited item's old text left out)."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import pytest

from exam_eval import api
from exam_eval.errors import UsageError
from exam_eval.grading.grade_files import read_grades
from exam_eval.io.passages import read_passages
from exam_eval.io.reports import reports_from_run
from exam_eval.trec_eval.trec_files import read_run
from inproc import run

DEMO = Path(__file__).resolve().parents[2] / "exam_eval" / "demo_data"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("parity")
    texts = read_passages(str(DEMO / "passages.jsonl"))
    objs = [o for name in ("good", "poor") for o in
            reports_from_run(name, read_run(str(DEMO / f"{name}.run")), texts, depth=3)]
    reports = tmp / "reports.jsonl"
    reports.write_text("".join(json.dumps(o) + "\n" for o in objs))
    bank = tmp / "nuggets.jsonl"
    bank.write_text((DEMO / "nuggets.jsonl").read_text())
    grades = tmp / "grades.jsonl"
    res = run("exam-grade", "--backend", "scripted", "--prompt", "nugget-selfrating", "--bank", bank,
              "--reports", reports, "--no-cache", "-o", grades)
    assert res.code in (0, None), res.stderr
    return tmp, reports, bank, grades


def _tot(stdout):
    rows = {}
    for line in stdout.splitlines():
        run_id, measure, topic, value = line.split()
        rows[(run_id, measure, topic)] = float(value)
    return rows


def _same(per, means, rows):
    for (run_id, topic), values in per.items():
        for measure, value in values.items():
            if value is not None:
                assert rows[(run_id, measure, topic)] == pytest.approx(value, abs=1e-4), (run_id, measure, topic)
    for run_id, values in means.items():
        for measure, value in values.items():
            assert rows[(run_id, measure, "all")] == pytest.approx(value, abs=1e-4), (run_id, measure)


def test_same_scores(inputs):
    _, reports, bank, grades = inputs
    res = run("exam-nuggets", "score", "--reports", reports, "--bank", bank, grades)
    assert res.code in (0, None), res.stderr
    per, means = api.nugget_scores(api.read_reports(str(reports)), read_grades(str(grades)), str(bank), log=print)
    assert means and any(v["nugget_all"] for v in means.values())
    _same(per, means, _tot(res.stdout))


def test_grades_of_two_kinds_are_refused_alike(inputs, tmp_path):
    _, reports, bank, grades = inputs
    graded = read_grades(str(grades))
    mixed = graded + [dataclasses.replace(g, kind="question") for g in graded[:5]]
    both = tmp_path / "both.jsonl"
    both.write_text("".join(json.dumps({k: v for k, v in dataclasses.asdict(g).items() if v is not None}) + "\n"
                            for g in mixed))
    res = run("exam-nuggets", "score", "--reports", reports, "--bank", bank, both)
    assert res.code == 1 and "holds grades of nugget and question; choose one with --kind" in res.stderr, res.stderr
    with pytest.raises(UsageError, match="holds grades of nugget and question; choose one with kind="):
        api.nugget_scores(api.read_reports(str(reports)), read_grades(str(both)), str(bank), log=print)
    # choosing one kind: both score the nugget grades alike
    res = run("exam-nuggets", "score", "--reports", reports, "--bank", bank, "--kind", "nugget", both)
    assert res.code in (0, None), res.stderr
    per, means = api.nugget_scores(api.read_reports(str(reports)), read_grades(str(both)), str(bank),
                                   kind="nugget", log=print)
    _same(per, means, _tot(res.stdout))


@pytest.mark.parametrize("as_objects", [False, True])
def test_grades_of_an_edited_items_old_text_are_left_out_alike(inputs, tmp_path, as_objects):
    _, reports, bank, grades = inputs
    lines = [json.loads(x) for x in bank.read_text().splitlines()]
    graded_ids = {g.item_id for g in read_grades(str(grades)) if g.grade}
    edited = next(i for i, x in enumerate(lines) if x["item_id"] in graded_ids)
    lines[edited]["text"] = "an entirely new nugget text"
    new_bank = tmp_path / "edited.jsonl"
    new_bank.write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = run("exam-nuggets", "score", "--reports", reports, "--bank", new_bank, grades)
    assert res.code in (0, None), res.stderr
    assert "given for an older text of an edited bank item left out" in res.stderr
    said = []
    bank_arg = api.read_bank(str(new_bank)) if as_objects else str(new_bank)
    per, means = api.nugget_scores(api.read_reports(str(reports)), read_grades(str(grades)), bank_arg,
                                   log=said.append)
    # from a file the old text's grades are named stale; items read already carry the new
    # text's id only, under which those grades are not: left out all the same
    said_of = "left out" if as_objects else "given for an older text of an edited bank item left out"
    assert any(said_of in s for s in said), said
    _same(per, means, _tot(res.stdout))


def test_the_api_warns_at_the_callers_line(inputs):
    _, reports, bank, grades = inputs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api.nugget_scores(api.read_reports(str(reports)), read_grades(str(grades)), str(bank))
    assert caught and all(Path(w.filename).resolve() == Path(__file__).resolve() for w in caught)


def test_the_measure_table_is_what_score_prints_and_the_api_returns(inputs):
    from exam_eval.measures import exam_measures

    _, reports, bank, grades = inputs
    res = run("exam-nuggets", "score", "--reports", reports, "--bank", bank, grades)
    printed = list(dict.fromkeys(m for (_, m, _) in _tot(res.stdout)))
    assert printed == list(exam_measures.SCORE_MEASURES) == list(api.NUGGET_MEASURES)
    _, means = api.nugget_scores(api.read_reports(str(reports)), read_grades(str(grades)), str(bank), log=print)
    assert all(set(v) == set(exam_measures.SCORE_MEASURES) for v in means.values())
    # what each measure means is the man page's to say: the table names no text of its own
    man = (DEMO.parents[1] / "man" / "exam-nuggets.1").read_text(encoding="utf-8").replace("\\fR, \\fP", " ")
    assert [m.name for m in exam_measures.TABLE if m.name not in man.split()] == []


def test_grade_reads_and_refuses_as_exam_grade(inputs, tmp_path):
    _, reports, bank, grades = inputs
    reps = api.read_reports(str(reports))
    # cited documents without their texts: a usage error naming what to give, in both
    res = run("exam-grade", "--backend", "scripted", "--prompt", "nugget-selfrating", "--bank", bank,
              "--reports", reports, "--cited-documents", "--no-cache", "-o", tmp_path / "g.jsonl")
    assert res.code == 1 and "cited documents need texts for --cited-documents: give --passages" in res.stderr
    with pytest.raises(UsageError, match="cited documents need texts for cited_documents=True: give passages="):
        api.grade(reps, bank=str(bank), prompt="nugget-selfrating", backend="scripted", cited_documents=True)
    # a prompt that shows the query, without query texts
    res = run("exam-grade", "--backend", "scripted", "--prompt", "umbrela", "--reports", reports, "--no-cache",
              "-o", tmp_path / "g.jsonl")
    assert res.code == 1 and "prompt 'umbrela' shows the query text: give --topics" in res.stderr
    with pytest.raises(UsageError, match="prompt 'umbrela' shows the query text: give queries="):
        api.grade(reps, prompt="umbrela", backend="scripted")
    # some topics without a text: the same bad input in both
    some = {r.topic_id: "a query" for r in reps[:1]}
    (tmp_path / "some.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in some.items()))
    res = run("exam-grade", "--backend", "scripted", "--prompt", "umbrela", "--reports", reports, "--topics",
              tmp_path / "some.tsv", "--no-cache", "-o", tmp_path / "g.jsonl")
    assert res.code == 2 and "no topic text for" in res.stderr
    with pytest.raises(api.InputError, match="no topic text for"):
        api.grade(reps, prompt="umbrela", backend="scripted", queries=some)


def test_the_api_reads_what_the_commands_write(inputs, tmp_path):
    _, reports, bank, grades = inputs
    graded = api.read_grades(str(grades))
    assert graded == read_grades(str(grades)) and graded
    assert api.grade(api.read_reports(str(reports)), bank=api.read_bank(str(bank)), prompt="nugget-selfrating",
                     backend="scripted", log=print) == graded
    res = run("exam-grade", "--backend", "scripted", "--prompt", "nugget-selfrating", "--bank", bank,
              "--reports", reports, "--reports-run-out", str(tmp_path / "runs") + "/", "--no-cache",
              "-o", tmp_path / "g.jsonl")
    assert res.code in (0, None), res.stderr
    for path in sorted((tmp_path / "runs").glob("*.run")):
        run_ = api.read_run(str(path))
        assert run_ and all(isinstance(s, float) for docs in run_.values() for s in docs.values())
        covered = api.cover(graded, {path.stem: run_})
        res = run("exam-cover", grades, path)
        assert res.code in (0, None), res.stderr
        line = next(x for x in res.stdout.splitlines() if x.split()[0] == "exam_cover")
        assert float(line.split()[-1]) == pytest.approx(covered[path.stem]["exam_cover"], abs=1e-4)
