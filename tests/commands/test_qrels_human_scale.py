"""exam-qrels --human: a human label off the scale of the labels it goes over (a 9 where
LABELS run 0-3, a typo in a hand-edited qrels) is said on stderr, one line per file naming
its first such line and how many there are; the labels are still merged as given (a
notice, not a refusal: a human label is the person's word)."""

from __future__ import annotations

import gzip
import json

LLM = "q1 0 d1 0\nq1 0 d2 3\nq2 0 d1 1\nq2 0 d2 2\n"       # the scale 0-3, as TREC DL's


def _merged(stdout: str) -> dict[tuple[str, str], int]:
    return {(q, d): int(v) for q, _, d, v in (ln.split() for ln in stdout.splitlines())}


def test_a_label_off_the_scale_is_said_with_its_file_line_and_count(tmp_path, run_cli):
    llm = tmp_path / "llm.qrels"
    llm.write_text(LLM)
    human = tmp_path / "ann.qrels"
    human.write_text("q1 0 d1 2\nq1 0 d2 9\nq2 0 d1 1\nq2 0 d9 7\n")
    res = run_cli("exam-qrels", llm, "--human", human)
    assert res.returncode == 0, res.stderr
    assert _merged(res.stdout) == {("q1", "d1"): 2, ("q1", "d2"): 9, ("q2", "d1"): 1, ("q2", "d2"): 2,
                                   ("q2", "d9"): 7}   # merged as given
    said = [ln for ln in res.stderr.splitlines() if " is off the " in ln]
    assert len(said) == 1, res.stderr
    assert f"{human}:2: " in said[0] and "label 9" in said[0] and "0-3" in said[0] and str(llm) in said[0]
    assert "2 human labels" in said[0], said[0]


def test_the_scale_is_that_of_the_labels_as_exam_qrels_makes_them(tmp_path, run_cli):
    """Grades with --label binary are labels 0-1: a human 3 is off them; the default label
    (the maximum grade, 0-5 here) takes it without a word."""
    grades = tmp_path / "grades.jsonl.gz"
    rows = [{"query_id": "q1", "doc_id": d, "item_id": f"q1/{i}", "grade": g, "probs": None, "answer": str(g),
             "parse_ok": True, "model": "m", "prompt": "question-selfrating", "prompt_hash": "h"}
            for d, i, g in (("d1", "a", 5), ("d1", "b", 1), ("d2", "a", 0), ("d2", "b", 2))]
    grades.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    human = tmp_path / "ann.qrels"
    human.write_text("q1 0 d1 3\n")
    res = run_cli("exam-qrels", grades, "--human", human)
    assert res.returncode == 0, res.stderr
    assert " is off the " not in res.stderr, res.stderr
    res = run_cli("exam-qrels", "--label", "binary", "--min-grade", "4", grades, "--human", human)
    assert res.returncode == 0, res.stderr
    said = [ln for ln in res.stderr.splitlines() if " is off the " in ln]
    assert len(said) == 1 and f"{human}:1: " in said[0] and "0-1" in said[0] and "1 human label" in said[0], \
        res.stderr


def test_labels_on_the_scale_say_nothing_of_it_and_stdin_is_named(tmp_path, run_cli):
    llm = tmp_path / "llm.qrels"
    llm.write_text(LLM)
    res = run_cli("exam-qrels", llm, "--human", "-", input="q1 0 d1 3\nq2 0 d3 0\n")
    assert res.returncode == 0, res.stderr
    assert " is off the " not in res.stderr and _merged(res.stdout)[("q1", "d1")] == 3
    res = run_cli("exam-qrels", llm, "--human", "-", input="q1 0 d1 3\nq2 0 d3 -4\n")
    assert res.returncode == 0, res.stderr
    said = [ln for ln in res.stderr.splitlines() if " is off the " in ln]
    assert len(said) == 1 and "<stdin>:2: " in said[0] and "label -4" in said[0], res.stderr
