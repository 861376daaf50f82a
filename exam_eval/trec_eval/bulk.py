"""TREC run and qrels files read in bulk: numpy over the whole file instead of Python per
line, for runs of millions of lines (a 2,000-query x 1,000-document run is 2 M lines).

The bulk reader takes only what it can vouch for: ASCII text (CR, CRLF and LF line ends,
as the line reader's universal newlines), fields separated by ASCII white space (where
trec_eval splits them), scores and labels with the value ``float`` and ``int`` give them (plain
decimals computed exactly in numpy, the others by ``float``/``int`` themselves).
Anything else (a short line, a score that is not a number or not finite, a duplicate,
non-ASCII or control bytes, an empty file) raises :class:`Decline`, and the caller hands the same bytes to the line reader in
``trec_files.py``, which gives its own result or its own refusal (message, file and line).
So the two readers cannot differ in what they accept or say; only in speed and memory.

A read run stays a :class:`RunTable` (offsets into the file's bytes, one float per
line) until queries are asked for, a batch at a time, as the dicts pytrec_eval takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..io.trec_rules import LABEL_MAX
from .packed_bytes import WordView, decimals, words
from .parallel import fork_map, worker_count

# Fields are split at 9-13 and 32 (C's isspace, as trec_eval); every other byte up to 32
# (control bytes, and 28-31, which str.split() would split at) is left to the line
# reader, so that "a field byte" is simply "a byte above 32".
_NEWLINE = 10
_CHUNK = 2 << 20          # bytes per tokenizing step: bounds the temporaries, not the result


# documents per batch of queries built and scored at once: large enough that the calls
# into pytrec_eval cost nothing, small enough that the dicts are a few MB
BATCH_DOCS = 1 << 15


class Decline(Exception):
    """The bulk reader is not sure; the line reader decides (and names file and line)."""


def _normalized(data: bytes) -> bytes:
    if not data or not data.isascii():
        raise Decline
    if b"\r" in data:  # universal newlines, as the line reader's TextIOWrapper
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data


def _tokenize(a: np.ndarray, n_fields: int, exact: bool, wanted: tuple[int, ...]
              ) -> tuple[dict[int, tuple[np.ndarray, np.ndarray]], tuple[int, int]]:
    """The [start, end) offsets of the wanted fields of every non-blank line, and the span
    of the last line's field ``n_fields - 1``. Decline unless each line has ``n_fields``
    fields (at least that many when not ``exact``: a run's fields after the sixth are
    ignored), or if there is no line."""
    offsets = np.int32 if len(a) < 2**31 else np.int64
    room = int(np.count_nonzero(a == _NEWLINE)) + 1           # lines at most
    spans = {f: (np.empty(room, offsets), np.empty(room, offsets)) for f in wanted}
    n = 0
    last = None
    pos, size = 0, len(a)
    while pos < size:
        end = min(pos + _CHUNK, size)
        if end < size:
            nl = np.flatnonzero(a[end:end + (1 << 16)] == _NEWLINE)
            end = size if not len(nl) else end + int(nl[0]) + 1  # no newline near: a long line, take the rest
        c = a[pos:end]
        simple = _simple_lines(c, n_fields)
        if simple is not None:
            for f in wanted:
                spans[f][0][n:n + len(simple[0][0])] = simple[f][0] + pos
                spans[f][1][n:n + len(simple[0][0])] = simple[f][1] + pos
            n += len(simple[0][0])
            last = (int(simple[n_fields - 1][0][-1]) + pos, int(simple[n_fields - 1][1][-1]) + pos)
            pos = end
            continue
        if ((c < 9) | ((c > 13) & (c < 32))).any():
            raise Decline
        edge = np.diff((c > 32).view(np.int8), prepend=np.int8(0), append=np.int8(0))
        starts = np.flatnonzero(edge == 1)
        ends = np.flatnonzero(edge == -1)
        # each line's first field: the first field of the chunk and the first after each
        # newline (a blank line gives the same one twice: once is kept)
        first = np.concatenate(([0], np.searchsorted(starts, np.flatnonzero(c == _NEWLINE))))
        first = first[(np.diff(first, append=len(starts)) > 0)]
        count = np.diff(first, append=len(starts))
        if len(count):
            if (count < n_fields).any() or (exact and (count != n_fields).any()):
                raise Decline
            for f in wanted:
                spans[f][0][n:n + len(first)] = starts[first + f] + pos
                spans[f][1][n:n + len(first)] = ends[first + f] + pos
            n += len(first)
            k = int(first[-1]) + n_fields - 1
            last = (int(starts[k]) + pos, int(ends[k]) + pos)
        pos = end
    if last is None:
        raise Decline
    return {f: (s[:n], e[:n]) for f, (s, e) in spans.items()}, last


def _simple_lines(c: np.ndarray, n_fields: int) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """The [start, end) of every field of every line, when each line of the chunk is
    ``n_fields`` fields separated by single spaces and ended by a newline (how runs and
    qrels are written): one pass finds the separators. None for any other shape, which the
    general tokenizer then reads."""
    if not len(c) or c[-1] != _NEWLINE:
        return None
    seps = np.flatnonzero(c <= 32)
    if len(seps) % n_fields or not len(seps) or seps[0] == 0:
        return None
    grid = seps.reshape(-1, n_fields)
    if not ((c[grid[:, -1]] == _NEWLINE).all() and (c[grid[:, :-1]] == 32).all() and (np.diff(seps) > 1).all()):
        return None
    line_start = np.concatenate(([0], grid[:-1, -1] + 1))
    return [(line_start if f == 0 else grid[:, f - 1] + 1, grid[:, f]) for f in range(n_fields)]


def _flat(a: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The spans' bytes end to end: (bytes, span of each byte, position in its span, lengths)."""
    starts = starts.astype(np.int64)
    lens = ends.astype(np.int64) - starts
    first = np.cumsum(lens) - lens
    which = np.repeat(np.arange(len(lens)), lens)
    pos = np.arange(int(lens.sum())) - first[which]
    return a[starts[which] + pos], which, pos, lens


def _strings(a: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list[str]:
    """The spans as str objects, made by one split of their concatenation (C loops only)."""
    if not len(starts):
        return []
    starts = starts.astype(np.int64)
    lens = ends.astype(np.int64) - starts
    step = lens + 1                                       # each token and a newline
    out_start = np.cumsum(step) - step
    idx = np.repeat(starts - out_start, step) + np.arange(int(step.sum()))
    joined = a[np.minimum(idx, len(a) - 1)]
    joined[out_start + lens] = _NEWLINE
    return joined.tobytes().decode("ascii").split("\n")[:-1]


def _numbers(a: np.ndarray, starts: np.ndarray, ends: np.ndarray, kind: type) -> np.ndarray:
    """``float``/``int`` of each span, as the line reader reads it: plain decimals in numpy
    (exactly ``float``'s value; for ``int``, those without a dot), the rest by ``kind``
    itself, one by one. Decline on an error, or an int beyond 64 bits."""
    out = np.empty(len(starts), dtype=np.float64 if kind is float else np.int64)
    view = WordView(a)
    step = 1 << 16
    for lo in range(0, len(starts), step):
        s, e = starts[lo:lo + step].astype(np.int64), ends[lo:lo + step].astype(np.int64)
        value, ok = decimals(a, view, s, e, dot=kind is float)
        out[lo:lo + len(s)] = value if kind is float else np.where(ok, value, 0).astype(np.int64)
        bad = np.flatnonzero(~ok)
        if len(bad):
            texts = _strings(a, s[bad], e[bad])
            if any("_" in t for t in texts):  # Python reads 1_0 as 10, trec_eval as 1: the line reader refuses it
                raise Decline
            try:
                out[lo + bad] = list(map(kind, texts))
            except (ValueError, OverflowError):
                raise Decline from None
    return out


def _group(a: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Distinct values of the spans in order of first appearance, and each span's index
    into them. Runs of equal neighbours (a file sorted by query) are found in numpy."""
    names: list[str] = []
    code_of: dict[str, int] = {}
    codes = np.empty(len(starts), dtype=np.int32)
    view = WordView(a)
    step = 1 << 16
    for lo in range(0, len(starts), step):
        s, e = starts[lo:lo + step].astype(np.int64), ends[lo:lo + step].astype(np.int64)
        n = len(s)
        lens = e - s
        same = np.zeros(n, dtype=bool)          # span i equals span i - 1
        longest = int(lens.max())
        if longest <= 16:                       # compared as one or two words each
            w = words(view, s, e, 1 if longest <= 8 else 2)
            same[1:] = (w[1:] == w[:-1]).all(axis=1)
        else:
            same[1:] = lens[1:] == lens[:-1]
            cand = np.flatnonzero(same)
            if len(cand):
                chars, which, pos, _ = _flat(a, s[cand], e[cand])
                differ = chars != a[s[cand - 1][which] + pos]
                same[cand[np.bincount(which, differ, len(cand)) > 0]] = False
        heads = np.flatnonzero(~same)
        bounds = np.append(heads, n)
        for head, b0, b1 in zip(_strings(a, s[heads], e[heads]), bounds[:-1].tolist(), bounds[1:].tolist()):
            code = code_of.get(head)
            if code is None:
                code = code_of[head] = len(names)
                names.append(head)
            codes[lo + b0:lo + b1] = code
    return names, codes


@dataclass
class RunTable:
    """A run file read in bulk: what trec_eval reads of it, documents built on demand."""

    qids: list[str]           # distinct, in order of first appearance
    tag: str                  # the last line's tag (trec_eval's runid)
    _a: np.ndarray            # the file's bytes
    _order: np.ndarray        # line indexes grouped by query (file order within a query)
    _bounds: np.ndarray       # _order[_bounds[k]:_bounds[k + 1]]: the lines of qids[k]
    _doc: tuple[np.ndarray, np.ndarray]
    _score: np.ndarray
    # what a duplicate document does: the caller's line reader, which names its line
    on_duplicate: Callable[[], None] | None = None

    def __len__(self) -> int:
        return len(self._score)

    def size(self, k: int) -> int:
        return int(self._bounds[k + 1] - self._bounds[k])

    def docs(self, ks: list[int]) -> dict[str, dict[str, float]]:
        """{qid: {docno: score}} for the queries ks (indexes into qids); Decline on a
        duplicate document (the line reader then says where)."""
        parts = [self._order[self._bounds[k]:self._bounds[k + 1]] for k in ks]
        lines = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        docnos = _strings(self._a, self._doc[0][lines], self._doc[1][lines])
        scores = self._score[lines].tolist()
        out = {}
        at = 0
        for k, part in zip(ks, parts):
            n = len(part)
            d = dict(zip(docnos[at:at + n], scores[at:at + n]))
            if len(d) != n:
                if self.on_duplicate is not None:
                    self.on_duplicate()
                raise Decline
            out[self.qids[k]] = d
            at += n
        return out

    def batch_indexes(self, docs_per_batch: int | None = None) -> list[list[int]]:
        """Every query, in batches of about ``docs_per_batch`` documents, in file order."""
        docs_per_batch = docs_per_batch or BATCH_DOCS
        out: list[list[int]] = [[]]
        n = 0
        for k in range(len(self.qids)):
            if n >= docs_per_batch:
                out.append([])
                n = 0
            out[-1].append(k)
            n += self.size(k)
        return out

    def check_all(self) -> None:
        """Every query's documents built once, for the duplicates."""
        for ks in self.batch_indexes():
            self.docs(ks)


def _scan_run_part(a: np.ndarray, lo: int, hi: int) -> tuple:
    """One stretch of whole lines: (docno spans, scores, qids, codes, tag span)."""
    spans, (tag_s, tag_e) = _tokenize(a[lo:hi], 6, False, (0, 2, 4))
    scores = _numbers(a[lo:hi], *spans[4], float)
    if not np.isfinite(scores).all():
        raise Decline
    qids, codes = _group(a[lo:hi], *spans[0])
    offsets = np.int32 if len(a) < 2**31 else np.int64
    doc_s, doc_e = (x.astype(offsets) + lo for x in spans[2])
    return doc_s, doc_e, scores, qids, codes, (tag_s + lo, tag_e + lo)


def _line_stretches(a: np.ndarray, n: int) -> list[tuple[int, int]]:
    """n stretches of about equal size, cut after a newline."""
    cuts = [0]
    for k in range(1, n):
        at = len(a) * k // n
        nl = np.flatnonzero(a[at:at + (1 << 20)] == _NEWLINE)
        if len(nl) and at + int(nl[0]) + 1 > cuts[-1] and at + int(nl[0]) + 1 < len(a):
            cuts.append(at + int(nl[0]) + 1)
    return list(zip(cuts, cuts[1:] + [len(a)]))


def scan_run(data: bytes) -> RunTable:
    a = np.frombuffer(_normalized(data), dtype=np.uint8)
    # stretches of the file in forked workers (a stretch with no line: Decline, as a
    # whole file with none); below a few MB the fork costs more than it saves
    stretches = _line_stretches(a, worker_count() if len(a) > (8 << 20) else 1)
    parts = fork_map(lambda r: _scan_run_part(a, *r), stretches, [hi - lo for lo, hi in stretches])
    qids: list[str] = []
    code_of: dict[str, int] = {}
    codes = []
    for *_, names, part_codes, _ in parts:
        for q in names:
            if q not in code_of:
                code_of[q] = len(qids)
                qids.append(q)
        codes.append(np.array([code_of[q] for q in names], dtype=np.int32)[part_codes])
    codes = np.concatenate(codes)
    order = np.argsort(codes, kind="stable").astype(np.int32)
    bounds = np.searchsorted(codes[order], np.arange(len(qids) + 1))
    tag_s, tag_e = parts[-1][5]
    doc = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
    scores = np.concatenate([p[2] for p in parts])
    return RunTable(qids, a[tag_s:tag_e].tobytes().decode("ascii"), a, order, bounds, doc, scores)


def scan_qrels(data: bytes) -> dict[str, dict[str, int]]:
    data = _normalized(data)
    a = np.frombuffer(data, dtype=np.uint8)
    spans, _ = _tokenize(a, 4, True, (0, 2, 3))
    labels = _numbers(a, *spans[3], int).tolist()
    if len(labels) != data.count(b"\n") + (not data.endswith(b"\n")):
        raise Decline  # a blank line, which trec_eval refuses in qrels: the line reader names it
    if labels and (max(labels) > LABEL_MAX or min(labels) < -LABEL_MAX):
        raise Decline  # out of range: the line reader names the line
    qids, codes = _group(a, *spans[0])
    docnos = _strings(a, *spans[2])
    qrels: dict[str, dict[str, int]] = {q: {} for q in qids}
    for code, docno, label in zip(codes.tolist(), docnos, labels):
        qrels[qids[code]][docno] = label
    if sum(map(len, qrels.values())) != len(labels):
        raise Decline  # a duplicate judgment
    return qrels
