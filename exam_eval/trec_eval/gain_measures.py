"""trec_eval's gain measures where pytrec_eval cannot give its value, written from trec_eval
9.0.8's m_Rndcg.c, m_ndcg.c, m_ndcg_rel.c, m_G.c and form_res_rels.c step for step (same
loops, same order of floating-point additions, the gain table sorted as glibc's qsort
sorts it with their comparator), and held to the real binary by the tests:

- Rndcg under -l below 1 on a query whose best label is 0. pytrec_eval takes no level
  below 1, and at level 1 such a query has no relevant document (Rndcg 0), where trec_eval
  counts its 0-labelled documents in R and goes on (with the default gains, to 0/0:
  -nan). On every other query the level does not reach Rndcg's value (R > 0 at level 1
  and at any level below), and pytrec_eval's is used.
- nDCG, ndcg_rel and G on a query whose judgments are all negative, evaluated after a
  query with a label >= 0. form_res_rels.c clears and fills its per-label counts only up
  to the query's largest label, and keeps the number of levels from the last query that
  had one: such a query is scored against the label counts of the last labelled query
  trec_eval scored before it (no memory is read out of bounds: the counts lie within the
  buffer that query filled). With the default gains that is 0 whatever the counts (no
  retrieved document has a gain); a gain given to level -1 or -2 (nDCG.-1=2) gives the
  retrieved documents without a label >= 0 a gain, and the ideal comes from those counts.
"""

from __future__ import annotations

import math

from .c_numbers import c_atof, c_atol, c_div
from ..io.trec_rules import trec_ranked

RELVALUE_NONPOOL = -1    # retrieved, not in the qrels
RELVALUE_UNJUDGED = -2   # judged with a negative label
_INT_MIN = -2 ** 31


def _c_int(x: float) -> int:
    # a double returned from a function declared int: x86's cvttsd2si truncates, and
    # gives INT_MIN for NaN and for anything out of int's range
    if x != x or not -2 ** 31 <= x < 2 ** 31:
        return _INT_MIN
    return int(x)


def _glibc_msort(items: list, cmp) -> list:
    """glibc's qsort for small arrays (msort_with_tmp: top-down merge sort, the left run
    first on cmp <= 0); m_Rndcg.c's comparator truncates a difference of gains to int,
    so gains less than 1 apart compare equal and the order they keep is the sort's."""
    n = len(items)
    if n <= 1:
        return list(items)
    n1 = n // 2
    left, right = _glibc_msort(items[:n1], cmp), _glibc_msort(items[n1:], cmp)
    out = []
    i = j = 0
    while i < len(left) and j < len(right):
        if cmp(left[i], right[j]) <= 0:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out + left[i:] + right[j:]


def _gains(raw: str | None, rel_levels: list[int]) -> list[list]:
    """setup_gains: [rel_level, num_at_level, gain] by (truncated) increasing gain."""
    table: list[list] = []
    if raw is not None:
        # get_param_pairs: name=value pairs; the level read with atol, the gain with atof
        for pair in raw.split(","):
            name, _, value = pair.partition("=")
            table.append([c_atol(name), 0, c_atof(value)])
    for i, count in enumerate(rel_levels):
        hit = next((g for g in table if g[0] == i), None)
        if hit is not None:
            hit[1] = count
        else:
            table.append([i, count, float(i)])
    return _glibc_msort(table, lambda a, b: _c_int(a[2] - b[2]))


def _get_gain(rel: int, gains: list[list]) -> float:
    for level, _, gain in gains:
        if level == rel:
            return gain
    return 0.0


def ranked_rels(labels: dict[str, int], docs: dict[str, float], judged_only: bool) -> list[int]:
    """form_res_rels.c's results_rel_list: the label of each ranked document, -1 where the
    qrels lack it, -2 where its label is negative; ``docs`` already cut to -M documents
    (trec_eval cuts before -J drops the unjudged)."""
    ranked = [labels.get(d) for d in trec_ranked(docs)]
    rel_list = [RELVALUE_NONPOOL if r is None else RELVALUE_UNJUDGED if r < 0 else r for r in ranked]
    return [r for r in rel_list if r >= 0] if judged_only else rel_list


def label_counts(labels: dict[str, int]) -> list[int]:
    """form_res_rels.c's rel_levels, up to num_rel_levels: judgments at each label >= 0
    ([] for a query judged only below 0)."""
    counts = [0] * (max(max(labels.values()), -1) + 1)
    for lab in labels.values():
        if lab >= 0:
            counts[lab] += 1
    while counts and not counts[-1]:
        counts.pop()
    return counts


def _c_log2(x: float) -> float:
    # glibc's log2 where Python's raises: -inf at 0, a negative NaN below it
    if x > 0 or x != x:
        return math.log2(x)
    return -math.inf if x == 0 else -math.nan


class _Ideal:
    """The ideal ranking's walk down the gain table, shared by the four loops: ``step``
    moves one rank down (past levels with no documents left), ``gain`` is that rank's."""

    def __init__(self, gains: list[list]):
        self.gains = gains
        self.cur_level = len(gains) - 1
        self.gain = gains[-1][2] if gains else 0.0
        self.num_at_level = 0

    def step(self) -> None:
        self.num_at_level += 1
        while self.cur_level >= 0 and self.num_at_level > self.gains[self.cur_level][1]:
            self.num_at_level = 1
            self.cur_level -= 1
            self.gain = self.gains[self.cur_level][2] if self.cur_level >= 0 else 0.0


def _ndcg(rel_list: list[int], gains: list[list]) -> float:
    ideal = _Ideal(gains)
    results_dcg = ideal_dcg = 0.0
    num_ret = len(rel_list)
    i = 0
    while i < num_ret and ideal.gain > 0.0:
        results_gain = _get_gain(rel_list[i], gains)
        if results_gain != 0:
            results_dcg += results_gain / math.log2(i + 2)
        ideal.step()
        if ideal.gain > 0.0:
            ideal_dcg += ideal.gain / math.log2(i + 2)
        i += 1
    while i < num_ret:
        results_gain = _get_gain(rel_list[i], gains)
        if results_gain != 0:
            results_dcg += results_gain / math.log2(i + 2)
        i += 1
    while ideal.gain > 0.0:
        ideal.step()
        if ideal.gain > 0.0:
            ideal_dcg += ideal.gain / math.log2(i + 2)
        i += 1
    return results_dcg / ideal_dcg if ideal_dcg > 0.0 else 0.0


def _ndcg_rel(rel_list: list[int], gains: list[list]) -> float:
    ideal = _Ideal(gains)
    results_dcg = ideal_dcg = total = 0.0
    num_rel = num_rel_ret = 0
    num_ret = len(rel_list)
    i = 0
    while i < num_ret and ideal.gain > 0.0:
        results_gain = _get_gain(rel_list[i], gains)
        if results_gain != 0:
            results_dcg += results_gain / math.log2(i + 2)
        ideal.step()
        if ideal.gain > 0.0:
            num_rel += 1
            ideal_dcg += ideal.gain / math.log2(i + 2)
        if results_gain > 0:
            total += c_div(results_dcg, ideal_dcg)
            num_rel_ret += 1
        i += 1
    while i < num_ret:
        results_gain = _get_gain(rel_list[i], gains)
        if results_gain != 0:
            results_dcg += results_gain / math.log2(i + 2)
        if results_gain > 0:
            total += c_div(results_dcg, ideal_dcg)
            num_rel_ret += 1
        i += 1
    while ideal.gain > 0.0:
        ideal.step()
        if ideal.gain > 0.0:
            num_rel += 1
            ideal_dcg += ideal.gain / math.log2(i + 2)
        i += 1
    total += c_div(float(num_rel - num_rel_ret) * results_dcg, ideal_dcg)
    return c_div(total, num_rel) if total > 0.0 else 0.0


def _g(rel_list: list[int], gains: list[list]) -> float:
    ideal = _Ideal(gains)
    results_g = sum_results = sum_ideal = sum_cost = 0.0
    min_cost = 1.0
    num_ret = len(rel_list)
    i = 0
    while i < num_ret and ideal.gain > 0.0:
        results_gain = _get_gain(rel_list[i], gains)
        sum_results += results_gain
        ideal.step()
        if ideal.gain > 0.0:
            sum_ideal += ideal.gain
        sum_cost += ideal.gain if ideal.gain >= min_cost else min_cost
        if results_gain != 0:
            results_g += c_div(results_gain, _c_log2(2 + sum_cost - sum_results))
        i += 1
    while i < num_ret:
        results_gain = _get_gain(rel_list[i], gains)
        sum_results += results_gain
        sum_cost += min_cost
        if results_gain != 0:
            results_g += c_div(results_gain, _c_log2(2 + sum_cost - sum_results))
        i += 1
    while ideal.gain > 0.0:
        ideal.step()
        if ideal.gain > 0.0:
            sum_ideal += ideal.gain
        i += 1
    return results_g / sum_ideal if sum_ideal > 0.0 else 0.0


def _rndcg(rel_list: list[int], gains: list[list]) -> float:
    ideal = _Ideal(gains)
    results_dcg = ideal_dcg = total = 0.0
    old_ideal_gain = ideal.gain
    num_changed = 0
    num_ret = len(rel_list)

    def step_ideal() -> None:
        # past a change of ideal gain: nDCG at this rank enters the average
        nonlocal old_ideal_gain, total, num_changed
        ideal.step()
        if old_ideal_gain != ideal.gain:
            if ideal_dcg > 0.0:
                total += results_dcg / ideal_dcg
                num_changed += 1
            old_ideal_gain = ideal.gain

    i = 0
    while i < num_ret and ideal.gain > 0.0:
        results_gain = _get_gain(rel_list[i], gains)
        step_ideal()
        if results_gain != 0:
            results_dcg += results_gain / math.log2(i + 2)
        if ideal.gain > 0.0:
            ideal_dcg += ideal.gain / math.log2(i + 2)
        i += 1
    if i < num_ret:
        while i < num_ret:
            results_gain = _get_gain(rel_list[i], gains)
            if results_gain != 0:
                results_dcg += results_gain / math.log2(i + 2)
            i += 1
        if ideal_dcg > 0.0:
            total += results_dcg / ideal_dcg
            num_changed += 1
    while ideal.gain > 0.0:
        step_ideal()
        if ideal.gain > 0.0:
            ideal_dcg += ideal.gain / math.log2(i + 2)
        i += 1
    # no ideal gain above 0 (the default gains give level 0 none): 0/0, printed -nan
    return c_div(total, num_changed)


_LOOPS = {"ndcg": _ndcg, "ndcg_rel": _ndcg_rel, "G": _g, "Rndcg": _rndcg}
GAIN_MEASURES = frozenset(_LOOPS)


def gain_value(name: str, raw: str | None, rel_list: list[int], levels: list[int], num_rel: int) -> float:
    """``name`` (one of GAIN_MEASURES) of a ranked list ``rel_list`` against the label
    counts ``levels``; ``raw``: the gain parameters as given (None: the defaults);
    ``num_rel``: relevant judgments at the level (Rndcg stops at 0 of them)."""
    gains = _gains(raw, levels)
    if name == "Rndcg" and num_rel == 0:
        return 0.0
    return _LOOPS[name](rel_list, gains)


def rndcg(labels: dict[str, int], docs: dict[str, float], raw: str | None, level: int,
          judged_only: bool) -> float:
    """trec_eval's Rndcg of one query: ``labels`` its judgments, ``docs`` its (already
    -M truncated) run, ``raw`` the gain parameters as given (None: the defaults)."""
    levels = label_counts(labels)
    num_rel = sum(c for i, c in enumerate(levels) if i >= level)
    return gain_value("Rndcg", raw, ranked_rels(labels, docs, judged_only), levels, num_rel)
