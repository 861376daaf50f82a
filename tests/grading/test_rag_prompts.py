"""The RAG-track prompts (nugget assignment, citation support): golden renderings typed by
hand, checked against the published sources quoted in tests/golden/prompts/sources/, and
their output parsing (a grade only from a stated label)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from exam_eval.grading.prompts import get_prompt

GOLDEN = Path(__file__).parents[1] / "golden" / "prompts"
SOURCES = GOLDEN / "sources"

QUERY = "how do vaccines train the immune system"
NUGGET = "weakened or inactivated pathogens"
CONTEXT = "Vaccines contain weakened or inactivated forms of a pathogen, which train the immune system."


def golden(prompt_id: str) -> str:
    text = (GOLDEN / f"{prompt_id}.txt").read_text(encoding="utf-8")
    assert text.endswith("\n") and not text.endswith("\n\n")
    return text[:-1]


def source(name: str) -> list[str]:
    """The quoted file without our leading '#' comment block."""
    lines = (SOURCES / name).read_text(encoding="utf-8").split("\n")
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return lines


@pytest.mark.parametrize("prompt_id", ["nuggetizer-assign", "citation-support"])
def test_golden_rendering(prompt_id):
    assert get_prompt(prompt_id).render(query=QUERY, item=NUGGET, context=CONTEXT) == golden(prompt_id)


def test_nuggetizer_prompt_is_the_published_yaml():
    lines = source("nuggetizer-assigner_template.yaml")
    system = re.fullmatch(r'system_message: "(.*)"', lines[1]).group(1)
    start = lines.index("prefix_user: |-") + 1
    # YAML block scalar with "strip" chomping: the indented lines, indentation removed
    user = "\n".join(line[2:] for line in lines[start:] if line.startswith("  ") or line == "").rstrip("\n")
    # the nuggetizer fills in num_nuggets and the Python list of nugget texts
    user = (user.replace("{num_nuggets}", "1").replace("{query}", QUERY).replace("{context}", CONTEXT)
            .replace("{nuggets}", str([NUGGET])))
    p = get_prompt("nuggetizer-assign")
    assert p.messages(query=QUERY, item=NUGGET, context=CONTEXT) == [
        {"role": "system", "content": system}, {"role": "user", "content": user}]
    assert p.render(query=QUERY, item=NUGGET, context=CONTEXT) == system + "\n" + user


def test_nuggetizer_prompt_writes_the_nugget_as_python_does():
    p = get_prompt("nuggetizer-assign")
    for nugget in ["it's a vaccine", 'say "hi"', "back\\slash", "{query} {context}"]:
        out = p.render(query="q", item=nugget, context="c")
        assert f"Nugget List: {[nugget]!s}\n" in out


def _paragraphs(text: str) -> list[str]:
    return [re.sub(r"\s+", " ", para).strip() for para in re.split(r"\n\s*\n", text) if para.strip()]


def test_support_prompt_is_the_published_text():
    published = "\n".join(source("trec-rag24-support-prompt.txt"))
    published = published.replace("``", '"').replace("''", '"')  # LaTeX quotes of the paper's source
    published = published.replace("{statement}", NUGGET).replace("{citation}", CONTEXT)
    ours = get_prompt("citation-support").render(query=QUERY, item=NUGGET, context=CONTEXT)
    # same paragraphs, same words; each of our paragraphs is one line (the figure's
    # wrapping is not part of the prompt)
    assert _paragraphs(ours) == _paragraphs(published)
    assert all("\n" not in para for para in ours.split("\n\n"))


def test_source_check_can_fail():
    published = _paragraphs("\n".join(source("trec-rag24-support-prompt.txt")))
    ours = _paragraphs(get_prompt("citation-support").template.replace("{item}", "{statement}")
                       .replace("{context}", "{citation}").replace("a statement following", "the statement following"))
    assert ours != [p.replace("``", '"').replace("''", '"') for p in published]


@pytest.mark.parametrize("text,grade", [
    ("['support']", 2), ("['partial_support']", 1), ("['not_support']", 0),
    ('["support"]', 2), ("```python\n['partial_support']\n```", 1), ("support", 2),
    ("Labels: ['not_support']", 0), ("[' Support ']", 2),
])
def test_nuggetizer_labels_parse(text, grade):
    parsed = get_prompt("nuggetizer-assign").parse(text)
    assert parsed.parse_ok and parsed.grade == grade


@pytest.mark.parametrize("text,note", [
    ("", "empty output"), ("['support', 'not_support']", "expected 1 label, got 2"),
    ("['maybe']", "unknown label 'maybe'"), ("The nugget is captured.", "no label list found"),
    ("[1]", "label list is not a list of strings"), ("[]", "expected 1 label, got 0"),
])
def test_nuggetizer_unparseable_is_recorded_not_graded(text, note):
    parsed = get_prompt("nuggetizer-assign").parse(text)
    assert not parsed.parse_ok and parsed.grade is None and parsed.note == note


@pytest.mark.parametrize("text,grade", [
    ("full_support", 2), ("partial_support", 1), ("no_support", 0), ("Full Support", 2),
    ('"partial_support"', 1), ("No Support.", 0), ("The answer is full_support.", 2),
])
def test_support_labels_parse(text, grade):
    parsed = get_prompt("citation-support").parse(text)
    assert parsed.parse_ok and parsed.grade == grade


@pytest.mark.parametrize("text", ["", "supported", "full_support or partial_support", "yes"])
def test_support_unparseable(text):
    parsed = get_prompt("citation-support").parse(text)
    assert not parsed.parse_ok and parsed.grade is None


def test_scripted_backend_grades_through_the_parsers():
    from exam_eval.grading.types import GradeRequest
    from exam_eval.backends.scripted import ScriptedBackend

    p = get_prompt("nuggetizer-assign")
    be = ScriptedBackend(script=lambda req, rendered: "['partial_support']" if "capital" in req.item_text else "x")
    res = be.grade([GradeRequest(p, "q", "the capital", "ctx"), GradeRequest(p, "q", "other", "ctx")])
    assert (res[0].grade, res[0].parse_ok) == (1, True)
    assert (res[1].grade, res[1].parse_ok) == (None, False)
    assert "Nugget List: ['the capital']" in be.seen[0]
