"""trec_eval's official measures computed over a run read in bulk, in numpy.

``exam-qrels`` scores with pytrec_eval (trec_eval's own C code) by default; pytrec_eval
takes a run as a dict of dicts, and building and copying that (1.6 M Python strings and
floats for a leaderboard at TREC depth) costs more than trec_eval's whole run. For the
measures a plain ``trec_eval QRELS RUN`` prints (``-m official``: num_ret, num_rel,
num_rel_ret, map, gm_map, Rprec, bpref, recip_rank, iprec_at_recall, P, with any
cutoffs) this module computes the same per-query values from the table's arrays.

Same values, not close ones: every value is the one IEEE double that trec_eval 9.0.8's C
computes (m_map.c, m_P.c, m_Rprec.c, m_bpref.c, m_recip_rank.c, m_iprec_at_recall.c,
m_gm_map.c, form_res_rels.c), because each is either one division of two integers, a
maximum of such divisions, or a sum taken in trec_eval's order (``cumsum`` along a row
adds left to right, as its loop does; numpy's ``sum`` would add pairwise). Scores rank as
C floats, ties by docno descending (byte order, as ``strcmp``). The tests hold these
values to pytrec_eval's and to the trec_eval binary's on random runs.

Anything else goes to pytrec_eval: other measures, ``-l`` below 1, ``-J``, ``-M 0``,
queries whose judgments are all negative, and (``None`` from :func:`score_table`) a
duplicate document, docnos longer than 64 bytes, or rankings too long to lay out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .packed_bytes import WordView
from .packed_bytes import words as packed_words
from .parallel import fork_map
from .qrels_cache import per_qrels
from .registry import Request

if TYPE_CHECKING:
    from .bulk import RunTable

OFFICIAL = frozenset({"num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
                      "iprec_at_recall", "P"})
_SUMMARY_ONLY = frozenset({"runid", "num_q"})   # filled in by the summary, from no per-query value
MIN_GEO_MEAN = 0.00001
BATCH_DOCS = 1 << 18            # documents scored at once: bounds the temporaries
_MAX_DOCNO = 64                  # bytes; longer docnos go to pytrec_eval
_MAX_CELLS = 1 << 24             # queries x most relevant documents retrieved by one query
_BLOOM_SHIFT = np.uint64(64 - 22)   # 4 MB of flags: few false positives for a million judgments
_M1, _M2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)


def can_score(requests: list[Request], *, level: int, judged_only: bool, max_docs: int | None,
              degenerate: set[str]) -> bool:
    """Whether this module computes every value of ``requests`` under these options."""
    names = {r.measure.name for r in requests}
    return (bool(names & OFFICIAL) and names <= OFFICIAL | _SUMMARY_ONLY and level >= 1
            and not judged_only and max_docs != 0 and not degenerate)


def _hash(qcodes: np.ndarray, words: np.ndarray) -> np.ndarray:
    """A 64-bit mix of (query, docno); equal hashes are compared in full."""
    h = qcodes.astype(np.uint64) * _M1
    with np.errstate(over="ignore"):
        for j in range(words.shape[1]):
            h = (h ^ words[:, j]) * _M2
            h ^= h >> np.uint64(31)
    return h


def _pad_words(words: np.ndarray, width: int) -> np.ndarray:
    if words.shape[1] >= width:
        return words
    return np.hstack([words, np.zeros((len(words), width - words.shape[1]), dtype=np.uint64)])


@dataclass
class _Judgments:
    """One qrels as arrays: the (query, docno) hashes sorted, their words and labels."""

    qcode: dict[str, int]
    hashes: np.ndarray
    words: np.ndarray
    labels: np.ndarray
    keys_qcode: np.ndarray
    n_queries: int
    bloom: np.ndarray               # by a hash's top bits: could it be a judgment's
    _counts: dict = field(default_factory=dict)

    def counts(self, level: int) -> tuple[np.ndarray, np.ndarray]:
        """Per query code: judgments with label >= level (num_rel), and with 0 <= label < level."""
        if level not in self._counts:
            q = self.n_queries
            qc, labels = self.keys_qcode, self.labels
            self._counts[level] = (np.bincount(qc[labels >= level], minlength=q),
                                   np.bincount(qc[(labels >= 0) & (labels < level)], minlength=q))
        return self._counts[level]


_JUDGMENTS: dict = {}


def _judgments(qrels: dict[str, dict[str, int]]) -> _Judgments | None:
    return per_qrels(_JUDGMENTS, qrels, (), lambda: _arrays_of(qrels))


def _arrays_of(qrels: dict[str, dict[str, int]]) -> _Judgments | None:
    qids = list(qrels)
    docnos = [d.encode("utf-8", "surrogateescape") for docs in qrels.values() for d in docs]
    width = max(map(len, docnos), default=1)
    if width > _MAX_DOCNO:
        return None
    width = -(-width // 8)
    flat = np.frombuffer(b"".join(d.ljust(width * 8, b"\0") for d in docnos), dtype=np.uint8)
    words = flat.reshape(len(docnos), width * 8).view(">u8").astype(np.uint64)
    qc = np.repeat(np.arange(len(qids)), [len(docs) for docs in qrels.values()])
    labels = np.fromiter((lab for docs in qrels.values() for lab in docs.values()), dtype=np.int64,
                         count=len(docnos))
    hashes = _hash(qc, words)
    order = np.argsort(hashes, kind="stable")
    hashes = hashes[order]
    if (hashes[1:] == hashes[:-1]).any():   # a collision: leave this qrels to pytrec_eval
        return None
    bloom = np.zeros(1 << (64 - _BLOOM_SHIFT), dtype=bool)
    bloom[hashes >> _BLOOM_SHIFT] = True
    return _Judgments({q: k for k, q in enumerate(qids)}, hashes, words[order], labels[order], qc[order],
                      len(qids), bloom)


def _segments(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For items grouped in segments of ``counts``: each item's segment and its index in it."""
    seg = np.repeat(np.arange(len(counts)), counts)
    start = np.cumsum(counts) - counts
    return seg, np.arange(int(counts.sum())) - start[seg]


def _ranking(scores: np.ndarray, seg: np.ndarray, words: np.ndarray) -> np.ndarray:
    """The permutation that ranks items (grouped by segment) as trec_eval does within each
    segment: score as a C float descending, then docno descending."""
    with np.errstate(over="ignore"):
        f = scores.astype(np.float32) + np.float32(0.0)   # -0.0 ties with 0.0, as in C
    bits = f.view(np.uint32)
    key = np.where(bits >> np.uint32(31) != 0, ~bits, bits | np.uint32(1 << 31))   # ascending as the floats
    composite = (seg.astype(np.uint64) << np.uint64(32)) | (~key).astype(np.uint64)
    perm = np.argsort(composite, kind="stable")
    ordered = composite[perm]
    tied = ordered[1:] == ordered[:-1]
    if tied.any():
        # within each group of equal (segment, score): docno descending
        tie = np.zeros(len(perm), dtype=bool)
        tie[1:] |= tied
        tie[:-1] |= tied
        at = np.flatnonzero(tie)
        group = np.cumsum(np.concatenate(([True], ~tied)))[at]
        sub = perm[at]
        keys = [~words[sub, j] for j in range(words.shape[1] - 1, -1, -1)] + [group]
        perm[at] = sub[np.lexsort(keys)]
    return perm


def score_table(qrels: dict[str, dict[str, int]], table: RunTable, evaluated: list[str], requests: list[Request],
                *, level: int, max_docs: int | None) -> dict[str, dict[str, float]] | None:
    """Per-query values of ``requests`` for the ``evaluated`` queries (all in the table and
    in the qrels), or None where pytrec_eval must decide (see the module's note). Queries
    go a batch at a time (memory stays that of one batch), batches to forked workers."""
    judg = _judgments(qrels)
    if judg is None or not len(table) or not evaluated:
        return None
    judg.counts(level)   # once, before the workers fork
    code_of = {q: judg.qcode[q] for q in evaluated}
    batches = table.batch_indexes(BATCH_DOCS)
    parts = fork_map(lambda ks: _score_queries(judg, table, ks, code_of, requests, level, max_docs),
                     batches, [sum(map(table.size, ks)) for ks in batches])
    out: dict[str, dict[str, float]] = {}
    for part in parts:
        if part is None:
            return None
        out.update(part)
    return out


def _score_queries(judg: _Judgments, table: RunTable, ks: list[int], code_of: dict[str, int],
                   requests: list[Request], level: int, max_docs: int | None) -> dict[str, dict[str, float]] | None:
    """The values of the evaluated queries among the table's queries ``ks`` (consecutive
    indexes), or None for a duplicate document or a docno too long."""
    starts, ends = table._doc
    lines = table._order[table._bounds[ks[0]]:table._bounds[ks[-1] + 1]]
    s, e = starts[lines].astype(np.int64), ends[lines].astype(np.int64)
    longest = int((e - s).max())
    if longest > _MAX_DOCNO:
        return None
    words = packed_words(WordView(table._a), s, e, max(-(-longest // 8), judg.words.shape[1]))
    del s, e
    qcount = np.array([table.size(k) for k in ks], dtype=np.int64)
    seg = np.repeat(np.arange(len(ks)), qcount)
    if _duplicate(_hash(seg, words), seg, words):
        return None

    # the evaluated queries' documents, ranked; segments numbered as ``ks``
    evaluated = [(i, table.qids[k]) for i, k in enumerate(ks) if table.qids[k] in code_of]
    if not evaluated:
        return {}
    scores = table._score[lines]
    if len(evaluated) < len(ks):
        keep = np.zeros(len(ks), dtype=bool)
        keep[[i for i, _ in evaluated]] = True
        on = keep[seg]
        seg, words, scores = seg[on], words[on], scores[on]
        qcount = np.where(keep, qcount, 0)
    words = words[_ranking(scores, seg, words)]
    del scores
    counts = qcount
    if max_docs is not None:
        _, rank = _segments(counts)
        words = words[rank < max_docs]
        counts = np.minimum(counts, max_docs)

    # each ranked document's label, as form_res_rels.c: -1 not in the pool, -2 a label < 0
    qcodes = np.zeros(len(ks), dtype=np.int64)
    qcodes[[i for i, _ in evaluated]] = [code_of[q] for _, q in evaluated]
    seg, rank = _segments(counts)
    # hashed on the judgments' width (a longer docno matches nothing), compared in full
    h = _hash(qcodes[seg], words[:, :judg.words.shape[1]])
    maybe = np.flatnonzero(judg.bloom[h >> _BLOOM_SHIFT])     # most documents are unjudged
    hm = h[maybe]
    at = np.minimum(np.searchsorted(judg.hashes, hm), len(judg.hashes) - 1)
    ok = (judg.hashes[at] == hm) & (judg.keys_qcode[at] == qcodes[seg[maybe]])
    ok &= (_pad_words(judg.words[at], words.shape[1]) == words[maybe]).all(axis=1)
    rel = np.full(len(h), -1, dtype=np.int64)
    rel[maybe[ok]] = np.where(judg.labels[at[ok]] < 0, -2, judg.labels[at[ok]])
    num_rel, num_nonrel = (x[qcodes] for x in judg.counts(level))
    values = _values(requests, counts, seg, rank, rel, level, num_rel, num_nonrel)
    if values is None:
        return None
    return {q: {name: column[i] for name, column in values} for i, q in evaluated}


def _duplicate(hashes: np.ndarray, seg: np.ndarray, words: np.ndarray) -> bool:
    """Whether two items share a segment and a docno. Items go to buckets by their hash's
    top bits (4 buckets an item); only those that share a bucket are sorted and compared
    (scattering into buckets is far cheaper than sorting every hash)."""
    n = len(hashes)
    bits = max(n.bit_length() + 2, 4)
    bucket = (hashes >> np.uint64(64 - bits)).astype(np.intp)
    last = np.empty(1 << bits, dtype=np.int32)
    last[bucket] = np.arange(n, dtype=np.int32)        # the last item written wins its bucket
    shared = np.zeros(1 << bits, dtype=bool)
    shared[bucket[last[bucket] != np.arange(n, dtype=np.int32)]] = True
    crowded = np.flatnonzero(shared[bucket])
    sub = crowded[np.argsort(hashes[crowded])]
    same = np.flatnonzero(hashes[sub][1:] == hashes[sub][:-1])
    i, j = sub[same], sub[same + 1]
    return bool(((seg[i] == seg[j]) & (words[i] == words[j]).all(axis=1)).any())


def _rows(seg: np.ndarray, index: np.ndarray, values: np.ndarray, n_rows: int, n_cols: int) -> np.ndarray:
    """values laid out one row per query (left to right in rank order), zero padded."""
    out = np.zeros((n_rows, max(n_cols, 1)), dtype=np.float64)
    out[seg, index] = values
    return out


def _values(requests: list[Request], counts: np.ndarray, seg: np.ndarray, rank: np.ndarray, rel: np.ndarray,
            level: int, num_rel: np.ndarray, num_nonrel: np.ndarray) -> list[tuple[str, list[float]]] | None:
    """(value name, its value for each segment) of every requested value. A segment without
    documents (a query not evaluated) gets values nobody reads."""
    nq = len(counts)
    fl = np.float64
    relevant = rel >= level
    hit = np.flatnonzero(relevant)
    hit_seg = seg[hit]
    rel_ret = np.bincount(hit_seg, minlength=nq)
    most = int(rel_ret.max(initial=0))
    if nq * most > _MAX_CELLS:
        return None
    hit_index = np.arange(len(hit)) - (np.cumsum(rel_ret) - rel_ret)[hit_seg]   # 0: the query's first
    hit_rank = (rank[hit] + 1).astype(fl)                                       # 1-based position
    seg_start = np.cumsum(counts) - counts
    cum_rel = np.concatenate(([0], np.cumsum(relevant)))

    def rel_in_top(k: np.ndarray) -> np.ndarray:
        """Per query: its relevant documents within its top k (k <= its documents)."""
        return cum_rel[seg_start + k] - cum_rel[seg_start]

    safe_rel = np.maximum(num_rel, 1).astype(fl)
    out: dict[str, np.ndarray] = {"num_ret": counts.astype(fl), "num_rel": num_rel.astype(fl),
                                  "num_rel_ret": rel_ret.astype(fl)}
    names = {name for r in requests for name in r.names}
    if names & {"map", "gm_map"}:
        # sum of precision at each relevant document, added in rank order as m_map.c
        total = np.cumsum(_rows(hit_seg, hit_index, (hit_index + 1) / hit_rank, nq, most), axis=1)[:, -1]
        out["map"] = np.where(rel_ret > 0, total / safe_rel, 0.0)
        out["gm_map"] = np.array([math.log(max(v, MIN_GEO_MEAN)) for v in out["map"].tolist()])
    if "Rprec" in names:
        look = np.minimum(counts, num_rel)
        out["Rprec"] = np.where(look > 0, rel_in_top(look) / safe_rel, 0.0)
    if "recip_rank" in names:
        first = np.zeros(nq)
        firsts = hit_index == 0
        first[hit_seg[firsts]] = 1.0 / hit_rank[firsts]
        out["recip_rank"] = first
    if "bpref" in names:
        judged_nonrel = (rel >= 0) & ~relevant
        above = np.concatenate(([0], np.cumsum(judged_nonrel)))        # judged nonrelevant before each position
        before = above[hit] - above[seg_start[hit_seg]]
        denom = np.minimum(num_nonrel, num_rel)[hit_seg].astype(fl)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(before > 0, 1.0 - np.minimum(before, num_rel[hit_seg]) / denom, 1.0)
        total = np.cumsum(_rows(hit_seg, hit_index, terms, nq, most), axis=1)[:, -1]
        out["bpref"] = np.where(num_rel > 0, total / safe_rel, total)
    for r in requests:
        if r.measure.name == "P":
            for name, k in zip(r.names, r.cutoffs):
                out[name] = rel_in_top(np.minimum(counts, int(k))) / fl(k)
        elif r.measure.name == "iprec_at_recall":
            # interpolated precision: the best precision at or below each relevant document
            prec = _rows(hit_seg, hit_index, (hit_index + 1) / hit_rank, nq, most)
            best = np.maximum.accumulate(prec[:, ::-1], axis=1)[:, ::-1]
            for name, pct in zip(r.names, r.cutoffs):
                with np.errstate(invalid="ignore"):  # a cutoff of nan or 1e20: C's (long) gives LONG_MIN too
                    cut = np.trunc(fl(pct) * num_rel.astype(fl) + 0.9).astype(np.int64)
                value = np.where((cut <= 0) & (rel_ret > 0), best[:, 0], 0.0)
                inside = np.flatnonzero((cut >= 1) & (cut <= rel_ret))
                value[inside] = best[inside, cut[inside] - 1]
                out[name] = value
    return [(name, out[name].tolist()) for r in requests if r.measure.source == "pytrec" for name in r.names]
