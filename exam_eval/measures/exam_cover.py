"""EXAM-Cover@k (EXAM paper, section 3; EXAM++).

For a run and a query: the fraction of the query's exam items that at least one of the
run's top-k passages answers (grade >= ``min_grade``). The normalized variant divides
instead by the items that *any* graded passage of the query answers, so a query whose
bank holds unanswerable questions is not penalised for them.

The query's items are the items of the bank when one is given, else every item that
appears in the query's grades. Passages of the run that have no grade answer nothing;
their number is reported so an incomplete pool does not go unnoticed.

The mean runs over the queries the run has (as the reference workbench does), or with
``complete`` over every query that has items (queries the run lacks score 0). Its
standard error is the sample standard deviation (ddof=1) over sqrt(n); with one query
it is 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..errors import InputError
from ..grading.grade_files import read_grades
from ..io.grades import Grade
from ..trec_eval.trec_files import Run, ranked
from .bank_filter import BankFilterStats, current_grades, effective_ids, read_current_bank


@dataclass
class CoverIndex:
    """Which items each graded passage answers, per query: built once, used for every run."""

    answered: dict[str, dict[str, frozenset[str]]]   # qid -> doc -> items with grade >= tau
    items: dict[str, frozenset[str]]                 # qid -> all items of the query
    answerable: dict[str, frozenset[str]]            # qid -> items any graded passage answers
    graded: dict[str, frozenset[str]]                # qid -> graded docs


def build_index(grades: Iterable[Grade], min_grade: int,
                bank_items: Mapping[str, Iterable[str]] | None = None) -> CoverIndex:
    answered: dict[str, dict[str, set[str]]] = {}
    items: dict[str, set[str]] = {}
    graded: dict[str, set[str]] = {}
    for g in grades:
        if g.item_id is None:
            continue  # direct relevance grades have no exam item to cover
        graded.setdefault(g.query_id, set()).add(g.doc_id)
        items.setdefault(g.query_id, set()).add(g.item_id)
        if g.parse_ok and g.grade is not None and g.grade >= min_grade:
            answered.setdefault(g.query_id, {}).setdefault(g.doc_id, set()).add(g.item_id)
    if bank_items is not None:
        items = {q: set(v) for q, v in bank_items.items()}
    answerable = {q: frozenset().union(*docs.values()) & frozenset(items.get(q, ()))
                  for q, docs in answered.items()}
    return CoverIndex(
        answered={q: {d: frozenset(s) for d, s in docs.items()} for q, docs in answered.items()},
        items={q: frozenset(s) for q, s in items.items()},
        answerable=answerable,
        graded={q: frozenset(s) for q, s in graded.items()},
    )


@dataclass
class CoverResult:
    per_query: dict[str, tuple[float, float | None]] = field(default_factory=dict)  # qid -> (cover, normalized|None)
    ungraded_in_topk: int = 0
    mean: float = 0.0
    stderr: float = 0.0
    n_mean: float = 0.0
    n_stderr: float = 0.0
    n_queries: int = 0
    #: queries with a normalized value; none: n_mean and n_stderr are undefined (0 here)
    n_defined: int = 0


def mean_stderr(values) -> tuple[float, float]:
    """Mean and standard error (sample sd, n-1, over sqrt(n)); (0, 0) when empty, se 0 for one value."""
    if not values:
        return 0.0, 0.0
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, 0.0
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var) / math.sqrt(n)


def exam_cover(index: CoverIndex, run: Run, k: int = 20, complete: bool = False) -> CoverResult:
    res = CoverResult()
    queries = sorted(index.items) if complete else sorted(q for q in run if q in index.items)
    for qid in queries:
        items = index.items[qid]
        docs = ranked(run[qid])[:k] if qid in run else []
        got: set[str] = set()
        answered_q = index.answered.get(qid, {})
        graded_q = index.graded.get(qid, frozenset())
        for d in docs:
            if d not in graded_q:
                res.ungraded_in_topk += 1
            got |= answered_q.get(d, frozenset())
        got &= items
        cover = len(got) / len(items) if items else 0.0
        possible = index.answerable.get(qid, frozenset())
        norm = len(got) / len(possible) if possible else None
        res.per_query[qid] = (cover, norm)
    covers = [c for c, _ in res.per_query.values()]
    # a query nothing can answer has no normalized value; it is left out of that mean
    norms = [n for _, n in res.per_query.values() if n is not None]
    res.mean, res.stderr = mean_stderr(covers)
    res.n_mean, res.n_stderr = mean_stderr(norms)
    res.n_queries = len(covers)
    res.n_defined = len(norms)
    return res


def read_cover_index(grades: str, min_grade: int, *, bank: str | None = None, model: str | None = None,
                     prompt: str | None = None, kind: str | None = None, log=lambda msg: None) -> CoverIndex:
    """exam-cover's index from a grades file: with ``bank``, the bank's items define each
    query's items and grades of deleted items or of edited items' old text are left out
    (see exam_eval.measures.bank_filter); unparsed grades answer nothing and are counted."""
    bank_items = items = None
    if bank is not None:
        items = read_current_bank(bank, log, kind=kind)  # edits matched by text hash
        bank_items = effective_ids(items)
    graded = read_grades(grades, model=model, prompt=prompt, kind=kind)
    notices = []  # said once the refusal below cannot come: a refusal is one line
    if items is not None:
        dropped = BankFilterStats()
        graded = current_grades(graded, items, dropped)
        notices += dropped.notices(grades)
    unparsed = sum(1 for g in graded if not g.parse_ok and g.item_id is not None)  # direct grades cover nothing
    if unparsed:
        notices.append(f"{grades}: {unparsed} unparsed grades (they count as not answering)")
    top = max((g.grade for g in graded if g.parse_ok and g.grade is not None), default=None)
    if top is not None and top < min_grade:  # every score 0: most likely a threshold on another scale
        notices.append(f"{grades}: no grade reaches --min-grade {min_grade} (the highest is {top}): "
                       "no item is answered")
    index = build_index(graded, min_grade, bank_items)
    if not index.items:
        raise InputError("no grades for bank items (direct relevance grades cannot give a cover score)", grades)
    for notice in notices:
        log(notice)
    return index
