"""All interval methods for one run: what ``exam-correlate interval`` prints.

Every interval (and its estimate) is clipped to the metric's range (``bounds``): a
normal-approximation interval such as PPI's can otherwise reach past what the metric
can take (an upper bound of 1.022 for nDCG). One method failing (CRC cannot be
calibrated, say) does not take the others with it: with a ``failures`` list the
failure is recorded there and the other methods' results are returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..errors import ExamEvalError
from ..trec_eval.trec_files import Qrels
from .bootstrap import empirical_bootstrap
from .crc import crc_dataset, crc_per_query
from .label_dists import LabelDists
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
    llm_mean: float = float("nan")  # the unshifted LLM-predicted mean over all queries

    def clipped(self, bounds: tuple[float, float] | None) -> "MethodResult":
        if bounds is None:
            return self
        lo, hi = bounds
        return MethodResult(self.method, float(np.clip(self.lower, lo, hi)), float(np.clip(self.estimate, lo, hi)),
                            float(np.clip(self.upper, lo, hi)), self.detail, self.llm_mean)

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


@dataclass
class MethodFailure:
    method: str
    reason: str


def compute_intervals(predicted, labelled_idx: np.ndarray, truth: np.ndarray, alpha: float, samples: int,
                      seed: int, methods: Sequence[str] = METHODS, correction: str = "paper",
                      bounds: tuple[float, float] | None = None,
                      failures: list[MethodFailure] | None = None) -> list[MethodResult]:
    """All dataset-level methods from a predicted metric (callable lambda -> per-query
    values over all queries), the labelled queries' positions and their human values.

    What each interval is about: bootstrap and PPI estimate the expected metric over
    the distribution the queries were sampled from; CRC bounds the metric over these
    very queries (all of them; the paper evaluates on its unlabelled test set alone),
    which is what it is calibrated for.
    Each method gets its own seeded generator so adding or dropping one does not change
    the others' numbers.

    ``estimate`` is each method's point estimate (inside its interval, but for the basic
    bootstrap's, which skewed resampled means can put beside it); ``llm_mean`` (the
    same for every method) is the plain mean of the LLM-predicted metric over all queries.
    """
    pred0 = predicted(0.0)
    llm_mean = float(np.mean(pred0))
    unlabelled = np.setdiff1d(np.arange(len(pred0)), labelled_idx)
    out: list[MethodResult] = []
    for method in methods:
        if method not in METHODS:
            raise ValueError(method)
        rng = np.random.default_rng([seed, METHODS.index(method)])
        try:
            result = _one_method(method, predicted, pred0, labelled_idx, unlabelled, truth, alpha, samples, rng,
                                 correction)
        except (ExamEvalError, ArithmeticError, ValueError, np.linalg.LinAlgError) as exc:
            if failures is None:
                raise
            failures.append(MethodFailure(method, str(exc) or type(exc).__name__))
            continue
        result.llm_mean = llm_mean
        out.append(result.clipped(bounds))
    return out


def _one_method(method, predicted, pred0, labelled_idx, unlabelled, truth, alpha, samples, rng,
                correction) -> MethodResult:
    if method == "bootstrap":
        r = empirical_bootstrap(truth, alpha, samples, rng)
        return MethodResult(method, r.lower, r.estimate, r.upper)
    if method in ("ppi", "ppi_tuned"):
        r = ppi_mean(truth, pred0[labelled_idx], pred0[unlabelled], alpha, lam=1.0 if method == "ppi" else None)
        return MethodResult(method, r.lower, r.estimate, r.upper, f"lambda={r.lam:.4f}")
    r = crc_dataset(predicted, labelled_idx, truth, alpha, samples, rng, correction)
    return MethodResult(method, r.lower, r.estimate, r.upper,
                        f"lambda_low={r.lam_low:.4f} lambda_high={r.lam_high:.4f}")


def compute_per_query(predicted, queries: Sequence[str], labelled: Sequence[str], truth: np.ndarray, alpha: float,
                      correction: str = "paper") -> PerQuery:
    position = {q: i for i, q in enumerate(queries)}
    idx = np.array([position[q] for q in labelled], dtype=np.int64)
    lo, mid, hi, lam_low, lam_high = crc_per_query(predicted, idx, truth, alpha, correction)
    return PerQuery(list(queries), lo, mid, hi, dict(zip(labelled, np.asarray(truth).tolist())), lam_low, lam_high)


def run_intervals(metric: Metric, run: Mapping[str, Mapping[str, float]], human: Qrels, labels: LabelDists,
                  queries: Sequence[str], labelled: Sequence[str], alpha: float, samples: int,
                  seed: int, methods: Sequence[str] = METHODS, correction: str = "paper",
                  bounds: tuple[float, float] | None = None, failures: list[MethodFailure] | None = None,
                  ) -> tuple[list[MethodResult], PredictedMetric]:
    """Intervals for a run's mean rank metric over ``queries``; human labels are used
    only for the ``labelled`` queries."""
    predicted = PredictedMetric(metric, run, labels, queries)
    position = {q: i for i, q in enumerate(queries)}
    idx = np.array([position[q] for q in labelled], dtype=np.int64)
    truth = human_values(metric, run, human, labelled)
    return compute_intervals(predicted, idx, truth, alpha, samples, seed, methods, correction, bounds,
                             failures), predicted


def run_per_query(metric: Metric, run, human: Qrels, labels: LabelDists, queries: Sequence[str],
                  labelled: Sequence[str], alpha: float, predicted: PredictedMetric | None = None,
                  correction: str = "paper") -> PerQuery:
    predicted = predicted or PredictedMetric(metric, run, labels, queries)
    truth = human_values(metric, run, human, labelled)
    return compute_per_query(predicted, queries, labelled, truth, alpha, correction)
