"""exam-nuggets score on grades that cover only some topics (a partial labelling: an
assignment file of a few topics, a grading run stopped after some): the covered topics are
scored, the others are left out and named in one line, not scored 0.0 with a warning about
unparsed grades. Values worked out by hand from the assignments."""

from __future__ import annotations

import hashlib
import json

import pytest

from refusals import one_line_refusal

BANK = {"t1": [("alpha fact", "vital"), ("beta fact", "okay")],
        "t2": [("delta fact", "vital"), ("epsilon fact", "vital")],
        "t3": [("zeta fact", "vital")]}
CREDIT = {"support": 1.0, "partial_support": 0.5, "not_support": 0.0}
# the partial labelling: t1 only; run -> nugget -> assignment
T1 = {"good": {"alpha fact": "support", "beta fact": "not_support"},
      "poor": {"alpha fact": "not_support", "beta fact": "partial_support"}}


@pytest.fixture
def track(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    for run in ("good", "poor"):
        lines = [json.dumps({"metadata": {"run_id": run, "topic_id": t, "team_id": "x"},
                             "responses": [{"text": f"{run} on {t}.", "citations": []}], "references": []})
                 for t in BANK]
        (runs / f"{run}.jsonl").write_text("\n".join(lines) + "\n")
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join(json.dumps({"query_id": t, "item_id": f"{t}/{hashlib.md5(x.encode()).hexdigest()}",
                                        "kind": "nugget", "text": x, "importance": imp}) + "\n"
                            for t, ns in BANK.items() for x, imp in ns))
    assign = tmp_path / "assign.jsonl"
    assign.write_text("".join(json.dumps({"qid": "t1", "run_id": run, "nuggets": [
        {"text": x, "importance": dict(BANK["t1"])[x], "assignment": a} for x, a in labels.items()]}) + "\n"
        for run, labels in T1.items()))
    return runs, bank, assign


def nugget_all(labels: dict[str, str]) -> float:
    return sum(CREDIT[a] for a in labels.values()) / len(labels)


def tot(stdout: str) -> dict[tuple[str, str, str], float]:
    return {(r, m, t): float(v) for r, m, t, v in (line.split("\t") for line in stdout.splitlines())}


@pytest.mark.parametrize("complete", [False, True], ids=["mean-over-run-topics", "-c"])
def test_uncovered_topics_are_left_out_and_named(track, run_cli, complete):
    runs, bank, assign = track
    res = run_cli("exam-nuggets", "score", "--reports", runs, "--bank", bank, "-m", "nugget_all",
                  *(["-c"] if complete else []), assign)
    assert res.returncode == 0, res.stderr
    rows = tot(res.stdout)
    expected = {(run, "nugget_all", t): nugget_all(T1[run]) for run in T1 for t in ("t1", "all")}
    assert rows == pytest.approx(expected)  # t2, t3: no row, and not in the mean
    (line,) = res.stderr.splitlines()
    assert line == (f"exam-nuggets: {assign}: no grade on 2 of the 3 topics of the reports: "
                    "t2, t3 left out (not scored 0)"), line
    assert "unparsed" not in res.stderr and "no parsed grade" not in res.stderr


def test_assignments_file_written_for_the_covered_topics_only(track, run_cli, tmp_path):
    runs, bank, assign = track
    out = tmp_path / "again.jsonl"
    res = run_cli("exam-nuggets", "score", "--reports", runs, "--bank", bank, "--assignments", out, assign)
    assert res.returncode == 0, res.stderr
    written = [json.loads(x) for x in out.read_text().splitlines()]
    assert {(w["run_id"], w["qid"]) for w in written} == {("good", "t1"), ("poor", "t1")}


def only_topics(runs, folder, topics):
    """A copy of the reports folder with the reports of ``topics`` only."""
    folder.mkdir()
    for f in runs.iterdir():
        keep = [x for x in f.read_text().splitlines() if json.loads(x)["metadata"]["topic_id"] in topics]
        (folder / f.name).write_text("".join(x + "\n" for x in keep))
    return folder


def grade_t1(runs, bank, tmp_path, run_cli):
    """Grades of t1's reports only, as a grading run over part of a track writes them."""
    topics = tmp_path / "topics.tsv"
    topics.write_text("".join(f"{t}\ttopic {t}\n" for t in BANK))
    grades = tmp_path / "grades.jsonl"
    res = run_cli("exam-grade", "--reports", only_topics(runs, tmp_path / "runs-t1", {"t1"}), "--bank", bank,
                  "--topics", topics, "--backend", "scripted", "--prompt", "nugget-selfrating", "--no-cache",
                  "-o", grades)
    assert res.returncode == 0, res.stderr
    return grades


def test_a_grades_file_of_some_topics_is_scored_on_them(track, run_cli, tmp_path):
    runs, bank, _ = track
    grades = grade_t1(runs, bank, tmp_path, run_cli)
    res = run_cli("exam-nuggets", "score", "--reports", runs, "--bank", bank, grades)
    assert res.returncode == 0, res.stderr
    assert {topic for (_, _, topic) in tot(res.stdout)} == {"t1", "all"}
    assert res.stderr.splitlines()[-1] == (f"exam-nuggets: {grades}: no grade on 2 of the 3 topics of the "
                                           "reports: t2, t3 left out (not scored 0)"), res.stderr


def test_grades_of_none_of_the_reports_topics_are_refused(track, run_cli, tmp_path):
    """Nothing to score (grades of another part of the track): one line, exit 2, no output."""
    runs, bank, _ = track
    grades = grade_t1(runs, bank, tmp_path, run_cli)
    others = only_topics(runs, tmp_path / "runs-t2-t3", {"t2", "t3"})
    out = tmp_path / "scores.tot"
    res = run_cli("exam-nuggets", "score", "--reports", others, "--bank", bank, grades, "-o", out)
    assert one_line_refusal(res) == (f"exam-nuggets: {grades}: no grade on any of the 2 topics of the reports "
                                     "(t2, t3): grades of other topics?")
    assert not out.exists()
