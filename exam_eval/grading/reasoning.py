"""A reasoning model's final answer, with its reasoning taken out.

Reasoning ("thinking") models write their chain of thought before the answer. The grade
parsers (:mod:`exam_eval.grading.parsing`) must only ever read the answer: a chain of
thought states ratings the model then rejects ("I rate it 2... no, 4"), and reading one of
those would be a grade from text that does not state the model's answer.
:func:`split_reasoning` separates the two in a generated text; :func:`join_reasoning` does
the same for servers that return the reasoning in a field of its own (OpenAI-compatible
servers' ``reasoning_content``, ``reasoning`` elsewhere).

The reasoning is kept, not thrown away: exam-verify and audits read why a judge gave a
grade, and a judge whose answer was refused or cut off is only explained by what it was
thinking. ``unfinished`` says that the model was cut off while reasoning (its token budget
ran out before it answered); such an output has no answer at all (``answer`` None), which
is not the same as an empty answer (``""``, the parser's "empty output").

Recognised markers (``marker`` names the one found, written as below; ``None`` when there
was none):

==========================================  =============================================
``<think>`` ... ``</think>``                 DeepSeek-R1 and its distills, Qwen3, QwQ,
                                             Magistral (first releases), most open
                                             reasoning models
``<thinking>`` ... ``</thinking>``           models prompted or tuned to "think in
                                             <thinking> tags" (Reflection-style)
``<reasoning>`` ... ``</reasoning>``         GRPO-style "<reasoning>...</reasoning>" tunes
``◁think▷`` ... ``◁/think▷``                 Kimi (k1.5, Kimi-VL-Thinking)
``[THINK]`` ... ``[/THINK]``                 Magistral (2509 and later)
``<|begin_of_thought|>`` ...                 Sky-T1, OpenThinker (Bespoke-Stratos format);
``<|end_of_thought|>``                       the answer may be wrapped in
                                             ``<|begin_of_solution|>`` ...
                                             ``<|end_of_solution|>``, which are removed
``<|channel|>``                              gpt-oss (OpenAI harmony format):
                                             ``<|channel|>analysis<|message|>...<|end|>``
                                             ``<|start|>assistant<|channel|>final``
                                             ``<|message|>ANSWER<|return|>``
``assistantfinal``                           the same, printed without its special tokens
                                             (a server decoding with
                                             skip_special_tokens): ``analysis...``
                                             ``assistantfinalANSWER``
==========================================  =============================================

Rules, kept simple on purpose:

- Markers are matched case-insensitively (``<THINK>``, ``[think]``), anywhere in the text,
  inside code fences too (a fence is not a reason to believe the model meant the tag as
  text); whitespace around them is dropped, and the answer is stripped. Harmony's
  special tokens are matched as printed (lowercase).
- Only one family is read: the one whose marker comes first in the text. Another
  family's markers are left as text (in the answer or in the reasoning).
- An opening marker starts reasoning; the next closing marker ends it (an opening marker
  inside reasoning is part of the reasoning's text, so a nested block ends at the first
  close). A closing marker without an opening one ends reasoning that began at the start
  of the text or at the previous closing marker: DeepSeek-R1's and QwQ's chat templates
  put ``<think>`` in the prompt, so their text starts directly with reasoning and holds
  only ``</think>``. A caller that knows its prompt ended with ``<think>`` passes
  ``opened=True``, and a text without any marker is then all reasoning (cut off).
- Several blocks: their reasoning is joined (blank line between), and the answer is what
  lies outside them (joined by line breaks).
- An opening marker never closed: the model was cut off while reasoning. When nothing
  outside the blocks is left, ``answer`` is None and ``unfinished`` True; when the model
  had written something outside them, that is the answer.
- A block that is present but empty (``<think>\\n\\n</think>``, the form Qwen3's chat
  template uses to switch thinking off) gives ``reasoning == ""``; ``reasoning`` is None
  only when no marker was found.
- Harmony: ``analysis`` and ``commentary`` messages are reasoning, ``final`` messages and
  text outside any message (llama.cpp's ``--reasoning-format none`` prints the answer right
  after ``<|end|>``) are the answer; a last analysis message without ``<|end|>`` and no
  answer is unfinished. The form without special tokens is only read when it cannot be
  anything else: the text starts with the lowercase word ``analysis`` glued to the next
  word (``analysisWe need to ...``, which no English answer does) -- then it is split at
  ``assistantfinal`` (``assistantanalysis`` and ``assistantcommentary`` separate further
  reasoning), and without ``assistantfinal`` it is reasoning cut off. "Analysis: the
  passage ..." is an answer.
- A text without markers is its own answer (``reasoning`` None). The word "think" is not a
  marker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Reasoned", "split_reasoning", "join_reasoning", "FIELD_MARKER"]

# ``marker`` of a Reasoned whose reasoning came only from a server's separate field
FIELD_MARKER = "reasoning field"


@dataclass(frozen=True)
class Reasoned:
    """A generated text split into the model's answer and its reasoning.

    answer: the final answer, stripped; None when the model produced none (no text, or
        cut off while reasoning); "" when it finished without writing one.
    reasoning: the reasoning, stripped (blocks joined by a blank line); "" when a marker
        was there but empty; None when there was no marker.
    unfinished: the model was cut off while reasoning (answer None).
    marker: the opening marker found (see the module's table), FIELD_MARKER, or None.
    """

    answer: str | None
    reasoning: str | None
    unfinished: bool
    marker: str | None


# (name as reported, opening marker, closing marker); matched case-insensitively
_BLOCKS = (
    ("<think>", r"<think>", r"</think>"),
    ("<thinking>", r"<thinking>", r"</thinking>"),
    ("<reasoning>", r"<reasoning>", r"</reasoning>"),
    ("\u25c1think\u25b7", r"\u25c1think\u25b7", r"\u25c1/think\u25b7"),
    ("[THINK]", r"\[THINK\]", r"\[/THINK\]"),
    ("<|begin_of_thought|>", r"<\|begin_of_thought\|>", r"<\|end_of_thought\|>"),
)
_BLOCK_RES = tuple(
    (name, re.compile(f"(?P<open>{o})|(?P<close>{c})", re.IGNORECASE)) for name, o, c in _BLOCKS)
_SOLUTION = re.compile(r"<\|(?:begin|end)_of_solution\|>", re.IGNORECASE)

HARMONY = "<|channel|>"
HARMONY_PLAIN = "assistantfinal"
# A harmony message header: an optional "<|start|>assistant", "<|channel|>", the channel
# name, optional header text (" to=functions.x <|constrain|>json"), "<|message|>".
_H_HEADER = re.compile(
    r"(?:<\|start\|>\s*assistant\s*)?(?:<\|channel\|>\s*)?(?P<channel>analysis|commentary|final)\b"
    r"(?P<header>[^<]*(?:<\|constrain\|>[^<]*)?)<\|message\|>")
_H_SEEN = re.compile(r"<\|(?:channel|message)\|>")
_H_END = re.compile(r"<\|(?P<token>end|return|call|start|channel)\|>")
_H_SPECIAL = re.compile(r"<\|(?:start|end|return|call|channel|message|constrain)\|>(?:\s*assistant\b)?")
_H_PLAIN_START = re.compile(r"^\s*analysis(?=[A-Za-z])")
_H_PLAIN_SPLIT = re.compile(r"assistant(?=analysis|commentary|final)")


def _joined(parts: list[str], sep: str) -> str:
    return sep.join(p for p in (x.strip() for x in parts) if p)


def _split_blocks(name: str, pattern: re.Pattern[str], text: str) -> Reasoned:
    outside: list[str] = []
    reasoning: list[str] = []
    pos = 0  # where the text not yet assigned starts
    open_at: int | None = None  # where the open block's reasoning starts
    for m in pattern.finditer(text):
        if m.group("open") is not None:
            if open_at is None:
                outside.append(text[pos:m.start()])
                open_at = m.end()
            continue  # an opening marker inside reasoning is reasoning text
        reasoning.append(text[pos if open_at is None else open_at:m.start()])
        open_at = None
        pos = m.end()
    unclosed = open_at is not None
    if unclosed:
        reasoning.append(text[open_at:])
    else:
        outside.append(text[pos:])
    answer = _joined(outside, "\n")
    if name == "<|begin_of_thought|>":
        answer = _SOLUTION.sub("", answer).strip()
    if unclosed and not answer:
        return Reasoned(None, _joined(reasoning, "\n\n"), True, name)
    return Reasoned(answer, _joined(reasoning, "\n\n"), False, name)


def _split_harmony(text: str) -> Reasoned:
    outside: list[str] = []
    reasoning: list[str] = []
    pos = 0
    unterminated = False  # the last message is reasoning that did not end
    while (m := _H_HEADER.search(text, pos)) is not None:
        outside.append(text[pos:m.start()])
        end = _H_END.search(text, m.end())
        body = text[m.end():end.start() if end else len(text)]
        (outside if m.group("channel") == "final" else reasoning).append(body)
        unterminated = end is None and m.group("channel") != "final"
        if end is None:
            pos = len(text)
        elif end.group("token") in ("start", "channel"):
            pos = end.start()  # the next message's header; this one ended without <|end|>
        else:
            pos = end.end()
    outside.append(text[pos:])
    answer = _joined([_H_SPECIAL.sub("", o) for o in outside], "\n")
    if unterminated and not answer:
        return Reasoned(None, _joined(reasoning, "\n\n"), True, HARMONY)
    return Reasoned(answer, _joined(reasoning, "\n\n"), False, HARMONY)


def _split_harmony_plain(text: str) -> Reasoned:
    segments = _H_PLAIN_SPLIT.split(text.strip())
    reasoning: list[str] = []
    answer: list[str] = []
    for segment in segments:
        channel = next(c for c in ("analysis", "commentary", "final") if segment.startswith(c))
        (answer if channel == "final" else reasoning).append(segment[len(channel):])
    if not any(s.startswith("final") for s in segments):
        return Reasoned(None, _joined(reasoning, "\n\n"), True, HARMONY_PLAIN)
    return Reasoned(_joined(answer, "\n"), _joined(reasoning, "\n\n"), False, HARMONY_PLAIN)


def split_reasoning(text: str | None, *, opened: bool = False) -> Reasoned:
    """The answer and the reasoning in a generated ``text`` (see the module's rules).

    ``opened``: the prompt ended with ``<think>`` (DeepSeek-R1's and QwQ-32B's chat
    templates add it), so the text starts inside reasoning even without any marker.
    """
    if text is None:
        return Reasoned(None, None, False, None)
    if opened and not re.match(r"\s*<think>", text, re.IGNORECASE):
        text = "<think>" + text
    # the family whose first marker comes first
    first: tuple[int, str] | None = None
    for name, pattern in _BLOCK_RES:
        m = pattern.search(text)
        if m and (first is None or m.start() < first[0]):
            first = (m.start(), name)
    if _H_PLAIN_START.match(text) and not _H_SEEN.search(text):
        return _split_harmony_plain(text)
    m = _H_SEEN.search(text)
    if m and (first is None or m.start() < first[0]) and _H_HEADER.search(text):
        return _split_harmony(text)
    if first is None:
        return Reasoned(text.strip(), None, False, None)
    name = first[1]
    return _split_blocks(name, dict(_BLOCK_RES)[name], text)


def join_reasoning(field: str | None, text: str | None, cut_off: bool) -> Reasoned:
    """The answer and reasoning of a server's reply whose reasoning came in a separate
    ``field`` (``reasoning_content``) and whose content is ``text``; ``cut_off``: the
    server says the generation stopped at its token limit (finish_reason "length").

    The reasoning is the field's, then any reasoning still marked in ``text``. The output
    is unfinished when no answer text remains and either the server cut it off or
    ``text`` ends inside an unclosed reasoning marker; an answer that is merely empty is
    ``""`` (the parser says "empty output")."""
    inner = split_reasoning(text)
    field = field.strip() if field is not None and field.strip() else None
    parts = [p for p in (field, inner.reasoning) if p is not None]
    reasoning = "\n\n".join(p for p in parts if p) if parts else None
    marker = inner.marker or (FIELD_MARKER if field is not None else None)
    answer = inner.answer or ""
    if not answer and (inner.unfinished or (cut_off and reasoning is not None)):
        return Reasoned(None, reasoning, True, marker)
    return Reasoned(answer, reasoning, False, marker)
