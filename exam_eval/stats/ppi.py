"""Prediction-powered inference for the mean metric (CI paper, section 4; power tuning
from Angelopoulos et al., PPI++).

U is the human metric on the n labelled queries, U-hat the LLM-predicted metric. As
in the paper's experiments (and Angelopoulos et al.), the mean prediction (Eq. 8's
first term) runs over the N unlabelled queries and the prediction error (its second
term) over the n labelled ones; the two terms are then independent, which is what
the variance of Eq. 10-11 assumes (averaging the predictions over the labelled
queries too makes that variance too small: our simulations under-covered).

    estimate = lam * mean_N(U-hat) + mean_n(U - lam * U-hat)
    variance = lam^2 * var_N(U-hat) / N + var_n(U - lam * U-hat) / n
    interval = estimate -/+ z_(1-alpha/2) * sqrt(variance)

lam = 1 is plain PPI (Eq. 8, 10, 11). Power tuning picks the lam that minimises the
variance, lam* = cov_n(U, U-hat) / (var_n(U-hat) + (n/N) var_N(U-hat)), clipped to
[0, 1] so that it never does worse than ignoring the LLM (lam = 0, the classical
mean with a normal interval). PPI++'s own estimator (and ppi_py's) divides by
(1 + n/N) var(U-hat) over all n + N predictions instead: the same where the labelled
queries' predictions vary as the others' do. A differential sweep against ppi_py (4,000
simulations per n, nominal 95%) found ours covering as well or better from n = 5 on
(0.82 / 0.90 / 0.94 at n = 5 / 10 / 20, against 0.79 / 0.88 / 0.93) and worse at n = 2
(0.42 against 0.51), where every normal interval here under-covers; the man page asks
for 10 or more labelled queries.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from .crc import CoverageError


@dataclass
class PPIResult:
    lower: float
    estimate: float
    upper: float
    lam: float

    @property
    def width(self) -> float:
        return self.upper - self.lower


def tuned_lambda(truth: np.ndarray, pred_labelled: np.ndarray, pred_unlabelled: np.ndarray) -> float:
    n, big_n = len(truth), len(pred_unlabelled)
    denom = np.var(pred_labelled, ddof=1) + (n / big_n) * np.var(pred_unlabelled, ddof=1)
    if denom <= 0:
        return 0.0
    cov = np.cov(truth, pred_labelled, ddof=1)[0, 1]
    return float(np.clip(cov / denom, 0.0, 1.0))


def ppi_mean(truth: np.ndarray, pred_labelled: np.ndarray, pred_unlabelled: np.ndarray, alpha: float,
             lam: float | None = 1.0) -> PPIResult:
    """``lam=None`` for power tuning."""
    truth = np.asarray(truth, dtype=float)
    pred_labelled = np.asarray(pred_labelled, dtype=float)
    pred_unlabelled = np.asarray(pred_unlabelled, dtype=float)
    n, big_n = len(truth), len(pred_unlabelled)
    if n < 2 or big_n < 2:
        raise CoverageError(f"PPI needs at least 2 labelled and 2 unlabelled queries, got {n} and {big_n}")
    if lam is None:
        lam = tuned_lambda(truth, pred_labelled, pred_unlabelled)
    residual = truth - lam * pred_labelled
    estimate = lam * pred_unlabelled.mean() + residual.mean()
    variance = lam ** 2 * np.var(pred_unlabelled, ddof=1) / big_n + np.var(residual, ddof=1) / n
    # isf(alpha/2), not ppf(1 - alpha/2): below alpha ~ 1e-16, 1 - alpha/2 is 1.0 and z infinite
    half = stats.norm.isf(alpha / 2) * np.sqrt(variance)
    return PPIResult(float(estimate - half), float(estimate), float(estimate + half), float(lam))
