"""Generated responses -> passages: paragraphs of at most ~400 tokens, stable ids.

A response (``{"query_id", "run_id", "text"}``) is split at blank lines (at single line
breaks when it has no blank line; CR, U+2028 and U+2029 break lines and paragraphs too);
a paragraph longer than the limit is split at sentence ends (CJK full stops included),
a sentence longer than the limit at word boundaries, and a word longer than the limit (a
URL, a run of Chinese or Thai, which are written without spaces) between characters.
Very short paragraphs (headings, "Sources:") are joined to the next one, because a
heading alone answers nothing and would only add grading work; so are the crumbs such
cuts leave ("See" before a URL).

Segment id: ``run_id/query_id/N-md5(text)[:10]``: N keeps two identical paragraphs of one
response apart, the digest makes sure that a regenerated response never reuses the id
(and therefore the grade) of a paragraph whose text changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..errors import InputError
from ..io.jsonl import iter_jsonl, json_id, require_fields
from ..io.openers import display_name
from ..io.reports import segment_id

MAX_TOKENS = 400
MIN_TOKENS = 8
#: scripts written without spaces between words (Han, kana, Thai, Lao, Khmer, Myanmar,
#: Tibetan): each character counts as a token, as subword tokenizers come close to
_UNSPACED = "\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_UNSPACED}]|[^\W{_UNSPACED}]+|[^\w\s]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|(?<=[。！？])\s*(?=\S)")
#: line and paragraph breaks other than LF, as split_paragraphs reads them
_BREAKS = str.maketrans({"\r": "\n", "\u2028": "\n", "\u2029": "\n\n", "\x85": "\n"})


def approx_tokens(text: str) -> int:
    """Words and punctuation marks (a character of a script without spaces is one): close
    to a subword tokenizer's count for English."""
    return len(_TOKEN.findall(text))


def _cut_word(word: str, limit: int, count: Callable[[str], int]) -> list[str]:
    """A "word" over the limit cut between characters, each piece the longest that fits."""
    pieces = []
    while count(word) > limit:
        lo, hi = 1, len(word)  # the longest prefix within the limit: count grows with the prefix
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count(word[:mid]) <= limit:
                lo = mid
            else:
                hi = mid - 1
        pieces.append(word[:lo])
        word = word[lo:]
    return pieces + [word] if word else pieces


@dataclass(frozen=True)
class Segment:
    query_id: str
    run_id: str
    doc_id: str
    text: str
    rank: int
    #: (file, line) of the response or report it came from, for messages
    where: tuple[str, int] | None = field(default=None, compare=False)


def _split_long(text: str, limit: int, count: Callable[[str], int]) -> list[str]:
    if count(text) <= limit:
        return [text]
    pieces: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(text):
        if count(sentence) > limit:
            if current:
                pieces.append(current)
                current = ""
            words = [piece for w in sentence.split() for piece in _cut_word(w, limit, count)]
            chunk: list[str] = []
            for w in words:
                if chunk and count(" ".join(chunk + [w])) > limit:
                    pieces.append(" ".join(chunk))
                    chunk = []
                chunk.append(w)
            if chunk:
                current = " ".join(chunk)
            continue
        candidate = f"{current} {sentence}" if current else sentence
        if current and count(candidate) > limit:
            pieces.append(current)
            current = sentence
        else:
            current = candidate
    if current:
        pieces.append(current)
    return pieces


def split_paragraphs(text: str, *, max_tokens: int = MAX_TOKENS, min_tokens: int = MIN_TOKENS,
                     count: Callable[[str], int] = approx_tokens) -> list[str]:
    text = text.replace("\r\n", "\n").translate(_BREAKS).strip()
    if not text:
        return []
    blocks = re.split(r"\n\s*\n", text) if re.search(r"\n\s*\n", text) else text.split("\n")
    blocks = [" ".join(b.split()) for b in blocks if b.strip()]
    merged: list[str] = []
    carry = ""
    for block in blocks:
        block = f"{carry} {block}" if carry else block
        carry = ""
        if count(block) < min_tokens:
            carry = block
            continue
        merged.append(block)
    if carry:
        if merged and count(f"{merged[-1]} {carry}") <= max_tokens:
            merged[-1] = f"{merged[-1]} {carry}"
        else:
            merged.append(carry)
    out: list[str] = []
    for block in merged:
        for piece in _split_long(block, max_tokens, count):
            # a crumb a cut left ("See" before a URL that did not fit beside it) goes with its
            # neighbour, a few tokens past the limit at most
            crumb = out and min(count(out[-1]), count(piece)) < min_tokens
            if crumb and count(f"{out[-1]} {piece}") <= max_tokens + min_tokens:
                out[-1] = f"{out[-1]} {piece}"
            else:
                out.append(piece)
    return out


def segment_response(query_id: str, run_id: str, text: str, where: tuple[str, int] | None = None,
                     **kw) -> list[Segment]:
    return [Segment(query_id, run_id, segment_id(run_id, query_id, n, para), para, n, where)
            for n, para in enumerate(split_paragraphs(text, **kw), 1)]


def read_responses(path: str, **kw) -> list[Segment]:
    """All segments of a responses JSONL file; one response per (run_id, query_id)."""
    name = display_name(path)
    seen: dict[tuple[str, str], int] = {}
    out: list[Segment] = []
    for lineno, obj in iter_jsonl(path):
        if not isinstance(obj, dict):
            raise InputError("expected a JSON object", name, lineno)
        require_fields(obj, ("query_id", "run_id", "text"), name, lineno)
        if not isinstance(obj["text"], str):
            raise InputError("'text' must be a string", name, lineno)
        key = (json_id(obj["run_id"], "run_id", name, lineno), json_id(obj["query_id"], "query_id", name, lineno))
        if key in seen:
            raise InputError(f"second response of run {key[0]!r} for query {key[1]!r} "
                             f"(first on line {seen[key]})", name, lineno)
        seen[key] = lineno
        segs = segment_response(key[1], key[0], obj["text"], (name, lineno), **kw)
        if not segs:
            raise InputError("response without text", name, lineno)
        out.extend(segs)
    if not out:
        raise InputError("no responses", name)
    return out


def segments_to_runs(segments: Iterable[Segment]) -> dict[str, dict[str, dict[str, float]]]:
    """run_id -> qid -> {segment id: score}; the score falls with the position so that
    trec_eval order equals response order."""
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for s in segments:
        runs.setdefault(s.run_id, {}).setdefault(s.query_id, {})[s.doc_id] = float(-s.rank)
    return runs
