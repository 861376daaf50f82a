"""Separating a reasoning model's answer from its reasoning (exam_eval.grading.reasoning):
every marker family, unclosed and odd cases, and that the grade parsers then read the answer
only."""

from __future__ import annotations

import pytest

from exam_eval.grading.prompts import get_prompt
from exam_eval.grading.reasoning import FIELD_MARKER, Reasoned, join_reasoning, split_reasoning

# (marker as reported, opening, closing) for the tag families
BLOCKS = [
    ("<think>", "<think>", "</think>"),
    ("<thinking>", "<thinking>", "</thinking>"),
    ("<reasoning>", "<reasoning>", "</reasoning>"),
    ("\u25c1think\u25b7", "\u25c1think\u25b7", "\u25c1/think\u25b7"),
    ("[THINK]", "[THINK]", "[/THINK]"),
    ("<|begin_of_thought|>", "<|begin_of_thought|>", "<|end_of_thought|>"),
]


def test_reasoned_is_a_frozen_dataclass():
    r = split_reasoning("4")
    assert r == Reasoned(answer="4", reasoning=None, unfinished=False, marker=None)
    with pytest.raises(AttributeError):
        r.answer = "5"  # type: ignore[misc]


@pytest.mark.parametrize("marker,opening,closing", BLOCKS)
def test_each_block_marker(marker, opening, closing):
    text = f"{opening}\nThe passage mentions the dose. Maybe 2? No: it is complete.\n{closing}\n\n4\n"
    assert split_reasoning(text) == Reasoned(
        "4", "The passage mentions the dose. Maybe 2? No: it is complete.", False, marker)
    # leading whitespace before the marker, and the other case
    for variant in [f"  \n{text}", text.replace(opening, opening.swapcase()).replace(closing, closing.swapcase())]:
        assert split_reasoning(variant) == Reasoned(
            "4", "The passage mentions the dose. Maybe 2? No: it is complete.", False, marker), variant


@pytest.mark.parametrize("marker,opening,closing", BLOCKS)
def test_each_block_marker_unclosed_is_unfinished(marker, opening, closing):
    assert split_reasoning(f"{opening}\nLet me weigh the passage. It says") == Reasoned(
        None, "Let me weigh the passage. It says", True, marker)
    assert split_reasoning(opening) == Reasoned(None, "", True, marker)


def test_deepseek_r1_text_has_only_the_closing_marker():
    # DeepSeek-R1's (and QwQ's) chat template ends the prompt with "<think>\n"
    text = "Okay, the user wants a rating. The context covers it partly, so 3.\n</think>\n\n3"
    assert split_reasoning(text) == Reasoned(
        "3", "Okay, the user wants a rating. The context covers it partly, so 3.", False, "<think>")
    # the caller that knows the prompt opened the block: same result, and a text without
    # any marker is then reasoning that was cut off
    assert split_reasoning(text, opened=True) == split_reasoning(text)
    assert split_reasoning("Okay, the user wants a rating", opened=True) == Reasoned(
        None, "Okay, the user wants a rating", True, "<think>")
    assert split_reasoning("<think>a</think>5", opened=True) == Reasoned("5", "a", False, "<think>")
    # without opened=True a text without markers is an answer
    assert split_reasoning("Okay, the user wants a rating") == Reasoned(
        "Okay, the user wants a rating", None, False, None)


def test_several_blocks_are_joined_and_the_answer_is_what_lies_outside():
    text = "<think>first</think>\nRating:\n<think>second\nthought</think>  4 "
    assert split_reasoning(text) == Reasoned("Rating:\n4", "first\n\nsecond\nthought", False, "<think>")


def test_an_empty_block_is_empty_reasoning():
    # the form Qwen3's chat template uses for enable_thinking=False
    assert split_reasoning("<think>\n\n</think>\n\n5") == Reasoned("5", "", False, "<think>")


def test_a_finished_block_without_an_answer_is_an_empty_answer():
    assert split_reasoning("<think>I cannot decide</think>\n") == Reasoned("", "I cannot decide", False, "<think>")
    assert get_prompt("question-selfrating").parse("").note == "empty output"


def test_text_without_markers():
    for text in ["4", "I think it is 4", "Let me think: 4", "thinking... 3", "<thinkpad> 2", "think>", "  4 \n"]:
        assert split_reasoning(text) == Reasoned(text.strip(), None, False, None), text
    assert split_reasoning("") == Reasoned("", None, False, None)
    assert split_reasoning(None) == Reasoned(None, None, False, None)


def test_odd_cases():
    # a stray closing marker after a block ends reasoning that began at the previous one
    assert split_reasoning("<think>a</think> b </think> 4") == Reasoned("4", "a\n\nb", False, "<think>")
    # an opening marker inside reasoning is reasoning text: the first close ends the block
    assert split_reasoning("<think>a <think> b</think>c</think>d") == Reasoned(
        "d", "a <think> b\n\nc", False, "<think>")
    # an answer written before a last block that was cut off is still the answer
    assert split_reasoning("<think>a</think>4\n<think>on second thought") == Reasoned(
        "4", "a\n\non second thought", False, "<think>")
    # markers inside code fences are still markers; the fences stay in the answer
    assert split_reasoning("```\n<think>x</think>\n```\n4") == Reasoned("```\n```\n4", "x", False, "<think>")
    assert get_prompt("question-selfrating").parse("```\n```\n4").grade == 4
    # only the family whose marker comes first is read; the others stay text
    assert split_reasoning("<thinking>a <think> b</thinking> 4") == Reasoned("4", "a <think> b", False, "<thinking>")
    assert split_reasoning("<think>a</think> <reasoning>4") == Reasoned("<reasoning>4", "a", False, "<think>")
    # "<think>" does not match "<thinking>" and the reverse
    assert split_reasoning("<thinking>a</think>").marker == "<thinking>"


def test_sky_t1_solution_markers_are_removed():
    text = ("<|begin_of_thought|>\n\nThe context answers the question.\n\n<|end_of_thought|>\n\n"
            "<|begin_of_solution|>\n\n5\n\n<|end_of_solution|>")
    assert split_reasoning(text) == Reasoned("5", "The context answers the question.", False, "<|begin_of_thought|>")
    # a solution cut off while being written is still an answer, not reasoning
    assert split_reasoning("<|begin_of_thought|>t<|end_of_thought|><|begin_of_solution|>4 because").answer == "4 because"
    # solution markers are only removed for that family
    assert split_reasoning("<think>t</think><|begin_of_solution|>4").answer == "<|begin_of_solution|>4"


# -- gpt-oss (harmony) ------------------------------------------------------------------------

HARMONY = ("<|channel|>analysis<|message|>We need to rate. The context partly answers: 2? It is complete: 4."
           "<|end|><|start|>assistant<|channel|>final<|message|>4<|return|>")


def test_harmony_channels():
    assert split_reasoning(HARMONY) == Reasoned(
        "4", "We need to rate. The context partly answers: 2? It is complete: 4.", False, "<|channel|>")
    # with the "<|start|>assistant" of the first message, and without the final <|return|>
    assert split_reasoning("<|start|>assistant" + HARMONY.removesuffix("<|return|>")) == split_reasoning(HARMONY)
    # llama.cpp --reasoning-format none: the answer right after <|end|>
    assert split_reasoning("<|channel|>analysis<|message|>think<|end|>3") == Reasoned("3", "think", False, "<|channel|>")
    # several analysis messages, a commentary (tool call) message: all reasoning
    text = ("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>commentary to=functions.lookup "
            "<|constrain|>json<|message|>{\"q\": 1}<|call|><|start|>assistant<|channel|>analysis<|message|>b<|end|>"
            "<|start|>assistant<|channel|>final<|message|>2<|return|>")
    assert split_reasoning(text) == Reasoned("2", 'a\n\n{"q": 1}\n\nb', False, "<|channel|>")


def test_harmony_cut_off_and_empty():
    assert split_reasoning("<|channel|>analysis<|message|>We need to weigh") == Reasoned(
        None, "We need to weigh", True, "<|channel|>")
    # the analysis ended and nothing followed: an empty answer, not cut off as far as the text says
    assert split_reasoning("<|channel|>analysis<|message|>done<|end|>") == Reasoned("", "done", False, "<|channel|>")
    # only the final channel
    assert split_reasoning("<|channel|>final<|message|>5<|return|>") == Reasoned("5", "", False, "<|channel|>")


def test_harmony_without_special_tokens():
    assert split_reasoning("analysisWe need to rate. Maybe 2. It is complete.assistantfinal4") == Reasoned(
        "4", "We need to rate. Maybe 2. It is complete.", False, "assistantfinal")
    assert split_reasoning("  analysisFirst.assistantanalysisSecond.assistantfinal 3 ") == Reasoned(
        "3", "First.\n\nSecond.", False, "assistantfinal")
    # no assistantfinal: cut off while reasoning
    assert split_reasoning("analysisWe need to rate. It says 2") == Reasoned(
        None, "We need to rate. It says 2", True, "assistantfinal")
    # English answers that start with the word are answers
    for text in ["analysis: the passage rates 4", "Analysis shows 4", "analysis 4", "AnalysisWe 4",
                 "analysis, 4", "The analysis: assistantfinal 4"]:
        assert split_reasoning(text) == Reasoned(text, None, False, None), text


# -- the grade parsers read the answer only ---------------------------------------------------

def test_the_self_rating_parser_reads_the_answer_not_the_reasoning():
    prompt = get_prompt("question-selfrating")
    text = "<think>I rate it 2... no, 4</think>\n\n4"
    assert prompt.parse(text).grade != 4  # read whole, the answer is not what is read
    assert prompt.parse("<think>Rating: 2. No, wait.</think>\n4").grade == 2  # but the reasoning's rating
    r = split_reasoning(text)
    parsed = prompt.parse(r.answer)
    assert parsed.parse_ok and parsed.grade == 4
    assert r.reasoning == "I rate it 2... no, 4"
    # the same with the other formats
    for other in [HARMONY, "analysisI rate it 2... no, 4assistantfinal4", "I rate it 2... no, 4</think>4",
                  "[THINK]Grade: 2? no[/THINK]\n4", "\u25c1think\u25b7rating 1\u25c1/think\u25b7- 4: The answer is mostly "
                  "relevant and complete but may have minor gaps or inaccuracies."]:
        assert prompt.parse(split_reasoning(other).answer).grade == 4, other
    # cut off while reasoning: no answer, so the parser says nothing was answered
    cut = split_reasoning("<think>I rate it 2... no")
    assert cut.unfinished and cut.answer is None
    assert prompt.parse(cut.answer).note == "empty output"


# -- a separate reasoning field ---------------------------------------------------------------

def test_join_reasoning():
    assert join_reasoning("The context answers it.", "4", False) == Reasoned(
        "4", "The context answers it.", False, FIELD_MARKER)
    # reasoning left in the text too: the field's first
    assert join_reasoning("field", "<think>text</think>\n5", False) == Reasoned("5", "field\n\ntext", False, "<think>")
    # no answer text: cut off only when the server says so (finish_reason "length") ...
    for empty in [None, "", "  \n"]:
        assert join_reasoning("Let me see", empty, True) == Reasoned(None, "Let me see", True, FIELD_MARKER)
        assert join_reasoning("Let me see", empty, False) == Reasoned("", "Let me see", False, FIELD_MARKER)
    # ... or an unclosed marker in the text does
    assert join_reasoning("field", "<think>still", False) == Reasoned(None, "field\n\nstill", True, "<think>")
    # an answer that was cut off is still an answer (the parser decides what it says)
    assert join_reasoning("r", "4 because the", True) == Reasoned("4 because the", "r", False, FIELD_MARKER)
    # no field
    assert join_reasoning(None, "4", False) == Reasoned("4", None, False, None)
    assert join_reasoning("", "4", False) == Reasoned("4", None, False, None)
    assert join_reasoning(None, None, False) == Reasoned("", None, False, None)
    # cut off with no reasoning at all is an empty answer, not one cut off while reasoning
    assert join_reasoning(None, None, True) == Reasoned("", None, False, None)
    assert join_reasoning(None, "", True) == Reasoned("", None, False, None)
