"""map_avgjg, P_avgjg, Rprec_mult_avgjg: trec_eval 9.0.8's judgment-group measures
(-R qrels_jg), which pytrec_eval does not compute. Written from form_res_rels_jg.c and
m_map_avgjg.c / m_P_avgjg.c / m_Rprec_mult_avgjg.c, step for step (same loops, same
order of floating-point additions), and held to the real binary by the tests.

Each judgment group (user) of a query is scored as its own qrels; a value with more
than one group is the mean over the groups.
"""

from __future__ import annotations

from dataclasses import dataclass

from .qrels_jg_files import QrelsJG
from .c_numbers import c_div
from ..io.trec_rules import trec_ranked
from .registry import Request

RELVALUE_NONPOOL = -1    # retrieved, not in this group's judgments
RELVALUE_UNJUDGED = -2   # judged with a negative label


@dataclass
class GroupRels:
    rel_list: list[int]   # per retrieved document, in rank order
    num_rel: int
    num_rel_ret: int

    @property
    def num_ret(self) -> int:
        return len(self.rel_list)


def group_rels(groups: dict[str, dict[str, int]], order: list[str], level: int, judged_only: bool) -> list[GroupRels]:
    out = []
    for jg in sorted(groups):
        labels = groups[jg]
        rels = []
        for d in order:
            lab = labels.get(d)
            rels.append(RELVALUE_NONPOOL if lab is None else RELVALUE_UNJUDGED if lab < 0 else lab)
        if judged_only:
            rels = [r for r in rels if r >= 0]
        num_rel_ret = sum(1 for r in rels if r >= 0 and r >= level)
        num_rel = sum(1 for lab in labels.values() if lab >= 0 and lab >= level)
        out.append(GroupRels(rels, num_rel, num_rel_ret))
    return out


def _map(groups: list[GroupRels], level: int) -> float:
    value = 0.0
    for g in groups:
        rel_so_far, total = 0, 0.0
        for i, r in enumerate(g.rel_list):
            if r >= level:
                rel_so_far += 1
                total += rel_so_far / (i + 1)
        if rel_so_far:
            value += c_div(total, g.num_rel)
    return value / len(groups) if len(groups) > 1 else value


def _precision(groups: list[GroupRels], level: int, cutoffs: tuple) -> list[float]:
    values = [0.0] * len(cutoffs)
    for g in groups:
        ci, rel_so_far = 0, 0
        for i, r in enumerate(g.rel_list):
            if i == cutoffs[ci]:
                values[ci] += rel_so_far / i
                ci += 1
                if ci == len(cutoffs):
                    break
            if r >= level:
                rel_so_far += 1
        while ci < len(cutoffs):
            values[ci] += rel_so_far / cutoffs[ci]
            ci += 1
    return [v / len(groups) for v in values] if len(groups) > 1 else values


def _rprec_mult(groups: list[GroupRels], level: int, percents: tuple) -> list[float]:
    values = [0.0] * len(percents)
    for g in groups:
        cutoffs = [int(p * g.num_rel + 0.9) for p in percents]
        cur = len(cutoffs) - 1
        while cur >= 0 and cutoffs[cur] > g.num_ret:
            values[cur] += g.num_rel_ret / cutoffs[cur]
            cur -= 1
        rel_so_far = g.num_rel_ret
        i = g.num_ret
        while i > 0 and rel_so_far > 0:
            precis = rel_so_far / i
            while cur >= 0 and i == cutoffs[cur]:
                values[cur] += precis
                cur -= 1
            if g.rel_list[i - 1] >= level:
                rel_so_far -= 1
            i -= 1
    return [v / len(groups) for v in values] if len(groups) > 1 else values


def per_query_values(judgments: QrelsJG, docs: dict[str, float], requests: list[Request], *,
                     level: int, judged_only: bool, max_docs: int | None, qid: str,
                     qrels_name: str | None = None) -> dict[str, float]:
    order = trec_ranked(docs)
    if max_docs is not None:
        order = order[:max_docs]
    groups = group_rels(judgments[qid], order, level, judged_only)
    values: dict[str, float] = {}
    for r in requests:
        name = r.measure.name
        if name == "map_avgjg":
            values[r.names[0]] = _map(groups, level)
        elif name == "P_avgjg":
            values.update(zip(r.names, _precision(groups, level, r.cutoffs)))
        elif name == "Rprec_mult_avgjg":
            values.update(zip(r.names, _rprec_mult(groups, level, r.cutoffs)))
    return values
