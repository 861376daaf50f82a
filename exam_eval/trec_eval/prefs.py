"""The prefs_* measures of trec_eval 9.0.8 (-R prefs, -R qrels_prefs), which pytrec_eval
does not compute. Written from form_prefs_counts.c and the m_prefs_*.c files, step for
step (same counts, same order of floating-point additions), and held to the real binary
by the tests.

Per query: the judged documents get internal ids, first the retrieved ones in rank
order (score descending, ties by docno *ascending* here, unlike the qrels measures),
then the others in docno order. A judgment group with one sub-group is a list of
equivalence classes (documents at one level), each preferred to the classes below it;
with several sub-groups it is a preference matrix closed under transitivity. Each
group counts its preferences as fulfilled / possible among retrieved documents ("ret"),
with one of the two retrieved ("imp"), or neither ("notoccur"); a counts matrix adds
the groups' preferences over document pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from .c_numbers import c_div
from ..io.trec_rules import trec_ranked
from .prefs_files import Prefs
from .registry import Request


class PrefsError(Exception):
    """trec_eval's form_prefs_counts fails on this query (its measures "Can't calculate")."""


@dataclass
class JG:
    ecs: list[tuple[float, list[int]]] | None = None   # one sub-group: (level, ids ascending), levels descending
    pool_start: int = 0                                # where its ids start in the query's id pool
    pa: np.ndarray | None = None                       # several sub-groups: pa[i, j] iff i preferred to j
    rel_array: np.ndarray | None = None                # their level per id (-1: not in this group)
    ful_ret: int = 0
    poss_ret: int = 0
    ful_imp: int = 0
    poss_imp: int = 0
    notoccur: int = 0
    rel: int = 0
    rel_ret: int = 0
    nonrel: int = 0
    nonrel_ret: int = 0


@dataclass
class ResultsPrefs:
    jgs: list[JG]
    num_judged: int
    num_judged_ret: int
    counts: np.ndarray
    pool: list[int] = field(default_factory=list)   # the ids of the one-sub-group JGs, as trec_eval lays them out


def _ids(lines: list, docs: dict[str, float], max_docs: int | None) -> tuple[dict[str, int], int]:
    order = trec_ranked(docs, docno_ascending=True)
    if max_docs is not None:
        order = order[:max_docs]
    judged = {line[3] for line in lines}
    retrieved = [d for d in order if d in judged]
    ids = {d: i for i, d in enumerate(retrieved)}
    for d in sorted(judged - set(ids)):
        ids[d] = len(ids)
    return ids, len(retrieved)


def _ec_counts(jg: JG, njr: int, counts: np.ndarray) -> None:
    for i, (level, ranks) in enumerate(jg.ecs):
        r = np.array(ranks, dtype=np.int64)
        ret = int(np.searchsorted(r, njr))          # ids are ascending: the retrieved come first
        if level > 0.0:
            jg.rel_ret += ret
            jg.rel += len(r)
        else:
            jg.nonrel_ret += ret
            jg.nonrel += len(r)
        for _, lower in jg.ecs[i + 1:]:
            r1, r2 = r[:, None], np.array(lower, dtype=np.int64)[None, :]
            if np.any(r1 == r2):
                raise PrefsError("a document occurs with different rel_levels in one sub-group")
            np.add.at(counts, (np.broadcast_to(r1, (len(r), r2.shape[1])), np.broadcast_to(r2, (len(r), r2.shape[1]))), 1)
            ful = r1 < r2
            jg.ful_ret += int(np.sum(ful & (r2 < njr)))
            jg.ful_imp += int(np.sum(ful & (r2 >= njr) & (r1 < njr)))
            jg.notoccur += int(np.sum(ful & (r1 >= njr) & (r2 >= njr)))
            jg.poss_ret += int(np.sum(~ful & (r1 < njr)))
            jg.poss_imp += int(np.sum(~ful & (r1 >= njr) & (r2 < njr)))
            jg.notoccur += int(np.sum(~ful & (r1 >= njr) & (r2 >= njr)))
    jg.poss_ret += jg.ful_ret
    jg.poss_imp += jg.ful_imp


def _closure(pa: np.ndarray) -> np.ndarray:
    # trec_eval multiplies the matrix (diagonal set) by itself until nothing changes:
    # the reflexive-transitive closure, whatever the order of the products
    n = len(pa)
    m = pa.copy()
    m[np.arange(n), np.arange(n)] = True
    while True:
        f = m.astype(np.float32)
        nxt = (f @ f) > 0
        if np.array_equal(nxt, m):
            break
        m = nxt
    m[np.arange(n), np.arange(n)] = False
    return m


def _pa_counts(jg: JG, entries: list, nj: int, njr: int, counts: np.ndarray) -> None:
    rel = np.full(nj, -1.0)
    pa = np.zeros((nj, nj), dtype=bool)
    for i, (_, jsg, level, rank) in enumerate(entries):
        prev = rel[rank]
        if (prev > 0.0 and level == 0.0) or (prev == 0.0 and level > 0.0):
            raise PrefsError("a document has both 0 and non-0 rel_level")
        rel[rank] = level
        j = i + 1
        while j < len(entries) and entries[j][1] == jsg and entries[j][2] == level:
            j += 1
        while j < len(entries) and entries[j][1] == jsg:
            pa[rank, entries[j][3]] = True
            j += 1
    pa = _closure(pa)
    if np.any(pa & pa.T):
        # trec_eval prints "Pref inconsistency found" and calls abort()
        raise PrefsError("preferences conflict within a judgment group (trec_eval aborts: Pref inconsistency found)")
    jg.pa, jg.rel_array = pa, rel
    jg.rel_ret = int(np.sum(rel[:njr] > 0.0))
    jg.nonrel_ret = int(np.sum(rel[:njr] == 0.0))
    jg.rel = jg.rel_ret + int(np.sum(rel[njr:] > 0.0))
    jg.nonrel = jg.nonrel_ret + int(np.sum(rel[njr:] == 0.0))
    jg.poss_ret, jg.ful_ret, jg.ful_imp, jg.poss_imp, jg.notoccur = _areas(pa, njr)
    counts += pa
    jg.poss_ret += jg.ful_ret
    jg.poss_imp += jg.ful_imp


def _areas(pa: np.ndarray, njr: int) -> tuple[int, int, int, int, int]:
    """Marks below / above the diagonal among retrieved, retrieved over not, not over
    retrieved, neither (form_prefs_counts.c's areas A2, A1, A3, A4, A5)."""
    top = pa[:njr, :njr]
    return (int(np.sum(np.tril(top, -1))), int(np.sum(np.triu(top, 1))), int(np.sum(pa[:njr, njr:])),
            int(np.sum(pa[njr:, :njr])), int(np.sum(pa[njr:, njr:])))


def form_prefs_counts(lines: list, docs: dict[str, float], max_docs: int | None) -> ResultsPrefs:
    ids, njr = _ids(lines, docs, max_docs)
    nj = len(ids)
    entries = sorted(((jg, jsg, level, ids[d]) for jg, jsg, level, d in lines),
                     key=lambda e: (e[0], e[1], -e[2], e[3]))
    counts = np.zeros((nj, nj), dtype=np.int64)
    rp = ResultsPrefs([], nj, njr, counts)
    start = 0
    while start < len(entries):
        end = start
        while end < len(entries) and entries[end][0] == entries[start][0]:
            end += 1
        group = entries[start:end]
        jg = JG()
        if len({e[1] for e in group}) > 1:
            _pa_counts(jg, group, nj, njr, counts)
        else:
            jg.ecs, jg.pool_start = [], len(rp.pool)
            for _, _, level, rank in group:
                if not jg.ecs or jg.ecs[-1][0] != level:
                    jg.ecs.append((level, []))
                jg.ecs[-1][1].append(rank)
                rp.pool.append(rank)
            _ec_counts(jg, njr, counts)
        rp.jgs.append(jg)
        start = end
    return rp


# ----------------------------------------------------------------- the measures

def _ratio(rp: ResultsPrefs, ful_of, poss_of) -> float:
    ful = sum(ful_of(g) for g in rp.jgs)
    poss = sum(poss_of(g) for g in rp.jgs)
    return ful / poss if poss else 0.0


def _avgjg(rp: ResultsPrefs, ful_of, poss_of) -> float:
    total = 0.0
    for g in rp.jgs:
        poss = poss_of(g)
        if poss:
            total += ful_of(g) / poss
    return total / len(rp.jgs) if total > 0.0 else 0.0


def _pair(rp: ResultsPrefs, blocks: int) -> float:
    """m_prefs_pair.c: blocks 1 (_ret), 2 (_imp) or 3 (all) of its loops."""
    c, njr = rp.counts, rp.num_judged_ret
    both = (c > 0) | (c.T > 0)
    total, pairs = 0.0, 0
    i, j = np.nonzero(np.triu(both[:njr, :njr], 1))
    for a, b in zip(i.tolist(), j.tolist()):
        pairs += 1
        total += int(c[a, b]) / int(c[a, b] + c[b, a])
    if blocks >= 2:
        i, j = np.nonzero(both[:njr, njr:])
        for a, b in zip(i.tolist(), (j + njr).tolist()):
            pairs += 1
            total += int(c[a, b]) / int(c[a, b] + c[b, a])
    if blocks >= 3:
        pairs += int(np.sum(np.triu(both[njr:, njr:], 1)))
    return total / pairs if pairs else 0.0


def _ec_recalculate(rp: ResultsPrefs, g: JG, size: int, retrieved_only: bool) -> tuple[int, int]:
    njr = rp.num_judged_ret
    last_start = g.pool_start + sum(len(ranks) for _, ranks in g.ecs[:-1])
    if last_start + size > len(rp.pool):
        # trec_eval takes the first R ids of the last class; with fewer there it reads
        # past its array (possible only with negative rel_levels)
        raise PrefsError("prefs_avgjg_Rnonrel on this input reads outside trec_eval's arrays")
    new_nonrel = rp.pool[last_start:last_start + size]

    def ids(ranks):
        if not retrieved_only:
            return ranks
        out = []
        for r in ranks:
            if r >= njr:
                break
            out.append(r)
        return out

    ful = poss = 0
    for e1 in range(len(g.ecs)):
        for e2 in range(e1 + 1, len(g.ecs) - 1):
            for r1 in ids(g.ecs[e1][1]):
                for r2 in ids(g.ecs[e2][1]):
                    if r1 < r2 and r1 < njr:
                        ful += 1
                    else:
                        poss += 1
    for e1 in range(len(g.ecs)):
        for r1 in ids(g.ecs[e1][1]):
            for r2 in ids(new_nonrel):
                if r1 < r2 and r1 < njr:
                    ful += 1
                else:
                    poss += 1
    return ful, poss + ful


def _pa_recalculate(rp: ResultsPrefs, g: JG, retrieved_only: bool) -> tuple[int, int]:
    njr, rel = rp.num_judged_ret, g.rel_array
    scan = njr if retrieved_only else rp.num_judged
    seen, first_discarded = 0, scan
    for i in range(scan):
        if rel[i] == 0.0:
            seen += 1
            if seen == g.rel + 1:
                first_discarded = i
                break
    keep = ~((np.arange(rp.num_judged) >= first_discarded) & (rel == 0.0))
    pa = g.pa & keep[:, None] & keep[None, :]
    below, above, ret_over_not, not_over_ret, neither = _areas(pa, njr)
    if retrieved_only:
        return above, below + above
    return above + ret_over_not, below + not_over_ret + neither + above + ret_over_not


def _rnonrel(rp: ResultsPrefs, retrieved_only: bool) -> float:
    total = 0.0
    for g in rp.jgs:
        R, N = (g.rel_ret, g.nonrel_ret) if retrieved_only else (g.rel, g.nonrel)
        if R >= N:
            if retrieved_only:
                ful, poss = g.ful_ret, g.poss_ret
            else:
                ful, poss = g.ful_ret + g.ful_imp, g.poss_ret + g.poss_imp + g.notoccur
            ful += g.rel_ret * (R - N)
            poss += g.rel * (R - N)
        elif g.ecs is not None:
            ful, poss = _ec_recalculate(rp, g, R, retrieved_only)
        else:
            ful, poss = _pa_recalculate(rp, g, retrieved_only)
        total += c_div(ful, poss)
    return total / len(rp.jgs) if total > 0.0 else 0.0


_ALL_FUL = (lambda g: g.ful_ret + g.ful_imp)
_ALL_POSS = (lambda g: g.poss_ret + g.poss_imp + g.notoccur)
_IMP_POSS = (lambda g: g.poss_ret + g.poss_imp)
MEASURES = {
    "prefs_num_prefs_poss": lambda rp: sum(_ALL_POSS(g) for g in rp.jgs),
    "prefs_num_prefs_ful": lambda rp: sum(_ALL_FUL(g) for g in rp.jgs),
    "prefs_num_prefs_ful_ret": lambda rp: sum(g.ful_ret for g in rp.jgs),
    "prefs_simp": lambda rp: _ratio(rp, _ALL_FUL, _ALL_POSS),
    "prefs_pair": lambda rp: _pair(rp, 3),
    "prefs_avgjg": lambda rp: _avgjg(rp, _ALL_FUL, _ALL_POSS),
    "prefs_avgjg_Rnonrel": lambda rp: _rnonrel(rp, False),
    "prefs_simp_ret": lambda rp: _ratio(rp, lambda g: g.ful_ret, lambda g: g.poss_ret),
    "prefs_pair_ret": lambda rp: _pair(rp, 1),
    "prefs_avgjg_ret": lambda rp: _avgjg(rp, lambda g: g.ful_ret, lambda g: g.poss_ret),
    "prefs_avgjg_Rnonrel_ret": lambda rp: _rnonrel(rp, True),
    "prefs_simp_imp": lambda rp: _ratio(rp, _ALL_FUL, _IMP_POSS),
    "prefs_pair_imp": lambda rp: _pair(rp, 2),
    "prefs_avgjg_imp": lambda rp: _avgjg(rp, _ALL_FUL, _IMP_POSS),
}


def per_query_values(judgments: Prefs, docs: dict[str, float], requests: list[Request], *,
                     level: int, judged_only: bool, max_docs: int | None, qid: str,
                     qrels_name: str | None = None) -> dict[str, float]:
    # -l and -J do not reach form_prefs_counts; -M does
    try:
        rp = form_prefs_counts(judgments[qid], docs, max_docs)
        return {r.names[0]: float(MEASURES[r.measure.name](rp)) for r in requests}
    except PrefsError as exc:
        first = requests[0].measure.name
        raise InputError(f"trec_eval 9.0.8 refuses this input: Can't calculate measure '{first}' "
                         f"(query {qid}: {exc})", qrels_name) from None
