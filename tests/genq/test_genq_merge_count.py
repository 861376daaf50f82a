"""exam-genq generate --merge-with says what it kept truly: the bank is copied whole, so
every query it holds is kept, whether or not TOPICS names it (man exam-genq's own example
merges new-topics.tsv into a bank of other queries, and was told "0 queries kept"); how
many of TOPICS' queries were not asked, being in the bank already, is said apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ENV = {"EXAM_EVAL_PROGRESS": "0"}
BANK = "".join(json.dumps({"query_id": q, "kind": k, "text": t}) + "\n" for q, k, t in (
    ("q1", "question", "What is one?"), ("q1", "question", "Why one?"), ("q2", "question", "What is two?"),
    ("q3", "nugget", "three is a number")))


def _generate(tmp_path: Path, run_cli, topics: str, *args: str):
    bank = tmp_path / "bank.jsonl"
    bank.write_text(BANK)
    (tmp_path / "t.tsv").write_text(topics)
    script = tmp_path / "s.jsonl"
    script.write_text("".join(json.dumps({"query_id": q, "response": f'["Is {q} new?"]'}) + "\n"
                              for q in ("q1", "q2", "q3", "q4", "q5")))
    res = run_cli("exam-genq", "--backend", "scripted", "--script", script, "--merge-with", bank,
                  "-o", tmp_path / "out.jsonl", *args, tmp_path / "t.tsv", env=ENV)
    assert res.returncode == 0, res.stderr
    (said,) = [ln for ln in res.stderr.splitlines() if "kept" in ln]
    return said, bank


def test_new_topics_merged_into_a_bank_of_other_queries(tmp_path, run_cli):
    said, bank = _generate(tmp_path, run_cli, "q4\tfour\nq5\tfive\n")
    assert "2 questions for 2 of 2 queries" in said
    assert f"{bank} kept whole (3 queries), 0 queries of TOPICS already in it" in said, said


@pytest.mark.parametrize("kind,covered", [("question", 2), ("nugget", 1)])
def test_topics_the_bank_has_are_counted_apart(tmp_path, run_cli, kind, covered):
    """q1 and q2 have questions, q3 a nugget: which TOPICS queries need no call depends on
    the kind asked for; the bank's three queries are kept either way."""
    said, bank = _generate(tmp_path, run_cli, "q1\tone\nq2\ttwo\nq3\tthree\nq4\tfour\n", "--kind", kind)
    assert f"for {4 - covered} of {4 - covered} queries" in said, said
    assert f"{bank} kept whole (3 queries), {covered} queries of TOPICS already in it" in said, said
