"""Lexical answer-key verification of the EXAM paper (exam-flan-t5-answerability-metric.txt,
Section 3.2.2; repeated in EXAM++ Section 4.2.1):

    "Both the correct and predicted answers are normalized by lower-casing, stopword
    removal, and stemming. A match is considered when the edit distance between these
    strings is less than 20% of the length of the longer string."

Exactly what is compared:

1. ``normalize(text)``: lowercase (and the typographic apostrophe ’ made ``'``), tokens are
   maximal runs of word characters with inner apostrophes (``\\w+(?:'\\w+)*``, so
   punctuation separates and is dropped, "don't" stays one token), tokens in the shipped
   stop-word list ``exam_eval/data/stopwords_en.txt`` (NLTK's English list, 179 words) are
   dropped, the rest are stemmed with nltk's ``PorterStemmer()`` (its default
   NLTK_EXTENSIONS mode; the papers say "stemming", Porter is the stemmer the brief names).
2. ``normalized_string(text)`` = the stems joined by single spaces.
3. ``matches(candidate, keys)``: for some key,
   ``nltk.edit_distance(c, k) < 0.2 * max(len(c), len(k))`` on those two strings, counted
   in characters (Levenshtein: insert, delete, substitute each cost 1; no transpositions).
   A candidate or key that normalises to the empty string never matches (0 < 0 is false).
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

THRESHOLD = 0.2
_TOKEN = re.compile(r"\w+(?:'\w+)*")


@lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    text = resources.files("exam_eval.data").joinpath("stopwords_en.txt").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


@lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer()


def normalize(text: str) -> list[str]:
    """Lowercased, stop-word-free, Porter-stemmed tokens of ``text``."""
    stop = stopwords()
    stem = _stemmer().stem
    tokens = _TOKEN.findall((text or "").lower().replace("\u2019", "'"))
    return [stem(tok) for tok in tokens if tok not in stop]


def normalized_string(text: str) -> str:
    return " ".join(normalize(text))


def _edit_distance(a: str, b: str) -> int:
    from nltk.metrics import distance as nltk_distance

    longest = max(len(a), len(b))
    if longest > nltk_distance.MAX_DISTANCE_INPUT_LEN:
        # nltk refuses strings over 2000 characters unless told (its documented knob) that
        # they are trusted; ``matches`` only gets here with an answer key that long, since
        # a long model answer to a shorter key fails the length bound first
        nltk_distance.MAX_DISTANCE_INPUT_LEN = longest
    return nltk_distance.edit_distance(a, b)


def distance(candidate: str, key: str) -> tuple[int, int]:
    """(edit distance, length of the longer string) between the normalised strings."""
    a, b = normalized_string(candidate), normalized_string(key)
    return _edit_distance(a, b), max(len(a), len(b))


def matches(candidate: str, answer_keys: list[str] | str) -> bool:
    """True when ``candidate`` matches any answer key under the EXAM heuristic."""
    if isinstance(answer_keys, str):
        # One key given as a string: iterating it would compare single characters.
        answer_keys = [answer_keys]
    a = normalized_string(candidate)
    for key in answer_keys:
        b = normalized_string(key)
        longest = max(len(a), len(b))
        # the edit distance is at least the difference in length: when that alone reaches
        # the threshold there is no match, and a rambling answer is not compared at all
        if not longest or abs(len(a) - len(b)) >= THRESHOLD * longest:
            continue
        if _edit_distance(a, b) < THRESHOLD * longest:
            return True
    return False
