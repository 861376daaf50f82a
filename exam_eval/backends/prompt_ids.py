"""Prompt token ids without tokenizing every prompt: each distinct passage once, each
distinct question's template text once, pairs assembled from ids.

The ids are the ones the string path gives, token for token: the passage cut to the
window exactly as :meth:`PromptBackend.fit_context` cuts it (a passage's own token count
and offsets, read once per passage), the prompt rendered around it and tokenized whole
(with the tokenizer's special tokens, cut at ``max_length`` as ``truncation=True`` cuts).
Only the way there differs:

- a rendered prompt is split where the passage goes: ``prefix + passage + suffix`` (the
  whitespace touching the passage goes with the passage, so a word-splitting
  pre-tokenizer sees the same words);
- ``ids(prefix) + ids(passage in place) + ids(suffix)`` replaces tokenizing the whole
  prompt once both halves were seen to compose: every distinct prefix/suffix (one
  question's template text) and every distinct passage is first tokenized whole in one
  pair, and its ids are kept only when that pair's ids are exactly the concatenation.
  A passage whose pair does not compose, a question whose pairs do not, a cut passage,
  an empty one, or a prompt without exactly one passage, takes the string path.

This rests on one property of pre-tokenizing tokenizers (SentencePiece-style Metaspace,
byte-level BPE, WordPiece): how the passage's words are cut depends on the passage and on
the template text next to it (kept in the cache key), not on a question further away.

Tokenizing goes through the fast tokenizer's Rust object in large batches (one call per
batch of distinct texts); the tokenizer's truncation and padding stay off, so the
prefetch thread of :mod:`exam_eval.grading.engine` and the grading thread can share it.
"""

from __future__ import annotations

import threading
from typing import Callable, NamedTuple, Sequence

import numpy as np

from ..grading.types import padded_width

#: stands in for the passage when a prompt is rendered to find its halves (a private-use
#: character pair that no tokenizer vocabulary and no passage is expected to contain)
SENTINEL = "\ue000passage\ue001"


class Halves(NamedTuple):
    prefix: np.ndarray  # ids of the text before the passage (less the whitespace touching it)
    suffix: np.ndarray
    left: str  # the whitespace before the passage
    right: str  # the whitespace after it
    boundary: tuple  # what the passage's ids may depend on besides itself


class Passage(NamedTuple):
    count: int
    ends: np.ndarray  # each token's end offset in the text (for cuts at a token boundary)


def _edge_word(text: str, last: bool) -> str:
    """The template text a pre-tokenizer may join to the passage: up to the nearest space."""
    if last:
        return text[text.rfind(" ") + 1:] if " " in text else text
    return text[: text.find(" ")] if " " in text else text


def _as_ids(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


class PromptEncoder:
    """Token ids of grading prompts for one tokenizer and one way of rendering.

    ``full_text(request, passage)``: the prompt as the back end renders it around a given
    (already cut) passage. ``window`` (None: no cut) and ``reserve``: the passage is cut to
    ``window - tokens(full_text(request, "")) - reserve`` tokens. ``special_tokens``: the
    tokenizer's own (BOS/EOS) added. ``max_length``: the guard cut of the whole prompt.
    """

    def __init__(self, tokenizer, full_text: Callable, *, window: int | None, reserve: int,
                 special_tokens: bool, max_length: int | None):
        self.tok = tokenizer.backend_tokenizer
        self.full_text = full_text
        self.window = window
        self.reserve = reserve
        self.special = special_tokens
        self.max_length = max_length
        self.head, self.tail = self._special_ids() if special_tokens else (_as_ids([]), _as_ids([]))
        self._overhead: dict[tuple, int] = {}
        self._halves: dict[tuple, Halves | None] = {}
        self._passages: dict[str, Passage] = {}
        # validation state: halves keys and (boundary, passage) keys seen to compose or not
        self._halves_ok: dict[tuple, bool] = {}
        self._middle: dict[tuple, np.ndarray] = {}
        self._bad_middle: set[tuple] = set()
        self._misses: dict[tuple, int] = {}
        self._ready: dict[int, tuple] = {}  # id(request) -> (request, ids) made ahead of use
        self._lock = threading.Lock()  # guards _ready
        self._build_lock = threading.Lock()  # one _build at a time (its caches)
        #: how the pairs went (for tests and the benchmark): composed, whole (string path)
        self.composed = 0
        self.whole = 0

    # -- the tokenizer ---------------------------------------------------------------------
    def _special_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """The ids the tokenizer adds before and after a text (BOS, EOS)."""
        probe = "a b"
        plain = self.tok.encode(probe, add_special_tokens=False).ids
        full = self.tok.encode(probe, add_special_tokens=True).ids
        for i in range(len(full) - len(plain) + 1):
            if full[i:i + len(plain)] == plain:
                return _as_ids(full[:i]), _as_ids(full[i + len(plain):])
        return _as_ids(full), _as_ids([])  # not expected; composition then never validates

    def _encode(self, texts: list[str], special: bool, offsets: bool = False) -> list:
        """The encodings of ``texts``; their ``offsets`` are all zeros unless asked for."""
        if not texts:
            return []
        # a call of the transformers tokenizer with truncation=True or padding leaves them
        # set on the Rust tokenizer; these ids are the untruncated, unpadded ones
        if self.tok.truncation is not None:
            self.tok.no_truncation()
        if self.tok.padding is not None:
            self.tok.no_padding()
        # the same ids without the offsets: a third less of the tokenizer's time (on DL19's
        # prompts), which went into mapping byte offsets to characters for every text that
        # is not ASCII (a hash map per text)
        encode = self.tok.encode_batch if offsets else self.tok.encode_batch_fast  # tokenizers >= 0.23.3 has it
        return encode(texts, add_special_tokens=special)

    def _whole(self, texts: list[str]) -> list[np.ndarray]:
        """The string path: each prompt tokenized whole, cut at ``max_length`` like
        ``truncation=True`` (the text's ids cut, then the special tokens added)."""
        out = [_as_ids(e.ids) for e in self._encode(texts, self.special)]
        if self.max_length:
            room = self.max_length - len(self.head) - len(self.tail)
            long = [i for i, ids in enumerate(out) if len(ids) > self.max_length]
            for i, e in zip(long, self._encode([texts[i] for i in long], False)):
                out[i] = np.concatenate([self.head, _as_ids(e.ids[:max(room, 0)]), self.tail])
        return out

    # -- per distinct text -----------------------------------------------------------------
    @staticmethod
    def _key(req) -> tuple:
        return (id(req.prompt), req.query, req.item_text, req.answer, req.correct_answer)

    def _learn_templates(self, requests: Sequence) -> None:
        """Overhead token counts and the halves of every distinct (prompt, question)."""
        new = {}
        for r in requests:
            k = self._key(r)
            if k not in self._overhead and k not in new:
                new[k] = r
        if not new:
            return
        keys = list(new)
        counts = self._encode([self.full_text(new[k], "") for k in keys], False)
        for k, e in zip(keys, counts):
            self._overhead[k] = len(e.ids)
        pieces = {}
        for k in keys:
            text = self.full_text(new[k], SENTINEL)
            if text.count(SENTINEL) != 1:
                self._halves[k] = None
                continue
            before, after = text.split(SENTINEL)
            core_b, core_a = before.rstrip(), after.lstrip()
            pieces[k] = (core_b, core_a, before[len(core_b):], after[: len(after) - len(core_a)])
        flat = [t for k in pieces for t in pieces[k][:2]]
        enc = self._encode(flat, False)
        for n, k in enumerate(pieces):
            core_b, core_a, left, right = pieces[k]
            boundary = (_edge_word(core_b, True), left, right, _edge_word(core_a, False))
            self._halves[k] = Halves(_as_ids(enc[2 * n].ids), _as_ids(enc[2 * n + 1].ids), left, right, boundary)

    def _learn_passages(self, requests: Sequence) -> None:
        if self.window is None:
            return
        new = list(dict.fromkeys(r.context for r in requests if r.context and r.context not in self._passages))
        for text, e in zip(new, self._encode(new, False, offsets=True)):
            ends = np.fromiter((end for _, end in e.offsets), dtype=np.int64, count=len(e.offsets))
            self._passages[text] = Passage(len(e.ids), ends)

    def fit(self, req) -> str:
        """The passage cut as ``PromptBackend.fit_context`` cuts it (templates and passages learnt)."""
        if self.window is None or not req.context:
            return req.context
        budget = self.window - self._overhead[self._key(req)] - self.reserve
        if budget <= 0:
            return ""
        p = self._passages[req.context]
        return req.context if p.count <= budget else req.context[: int(p.ends[budget - 1])]

    # -- requests --------------------------------------------------------------------------
    def _compose(self, halves: Halves, middle: np.ndarray) -> np.ndarray:
        return np.concatenate([self.head, halves.prefix, middle, halves.suffix, self.tail])

    def _build(self, requests: Sequence) -> list[np.ndarray]:
        self._learn_templates(requests)
        self._learn_passages(requests)
        out: list = [None] * len(requests)
        whole: dict[int, str] = {}  # index -> its prompt, tokenized whole
        probes: dict[int, tuple] = {}  # of those, the pairs learnt from: index -> (halves key, middle key)
        later: dict[int, tuple] = {}  # composed once this batch's probes are learnt
        pending: set = set()
        for i, r in enumerate(requests):
            context = self.fit(r)
            k = self._key(r)
            halves = self._halves.get(k)
            if halves is None or not context or context != r.context or self._halves_ok.get(k) is False:
                whole[i] = self.full_text(r, context)
                continue
            mk = (halves.boundary, context)
            if mk in self._bad_middle:
                whole[i] = self.full_text(r, context)
            elif self._halves_ok.get(k) and mk in self._middle:
                later[i] = (k, mk)
            elif (k in self._halves_ok or k in pending) and (mk in self._middle or mk in pending):
                later[i] = (k, mk)
            else:
                whole[i] = self.full_text(r, context)
                probes[i] = (k, mk)
                pending.update((k, mk))
        self._tokenize_whole(requests, whole, probes, out)
        again: dict[int, str] = {}
        for i, (k, mk) in later.items():
            if self._halves_ok.get(k) and mk in self._middle:
                ids = self._compose(self._halves[k], self._middle[mk])
                if not self.max_length or len(ids) <= self.max_length:
                    out[i] = ids
                    continue
            again[i] = self.full_text(requests[i], self.fit(requests[i]))
        self._tokenize_whole(requests, again, {}, out)
        self.composed += len(requests) - len(whole) - len(again)
        self.whole += len(whole) + len(again)
        return out

    def _tokenize_whole(self, requests, texts: dict[int, str], probes: dict[int, tuple], out: list) -> None:
        order = list(texts)
        for i, ids in zip(order, self._whole([texts[i] for i in order])):
            out[i] = ids
            if i in probes:
                self._learn_from(*probes[i], ids)

    def _learn_from(self, k: tuple, mk: tuple, ids: np.ndarray) -> None:
        """Keep the passage's ids in place when the whole prompt's ids are head + prefix +
        passage + suffix + tail; when not, blame the half not yet seen to compose."""
        if self.max_length and len(ids) >= self.max_length:
            return  # possibly cut: says nothing about composing
        halves = self._halves[k]
        start = len(self.head) + len(halves.prefix)
        stop = len(ids) - len(halves.suffix) - len(self.tail)
        known = self._middle.get(mk)
        fits = (stop >= start and np.array_equal(ids[:start], np.concatenate([self.head, halves.prefix]))
                and np.array_equal(ids[stop:], np.concatenate([halves.suffix, self.tail]))
                and (known is None or np.array_equal(known, ids[start:stop])))
        if fits:
            self._middle[mk] = ids[start:stop].copy()
            self._halves_ok.setdefault(k, True)
        elif known is not None or self._halves_ok.get(k) is None and self._misses.get(k, 0) >= 2:
            self._halves_ok[k] = False  # the passage composes elsewhere (or nothing does): not this question
        else:
            self._bad_middle.add(mk)
            if not self._halves_ok.get(k):
                self._misses[k] = self._misses.get(k, 0) + 1

    def prepare(self, requests: Sequence) -> list[int]:
        """Make the ids of ``requests`` ahead of their use (the engine's prefetch thread);
        returns their token counts."""
        with self._build_lock:
            rows = self._build(requests)
        with self._lock:
            for r, ids in zip(requests, rows):
                self._ready[id(r)] = (r, ids)
        return [len(ids) for ids in rows]

    def ids(self, requests: Sequence) -> list[np.ndarray]:
        """The prompt ids of each request (made here unless :meth:`prepare` made them)."""
        out: list = [None] * len(requests)
        missing = []
        with self._lock:
            for i, r in enumerate(requests):
                got = self._ready.pop(id(r), None)
                if got is not None and got[0] is r:
                    out[i] = got[1]
                else:
                    missing.append(i)
        if missing:
            with self._build_lock:
                for i, ids in zip(missing, self._build([requests[i] for i in missing])):
                    out[i] = ids
        return out

def pad(rows: Sequence[np.ndarray], pad_id: int, left: bool, multiple: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(ids, attention mask) as int64 matrices, padded on the tokenizer's side to the
    longest row rounded up to a multiple of ``multiple``."""
    width = padded_width(max((len(r) for r in rows), default=0), multiple)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        n = len(r)
        if left:
            ids[i, width - n:] = r
            mask[i, width - n:] = 1
        else:
            ids[i, :n] = r
            mask[i, :n] = 1
    return ids, mask
