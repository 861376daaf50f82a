"""Parsing model answers into item lists, and the generation prompts against the papers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from exam_eval.genq.parse import parse_items
from exam_eval.genq.prompts import PROMPTS, get_prompt

PAPERS = Path(__file__).resolve().parents[3] / "shared" / "papers"

Q = ["What is A?", "How does B work?", "Why C?"]


@pytest.mark.parametrize("answer", [
    '{"questions": ["What is A?", "How does B work?", "Why C?"]}',
    'Sure! Here they are:\n```json\n{ "questions" : ["What is A?", "How does B work?", "Why C?"]}\n```\nHope it helps.',
    '```\n{"questions": ["What is A?", "How does B work?", "Why C?"]}\n```',
    'Here: {"questions": ["What is A?", "How does B work?", "Why C?"]} -- done',
    '["What is A?", "How does B work?", "Why C?"]',
    "['What is A?', 'How does B work?', \"Why C?\"]",
    "```python\nquestion_set = [\n    'What is A?',\n    'How does B work?',\n    'Why C?',\n]\n```",
    "1. What is A?\n2. How does B work?\n3. Why C?",
    "Questions:\n1) What is A?\n2) How does B work?\n\n3) Why C?\nThat is all.",
    "- What is A?\n* How does B work?\n\u2022 Why C?",
    "Q1: What is A?\nQ2: How does B work?\nQ3: Why C?",
    '{"questions": ["1. What is A?", "2. How does B work?", "3. Why C?"]}',
    '{"questions": ["What is A?", "what is  a?", "How does B work?", "Why C?", "What is A?"]}',
    '{"questions": [{"question": "What is A?"}, {"question": "How does B work?"}, {"text": "Why C?"}]}',
    '{"question_set": ["What is A?", "How does B work?", "Why C?"]}',
    '{"Questions": ["What is A?", "How does B work?", "Why C?"]}',
    '1. "What is A?",\n2. "How does B work?",\n3. "Why C?"',
])
def test_accepted_shapes(answer):
    assert parse_items(answer, "questions") == Q


@pytest.mark.parametrize("answer", [
    None, "", "   ", "I am sorry, I cannot help with that.",
    "What is A? How does B work?",  # prose, not a list: never turned into questions
    '{"questions": []}', '{"questions": "What is A?"}', "[1, 2, 3]",
    '{"a": ["x"], "b": ["y"]}',  # two candidate lists and none named: ambiguous
])
def test_rejected_shapes(answer):
    assert parse_items(answer, "questions") is None


def test_python_literal_is_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    answer = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    assert parse_items(answer, "questions") is None
    assert parse_items(f"x = [{answer}]", "questions") is None
    assert not marker.exists()


def test_nugget_field_and_order_kept():
    got = parse_items('```json\n{"nuggets": ["Early 1950s", "Chuck Berry", "Early 1950s "]}\n```', "nuggets")
    assert got == ["Early 1950s", "Chuck Berry"]


# -- prompts versus the published text ------------------------------------------------

def _paper(name: str) -> str:
    path = PAPERS / name
    if not path.is_file():
        pytest.skip("../shared/papers is not present")
    return " ".join(path.read_text(encoding="utf-8").split())


def test_workbench_prompts_are_the_papers_table_1():
    paper = _paper("rubric-grading-workbench.txt")
    for style, kind in [("dl", "question"), ("dl", "nugget"), ("car", "question"), ("car", "nugget")]:
        p = get_prompt("workbench", style, kind)
        assert p.template.replace("{n}", "10") + " {instruction}" in paper, (style, kind)
    # the nugget instruction as extracted from the PDF: fence flattened, ellipsis dropped
    nug = get_prompt("workbench", "dl", "nugget").instruction
    assert nug.replace("\n", " ").replace(", ...]", ",]") in paper
    # the question instruction is the same sentence for questions (its cell is empty in the PDF text)
    que = get_prompt("workbench", "dl", "question").instruction
    assert que == nug.replace("nugget", "question")


def test_exam_prompts_are_the_papers_table_1():
    paper = _paper("exam-flan-t5-answerability-metric.txt").replace("\u2019", "'")
    for style in ("dl", "car"):
        p = get_prompt("exam", style, "question")
        assert p.template.replace("{n}", "10") in paper
        assert not p.instruction


def test_rendering_substitutes_literally():
    p = get_prompt("workbench", "dl", "question")
    text = p.render(query_text="what is {query_title} {n}?", n=10)
    assert text.count("'what is {query_title} {n}?'") == 2
    assert "Generate 10 concise" in text
    assert text.endswith("```")
    car = get_prompt("workbench", "car", "nugget").render(query_title="The Skin", query_subtopic="Dermis")
    assert car.startswith("Explore the connection between 'The Skin' with a specific focus on the subtopic 'Dermis'.")
    assert "advanced aspects of 'Dermis'" in car


def test_every_prompt_names_its_field():
    for (family, style, kind), p in PROMPTS.items():
        assert p.field == kind + "s"
        assert re.search(r"\{query_(text|title)\}", p.template)
