"""Scoring from trec_eval's other judgment formats (-R qrels_jg, -R prefs, -R qrels_prefs).

Each format has its own reader and its own measures (registry: ``formats``); runid and
num_q go with any. What trec_eval does, and so what we do: queries with both results
and judgments are scored in qid order; a requested measure the format does not feed
stops trec_eval with "Can't calculate measure" (exit 4) once such a query exists, and
with "No queries with both results and relevance info" (exit 7) otherwise; summaries
are means over the scored queries (-c: over every judged query, the missing scoring 0),
and counts (prefs_num_prefs_*) are sums.
"""

from __future__ import annotations

from ..errors import UsageError
from .prefs_files import read_prefs, read_qrels_prefs
from . import qrels_jg
from .qrels_jg_files import read_qrels_jg
from .trec_files import Qrels, Run
from .registry import Request, first_unavailable
from .evaluate import Evaluation, TrecEvalRefusal
from .zscores import apply_zscores

REL_FORMATS = ("qrels", "prefs", "qrels_prefs", "qrels_jg")


def check_measures(requests: list[Request], rel_format: str, evaluated: list[str],
                   qrels_name: str | None, qrels: Qrels | None = None) -> None:
    """Refuse as trec_eval does a measure that ``rel_format`` judgments cannot feed, or that
    it cannot calculate at all (registry.improper)."""
    unavailable = first_unavailable(requests, rel_format)
    if unavailable is None or not evaluated:
        return
    missing, why = unavailable
    name = missing.name
    if qrels is not None and max(qrels[evaluated[0]].values()) < 0:
        # on qrels whose first scored query has no label >= 0, the first measure already
        # fails (see trec_eval._degenerate_queries)
        name = next(r.measure.name for r in requests if r.measure.agg not in ("runid", "num_q"))
    raise TrecEvalRefusal(f"trec_eval 9.0.8 refuses this input: Can't calculate measure '{name}' ({why})",
                          qrels_name)


def read_judgments(rel_format: str, path: str):
    if rel_format == "qrels_jg":
        return read_qrels_jg(path)
    return read_prefs(path) if rel_format == "prefs" else read_qrels_prefs(path)


def _calculator(rel_format: str):
    if rel_format == "qrels_jg":
        return qrels_jg.per_query_values
    from . import prefs  # numpy: not loaded for exam-qrels --help
    return prefs.per_query_values


def evaluate_judgments(rel_format: str, judgments: dict, run: Run, requests: list[Request], *,
                       level: int = 1, judged_only: bool = False, max_docs: int | None = None,
                       complete: bool = False, run_tag: str = "", qrels_name: str | None = None,
                       zscores=None) -> Evaluation:
    if max_docs is not None and max_docs < 0:
        raise UsageError("-M must be a non-negative number of documents")
    evaluated = sorted(set(run) & set(judgments))
    check_measures(requests, rel_format, evaluated, qrels_name)
    calc = _calculator(rel_format)
    own = [r for r in requests if r.measure.formats is not None]
    per_query = {q: calc(judgments, run[q], own, level=level, judged_only=judged_only, max_docs=max_docs, qid=q,
                         qrels_name=qrels_name) for q in evaluated}
    if zscores is not None:
        apply_zscores(per_query, requests, zscores)
    n_div = len(judgments) if complete else len(evaluated)
    summary: dict[str, float | int | str] = {}
    for r in requests:
        for name in r.names:
            if r.measure.agg == "runid":
                summary[name] = run_tag
            elif r.measure.agg == "num_q":
                summary[name] = n_div
            else:
                total = 0.0
                for q in evaluated:
                    total += per_query[q][name]
                if r.measure.agg == "sum":
                    summary[name] = total if zscores is not None else int(total)
                else:
                    summary[name] = total / n_div if n_div else 0.0
    return Evaluation(requests, per_query, summary, run_tag, zscores is not None)
