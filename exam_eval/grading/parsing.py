"""Reading a grade from a model's generated text, per prompt family.

Rule: a grade is only ever produced from text that states it. Everything else is
``Parsed(grade=None, parse_ok=False, note=why)``, recorded and counted by exam-grade.

Unanswerable expressions (grade 0, parse_ok True) are the EXAM++ paper's list, Section
4.2.1: "unanswerable", "no", "no answer", "not enough information", "unknown", "it is not
possible to tell", "it does not say", "no relevant information"; the same list is in the
original EXAM paper's footnote 5 (printed there with the typo "no answe", which we also
accept). EXAM++ also counts "ill-formed" answers such as "a." or "(iii)" as grade 0 for
question answering. A response is matched against the list as a whole (lowercased,
surrounding whitespace, quotes and final punctuation removed), never as a substring: "no"
inside a sentence is not an unanswerable answer.

Deviation from the papers: for self-rating, EXAM++ (Section 4.2.2) defaults a response
without a number to rating 1; we record it as unparseable instead (parse_ok False) so the
choice stays visible. Two opt-in rules (``exam-grade --rating-rule``) read every answer:

- ``exam-pp`` (:func:`tolerant_rating`): the paper's text, a response without a number
  is rating 1 (unanswerable expressions 0);
- ``workbench`` (:func:`parse_rating_workbench`): what the reference workbench's code
  did when it produced its published grades, which is not the paper's text: only a lone
  digit on the scale (non-word characters around it allowed) is read; every other answer
  is 0, except an unanswerable expression, a bare choice marker ("A", "d.") or an empty
  answer, which get 1 (its check for unanswerable answers returns True for an answer
  that is *not* one, so the two branches are swapped). On the DL19 reference file this
  gives the reference's grade for all 92,600 answers; the ``exam-pp`` rule for 92,148
  (the reference rated 0 what the paper's rule rates 1, and off-scale numbers stay
  unparsed).

Rating parsers pick the rating the model meant, in this order: a number at the very start
("4", " 4.", "4/5", "**4**", "[2] Highly relevant", "4: The answer ..."); one of the
prompt's scale lines echoed whole, "- 5: The answer is highly relevant, complete, and
accurate." (the self-rating prompts print their scale as "- N: description"; chat models
such as SmolLM2-135M-Instruct answer with one such line) -- the "- " bullet must be
followed by the number, ":" and text, so "- 3", "-3" (a negative number) and "- 4-6 weeks"
are not read, and an answer echoing scale lines of two or more numbers (the model copying
the scale) is refused; a number after a rating keyword ("Grade: 4", "Rating: 4 out of 5",
"The answer is 4", "score = 3"); an "N/M" or "N out of M" whose M is the scale's maximum.
A number word ("four") only counts when it is the whole response. Non-integers ("4.5")
and numbers off the prompt's scale are parse_ok False, never clipped.

A number is a rating only when what follows it says so: nothing, "/M" or "out of M" with
M the scale's maximum, or a separator (":", ".", ")", "]", " - ", ",", a line break) and
more text. "4-6 weeks", "5 Day", "2 or 3 months" -- real flan-t5-large outputs to the
self-rating prompt, where the model answered the question instead -- are not ratings.
When the text after "N:" repeats the prompt's printed description of another grade (at
least half its words, more than N's own), the output contradicts itself and is refused.

Checked against the reference workbench's 92,600 flan-t5-large self-rating outputs for
DL19 (tests/grading/test_parsing.py): 92,131 parse to the reference's grade; 468 are refused
(the reference filled those in with 0 or 1 without reading a rating); 1 ("2: <grade 2's
description>") is read as 2 where the reference, which only reads bare digits, gave 0.
"""

from __future__ import annotations

import ast
import json
import re
from typing import TYPE_CHECKING, Callable

from exam_eval.grading.types import Parsed

if TYPE_CHECKING:  # pragma: no cover
    from exam_eval.grading.prompts.base import Prompt

UNANSWERABLE = frozenset({
    "unanswerable",
    "no",
    "no answer",
    "no answe",
    "not enough information",
    "unknown",
    "it is not possible to tell",
    "it does not say",
    "no relevant information",
})

NUMBER_WORDS = {w: i for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"])}

_MARKUP = re.compile(r"[*_`#]+")
# [0-9], not \d: \d also matches other scripts' digits ("４", "٤", "𝟓"), which int() reads
# but no reader of a number in exam_eval's files (qrels labels, runs) takes as one
_NUM = r"(?<![\w.])(-?[0-9]+(?:[.,][0-9]+)?)(?![\w])"
_KEYWORD = re.compile(
    r"\b(?:grade|grading|rating|rate|rated|score|scored|relevance|label|category|answer(?:\s+is)?|"
    r"final\s+score)\b\s*(?:is|of|would\s+be|=|:|-)?\s*[:=]?\s*[\[\(\"']?\s*" + _NUM,
    re.IGNORECASE,
)
_OUT_OF = re.compile(_NUM + r"\s*(?:/|out\s+of|of)\s*([0-9]+)", re.IGNORECASE)
# A choice marker with its punctuation: "a.", "b)", "(c)", "(iii)", "iv.". A bare letter
# is left alone: "C" may be a real answer (vitamin C).
_ILL_FORMED = re.compile(r"^(?:\(?[a-z]\)|[a-z]\.|\(?[ivx]+\)|[ivx]+\.)$", re.IGNORECASE)


def _clean(text: str) -> str:
    return _MARKUP.sub("", text or "").strip()


def _canonical(text: str) -> str:
    """Whole-response form used for the expression lists."""
    t = _clean(text).lower()
    t = re.sub(r"\s+", " ", t)
    return t.strip(" \t\n\"'`.!?,;:()[]")


def is_unanswerable(text: str) -> bool:
    return _canonical(text) in UNANSWERABLE


def is_ill_formed(text: str) -> bool:
    """EXAM++'s ill-formed answers: a bare choice letter or roman numeral ("a.", "(iii)")."""
    t = _clean(text)
    return bool(t) and bool(_ILL_FORMED.match(t))


def _to_grade(prompt: Prompt, raw: str) -> Parsed:
    if "." in raw or "," in raw:
        return Parsed(None, False, None, f"non-integer rating {raw!r}")
    lo, hi = prompt.scale
    if len(raw.strip().lstrip("+-").lstrip("0")) > 9:  # a model repeating "4444...": int() refuses 4300 digits
        return Parsed(None, False, None, f"rating of {len(raw.strip())} digits outside the scale {lo}-{hi}")
    value = int(raw)
    if not lo <= value <= hi:
        return Parsed(None, False, None, f"rating {value} outside the scale {lo}-{hi}")
    return Parsed(value, True, None)


# What may follow a number for it to be a rating rather than part of an answer such as
# "4-6 weeks", "5 Day" or "2 or 3 months" (real FLAN-T5 outputs for the self-rating prompt):
_BARE = re.compile(r"^[\s\])\"'>.!]*$")
_DENOMINATOR = re.compile(r"^\s*(?:/|out\s+of\b|of\b)\s*([0-9]+)(?![0-9])")
_DESCRIBED = re.compile(
    r"^(?:[\])]?\s*[:.)\]=]\s+|\s*[-\u2013\u2014]\s+(?=\D)|\s*\n|,\s+(?=\D))(?P<tail>.*)$", re.DOTALL)
_CHOICE_LINE = re.compile(r"^\s*(?:-\s*)?\[?(\d+)\]?\s*[:=]?\s*(.+?)\s*$")
_CHOICE_START = re.compile(r"^\s*(?:-\s*)?(?:\[\d+\]|\d+\s*[:=])")


def choice_descriptions(prompt: Prompt) -> dict[int, str]:
    """The template's description of each grade ("- 4: The answer is mostly ...",
    "[2] Highly relevant: ...", "2 = highly relevant ..."), when every grade has one line."""
    found: dict[int, list[str]] = {}
    for line in prompt.template.splitlines():
        m = _CHOICE_LINE.match(line)
        if m and _CHOICE_START.match(line):
            found.setdefault(int(m.group(1)), []).append(m.group(2))
    lo, hi = prompt.scale
    if set(found) != set(range(lo, hi + 1)) or any(len(v) != 1 for v in found.values()):
        return {}
    return {g: v[0] for g, v in found.items()}


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def _described_grade(prompt: Prompt, tail: str) -> int | None:
    """The grade whose printed description ``tail`` repeats (most shared words, at least
    half of them), or None when it repeats none."""
    descriptions = choice_descriptions(prompt)
    words = _words(tail)
    if not descriptions or not words:
        return None
    best, best_score = None, 0.0
    for grade, description in descriptions.items():
        d = _words(description)
        score = len(words & d) / len(words | d)
        if score > best_score:
            best, best_score = grade, score
    return best if best_score >= 0.5 else None


def _rating_then(prompt: Prompt, raw: str, rest: str) -> Parsed | None:
    """A rating ``raw`` followed by ``rest``; None when ``rest`` shows ``raw`` is not a rating."""
    if _BARE.match(rest):
        return _to_grade(prompt, raw)
    m = _DENOMINATOR.match(rest)
    if m:
        if m.group(1) != str(prompt.scale[1]):
            return Parsed(None, False, None, f"rating {raw}/{m.group(1)} is not on the scale "
                                             f"{prompt.scale[0]}-{prompt.scale[1]}")
        return _to_grade(prompt, raw)
    m = _DESCRIBED.match(rest)
    if m:
        parsed = _to_grade(prompt, raw)
        described = _described_grade(prompt, m.group("tail"))
        if parsed.parse_ok and described is not None and described != parsed.grade:
            return Parsed(None, False, None, f"rating {raw} given with the description of grade {described}")
        return parsed
    return None


_LEADING = re.compile(r"^[\s\[\(\"'<]*" + _NUM + r"(?P<rest>.*)$", re.DOTALL)
# An echoed scale line: "- 5: The answer is highly relevant, ..." (the self-rating prompts
# print their scale as "- N: description" and chat models answer with one such line). The
# "- " bullet needs a space ("-3" is a negative number) and the number needs ":" and text
# after it ("- 4-6 weeks", "- 3" are not read).
_SCALE_ECHO = re.compile(r"^\s*-[ \t]+([0-9]+(?:[.,][0-9]+)?)(?P<rest>\s*:\s+\S.*)$", re.DOTALL)
# Every line of an answer that looks like one of the scale's lines, bulleted or not.
_SCALE_LINES = re.compile(r"^[ \t]*(?:-[ \t]+)?([0-9]+)[ \t]*:", re.MULTILINE)


def find_rating(prompt: Prompt, text: str) -> Parsed | None:
    """The rating stated in ``text``, or None when none is stated; refused when the text
    also states another one out of the scale's maximum ("2/5 3/5")."""
    found = _first_rating(prompt, text)
    if found is not None and found.parse_ok:
        top = str(prompt.scale[1])
        others = sorted({m.group(1) for m in _OUT_OF.finditer(_clean(text))
                         if m.group(2) == top and m.group(1).lstrip("0") != str(found.grade).lstrip("0")})
        if others:
            return Parsed(None, False, None, f"two ratings: {found.grade} and {others[0]} out of {top}")
    return found


def _scale_echo(prompt: Prompt, raw: str, rest: str, text: str) -> Parsed:
    """An answer opening with one of the prompt's scale lines, "- N: text": read as "N: text"
    (so "N: <another grade's description>" is refused as before), unless the answer echoes
    scale lines of two or more numbers (the model copying the scale)."""
    numbers = sorted({int(n) for n in _SCALE_LINES.findall(text)}, reverse=True)
    if len(numbers) > 1:
        return Parsed(None, False, None, "several scale lines: " + ", ".join(map(str, numbers)))
    found = _rating_then(prompt, raw, rest)
    return found if found is not None else Parsed(None, False, None, "no rating found")


def _first_rating(prompt: Prompt, text: str) -> Parsed | None:
    t = _clean(text)
    m = _LEADING.match(t)
    if m:
        found = _rating_then(prompt, m.group(1), m.group("rest"))
        if found is not None:
            return found
    m = _SCALE_ECHO.match(t)
    if m:
        return _scale_echo(prompt, m.group(1), m.group("rest"), t)
    for m in _KEYWORD.finditer(t):
        found = _rating_then(prompt, m.group(1), t[m.end():])
        if found is not None:
            return found
    for m in _OUT_OF.finditer(t):
        if m.group(2) == str(prompt.scale[1]):
            return _to_grade(prompt, m.group(1))
    word = _canonical(text)
    if word in NUMBER_WORDS:
        return _to_grade(prompt, str(NUMBER_WORDS[word]))
    return None


def _empty(text: str) -> Parsed | None:
    if not _clean(text):
        return Parsed(None, False, None, "empty output")
    return None


def parse_rating(prompt: Prompt, text: str) -> Parsed:
    """Self-rating and scale prompts: a number on the prompt's scale."""
    if (p := _empty(text)) is not None:
        return p
    if prompt.target in ("question", "nugget") and is_unanswerable(text):
        return Parsed(0, True, None, "unanswerable")
    found = find_rating(prompt, text)
    if found is None:
        return Parsed(None, False, None, "no rating found")
    return found


def parse_thomas(prompt: Prompt, text: str) -> Parsed:
    """The abridged Thomas prompt asks for a bare score; the full prompt of Thomas et al.
    answers JSON ``{"M": m, "T": t, "O": o}`` whose "O" is the overall label, so a JSON
    answer is read by its "O" field."""
    if (p := _empty(text)) is not None:
        return p
    m = re.search(r"\{[^{}]*\}", text)
    if m:
        try:
            obj = json.loads(m.group(0))
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "O" in obj:
            value = obj["O"]
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                return Parsed(None, False, None, f"\"O\" is not an integer: {value!r}")
            return _to_grade(prompt, str(value).strip())
    return parse_rating(prompt, text)


_YES_NO = re.compile(r"^[\s\"'\[\(]*(yes|no)\b", re.IGNORECASE)
# An echo of the instruction ("Yes/No", "Yes or No") answers neither.
_BOTH = re.compile(r"^\W*(?:yes\W*(?:/|or)\W*no|no\W*(?:/|or)\W*yes)\b", re.IGNORECASE)
_ANSWER_YES_NO = re.compile(r"\banswer(?:\s+is)?\s*[:=]?\s*[\"']?(yes|no)\b", re.IGNORECASE)


def parse_yes_no(prompt: Prompt, text: str) -> Parsed:
    """Sun, FaggioliB, HELM, answer verification: "Yes" -> 1, "No" -> 0 (the label's
    position in ``prompt.labels``), as the first word or after "Answer:"."""
    if (p := _empty(text)) is not None:
        return p
    t = _clean(text)
    if _BOTH.match(t):
        return Parsed(None, False, None, "both yes and no")
    m = _YES_NO.match(t) or _ANSWER_YES_NO.search(t)
    if not m:
        return Parsed(None, False, None, "no yes/no found")
    word = m.group(1).lower()
    for label, grade in prompt.label_grades().items():
        if label.lower() == word:
            return Parsed(grade, True, None)
    return Parsed(1 if word == "yes" else 0, True, None)


_FINAL_SCORE = re.compile(r"#*\s*final\s+score\s*[:=]?\s*[\[\(\"']?" + _NUM, re.IGNORECASE)


def parse_umbrela(prompt: Prompt, text: str) -> Parsed:
    """UMBRELA asks for "##final score: score"; a response that is only the integer (the
    prompt also says "Final score must be an integer value only") is accepted too."""
    if (p := _empty(text)) is not None:
        return p
    # Emphasis is dropped but not '#': the marker itself is made of them.
    m = _FINAL_SCORE.search(re.sub(r"[*_`]+", "", text))
    if m:
        return _to_grade(prompt, m.group(1))
    t = _clean(text)
    if re.fullmatch(r"-?[0-9]+(?:[.,][0-9]+)?\.?", t):
        return _to_grade(prompt, t.rstrip("."))
    return Parsed(None, False, None, "no '##final score:' found")


def parse_extraction(prompt: Prompt, text: str) -> Parsed:
    """Extraction prompts: the answer text, grade pending verification (None, parse_ok
    True); the unanswerable expressions and ill-formed answers are grade 0."""
    if (p := _empty(text)) is not None:
        return p
    answer = text.strip()
    if is_unanswerable(answer):
        return Parsed(0, True, answer, "unanswerable")
    if is_ill_formed(answer):
        return Parsed(0, True, answer, "ill-formed answer")
    note = "pending verification" if prompt.needs_verification else "extracted"
    return Parsed(None, True, answer, note)


def tolerant_rating(parsed: Parsed) -> Parsed:
    """EXAM++ Section 4.2.2's rule for self-rating: a response without a numerical rating
    counts as rating 1 (unanswerable expressions are already 0). Opt-in only."""
    if parsed.parse_ok or parsed.note == "empty output":
        return parsed
    if parsed.note.startswith("no rating found"):
        return Parsed(1, True, parsed.answer, "no rating: default 1 (EXAM++ 4.2.2)")
    return parsed


def parse_rating_exam_pp(prompt: Prompt, text: str) -> Parsed:
    """``--rating-rule exam-pp``: the strict reading, then EXAM++ 4.2.2's default of 1."""
    return tolerant_rating(parse_rating(prompt, text))


_LONE_DIGIT = re.compile(r"[^\w]*([0-9])[^\w]*")
# choice markers the workbench's published grades treat like unanswerable expressions
_CHOICE_MARKER = re.compile(r"^[\s(\[]*(?:[a-e]|[ivx]+)[\s.)\]]*$", re.IGNORECASE)


def parse_rating_workbench(prompt: Prompt, text: str) -> Parsed:
    """``--rating-rule workbench``: the reference workbench's self-rating reader (its
    SelfRaterStrict), as it behaved on the published DL19 grades; always a grade."""
    m = _LONE_DIGIT.fullmatch(text or "")
    if m and prompt.scale[0] <= int(m.group(1)) <= prompt.scale[1]:
        return Parsed(int(m.group(1)), True, None, "lone digit")
    if not (text or "").strip() or is_unanswerable(text) or _CHOICE_MARKER.match(text):
        return Parsed(1, True, None, "workbench: unanswerable, choice marker or empty -> 1")
    return Parsed(0, True, None, "workbench: no lone digit -> 0")


RATING_RULES = {"strict": "rating", "exam-pp": "rating-exam-pp", "workbench": "rating-workbench"}

PARSERS: dict[str, Callable[[Prompt, str], Parsed]] = {
    "rating": parse_rating,
    "rating-exam-pp": parse_rating_exam_pp,
    "rating-workbench": parse_rating_workbench,
    "thomas": parse_thomas,
    "yesno": parse_yes_no,
    "umbrela": parse_umbrela,
    "extraction": parse_extraction,
}

# -- RAG-track prompts (exam_eval.grading.prompts.rag): one label word, or a list of one

def _norm_label(text: str) -> str:
    t = text.strip().strip("\"'`.,;:!()[]{}* \t\n").lower()
    return re.sub(r"[\s\-]+", "_", t)


def _label_grade(prompt: Prompt, word: str) -> int | None:
    norm = _norm_label(word)
    for i, label in enumerate(prompt.labels):
        if norm == label:
            return prompt.scale[0] + i
    return None


def _strip_fences(text: str) -> str:
    return re.sub(r"```[a-zA-Z]*", "", text).strip()


def _bare_label(prompt: Prompt, text: str) -> tuple[str, Parsed | None]:
    """The answer without code fences, and its reading when it is empty or one label."""
    t = _strip_fences(text or "")
    if not t:
        return t, Parsed(None, False, None, "empty output")
    grade = _label_grade(prompt, t)
    return t, None if grade is None else Parsed(grade, True, None)


def parse_label_list(prompt: Prompt, text: str) -> Parsed:
    """The nuggetizer's answer: a list with one label per nugget (here: one nugget)."""
    t, bare = _bare_label(prompt, text)
    if bare is not None:
        return bare
    m = re.search(r"\[[^\[\]]*\]", t)
    if not m:
        return Parsed(None, False, None, "no label list found")
    value = None
    for loader in (ast.literal_eval, json.loads):
        try:
            value = loader(m.group(0))
            break
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return Parsed(None, False, None, "label list is not a list of strings")
    if len(value) != 1:
        return Parsed(None, False, None, f"expected 1 label, got {len(value)}")
    grade = _label_grade(prompt, value[0])
    if grade is None:
        return Parsed(None, False, None, f"unknown label {value[0]!r}")
    return Parsed(grade, True, None)


_OPTION_NAMES = {"full support": "full_support", "partial support": "partial_support", "no support": "no_support"}


def parse_support_label(prompt: Prompt, text: str) -> Parsed:
    """One of full_support / partial_support / no_support (or the option names)."""
    t, bare = _bare_label(prompt, text)
    if bare is not None:
        return bare
    low = t.lower()
    for name, label in _OPTION_NAMES.items():
        low = low.replace(name, label)
    found = set(re.findall(r"\b(full_support|partial_support|no_support)\b", low))
    if len(found) > 1:
        return Parsed(None, False, None, "several support labels: " + ", ".join(sorted(found)))
    if not found:
        return Parsed(None, False, None, "no support label found")
    return Parsed(_label_grade(prompt, found.pop()), True, None)


PARSERS.update({"nugget-label-list": parse_label_list, "support-label": parse_support_label})
