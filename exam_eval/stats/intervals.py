"""All interval methods for one run: what ``exam-correlate interval`` prints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..io.trec import Qrels
from .bootstrap import empirical_bootstrap
from .crc import crc_dataset, crc_per_query
from .labels import LabelDists
from .metrics import Metric, human_value
from .ppi import ppi_mean
from .predicted import PredictedMetric

METHODS = ("bootstrap", "ppi", "ppi_tuned", "crc")


@dataclass
class MethodResult:
    method: str
    lower: float
    estimate: float
    upper: float
    detail: str = ""     # lambda(s) used

    @property
    def width(self) -> float:
        return self.upper - self.lower


@dataclass
class PerQuery:
    queries: list[str]
    lower: np.ndarray
    predicted: np.ndarray
    upper: np.ndarray
    human: dict[str, float]          # labelled queries only
    lam_low: float
    lam_high: float


def human_values(metric: Metric, run, human: Qrels, queries: Sequence[str]) -> np.ndarray:
    return np.array([human_value(metric, run.get(q, {}), human.get(q, {})) for q in queries])


def compute_intervals(predicted, labelled_idx: np.ndarray, truth: np.ndarray, alpha: float, samples: int,
                      seed: int, methods: Sequence[str] = METHODS, correction: str = "paper") -> list[MethodResult]:
    """All dataset-level methods from a predicted metric (callable lambda -> per-query
    values over all queries), the labelled queries' positions and their human values.

    What each interval is about: bootstrap and PPI estimate the expected metric over
    the distribution the queries were sampled from; CRC bounds the metric over these
    very queries (the paper's test-set performance), which is what it is calibrated for.
    Each method gets its own seeded generator so adding or dropping one does not change
    the others' numbers.
    """
    pred0 = predicted(0.0)
    unlabelled = np.setdiff1d(np.arange(len(pred0)), labelled_idx)
    out: list[MethodResult] = []
    for method in methods:
        rng = np.random.default_rng([seed, METHODS.index(method)])
        if method == "bootstrap":
            r = empirical_bootstrap(truth, alpha, samples, rng)
            out.append(MethodResult(method, r.lower, r.estimate, r.upper))
        elif method in ("ppi", "ppi_tuned"):
            r = ppi_mean(truth, pred0[labelled_idx], pred0[unlabelled], alpha,
                         lam=1.0 if method == "ppi" else None)
            out.append(MethodResult(method, r.lower, r.estimate, r.upper, f"lambda={r.lam:.4f}"))
        elif method == "crc":
            r = crc_dataset(predicted, labelled_idx, truth, alpha, samples, rng, correction)
            out.append(MethodResult(method, r.lower, r.estimate, r.upper,
                                    f"lambda_low={r.lam_low:.4f} lambda_high={r.lam_high:.4f}"))
        else:
            raise ValueError(method)
    return out


def compute_per_query(predicted, queries: Sequence[str], labelled: Sequence[str], truth: np.ndarray, alpha: float,
                      correction: str = "paper") -> PerQuery:
    position = {q: i for i, q in enumerate(queries)}
    idx = np.array([position[q] for q in labelled], dtype=np.int64)
    lo, mid, hi, lam_low, lam_high = crc_per_query(predicted, idx, truth, alpha, correction)
    return PerQuery(list(queries), lo, mid, hi, dict(zip(labelled, np.asarray(truth).tolist())), lam_low, lam_high)


def run_intervals(metric: Metric, run: Mapping[str, Mapping[str, float]], human: Qrels, labels: LabelDists,
                  queries: Sequence[str], labelled: Sequence[str], alpha: float, samples: int,
                  seed: int, methods: Sequence[str] = METHODS, correction: str = "paper",
                  ) -> tuple[list[MethodResult], PredictedMetric]:
    """Intervals for a run's mean rank metric over ``queries``; human labels are used
    only for the ``labelled`` queries."""
    predicted = PredictedMetric(metric, run, labels, queries)
    position = {q: i for i, q in enumerate(queries)}
    idx = np.array([position[q] for q in labelled], dtype=np.int64)
    truth = human_values(metric, run, human, labelled)
    return compute_intervals(predicted, idx, truth, alpha, samples, seed, methods, correction), predicted


def run_per_query(metric: Metric, run, human: Qrels, labels: LabelDists, queries: Sequence[str],
                  labelled: Sequence[str], alpha: float, predicted: PredictedMetric | None = None,
                  correction: str = "paper") -> PerQuery:
    predicted = predicted or PredictedMetric(metric, run, labels, queries)
    truth = human_values(metric, run, human, labelled)
    return compute_per_query(predicted, queries, labelled, truth, alpha, correction)
