"""exam-correlate compare's table: which pairs of runs differ on a metric.

Without LLM labels every run's per-query values come from the human labels over the
queries HUMAN judges (a run missing a query scores 0 there, as trec_eval -c), and the
pairs are compared by a paired t-test or randomization test (exam_eval.stats.paired).
With LLM labels (``llm`` given with a labelled set) the population is the same, the
human labels are used on the labelled queries only, and PPI combines their differences
with the LLM-predicted differences of the rest, as ``interval`` does for one run's mean.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..errors import InputError, UsageError
from ..io.leaderboard import run_name
from ..io.openers import display_name
from ..trec_eval.trec_files import read_run
from .interval_table import choose_labelled, open_source
from .leaderboards import fmt
from .paired import Paired, adjust, pairs, ppi_test, randomization, t_test

HEADER = ("run_a", "run_b", "metric", "method", "queries", "difference", "lower", "upper", "p", "p_adjusted",
          "differs")
HUMAN_METHODS = ("t", "randomization")    # human labels alone (with LLM labels: on the labelled queries)
LLM_METHODS = ("ppi", "ppi_tuned")
METHODS = HUMAN_METHODS + LLM_METHODS


@dataclass
class RunScores:
    """What the picture draws: each run's mean with its interval (by the first method's
    kind: a t interval, or PPI's), and the runs that do not differ from ``reference``."""
    names: list[str]
    score: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    same: list[bool]
    reference: str
    method: str


@dataclass
class CompareTable:
    metric: str
    rows: list[list[str]] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    scores: RunScores | None = None


def _p(v: float) -> str:
    return "nan" if np.isnan(v) else f"{v:.4g}"  # significant digits: 4 decimals would print 1e-9 as 0


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise InputError(f"must be between 0 and 1 (exclusive), got {alpha:g}", "--alpha")


def _baseline(baseline: str | None, names: list[str]) -> str | None:
    if baseline is None or baseline in names:
        return baseline
    if run_name(baseline) in names:  # given as the run's file
        return run_name(baseline)
    raise InputError(f"{baseline!r} is not one of the runs ({', '.join(names)})", "--baseline")


def _read(runs: Sequence[tuple[str, str]], queries: list[str], human: str, idx: list[tuple[int, int]]):
    data = [(name, path, read_run(path)) for name, path in runs]
    judged = set(queries)
    for name, path, run in data:
        if not judged & set(run):
            raise InputError(f"run {name} has none of the {len(queries)} queries {display_name(human)} judges",
                             display_name(path))
    for a, b in idx:
        if not judged & set(data[a][2]) & set(data[b][2]):
            raise InputError(f"no judged query in common with {display_name(data[a][1])}: the two runs cannot "
                             "be compared", display_name(data[b][1]))
    return [run for _, _, run in data]


def compare_rows(human: str, llm: str | None, runs: Sequence[tuple[str, str]], *, metric: str, rel_level: int,
                 min_grade: int, labelled_file: str | None, n_labelled: int | None, alpha: float, samples: int,
                 seed: int, mapping: str, methods: Sequence[str], correction: str, baseline: str | None,
                 model=None, prompt=None, kind=None, log: Callable[[str], None] = lambda msg: None) -> CompareTable:
    """``runs``: (leaderboard name, path) of each run, as exam-qrels names them."""
    _check_alpha(alpha)
    names = [name for name, _ in runs]
    if len(runs) < 2:
        raise InputError(f"compare needs at least 2 runs, got {len(runs)}", display_name(runs[0][1]) if runs else None)
    baseline = _baseline(baseline, names)
    idx = pairs(names, baseline)
    source = open_source(human, llm, metric, rel_level, min_grade, model, prompt, kind, log)
    queries = sorted(source.human_queries)
    if not queries:
        raise InputError("no judged query", display_name(human))
    read = _read(runs, queries, human, idx)
    table = CompareTable(source.name)
    lo, hi = source.value_range()
    span = hi - lo  # a difference lies in [-span, span]
    if llm is None:  # human labels on every query
        chosen, lab, unl, pred = list(methods), None, None, None
        truth = np.array([source.human_values(run, queries) for run in read])
    else:  # human labels on the labelled queries (truth's columns), LLM predictions on all
        chosen, labelled = _llm_inputs(source, queries, labelled_file, n_labelled, seed, human, mapping, methods, log)
        lab, unl, truth, pred = _predictions(source, read, queries, labelled, log)
    a, b = [i for i, _ in idx], [j for _, j in idx]
    for method in chosen:
        if method in HUMAN_METHODS:
            res = _human_test(method, truth[a] - truth[b], alpha, samples, seed, span)
            if method == "randomization":
                _resolution_note(truth.shape[1], samples, len(idx), correction, alpha, log)
        else:
            d_pred = pred[a] - pred[b]
            res = ppi_test(truth[a] - truth[b], d_pred[:, lab], d_pred[:, unl], alpha, method == "ppi_tuned")
        differs = _add(table, names, idx, method, truth.shape[1] if method in HUMAN_METHODS else len(queries), res,
                       alpha, correction, span)
        if table.scores is None:  # the picture follows the first method: its kind of interval, its verdicts
            per_run = (t_test(truth, alpha) if method in HUMAN_METHODS else
                       ppi_test(truth, pred[:, lab], pred[:, unl], alpha, method == "ppi_tuned"))
            table.scores = _scores(names, per_run, differs, idx, baseline, (lo, hi), method)
    return table


def _llm_inputs(source, queries, labelled_file, n_labelled, seed, human, mapping, methods, log):
    """(methods, labelled queries), the label mapping fitted on the labelled queries."""
    llm_only = source.llm_queries - set(queries)
    if llm_only:
        log(f"{len(llm_only)} LLM-labelled queries that {display_name(human)} does not judge are left out "
            "(the population is the judged queries)")
    unseen = set(queries) - source.llm_queries
    if unseen:
        log(f"{len(unseen)} judged queries have no LLM label: every passage of theirs is predicted at the lowest "
            f"LLM label ({', '.join(sorted(unseen)[:5])}{', ...' if len(unseen) > 5 else ''})")
    labelled = choose_labelled(queries, labelled_file, n_labelled, seed, human, log,
                               lacking=f"is not judged in {display_name(human)}")
    chosen = list(methods)
    if len(queries) - len(labelled) < 2 and any(m in LLM_METHODS for m in chosen):
        chosen = [m for m in chosen if m not in LLM_METHODS]
        log(f"{len(queries) - len(labelled)} unlabelled queries: PPI needs at least 2, so it is left out")
        if not chosen:
            raise UsageError("nothing left to compute: PPI needs unlabelled queries (label fewer queries, or give "
                             "--methods t)")
    source.prepare(labelled, mapping)
    log(f"{len(queries)} judged queries, {len(labelled)} labelled with human judgments; metric {source.name}, "
        f"mapping {mapping}")
    return chosen, labelled


def _predictions(source, read, queries, labelled, log):
    position = {q: i for i, q in enumerate(queries)}
    lab = np.array([position[q] for q in labelled], dtype=np.int64)
    unl = np.setdiff1d(np.arange(len(queries)), lab)
    truth, pred, unlabelled = [], [], 0
    for run in read:
        predicted, human_values = source.build(run, queries, labelled)
        unlabelled += predicted.unlabelled
        pred.append(predicted(0.0))
        truth.append(human_values)
    if unlabelled:
        log(f"{unlabelled} top-ranked passage(s) without LLM label over all runs (counted as the lowest LLM label "
            "/ answering nothing)")
    return lab, unl, np.array(truth), np.array(pred)


def _human_test(method: str, d: np.ndarray, alpha: float, samples: int, seed: int, span: float) -> Paired:
    if method == "t":
        return t_test(d, alpha)
    # a generator of its own per method, as interval's methods: adding one moves no other
    return randomization(d, alpha, samples, np.random.default_rng([seed, METHODS.index(method)]), span)


def _resolution_note(n: int, samples: int, m: int, correction: str, alpha: float, log) -> None:
    """A randomization p-value cannot go below one pattern's share: with many pairs and too few
    patterns, Holm or Bonferroni can call no pair different whatever the data say."""
    smallest = 2 / 2 ** n if n < 63 and 2 ** n <= samples else 1 / (samples + 1)
    if (m if correction != "none" else 1) * smallest >= alpha:
        log(f"warning: the randomization test's p-values cannot go below {smallest:.3g}, so {correction} over {m} "
            f"pairs can call none of them different at alpha {alpha:g}: raise --samples (or label more queries)")


def _add(table: CompareTable, names, idx, method, n, res: Paired, alpha, correction, span) -> np.ndarray:
    adjusted = adjust(res.p, correction)
    differs = adjusted < alpha
    lower, upper = np.clip(res.lower, -span, span), np.clip(res.upper, -span, span)
    for k, (a, b) in enumerate(idx):
        table.rows.append([names[a], names[b], table.metric, method, str(n), fmt(res.difference[k]), fmt(lower[k]),
                           fmt(upper[k]), _p(res.p[k]), _p(adjusted[k]), "1" if differs[k] else "0"])
    table.summaries.append(f"{int(differs.sum())} of {len(idx)} pairs differ at alpha {alpha:g} "
                           f"({method}, {correction})")
    return differs


def _scores(names, per_run: Paired, differs, idx, baseline, bounds, method) -> RunScores:
    """The runs that do not differ from the reference: the baseline, else the best-scoring run."""
    reference = baseline if baseline is not None else names[int(np.argmax(per_run.difference))]
    r = names.index(reference)
    same = [True] * len(names)
    for k, (a, b) in enumerate(idx):
        if r in (a, b) and differs[k]:
            same[b if a == r else a] = False
    return RunScores(names, per_run.difference, np.clip(per_run.lower, *bounds), np.clip(per_run.upper, *bounds),
                     same, reference, method)
