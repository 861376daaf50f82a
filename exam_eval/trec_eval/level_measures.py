"""The measures whose value hangs on ``-l`` (each compares a ranked document's label with
the level), computed from trec_eval 9.0.8's source for levels below 0.

At such a level trec_eval's form_res_rels.c still counts num_rel and num_rel_ret over
judged documents only (labels >= 0), but these measures test each retrieved document's
entry in its ranked list against the level, and that list holds -1 for a document the
qrels lack and -2 for one judged with a negative label: at -l -1 the first count as
relevant, at -l -2 both, so that map or recall can pass 1. The output is well defined (no
array is read out of bounds); pytrec_eval takes no level below 1 and relabelled qrels
cannot stand in (they cannot make a document relevant where it is retrieved without
adding it to num_rel), so exam-qrels computes them here: the loops, the integer
conversions and the order of floating-point additions are those of m_map.c, m_P.c, ...
Every other measure reads only labels >= 0 (or counts that do), where any level below 0
is level 0, and keeps that path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .c_numbers import c_div, c_long
from .registry import Request

MIN_GEO_MEAN = 0.00001
LEVEL_MEASURES = frozenset({"map", "gm_map", "Rprec", "recip_rank", "iprec_at_recall", "P", "recall",
                            "Rprec_mult", "11pt_avg", "binG", "map_cut", "relative_P", "success", "yaap"})


@dataclass
class ResRels:
    """form_res_rels.c's RES_RELS for one query (what these measures read of it)."""

    rel_list: list[int]   # label of each ranked document: >= 0, -1 not judged, -2 judged below 0
    num_rel: int
    num_rel_ret: int

    @property
    def num_ret(self) -> int:
        return len(self.rel_list)


def res_rels(labels: dict[str, int], rel_list: list[int], level: int) -> ResRels:
    """``rel_list``: gain_measures.ranked_rels of the query's run."""
    num_rel_ret = sum(1 for r in rel_list if r >= 0 and r >= level)
    num_rel = sum(1 for lab in labels.values() if lab >= 0 and lab >= level)
    return ResRels(rel_list, num_rel, num_rel_ret)


def c_log(x: float) -> float:
    """glibc's log where Python's raises: -inf at 0, a negative NaN below it."""
    if x != x:
        return x
    if x > 0:
        return math.log(x)
    return -math.inf if x == 0 else -math.nan


def _ap_sum(rr: ResRels, level: int) -> tuple[float, int]:
    total, rel_so_far = 0.0, 0
    for i, r in enumerate(rr.rel_list):
        if r >= level:
            rel_so_far += 1
            total += rel_so_far / (i + 1)
    return total, rel_so_far


def _at_cutoffs(rr: ResRels, level: int, cutoffs: tuple, value) -> list[float]:
    """m_P.c's loop, shared by P, recall, map_cut, relative_P, success: ``value(i, rel_so_far,
    ap_sum)`` at each cutoff i within the ranking, and at the cutoffs past its end."""
    out = [0.0] * len(cutoffs)
    k = rel_so_far = 0
    total = 0.0
    for i, r in enumerate(rr.rel_list):
        if i == cutoffs[k]:
            out[k] = value(i, rel_so_far, total)
            k += 1
            if k == len(cutoffs):
                return out
        if r >= level:
            rel_so_far += 1
            total += rel_so_far / (i + 1)
    while k < len(cutoffs):
        out[k] = value(cutoffs[k], rel_so_far, total)
        k += 1
    return out


def _iprec(rr: ResRels, level: int, percents: tuple) -> tuple[list[float | None], float]:
    """m_iprec_at_recall.c / m_11pt_avg.c: the interpolated precision at each recall cutoff
    (None: left at 0 by iprec_at_recall, left out of 11pt_avg's sum), and the last one."""
    cutoffs = [c_long(p * rr.num_rel + 0.9) for p in percents]
    out: list[float | None] = [None] * len(cutoffs)
    cut = len(cutoffs) - 1
    while cut >= 0 and cutoffs[cut] > rr.num_rel_ret:
        cut -= 1
    int_precis = c_div(rr.num_rel_ret, rr.num_ret)
    rel_so_far = rr.num_rel_ret
    i = rr.num_ret
    while i > 0 and rel_so_far > 0:
        precis = rel_so_far / i
        if int_precis < precis:
            int_precis = precis
        if rr.rel_list[i - 1] >= level:
            while cut >= 0 and rel_so_far == cutoffs[cut]:
                out[cut] = int_precis
                cut -= 1
            rel_so_far -= 1
        i -= 1
    while cut >= 0:
        out[cut] = int_precis
        cut -= 1
    return out, int_precis


def _rprec_mult(rr: ResRels, level: int, percents: tuple) -> list[float]:
    cutoffs = [c_long(p * rr.num_rel + 0.9) for p in percents]
    out = [0.0] * len(cutoffs)
    cut = len(cutoffs) - 1
    while cut >= 0 and cutoffs[cut] > rr.num_ret:
        out[cut] = rr.num_rel_ret / float(cutoffs[cut])
        cut -= 1
    rel_so_far = rr.num_rel_ret
    i = rr.num_ret
    while i > 0 and rel_so_far > 0:
        precis = rel_so_far / i
        while cut >= 0 and i == cutoffs[cut]:
            out[cut] = precis
            cut -= 1
        if rr.rel_list[i - 1] >= level:
            rel_so_far -= 1
        i -= 1
    return out


def values(r: Request, rr: ResRels, level: int) -> list[float]:
    """The values of ``r`` (a measure of LEVEL_MEASURES) in ``r.names`` order."""
    name = r.measure.name
    num_rel = rr.num_rel
    if name in ("map", "gm_map"):
        total, rel_so_far = _ap_sum(rr, level)
        if name == "map":
            return [c_div(total, num_rel) if rel_so_far else 0.0]
        if rel_so_far:
            total = c_div(total, num_rel)
        return [c_log(total if total > MIN_GEO_MEAN else MIN_GEO_MEAN)]
    if name == "Rprec":
        look = min(rr.num_ret, num_rel)
        if look == 0:
            return [0.0]
        return [sum(1 for x in rr.rel_list[:look] if x >= level) / num_rel]
    if name == "recip_rank":
        first = next((i for i, x in enumerate(rr.rel_list) if x >= level), None)
        return [0.0 if first is None else 1.0 / (first + 1)]
    if name == "iprec_at_recall":
        return [0.0 if v is None else v for v in _iprec(rr, level, r.cutoffs)[0]]
    if name == "11pt_avg":
        cuts, _ = _iprec(rr, level, r.cutoffs)
        total = 0.0
        for v in reversed(cuts):   # added from the top cutoff down, as the C loop goes
            if v is not None:
                total += v
        return [total / len(cuts)]
    if name == "Rprec_mult":
        return _rprec_mult(rr, level, r.cutoffs)
    if name == "binG":
        total, rel_so_far = 0.0, 0
        for i, x in enumerate(rr.rel_list):
            if x >= level:
                rel_so_far += 1
                total += 1.0 / math.log2(float(3 + i - rel_so_far))
        return [c_div(total, num_rel) if rel_so_far else 0.0]
    if name == "yaap":
        total, _ = _ap_sum(rr, level)
        return [c_log(c_div(1.0 + total, 1.0 + num_rel - total))]
    cutoffs = r.cutoffs
    if name == "P":
        return _at_cutoffs(rr, level, cutoffs, lambda i, n, _: n / float(i))
    if name == "success":
        return _at_cutoffs(rr, level, cutoffs, lambda i, n, _: 1.0 if n else 0.0)
    if num_rel == 0:   # recall, map_cut, relative_P
        return [0.0] * len(cutoffs)
    if name == "recall":
        return _at_cutoffs(rr, level, cutoffs, lambda i, n, _: n / float(num_rel))
    if name == "map_cut":
        return _at_cutoffs(rr, level, cutoffs, lambda i, n, total: total / float(num_rel))
    if name == "relative_P":
        return _at_cutoffs(rr, level, cutoffs, lambda i, n, _: n / float(num_rel if i > num_rel else i))
    raise ValueError(name)
