"""exam-correlate interval's table: read the two label sources and the runs, choose the
labelled queries, and compute every method's interval per run (exam_eval.stats.intervals)
or per-query CRC intervals. Notes go to ``log``; ``progress(n)``, when given, is a context
manager whose value's ``advance()`` is called after each of the n runs, entered once the
inputs are read (so that a refused input is the only line on stderr)."""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Sequence

import numpy as np

from ..errors import InputError, UsageError
from ..io.openers import display_name, iter_lines
from ..io.leaderboard import run_name
from ..trec_eval.trec_files import read_run
from .bootstrap import DRAW_BYTES, affordable_samples
from .crc import CoverageError, min_labelled_per_query
from .intervals import compute_intervals, compute_per_query
from .leaderboards import fmt
from .metrics import cover_k
from .sources import CoverSource, RankMetricSource


@dataclass
class IntervalTable:
    header: str
    rows: list[str]
    # (run, method, why) of each interval that failed, said by the caller: one line is all
    # when every one failed
    failures: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        return [f"{run}/{method}" for run, method, _ in self.failures]

    @property
    def first_error(self) -> str | None:
        return self.failures[0][2] if self.failures else None

    @property
    def failure_notes(self) -> list[str]:
        return [f"{run}: {method} failed: {why}" for run, method, why in self.failures]


#: below this many labelled queries the normal intervals (PPI, the t-test) and the bootstrap
#: cover far less than they say (PPI at nominal 95%: 0.42 with 2, 0.82 with 5, 0.90 with 10;
#: see stats/ppi.py): said on stderr, not refused, as a small pilot is still worth a look
FEW_LABELLED = 10


def read_labelled(path: str, allowed: set[str], lacking: str = "has no human judgments or no LLM labels") -> list[str]:
    name = display_name(path)
    out: list[str] = []
    seen: dict[str, int] = {}
    for lineno, line in iter_lines(path):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) > 1:
            # "101 102" read as 101 alone made one labelled query of two
            raise InputError(f"expected one query id per line, got {len(fields)} fields", name, lineno)
        qid = fields[0]
        if qid not in allowed:
            raise InputError(f"query {qid} {lacking}", name, lineno)
        if qid in seen:
            raise InputError(f"query {qid} is listed again (first on line {seen[qid]})", name, lineno)
        seen[qid] = lineno
        out.append(qid)
    if not out:
        raise InputError("no query ids", name)
    return out


def open_source(human: str, llm: str | None, metric: str, rel_level: int, min_grade: int, model=None, prompt=None,
                kind=None, log: Callable[[str], None] = lambda msg: None) -> RankMetricSource | CoverSource:
    """The two label sources of a metric: rank metrics from qrels, exam-cover from grades."""
    k = cover_k(metric)
    if k is None:
        return RankMetricSource(human, llm, metric, rel_level, model, prompt, kind, log)
    return CoverSource(human, llm, k, min_grade, model, prompt, kind, log)


def choose_labelled(judged: list[str], labelled_file: str | None, n_labelled: int | None, seed: int, human: str,
                    log: Callable[[str], None], lacking: str = "has no human judgments or no LLM labels") -> list[str]:
    """The labelled queries: a file's, N drawn (seeded) from ``judged``, or all of ``judged``."""
    if labelled_file and n_labelled is not None:
        raise UsageError("give --labelled or --n-labelled, not both")
    if labelled_file:
        labelled = read_labelled(labelled_file, set(judged), lacking)
    elif n_labelled is not None:
        if n_labelled > len(judged):
            raise UsageError(f"--n-labelled must be between 2 and {len(judged)} (the queries it draws from)")
        if n_labelled < 2:  # too few labelled queries, as a labelled file of one: bad input, not usage
            raise InputError(f"must be at least 2, got {n_labelled}", "--n-labelled")
        labelled = sorted(random.Random(seed).sample(judged, n_labelled))
    else:
        labelled = judged
    if len(labelled) < 2:  # every method would fail alike, one line per run and method
        raise InputError(f"{len(labelled)} labelled query ({labelled[0]}): the intervals need at least 2 queries "
                         "with human judgments and LLM labels", display_name(labelled_file or human))
    if len(labelled) < FEW_LABELLED:
        log(f"warning: only {len(labelled)} labelled queries: with fewer than {FEW_LABELLED} the intervals cover "
            "far less often than 1 - alpha (PPI at 95%: about 42% of the time with 2, 82% with 5)")
    return labelled


def interval_rows(human: str, llm: str, runs: Sequence[str], *, metric: str, rel_level: int, min_grade: int,
                  labelled_file: str | None, n_labelled: int | None, alpha: float, samples: int, seed: int,
                  mapping: str, chosen: list[str], crc_correction: str, per_query: bool, model=None, prompt=None,
                  kind=None, log: Callable[[str], None] = lambda msg: None,
                  progress: Callable[[int], ContextManager] | None = None) -> IntervalTable:
    source = open_source(human, llm, metric, rel_level, min_grade, model, prompt, kind, log)

    run_data = [(run_name(p), read_run(p)) for p in runs]
    names = [n for n, _ in run_data]
    if len(set(names)) != len(names):
        raise UsageError("two runs have the same name: " + ", ".join(sorted({n for n in names if names.count(n) > 1})))

    queries = sorted(source.llm_queries)
    judged = sorted(set(queries) & source.human_queries)
    if not judged:
        raise InputError(f"no query of {display_name(human)} has LLM labels", display_name(llm))
    labelled = choose_labelled(judged, labelled_file, n_labelled, seed, human, log)
    for name, run in run_data:
        if not set(run) & set(queries):
            raise InputError(f"run {name} has none of the {len(queries)} LLM-labelled queries", name)

    need = min_labelled_per_query(alpha, crc_correction)
    if per_query and len(labelled) < need:
        raise CoverageError(f"per-query CRC at 1-alpha = {1 - alpha:g} needs at least {need} labelled "
                            f"queries (--crc-correction {crc_correction}), got {len(labelled)}")
    if len(labelled) == len(queries) and any(m.startswith("ppi") for m in chosen):
        chosen = [m for m in chosen if not m.startswith("ppi")]
        log("every query is labelled, so PPI has no unlabelled queries to use: PPI left out")
        if not chosen:
            raise UsageError("nothing left to compute: PPI needs unlabelled queries (use --labelled/--n-labelled)")

    if not per_query and {"bootstrap", "crc"} & set(chosen):
        fits = affordable_samples(len(labelled))
        if fits is not None and samples > fits:
            raise UsageError(f"--samples {samples:,}: the bootstrap draws of {len(labelled)} labelled queries "
                             f"would take {samples * len(labelled) * DRAW_BYTES / 2**30:,.0f} GiB; "
                             f"at most {fits:,} samples fit in half of this machine's memory")
    source.prepare(labelled, mapping)
    log(f"{len(queries)} queries with LLM labels, {len(labelled)} labelled with human judgments; "
        f"metric {source.name}, 1-alpha = {1 - alpha:g}, mapping {mapping}")
    position = {q: i for i, q in enumerate(queries)}
    idx = np.array([position[q] for q in labelled], dtype=np.int64)

    bounds = source.value_range()
    rows: list[str] = []
    failures: list[tuple[str, str, str]] = []
    with progress(len(run_data)) if progress else contextlib.nullcontext() as bar:
        for name, run in run_data:
            predicted, truth = source.build(run, queries, labelled)
            if predicted.unlabelled:
                log(f"{name}: {predicted.unlabelled} top-ranked passage(s) without LLM label "
                    "(counted as the lowest LLM label / answering nothing)")
            if per_query:
                pq = compute_per_query(predicted, queries, labelled, truth, alpha, crc_correction)
                log(f"{name}: per-query CRC lambda_low={pq.lam_low:.4f} lambda_high={pq.lam_high:.4f}")
                lower, upper = np.clip(pq.lower, *bounds), np.clip(pq.upper, *bounds)
                for i, q in enumerate(pq.queries):
                    hv = pq.human.get(q)
                    rows.append("\t".join([name, q, "1" if hv is not None else "0", "" if hv is None else fmt(hv),
                                           fmt(lower[i]), fmt(pq.predicted[i]), fmt(upper[i]),
                                           fmt(upper[i] - lower[i])]))
            else:
                failed_here: list = []
                for r in compute_intervals(predicted, idx, truth, alpha, samples, seed, chosen, crc_correction,
                                           bounds, failed_here):
                    if r.detail:
                        log(f"{name}: {r.method} {r.detail}")
                    rows.append("\t".join([name, source.name, r.method, fmt(r.lower), fmt(r.estimate),
                                           fmt(r.upper), fmt(r.width), fmt(r.llm_mean)]))
                failures.extend((name, f.method, f.reason) for f in failed_here)
            if bar is not None:
                bar.advance()
    header = ("run\tquery\tlabelled\thuman\tlower\tpredicted\tupper\twidth" if per_query
              else "run\tmetric\tmethod\tlower\testimate\tupper\twidth\tllm_mean")
    return IntervalTable(header, rows, failures)
