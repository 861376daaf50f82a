"""trec_eval-identical evaluation: per-query values from pytrec_eval (trec_eval's own C
code), selection of queries, -c/-l/-J/-M handling, aggregation and output bytes ours.

What trec_eval does, and so what we do:
- queries evaluated = those in both run and qrels, in lexicographic qid order;
- ``-M n`` keeps the top n documents (score desc, docno desc) *before* ``-J`` drops the
  unjudged ones;
- the summary ("all") of a mean measure divides by the evaluated queries, or with ``-c``
  by every qrels query (missing queries add 0); summed measures (num_ret, num_rel,
  num_rel_ret) add over evaluated queries only; num_q is the divisor; geometric means
  (gm_map, gm_bpref) average per-query logs and with ``-c`` add log(1e-5) per missing query;
- ``-l`` below 1, which pytrec_eval refuses, is applied by relabelling: binary measures
  see label >= l as 1, gain measures (ndcg family) see the raw labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import IO

from ..errors import InputError, UsageError
from ..io.trec import Qrels, Run, ranked
from .registry import Request

MIN_GEO_MEAN = 0.00001


@dataclass
class Evaluation:
    requests: list[Request]
    per_query: dict[str, dict[str, float]]   # evaluated qid -> value name -> value
    summary: dict[str, float | int | str]     # value name -> aggregate
    run_tag: str

    def value_names(self, per_query: bool = False) -> list[str]:
        names = []
        for r in self.requests:
            if per_query and not r.measure.per_query:
                continue
            names.extend(r.names)
        return names


def _truncate(run: Run, max_docs: int | None) -> Run:
    if max_docs is None:
        return run
    out = {}
    for qid, docs in run.items():
        if len(docs) > max_docs:
            keep = ranked(docs)[:max_docs]
            out[qid] = {d: docs[d] for d in keep}
        else:
            out[qid] = docs
    return out


def _binarize(qrels: Qrels, level: int) -> Qrels:
    out = {}
    for qid, docs in qrels.items():
        out[qid] = {d: (1 if lab >= level else (0 if lab >= 0 else lab)) for d, lab in docs.items()}
    return out


# Building an evaluator copies the whole qrels into C structures; a leaderboard scores
# many runs against one qrels, so keep the last few (keyed by the qrels object itself,
# which the cache holds on to so its id cannot be reused).
_EVALUATORS: dict[tuple, tuple[object, object]] = {}


def _pytrec(qrels: Qrels, run: Run, specs: set[str], level: int, judged_only: bool) -> dict:
    import pytrec_eval  # light C extension, but only needed here

    key = (id(qrels), frozenset(specs), level, judged_only)
    hit = _EVALUATORS.get(key)
    if hit is None or hit[0] is not qrels:
        if len(_EVALUATORS) >= 8:
            _EVALUATORS.clear()
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, specs, relevance_level=level,
                                                   judged_docs_only_flag=judged_only)
        hit = _EVALUATORS[key] = (qrels, evaluator)
    return hit[1].evaluate(run)


def evaluate(qrels: Qrels, run: Run, requests: list[Request], *, level: int = 1,
             judged_only: bool = False, max_docs: int | None = None, complete: bool = False,
             run_tag: str = "") -> Evaluation:
    if max_docs is not None and max_docs < 0:
        raise UsageError("-M must be a non-negative number of documents")
    run = _truncate(run, max_docs)
    evaluated = sorted(set(run) & set(qrels))
    # pytrec_eval reports nothing for a query whose run list is empty; trec_eval never
    # sees such a query either (it has no result lines), so the two agree.
    computable = [r for r in requests if r.measure.agg not in ("runid", "num_q")]
    per_query: dict[str, dict[str, float]] = {q: {} for q in evaluated}
    if computable and evaluated:
        sub_run = {q: run[q] for q in evaluated}
        if level >= 1:
            groups = [(qrels, level, computable)]
        else:
            gain = [r for r in computable if r.measure.gain]
            binary = [r for r in computable if not r.measure.gain]
            groups = [(qrels, 1, gain), (_binarize(qrels, level), 1, binary)]
        for q_labels, lvl, reqs in groups:
            if not reqs:
                continue
            result = _pytrec(q_labels, sub_run, {r.pytrec_spec for r in reqs}, lvl, judged_only)
            for qid in evaluated:
                values = result.get(qid, {})
                for r in reqs:
                    for name in r.names:
                        per_query[qid][name] = values.get(name, 0.0)
    n_eval = len(evaluated)
    n_div = len(qrels) if complete else n_eval
    summary: dict[str, float | int | str] = {}
    for r in requests:
        agg = r.measure.agg
        for name in r.names:
            if agg == "runid":
                summary[name] = run_tag
            elif agg == "num_q":
                summary[name] = n_div
            elif agg == "sum":
                summary[name] = int(sum(per_query[q][name] for q in evaluated))
            elif agg == "gm":
                total = 0.0
                for q in evaluated:
                    total += per_query[q][name]
                total += (n_div - n_eval) * math.log(MIN_GEO_MEAN)
                summary[name] = math.exp(total / n_div) if n_div else 0.0
            else:
                total = 0.0
                for q in evaluated:  # same order as trec_eval's accumulation
                    total += per_query[q][name]
                summary[name] = total / n_div if n_div else 0.0
    return Evaluation(requests, per_query, summary, run_tag)


def _line(name: str, qid: str, value, kind: str) -> str:
    if kind == "long":
        return "%-22s\t%s\t%d\n" % (name, qid, int(value))
    if kind == "string":
        return "%-22s\t%s\t%s\n" % (name, qid, value)
    return "%-22s\t%s\t%6.4f\n" % (name, qid, value)


def write_trec_eval(ev: Evaluation, out: IO[str], *, per_query: bool = False, summary: bool = True) -> None:
    """Bytes as trec_eval prints them (relational format)."""
    if per_query:
        for qid in sorted(ev.per_query):
            for r in ev.requests:
                if not r.measure.per_query:
                    continue
                for name in r.names:
                    out.write(_line(name, qid, ev.per_query[qid][name], r.measure.value))
    if summary:
        for r in ev.requests:
            for name in r.names:
                out.write(_line(name, "all", ev.summary[name], r.measure.value))


def require_overlap(ev: Evaluation, run_name: str, qrels_name: str) -> None:
    if not ev.per_query:
        raise InputError(f"no queries in common with the qrels {qrels_name} (trec_eval: No queries with both results and relevance info)", run_name)
