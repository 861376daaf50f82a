"""Rndcg where pytrec_eval cannot give trec_eval's value: under -l below 1 on a query
whose best label is 0. pytrec_eval takes no level below 1, and at level 1 such a query
has no relevant document (Rndcg 0), where trec_eval counts its 0-labelled documents in R
and goes on (with the default gains, to 0/0: -nan). Written from trec_eval 9.0.8's
m_Rndcg.c and form_res_rels.c, step for step (same loops, same order of floating-point
additions, the gain table sorted as glibc's qsort sorts it with m_Rndcg.c's comparator),
and held to the real binary by the tests. On every other query the level does not reach
Rndcg's value (R > 0 at level 1 and at any level below), and pytrec_eval's is used.
"""

from __future__ import annotations

import math

from .c_numbers import c_atof, c_atol, c_div, trec_ranked

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


def rndcg(labels: dict[str, int], docs: dict[str, float], raw: str | None, level: int,
          judged_only: bool) -> float:
    """trec_eval's Rndcg of one query: ``labels`` its judgments, ``docs`` its (already
    -M truncated) run, ``raw`` the gain parameters as given (None: the defaults)."""
    ranked = [labels.get(d) for d in trec_ranked(docs)]
    rel_list = [RELVALUE_NONPOOL if r is None else RELVALUE_UNJUDGED if r < 0 else r for r in ranked]
    if judged_only:
        rel_list = [r for r in rel_list if r >= 0]
    max_rel = max(labels.values())
    rel_levels = [0] * (max_rel + 1)
    for lab in labels.values():
        if lab >= 0:
            rel_levels[lab] += 1
    num_rel_levels = max((i + 1 for i, c in enumerate(rel_levels) if c), default=0)
    num_rel = sum(c for i, c in enumerate(rel_levels) if i >= level)
    gains = _gains(raw, rel_levels[:num_rel_levels])
    if num_rel == 0:
        return 0.0
    num_ret = len(rel_list)

    results_dcg = ideal_dcg = total = 0.0
    cur_level = len(gains) - 1
    ideal_gain = gains[cur_level][2] if cur_level >= 0 else 0.0
    old_ideal_gain = ideal_gain
    num_changed = 0
    num_at_level = 0

    def step_ideal() -> None:
        nonlocal num_at_level, cur_level, ideal_gain, old_ideal_gain, total, num_changed
        num_at_level += 1
        while cur_level >= 0 and num_at_level > gains[cur_level][1]:
            num_at_level = 1
            cur_level -= 1
            ideal_gain = gains[cur_level][2] if cur_level >= 0 else 0.0
        if old_ideal_gain != ideal_gain:
            if ideal_dcg > 0.0:
                total += results_dcg / ideal_dcg
                num_changed += 1
            old_ideal_gain = ideal_gain

    i = 0
    while i < num_ret and ideal_gain > 0.0:
        results_gain = _get_gain(rel_list[i], gains)
        step_ideal()
        if results_gain != 0:
            results_dcg += results_gain / math.log2(i + 2)
        if ideal_gain > 0.0:
            ideal_dcg += ideal_gain / math.log2(i + 2)
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
    while ideal_gain > 0.0:
        step_ideal()
        if ideal_gain > 0.0:
            ideal_dcg += ideal_gain / math.log2(i + 2)
        i += 1
    # no ideal gain above 0 (the default gains give level 0 none): 0/0, printed -nan
    return c_div(total, num_changed)
