"""Output parsing for every registered prompt: what becomes a grade and what stays
unparseable. Expected values are written out per case, from the prompts' scales."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from exam_eval.grading.parsing import PARSERS, UNANSWERABLE, is_ill_formed, tolerant_rating
from exam_eval.grading.prompts import REGISTRY, get_prompt
from exam_eval.grading.types import Parsed

PAPERS = Path(__file__).resolve().parents[3] / "shared" / "papers"

RATING = ["question-selfrating", "nugget-selfrating", "thomas", "ci-dl", "ci-robust04"]
YES_NO = ["sun", "sun-few", "faggioli-b", "faggioli-b-few", "helm", "answer-verification"]
EXTRACTION = ["question-extraction", "nugget-extraction"]
UMBRELA = ["umbrela"]
RAG = ["nuggetizer-assign", "citation-support"]  # their parsing cases: tests/grading/test_rag_prompts.py
PAPER_UNANSWERABLE = ["unanswerable", "no", "no answer", "not enough information", "unknown",
                      "it is not possible to tell", "it does not say", "no relevant information"]


def test_every_prompt_has_parsing_cases():
    published = {k for k in REGISTRY if not k.startswith("file:")}
    assert published == set(RATING + YES_NO + EXTRACTION + UMBRELA + RAG)


def ok(grade):
    return lambda p: p.parse_ok and p.grade == grade


def bad(p: Parsed):
    return not p.parse_ok and p.grade is None


# -- rating prompts -----------------------------------------------------------------------

@pytest.mark.parametrize("prompt_id", RATING)
def test_rating_every_grade_in_many_spellings(prompt_id):
    prompt = get_prompt(prompt_id)
    lo, hi = prompt.scale
    for g in range(lo, hi + 1):
        for text in [f"{g}", f" {g}.", f"{g}\n", f"{g}/{hi}", f"Grade: {g}", f"grade: {g}", f"Rating: {g} out of {hi}",
                     f"**{g}**", f"The answer is {g}", f"[{g}]", f"Score = {g}", f"Relevance: {g}",
                     f"I would rate it {g}/{hi}.", f"{g}: some explanation that mentions {hi} things"]:
            parsed = prompt.parse(text)
            assert parsed.parse_ok and parsed.grade == g, (prompt_id, text, parsed)
            assert parsed.answer is None


@pytest.mark.parametrize("prompt_id", RATING)
def test_rating_out_of_scale_and_garbage(prompt_id):
    prompt = get_prompt(prompt_id)
    lo, hi = prompt.scale
    for text in [f"{hi + 1}", f"{lo - 1}", "10/10", f"Grade: {hi + 4}", "2.5", "3,5", "", "   ", "\n",
                 "garbage", "The passage talks about vaccines.", "Question 2 is hard",
                 "!!!", "In 1998 the policy changed", "maybe"]:
        parsed = prompt.parse(text)
        assert bad(parsed), (prompt_id, text, parsed)
        assert parsed.note


def test_rating_notes_say_why():
    p = get_prompt("question-selfrating")
    assert p.parse("").note == "empty output"
    assert p.parse("7").note == "rating 7 outside the scale 0-5"
    assert p.parse("4.5").note.startswith("non-integer")
    assert p.parse("the sky").note == "no rating found"


def test_rating_picks_the_rating_not_the_denominator():
    p = get_prompt("question-selfrating")
    assert p.parse("4/5").grade == 4
    assert p.parse("Rating: 2 out of 5").grade == 2
    assert p.parse("Out of 5, I give it 3/5").grade == 3  # "of 5" is not "N of 5"
    assert p.parse("0/5").grade == 0


def test_number_words_only_when_they_are_the_whole_answer():
    p = get_prompt("question-selfrating")
    assert p.parse("four").grade == 4
    assert p.parse("Five.").grade == 5
    assert bad(p.parse("one of the answers mentions vaccines"))
    assert bad(p.parse("six"))


@pytest.mark.parametrize("prompt_id", ["question-selfrating", "nugget-selfrating"])
@pytest.mark.parametrize("expression", PAPER_UNANSWERABLE)
def test_unanswerable_expressions_are_zero_for_bank_items(prompt_id, expression):
    prompt = get_prompt(prompt_id)
    for text in [expression, expression.capitalize() + ".", f'"{expression}"', f"  {expression.upper()} \n"]:
        parsed = prompt.parse(text)
        assert parsed == Parsed(0, True, None, "unanswerable"), (text, parsed)


@pytest.mark.parametrize("prompt_id", ["thomas", "ci-dl", "ci-robust04"])
@pytest.mark.parametrize("expression", ["unanswerable", "no answer", "unknown"])
def test_unanswerable_expressions_do_not_grade_direct_prompts(prompt_id, expression):
    # The papers list them for question answering and self-rating, not for direct labels.
    assert bad(get_prompt(prompt_id).parse(expression))


def test_unanswerable_expression_only_as_the_whole_answer():
    p = get_prompt("question-selfrating")
    assert bad(p.parse("no, but the passage is about something else"))
    assert bad(p.parse("There is no answer here but maybe later"))


def test_unanswerable_list_is_quoted_from_the_papers():
    if not PAPERS.is_dir():
        pytest.skip("../shared/papers is not present")
    plus = (PAPERS / "exam-plusplus.txt").read_text(encoding="utf-8")
    exam = (PAPERS / "exam-flan-t5-answerability-metric.txt").read_text(encoding="utf-8")
    quoted_plus = set(re.findall(r'"([^"]+)"', plus[plus.index("one of the following expressions"):][:400]))
    assert quoted_plus == set(PAPER_UNANSWERABLE)
    quoted_exam = set(re.findall(r"\u201c([^\u201d]+?)\s*\u201d", exam))
    assert "no answe" in quoted_exam  # the EXAM paper's footnote prints this typo
    assert UNANSWERABLE == set(PAPER_UNANSWERABLE) | {"no answe"}


def test_thomas_reads_the_json_overall_label():
    p = get_prompt("thomas")
    assert ok(1)(p.parse('{"M": 2, "T": 1, "O": 1}'))
    assert ok(2)(p.parse('Here is my assessment: {"M": 2, "T": 2, "O": 2}'))
    assert bad(p.parse('{"M": 2, "T": 1, "O": 3}'))
    assert bad(p.parse('{"M": 2, "T": 1, "O": null}'))
    assert bad(p.parse('{"M": 2, "T": 1, "O": true}'))
    assert ok(0)(p.parse('{"O": "0"}'))


def test_tolerant_rating_applies_the_exam_pp_default_only_on_request():
    p = get_prompt("question-selfrating")
    strict = p.parse("the passage is about vaccines")
    assert bad(strict)
    tolerant = tolerant_rating(strict)
    assert tolerant.grade == 1 and tolerant.parse_ok
    assert tolerant_rating(p.parse("unknown")).grade == 0
    assert tolerant_rating(p.parse("4")).grade == 4
    assert bad(tolerant_rating(p.parse("")))  # nothing was answered at all
    assert bad(tolerant_rating(p.parse("9")))  # a number off the scale is not "no number"


# -- yes/no prompts ---------------------------------------------------------------------

@pytest.mark.parametrize("prompt_id", YES_NO)
def test_yes_no(prompt_id):
    p = get_prompt(prompt_id)
    for text in ["Yes", "yes", "YES.", " Yes\n", "**Yes**", "Yes, the passage answers it.", "Answer: Yes",
                 "'yes'", "The answer is yes."]:
        assert ok(1)(p.parse(text)), (text, p.parse(text))
    for text in ["No", "no", "NO.", "No, it does not.", "Answer: No", "\"No\""]:
        assert ok(0)(p.parse(text)), (text, p.parse(text))
    for text in ["", " ", "maybe", "Not sure", "yesterday", "nobody knows", "1", "4/5", "Grade: 4",
                 "unanswerable", "garbage", "Yes/No", "'Yes' or 'No'", "no or yes"]:
        assert bad(p.parse(text)), (text, p.parse(text))


# -- UMBRELA ------------------------------------------------------------------------------

def test_umbrela():
    p = get_prompt("umbrela")
    for g in range(4):
        for text in [f"##final score: {g}", f"## Final Score: {g}", f"M: 2 T: 1 ##final score: {g}",
                     f"final score: {g}", f"{g}", f"##final score: **{g}**"]:
            assert ok(g)(p.parse(text)), (text, p.parse(text))
    for text in ["##final score: 4", "##final score: -1", "##final score: 2.5", "", "garbage",
                 "##final score: score", "The passage is relevant", "4/5", "Grade: 4"]:
        assert bad(p.parse(text)), (text, p.parse(text))


# -- extraction prompts -----------------------------------------------------------------------

@pytest.mark.parametrize("prompt_id", EXTRACTION)
def test_extraction(prompt_id):
    p = get_prompt(prompt_id)
    parsed = p.parse("  the epidermis \n")
    assert parsed.parse_ok and parsed.grade is None and parsed.answer == "the epidermis"
    assert parsed.note == ("pending verification" if p.needs_verification else "extracted")
    for expression in PAPER_UNANSWERABLE:
        parsed = p.parse(expression.capitalize() + ".")
        assert parsed.grade == 0 and parsed.parse_ok and parsed.note == "unanswerable"
        assert parsed.answer == expression.capitalize() + "."
    for ill in ["a.", "(iii)", "b)", "(c)", "iv."]:
        parsed = p.parse(ill)
        assert parsed.grade == 0 and parsed.parse_ok and parsed.note == "ill-formed answer"
    for text in ["", "   ", "\n", "**"]:
        assert bad(p.parse(text))
    # Numbers and grade-like text are answers here, never grades.
    for text in ["4", "4/5", "Grade: 4", "1998", "Yes"]:
        parsed = p.parse(text)
        assert parsed.grade is None and parsed.parse_ok and parsed.answer == text


def test_ill_formed_leaves_real_short_answers_alone():
    assert is_ill_formed("a.") and is_ill_formed("(iii)")
    assert not is_ill_formed("C") and not is_ill_formed("vitamin C") and not is_ill_formed("iron")


def test_parser_registry_names_are_used_by_prompts():
    used = {p.parser for p in REGISTRY.values()}
    assert used <= set(PARSERS)


# -- against the reference workbench's own FLAN-T5 outputs ------------------------------------

@pytest.mark.shared
def test_selfrating_parse_agrees_with_the_reference_workbench(shared_data):
    """92,600 raw flan-t5-large answers to the question self-rating prompt (DL19) and the
    self_rating the reference workbench derived from each. Every answer we parse must get
    the reference's grade, except an answer that is "N: <the printed description of N>"
    which the reference does not read; every answer we refuse must be one the reference
    filled in with its default (0 or 1) rather than read."""
    import gzip
    import json

    from exam_eval.grading.parsing import choice_descriptions

    prompt = get_prompt("question-selfrating")
    descriptions = choice_descriptions(prompt)
    parsed_same = refused = described = 0
    with gzip.open(shared_data / "dl19" / "graded-flan-t5-large.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            _qid, paragraphs = json.loads(line)
            for para in paragraphs:
                for eg in para.get("exam_grades") or []:
                    assert eg["prompt_info"]["prompt_class"] == "QuestionSelfRatedUnanswerablePromptWithChoices"
                    ratings = {r["question_id"]: r["self_rating"] for r in eg["self_ratings"]}
                    for item_id, raw in eg["answers"]:
                        ref = ratings[item_id]
                        mine = prompt.parse(raw)
                        if mine.parse_ok and mine.grade == ref:
                            parsed_same += 1
                        elif mine.parse_ok:
                            assert raw.strip() == f"{mine.grade}: {descriptions[mine.grade]}", (raw, ref)
                            described += 1
                        else:
                            assert ref in (0, 1), (raw, ref)
                            assert not re.fullmatch(r"\s*[0-5]\s*", raw), raw
                            refused += 1
    total = parsed_same + refused + described
    assert total == 92600
    # the counts exam_eval.grading.parsing's docstring states
    assert (parsed_same, refused, described) == (92131, 468, 1)


def test_a_number_that_is_part_of_an_answer_is_not_a_rating():
    # Real flan-t5-large outputs to the self-rating prompt (DL19 reference file): the model
    # answered the question instead of rating it.
    p = get_prompt("question-selfrating")
    for text in ["4-6 weeks", "5 Day", "2 or 3 months", "1-19-1807", "3-5", "2 1 2 months",
                 "1 and one-half years", "4 to six hours", "The answer is 4 to six hours", "7/10", "3 of 10"]:
        assert bad(p.parse(text)), (text, p.parse(text))
    for text, grade in [("4 - mostly relevant", 4), ("4, because it says so", 4), ("3\n\nThe passage explains", 3),
                        ("5. The passage is complete", 5), ("[2]", 2), ("(3)", 3)]:
        assert ok(grade)(p.parse(text)), (text, p.parse(text))


def test_rating_with_another_grades_description_is_ambiguous():
    p = get_prompt("question-selfrating")
    # The number says 3, the words are those of grade 2 (a real flan-t5-large output).
    blend = "3: The answer has limited relevance and completeness, with noticeable gaps or inaccuracies."
    assert bad(p.parse(blend)) and p.parse(blend).note == "rating 3 given with the description of grade 2"
    assert bad(p.parse("1: The answer is not relevant or complete at all."))
    assert ok(2)(p.parse("2: The answer has limited relevance and completeness, with significant gaps or inaccuracies."))
    assert ok(4)(p.parse("4: the passage names the vaccine's ingredients"))
    ci = get_prompt("ci-dl")
    assert ok(2)(ci.parse("[2] Highly relevant: The passage has some answer for the query"))
    assert bad(ci.parse("[3] Irrelevant: The passage has nothing to do with the query."))
    th = get_prompt("thomas")
    assert bad(th.parse("2 = not relevant, should never be shown for this query"))


# -- an echoed scale line ("- N: description", issue 40 item 6) -------------------------------

def _scale_lines(prompt):
    """The template's own scale lines, as printed: {grade: "- N: description"}."""
    lines = {}
    for line in prompt.template.splitlines():
        m = re.match(r"^- ([0-9]+): \S", line)
        if m:
            lines[int(m.group(1))] = line
    return lines


@pytest.mark.parametrize("prompt_id", ["question-selfrating", "nugget-selfrating"])
def test_an_echoed_scale_line_is_its_rating(prompt_id):
    # SmolLM2-135M-Instruct answers the self-rating prompts by repeating one scale line,
    # e.g. "- 5: The answer is highly relevant, complete, and accurate."
    p = get_prompt(prompt_id)
    lines = _scale_lines(p)
    lo, hi = p.scale
    assert set(lines) == set(range(lo, hi + 1))
    for g, line in lines.items():
        for text in [line, f"  {line}\n", line.replace(f"- {g}:", f"- **{g}**:"), line.replace("- ", "-   ", 1),
                     f"{line}\n\nThe context names the vaccine's ingredients.", f"{line}\n{line}"]:
            assert ok(g)(p.parse(text)), (text, p.parse(text))
    # the same under the opt-in rules that start from the strict reading
    assert PARSERS["rating-exam-pp"](p, lines[hi]).grade == hi


@pytest.mark.parametrize("prompt_id", ["question-selfrating", "nugget-selfrating"])
def test_an_echoed_scale_line_with_another_grades_description_is_refused(prompt_id):
    p = get_prompt(prompt_id)
    lines = _scale_lines(p)
    for g, line in lines.items():
        for other, other_line in lines.items():
            if other == g:
                continue
            blend = f"- {g}:" + other_line.split(":", 1)[1]
            parsed = p.parse(blend)
            assert bad(parsed) and parsed.note == f"rating {g} given with the description of grade {other}", blend


@pytest.mark.parametrize("prompt_id", ["question-selfrating", "nugget-selfrating"])
def test_an_answer_copying_the_scale_is_refused(prompt_id):
    p = get_prompt(prompt_id)
    lines = _scale_lines(p)
    whole = "\n".join(lines[g] for g in sorted(lines, reverse=True))
    parsed = p.parse(whole)
    assert bad(parsed) and parsed.note == "several scale lines: 5, 4, 3, 2, 1, 0"
    assert bad(p.parse(f"{lines[5]}\n{lines[3]}"))
    assert p.parse(f"{lines[5]}\n{lines[3]}").note == "several scale lines: 5, 3"
    # a second line "N:" without the bullet is a scale line too
    assert bad(p.parse(f"{lines[4]}\n2: but maybe less"))
    # the exam-pp rule does not turn a refused copy into its default of 1
    assert bad(PARSERS["rating-exam-pp"](p, whole))


def test_what_only_looks_like_an_echoed_scale_line_stays_refused():
    p = get_prompt("question-selfrating")
    for text, note in [("-3", "rating -3 outside the scale 0-5"),
                       ("-3: The answer is partially relevant and complete", "rating -3 outside the scale 0-5"),
                       ("- 4-6 weeks", "no rating found"),
                       ("- 3", "no rating found"),         # no ":" and text: not the scale's line
                       ("- 3:", "no rating found"),
                       ("- 7: The answer is excellent.", "rating 7 outside the scale 0-5"),
                       ("- 2.5: The answer is partly there.", "non-integer rating '2.5'"),
                       ("- vaccines: 3 doses", "no rating found")]:
        parsed = p.parse(text)
        assert bad(parsed) and parsed.note == note, (text, parsed)
    # the workbench rule, which reads only lone digits, is unchanged
    line = _scale_lines(p)[5]
    assert PARSERS["rating-workbench"](p, line).grade == 0
