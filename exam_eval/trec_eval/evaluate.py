"""trec_eval-identical evaluation: per-query values from pytrec_eval (trec_eval's own C
code), selection of queries, -c/-l/-J/-M handling, aggregation and output bytes ours.
The bytes follow trec_eval 9.0.8 (usnistgov/trec_eval v9.0.8, whose ``-v`` says 9.0.7).

What trec_eval 9.0.8 does, and so what we do:
- queries evaluated = those in both run and qrels, in lexicographic qid order; run
  queries without judgments are ignored (10.0 rejects them);
- ``-M n`` keeps the top n documents (score desc, docno desc) *before* ``-J`` drops the
  unjudged ones (``-J`` keeps documents judged with a label >= 0);
- the summary ("all") of a mean measure divides by the evaluated queries, or with ``-c``
  by every qrels query (missing queries add 0); summed measures (num_ret, num_rel_ret)
  add over evaluated queries, except num_rel, which with ``-c`` counts every judgment
  with label >= 1 in the whole qrels (whatever ``-l``); num_q is the divisor; geometric
  means (gm_map, gm_bpref) average per-query logs, with ``-c`` adding log(1e-5) per
  missing query, and are printed on the 'all' line only; relstring only per query;
- runid is the tag of the run file's *last* line (trec_eval keeps the last one parsed);
- NaN prints as C's printf does: ``-nan`` for the negative NaN that 0/0 gives on x86;
- a judged query whose labels are all negative: trec_eval 9.0.8 stops with "Can't
  calculate measure" when no earlier evaluated query had a label >= 0 (exit 4), and
  otherwise scores it as a query without relevant documents, or segfaults when its
  largest label is below -1 (an out-of-range memset). We refuse in the first case and
  give the no-relevant-documents scores in both others; pytrec_eval, which shares that
  code, never sees such a query (it crashes on it): it gets the query with one extra
  label-0 judgment of a docno no run can contain. trec_eval scores nDCG, ndcg_rel and G
  of such a query against the label counts of the labelled query before it, which
  gain_measures.py reproduces;
- ``-l`` below 1, which pytrec_eval refuses, is applied by relabelling: binary measures
  see label >= l (and >= 0) as 1, gain measures (ndcg family) see the raw labels; but
  Rndcg's R counts labels >= l, so on a query whose best label is 0 it is computed by
  gain_measures.py from m_Rndcg.c; and below 0 the measures that compare each ranked
  document with the level count retrieved documents without a label >= 0 as relevant,
  which level_measures.py computes.
"""

from __future__ import annotations

import heapq
import math
import sys
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from ..errors import InputError, UsageError
from .c_numbers import c_floats, c_long
from ..io.trec_rules import LABEL_MAX, trec_ranked
from .parallel import fork_map
from .trec_files import Qrels, Run
from .qrels_cache import per_qrels
from .gain_measures import GAIN_MEASURES, gain_value, label_counts, ranked_rels, rndcg
from .level_measures import LEVEL_MEASURES, res_rels
from .level_measures import values as level_values

if TYPE_CHECKING:
    from .bulk import RunTable
from .registry import Request, improper
from .zscores import apply_zscores

MIN_GEO_MEAN = 0.00001


@dataclass
class Evaluation:
    requests: list[Request]
    per_query: dict[str, dict[str, float]]   # evaluated qid -> value name -> value
    summary: dict[str, float | int | str]     # value name -> aggregate
    run_tag: str
    zscored: bool = False                     # -Z: values are z-scores, printed "Z<name>" as floats

    def value_names(self, per_query: bool = False) -> list[str]:
        names = []
        for r in self.requests:
            if (per_query and not r.measure.per_query) or (not per_query and not r.measure.summary):
                continue
            names.extend(r.names)
        return names


def _truncate(run: Run, max_docs: int | None) -> Run:
    if max_docs is None:
        return run
    out = {}
    for qid, docs in run.items():
        if len(docs) > max_docs:
            keep = trec_ranked(docs)[:max_docs]
            out[qid] = {d: docs[d] for d in keep}
        else:
            out[qid] = docs
    return out


def _binarize(qrels: Qrels, level: int) -> Qrels:
    out = {}
    for qid, docs in qrels.items():
        out[qid] = {d: (lab if lab < 0 else (1 if lab >= level else 0)) for d, lab in docs.items()}
    return out


# Building an evaluator copies the whole qrels into C structures; a leaderboard scores
# many runs against one qrels, so keep the last few.
_EVALUATORS: dict = {}


def _pytrec(qrels: Qrels, run: Run, specs: set[str], level: int, judged_only: bool) -> dict:
    from .pytrec_specs import TrecSpecEvaluator  # light C extension, but only needed here

    def build():
        return TrecSpecEvaluator(qrels, specs, relevance_level=level, judged_docs_only_flag=judged_only)

    if any("=" in spec for spec in specs):
        # trec_eval parses a gain list (ndcg.1=3,2=9) in place, '=' -> ',', on every
        # evaluate; a second evaluate of the same evaluator then reads '1,3,2,9' and
        # pytrec_eval crashes (SIGSEGV): such an evaluator is used once
        return build().evaluate(run) if run else {}
    return per_qrels(_EVALUATORS, qrels, (frozenset(specs), level, judged_only), build).evaluate(run)


# A docno cannot hold whitespace in a TREC file, so no run retrieves this one.
_PLACEHOLDER_DOCNO = " no run retrieves this "
# With -M 0 trec_eval scores every query on an empty ranking; pytrec_eval skips a query
# without documents, but a ranking of one unjudged document under -J is the same state
# (nothing retrieved, the judgments counted), so that is what it gets.
_NOTHING_RETRIEVED = " nothing retrieved "
_UTILITY_HELPERS = ("num_ret", "num_rel", "num_rel_ret")


class TrecEvalRefusal(InputError):
    """An input trec_eval 9.0.8 refuses to score (it exits 4 or 7)."""


@dataclass
class _QrelsFacts:
    max_label: dict[str, int]   # qid -> largest label
    n_relevant: int             # judgments with label >= 1, all queries (num_rel under -c)


# A leaderboard scores many runs against one qrels: look at its labels once.
_FACTS: dict = {}


def _facts(qrels: Qrels) -> _QrelsFacts:
    return per_qrels(_FACTS, qrels, (), lambda: _QrelsFacts(
        {q: max(docs.values(), default=-1) for q, docs in qrels.items()},
        sum(1 for docs in qrels.values() for lab in docs.values() if lab >= 1)))


def _degenerate_queries(qrels: Qrels, evaluated: list[str], requests: list[Request],
                        qrels_name: str | None) -> set[str]:
    """Evaluated queries whose judgments are all negative, after trec_eval's refusal check.

    trec_eval sizes a per-query array by the largest label + 1; for the first such query
    before any other evaluated query has a label >= 0 that size is 0 and its allocator
    returns NULL, which every measure but runid and num_q reports as "Can't calculate".
    """
    first = next((r.measure.name for r in requests if r.measure.agg not in ("runid", "num_q")), None)
    out: set[str] = set()
    allocated = False
    max_label = _facts(qrels).max_label
    for qid in evaluated:
        if max_label[qid] >= 0:
            allocated = True
            continue
        if not allocated and first is not None:
            raise TrecEvalRefusal(
                f"trec_eval 9.0.8 refuses this input: Can't calculate measure '{first}' "
                f"(query {qid} has no judgment with a label >= 0, and no query before it has one)",
                qrels_name)
        out.add(qid)
    return out


def _with_placeholder(qrels: Qrels, queries: set[str]) -> Qrels:
    out = dict(qrels)
    for qid in queries:
        out[qid] = {**qrels[qid], _PLACEHOLDER_DOCNO: 0}
    return out


# Relabelled qrels are made once per qrels, not once per batch of queries: the
# evaluators above are cached by the identity of the qrels they were built from.
_DERIVED: dict = {}


def _derived(qrels: Qrels, how, arg) -> Qrels:
    return per_qrels(_DERIVED, qrels, (how, arg if not isinstance(arg, set) else frozenset(arg)),
                     lambda: how(qrels, arg))


def _binarized(qrels: Qrels, level: int) -> Qrels:
    return _derived(qrels, _binarize, level)


def _placeheld(qrels: Qrels, queries: set[str]) -> Qrels:
    return _derived(qrels, _with_placeholder, queries)


def _relstring(qrels_q: dict[str, int], docs: dict[str, float], length: float, judged_only: bool) -> str:
    # the top of trec_ranked(docs) (scores as C floats, ties by docno descending): pairs
    # compared in C by heapq, no key function per document
    pairs = zip(c_floats(list(docs.values())), docs.keys())
    if judged_only:
        pairs = ((s, d) for s, d in pairs if qrels_q.get(d, -1) >= 0)
    chars = []
    # m_relstring.c: MIN((long) length, num_ret), and none below 0
    for _, d in heapq.nlargest(max(c_long(length), 0), pairs):
        rel = qrels_q.get(d)
        if rel is None:
            chars.append("-")          # not in the pool
        elif rel < 0:
            chars.append(".")          # in the pool, unjudged
        elif rel > 9:
            chars.append(">")
        else:
            chars.append(str(rel))
    return "".join(chars)


def _utility(coef: tuple, values: dict[str, float]) -> float:
    # trec_eval's m_utility.c with -N (documents in the collection) left at 0
    ret, rel, rel_ret = (values.get(n, 0.0) for n in _UTILITY_HELPERS)
    return (coef[0] * rel_ret + coef[1] * (ret - rel_ret) + coef[2] * (rel - rel_ret)
            + coef[3] * (0 + rel_ret - ret - rel))


def evaluate(qrels: Qrels, run: Run | RunTable, requests: list[Request], *, level: int = 1,
             judged_only: bool = False, max_docs: int | None = None, complete: bool = False,
             run_tag: str = "", qrels_name: str | None = None, zscores=None) -> Evaluation:
    """``run``: a dict, or a :class:`RunTable` (a run read in bulk), whose queries are
    built and scored a batch at a time (pytrec_eval scores each query on its own, so the
    values are the same; memory stays that of one batch). Every query of a table is built
    once, evaluated or not, so that a duplicate document is refused wherever it is."""
    if max_docs is not None and max_docs < 0:
        raise UsageError("-M must be a non-negative number of documents")
    if max_docs is not None:
        # trec_eval reads -M with atol: a number past LONG_MAX is LONG_MAX (no limit);
        # numpy cannot compare its rank arrays with a larger Python int
        max_docs = min(max_docs, sys.maxsize)
    if level > LABEL_MAX:
        # pytrec_eval takes a C int; every level above the largest label means the same
        level = max(LABEL_MAX + 1, 1 + max((lab for docs in qrels.values() for lab in docs.values()), default=0))
    table = None if isinstance(run, dict) else run
    qids = table.qids if table is not None else list(run)
    in_qrels = set(qrels)
    evaluated = sorted(q for q in qids if q in in_qrels)
    degenerate = _degenerate_queries(qrels, evaluated, requests, qrels_name)
    bad = next((r for r in requests if improper(r)), None)
    if bad is not None and evaluated:   # exam-qrels said so already (check_measures); callers of the API
        raise TrecEvalRefusal(f"trec_eval 9.0.8 refuses this input: Can't calculate measure "
                              f"'{bad.measure.name}' ({improper(bad)})", qrels_name)
    per_query: dict[str, dict[str, float]] = {q: {} for q in evaluated}
    fast = None
    if table is not None:   # read in bulk: numpy is loaded, and the official measures may not need pytrec_eval
        from . import official_arrays
    if table is not None and official_arrays.can_score(requests, level=level, judged_only=judged_only,
                                                       max_docs=max_docs, degenerate=degenerate):
        fast = official_arrays.score_table(qrels, table, evaluated, requests, level=level, max_docs=max_docs)
    if fast is not None:
        per_query = fast
    elif table is None:
        groups = _groups(qrels, requests, level, degenerate, max_docs, judged_only)
        _score_batch(qrels, run, evaluated, requests, per_query, groups, max_docs, judged_only, level,
                     _stale_counts(qrels, evaluated, degenerate))
    else:
        groups = _groups(qrels, requests, level, degenerate, max_docs, judged_only)
        stale = _stale_counts(qrels, evaluated, degenerate)

        def score(ks: list[int]) -> dict[str, dict[str, float]]:
            docs = table.docs(ks)   # every query, for its duplicates
            part: dict[str, dict[str, float]] = {q: {} for q in docs if q in in_qrels}
            _score_batch(qrels, docs, list(part), requests, part, groups, max_docs, judged_only, level, stale)
            return part

        for q_labels, lvl, _, specs, judged in groups:   # built once, before the workers fork
            _pytrec(q_labels, {}, specs, lvl, judged)
        batches = table.batch_indexes()
        for part in fork_map(score, batches, [sum(map(table.size, ks)) for ks in batches]):
            per_query.update(part)
    if zscores is not None:
        apply_zscores(per_query, requests, zscores)
    return _summarize(qrels, evaluated, requests, per_query, complete, run_tag, zscores is not None)


def _groups(qrels: Qrels, requests: list[Request], level: int, degenerate: set[str], max_docs: int | None,
            judged_only: bool) -> list[tuple[Qrels, int, list[Request], set[str], bool]]:
    """What pytrec_eval is asked: (labels, level, requests, measure specs, judged only) per
    evaluator; the utility helpers ride with the binary measures."""
    computable = [r for r in requests if r.measure.source == "pytrec"]
    helpers = any(r.measure.name == "utility" for r in requests)
    # With -M 0 every query gets one unjudged document under -J (see _NOTHING_RETRIEVED).
    judged = judged_only or max_docs == 0
    if level >= 1:
        plan = [(qrels, level, computable, helpers)]
    else:
        gain = [r for r in computable if r.measure.gain]
        binary = [r for r in computable if not r.measure.gain]
        plan = [(qrels, 1, gain, False), (_binarized(qrels, level), 1, binary, helpers)]
    out = []
    for q_labels, lvl, reqs, want_helpers in plan:
        if not reqs and not want_helpers:
            continue
        if degenerate:
            q_labels = _placeheld(q_labels, degenerate)
        specs = {r.pytrec_spec for r in reqs} | (set(_UTILITY_HELPERS) if want_helpers else set())
        out.append((q_labels, lvl, reqs, specs, judged))
    return out


def _stale_counts(qrels: Qrels, evaluated: list[str], degenerate: set[str]) -> dict[str, list[int]]:
    """For each query judged only below 0, the label counts trec_eval scores its gain
    measures against: those of the last labelled query evaluated before it (its own
    counts fill none of form_res_rels.c's buffer; see gain_measures.py). Over every
    evaluated query, not one batch's."""
    out: dict[str, list[int]] = {}
    last: list[int] = []
    for qid in evaluated:
        if qid in degenerate:
            out[qid] = last
        else:
            last = label_counts(qrels[qid])
    return out


def _score_batch(qrels: Qrels, run: Run, evaluated: list[str], requests: list[Request],
                 per_query: dict[str, dict[str, float]], groups: list, max_docs: int | None,
                 judged_only: bool, level: int = 1, stale: dict[str, list[int]] | None = None) -> None:
    """Per-query values of the queries ``evaluated`` (all in ``run``), into ``per_query``;
    ``stale``: see _stale_counts."""
    run = _truncate({q: run[q] for q in evaluated}, max_docs)
    # pytrec_eval reports nothing for a query whose run list is empty; trec_eval never
    # sees such a query either (it has no result lines), so the two agree.
    if evaluated:
        sub_run = {q: {_NOTHING_RETRIEVED: 0.0} for q in evaluated} if max_docs == 0 else run
        utilities = [r for r in requests if r.measure.name == "utility"]
        for q_labels, lvl, reqs, specs, judged in groups:
            result = _pytrec(q_labels, sub_run, specs, lvl, judged)
            keys = [(name, key) for r in reqs for name, key in zip(r.names, r.pytrec_keys)]
            helpers = _UTILITY_HELPERS[0] in specs
            for qid in evaluated:
                values = result.get(qid, {})
                row = per_query[qid]
                for name, key in keys:
                    row[name] = values.get(key, 0.0)
                    if key == "G" and row[name] != row[name]:
                        row[name] = _G_NAN
                if helpers:
                    for r in utilities:
                        row[r.names[0]] = _utility(r.cutoffs, values)
    for r in requests:
        if r.measure.name == "relstring":
            for qid in evaluated:
                per_query[qid][r.names[0]] = _relstring(qrels[qid], run[qid], r.cutoffs[0], judged_only)
        elif r.measure.name == "Rndcg" and level < 1:
            # pytrec_eval scored these at level 1, where R is 0; see gain_measures.py
            max_label = _facts(qrels).max_label
            for qid in evaluated:
                if max_label[qid] == 0:
                    per_query[qid][r.names[0]] = rndcg(qrels[qid], run[qid], r.raw, level, judged_only)
    gains = [r for r in requests if r.measure.name in GAIN_MEASURES] if stale else []
    below_zero = [r for r in requests if r.measure.name in LEVEL_MEASURES] if level < 0 else []
    for qid in evaluated:
        if below_zero or (gains and qid in stale):
            rel_list = ranked_rels(qrels[qid], run[qid], judged_only)
        if gains and qid in stale:
            for r in gains:   # a query judged only below 0 has no relevant document (R = 0)
                per_query[qid][r.names[0]] = gain_value(r.measure.name, r.raw, rel_list, stale[qid], 0)
        if below_zero:
            rr = res_rels(qrels[qid], rel_list, level)
            for r in below_zero:
                per_query[qid].update(zip(r.names, level_values(r, rr, level)))


# G's NaN (a gain given to a negative level): trec_eval, built here, prints the negative
# NaN of x86 ("-nan"); pytrec_eval's wheel returns a positive one for the same C code
_G_NAN = -math.nan


def _c_exp(x: float) -> float:
    """C's exp: past a double's range it is inf, where math.exp raises (z-scores of gm_map
    reach it: a per-query value of 1000 is exp(1000))."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _summarize(qrels: Qrels, evaluated: list[str], requests: list[Request],
               per_query: dict[str, dict[str, float]], complete: bool, run_tag: str,
               zscored: bool = False) -> Evaluation:
    n_eval = len(evaluated)
    n_div = len(qrels) if complete else n_eval
    summary: dict[str, float | int | str] = {}
    for r in requests:
        agg = r.measure.agg
        for name in r.names:
            if agg == "none":
                continue
            if agg == "runid":
                summary[name] = run_tag
            elif agg == "num_q":
                summary[name] = n_div
            elif agg == "sum":
                if name == "num_rel" and complete:
                    summary[name] = _facts(qrels).n_relevant
                else:
                    total = sum(per_query[q][name] for q in evaluated)
                    summary[name] = total if zscored else int(total)
            elif agg == "gm":
                total = 0.0
                for q in evaluated:
                    total += per_query[q][name]
                total += (n_div - n_eval) * math.log(MIN_GEO_MEAN)
                summary[name] = _c_exp(total / n_div) if n_div else 0.0
            else:
                total = 0.0
                for q in evaluated:  # same order as trec_eval's accumulation (NaN sign included)
                    total += per_query[q][name]
                summary[name] = total / n_div if n_div else 0.0
    return Evaluation(requests, per_query, summary, run_tag, zscored)


def _float(value: float) -> str:
    if math.isnan(value):
        # glibc prints the sign bit of a NaN; 0/0 on x86 gives a negative one
        return "%6s" % ("-nan" if math.copysign(1.0, value) < 0 else "nan")
    return "%6.4f" % value


def _line(name: str, qid: str, value, kind: str, zscored: bool = False) -> str:
    if zscored and kind in ("long", "float"):
        return "Z%-22s\t%s\t%s\n" % (name, qid, _float(value))
    if kind == "long":
        return "%-22s\t%s\t%d\n" % (name, qid, int(value))
    if kind == "string":
        return "%-22s\t%s\t%s\n" % (name, qid, value)
    if kind == "relstring":
        return "%-22s\t%s\t'%s'\n" % (name, qid, value)
    return "%-22s\t%s\t%s\n" % (name, qid, _float(value))


def _value_text(kind: str, value) -> str:
    """A per-query value as trec_eval prints it (not z-scored)."""
    if kind == "float":
        return "%6.4f" % value if value == value else _float(value)
    if kind == "long":
        return "%d" % int(value)
    if kind == "relstring":
        return "'%s'" % value
    return "%s" % value


def write_trec_eval(ev: Evaluation, out: IO[str], *, per_query: bool = False, summary: bool = True) -> None:
    """Bytes as trec_eval prints them (relational format)."""
    if per_query:
        # each value name's column once; -q -m all_trec prints ~90 lines a query
        columns = [(name, "%-22s\t" % name, r.measure.value) for r in ev.requests if r.measure.per_query
                   for name in r.names]
        for qid in sorted(ev.per_query):
            values = ev.per_query[qid]
            if ev.zscored:
                out.write("".join([_line(name, qid, values[name], kind, True) for name, _, kind in columns]))
            else:
                out.write("".join([f"{head}{qid}\t{_value_text(kind, values[name])}\n" for name, head, kind in columns]))
    if summary:
        for r in ev.requests:
            if not r.measure.summary:
                continue
            for name in r.names:
                out.write(_line(name, "all", ev.summary[name], r.measure.value, ev.zscored))


def require_overlap(ev: Evaluation, run_name: str, qrels_name: str) -> None:
    if not ev.per_query:
        raise TrecEvalRefusal(f"no queries in common with the qrels {qrels_name} (trec_eval: No queries with both results and relevance info)", run_name)
