"""Conformal risk control intervals for IR metrics (CI paper, section 6).

Each passage's predicted label distribution is shifted optimistically (lambda > 0:
remove lambda probability mass from the lowest labels, Eq. 16 top) or pessimistically
(lambda < 0: from the highest labels), renormalised (Eq. 17); the metric computed
with the shifted expected gains is U_CRC(Q, lambda) (Eq. 18-20). lambda_high and
lambda_low are calibrated separately by binary search so that on calibration batches
of labelled queries the empirical miss rate of each bound is below
(alpha - (1 - alpha) / M) / 2 (Eq. 24), M being the number of batches:

- dataset level: M bootstrap batches of n queries drawn with replacement from the
  n labelled queries (section 6.2);
- per query: the n labelled queries themselves, one per batch.

CRC gives an interval, not a point. Its dataset-level ``estimate`` is the metric under
the shift halfway between the two calibrated degrees, U_CRC(Q, (lambda_low +
lambda_high) / 2): U_CRC is monotone in lambda, so it always lies inside the interval,
and it is the LLM prediction moved the way calibration says it errs. The unshifted LLM
mean, U_CRC(Q, 0), lies outside the interval whenever both degrees have the same sign
(half to two thirds of DL19 cases); it is kept as ``llm_mean``.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import ExamEvalError

SEARCH_STEPS = 50
EDGE = 1e-9  # lambda lives in the open interval (-1, 1)
TINY = 1e-12  # a threshold this small is 0 up to rounding ((1 - 0.95) * 19 = 0.95 exactly)


class CoverageError(ExamEvalError):
    """The labelled data cannot certify the requested coverage; exit 2 like bad input."""


def degree_shift(p: np.ndarray, lam: float) -> np.ndarray:
    """P_CRC(. | d, lambda) for rows of label distributions over ascending labels."""
    p = np.asarray(p, dtype=float)
    if lam == 0:
        return p
    q = p if lam > 0 else p[..., ::-1]
    t = abs(lam)
    below = np.cumsum(q, axis=-1) - q            # mass of the labels removed before this one
    removed = np.clip(t - below, 0.0, q)
    kept = q - removed
    total = kept.sum(axis=-1, keepdims=True)
    # At |lambda| -> 1 all that is left is the extreme label with mass; rounding can
    # leave nothing, so fall back to that limit explicitly.
    extreme = np.zeros_like(q)
    last = q.shape[-1] - 1 - np.argmax((q > 0)[..., ::-1], axis=-1)
    np.put_along_axis(extreme, last[..., None], 1.0, axis=-1)
    out = np.where(total > 1e-12, kept / np.where(total > 1e-12, total, 1.0), extreme)
    return out if lam > 0 else out[..., ::-1]


CORRECTIONS = ("paper", "crc")


def threshold(alpha: float, m: int, correction: str = "paper") -> float:
    """Largest allowed empirical miss rate of one bound over M calibration batches.

    ``paper``: Eq. 24, (alpha - (1 - alpha) / M) / 2. ``crc``: Eq. 15 (Angelopoulos et
    al.'s finite-sample bound, B = 1) applied to each bound at level alpha / 2,
    alpha / 2 - (1 - alpha / 2) / M; stricter, it keeps per-query coverage at 1 - alpha
    where the paper's correction falls short by about 1/n (our simulations).
    """
    if correction == "paper":
        return 0.5 * (alpha - (1.0 - alpha) / m)
    if correction == "crc":
        return alpha / 2 - (1.0 - alpha / 2) / m
    raise ValueError(f"unknown correction {correction!r}")


def min_labelled_per_query(alpha: float, correction: str = "paper") -> int:
    """Smallest n whose threshold is positive, i.e. for which Eq. 24 can hold at all.
    Solved for n, then checked (counting up from 1 took about 1/alpha steps: minutes at
    --alpha 1e-9)."""
    threshold(alpha, 1, correction)  # an unknown correction fails here
    if correction == "paper":
        room, cost = alpha - 2 * TINY, 1.0 - alpha
    else:
        room, cost = alpha / 2 - TINY, 1.0 - alpha / 2
    if room <= 0:
        return sys.maxsize  # no number of batches is enough
    m = max(1, math.floor(cost / room))
    while m > 1 and threshold(alpha, m - 1, correction) > TINY:
        m -= 1
    while threshold(alpha, m, correction) <= TINY:
        m += 1
    return m


def _search(risk: Callable[[float], float], thr: float, increasing: bool) -> float | None:
    """Smallest lambda with risk < thr for a non-increasing risk (largest one for a
    non-decreasing risk), or None when even the extreme lambda fails."""
    if increasing:
        # mirror: the interval is symmetric and negation is exact, so this is the same search
        found = _search(lambda lam: risk(-lam), thr, increasing=False)
        return None if found is None else -found
    lo, hi = -1.0 + EDGE, 1.0 - EDGE
    if risk(hi) >= thr:
        return None
    if risk(lo) < thr:
        return lo
    for _ in range(SEARCH_STEPS):
        mid = 0.5 * (lo + hi)
        if risk(mid) < thr:
            hi = mid
        else:
            lo = mid
    return hi


def calibrate(predict: Callable[[float], np.ndarray], truth: np.ndarray, batches: np.ndarray,
              alpha: float, correction: str = "paper") -> tuple[float, float]:
    """(lambda_low, lambda_high) for calibration batches.

    ``predict(lam)`` gives U_CRC per labelled query, ``truth`` the human U per labelled
    query, ``batches`` an (M, n) matrix of how often each labelled query is in each
    batch; a batch's value is the mean over its queries.
    """
    m = batches.shape[0]
    thr = threshold(alpha, m, correction)
    if thr <= TINY:
        raise CoverageError(
            f"{m} calibration batches cannot certify 1-alpha = {1 - alpha:g} "
            f"(needs at least {min_labelled_per_query(alpha, correction)})")
    sizes = batches.sum(axis=1)
    target = batches @ truth / sizes
    # a value equal to the human one up to rounding is no miss: a judge whose labels are
    # the human ones computes nDCG through other sums and divisions than the truth did
    slack = 1e-12 * (1.0 + np.abs(target))

    def values(lam: float) -> np.ndarray:
        return batches @ predict(lam) / sizes

    lam_high = _search(lambda lam: float(np.mean(values(lam) < target - slack)), thr, increasing=False)
    lam_low = _search(lambda lam: float(np.mean(values(lam) > target + slack)), thr, increasing=True)
    if lam_high is None or lam_low is None:
        side = "upper" if lam_high is None else "lower"
        raise CoverageError(
            f"CRC cannot reach 1-alpha = {1 - alpha:g}: even the extreme {side} shift misses the human "
            f"values too often on the labelled queries (more labelled queries or a larger alpha needed)")
    # Eq. 24 wants lambda_low < lambda_high; if calibration crossed them, swapping keeps
    # both risks below the threshold because each risk is monotone in lambda.
    return min(lam_low, lam_high), max(lam_low, lam_high)


def bootstrap_batches(n: int, samples: int, rng: np.random.Generator) -> np.ndarray:
    """M batches of n labelled queries drawn with replacement, as counts (M, n)."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=samples).astype(float)


@dataclass
class CRCResult:
    lower: float
    estimate: float  # at the middle degree; inside [lower, upper]
    upper: float
    lam_low: float
    lam_high: float
    llm_mean: float = float("nan")  # unshifted (lambda 0)


def crc_dataset(predict_all: Callable[[float], np.ndarray], labelled: np.ndarray, truth: np.ndarray,
                alpha: float, samples: int, rng: np.random.Generator, correction: str = "paper") -> CRCResult:
    """Dataset-level interval for the mean metric over all queries.

    ``predict_all(lam)``: U_CRC for every query; ``labelled``: indices of the labelled
    queries into that array; ``truth``: their human values.
    """
    n = len(labelled)
    if n < 2:
        raise CoverageError(f"CRC needs at least 2 labelled queries, got {n}")
    batches = bootstrap_batches(n, samples, rng)
    lam_low, lam_high = calibrate(lambda lam: predict_all(lam)[labelled], truth, batches, alpha, correction)
    lower, upper = float(np.mean(predict_all(lam_low))), float(np.mean(predict_all(lam_high)))
    # monotone in lambda, so inside already; the clip only absorbs rounding
    middle = float(np.clip(np.mean(predict_all(0.5 * (lam_low + lam_high))), lower, upper))
    return CRCResult(lower, middle, upper, lam_low, lam_high, float(np.mean(predict_all(0.0))))


def crc_per_query(predict_all: Callable[[float], np.ndarray], labelled: np.ndarray, truth: np.ndarray,
                  alpha: float, correction: str = "paper") -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """Per-query intervals: calibrated on single-query batches of the labelled queries."""
    n = len(labelled)
    need = min_labelled_per_query(alpha, correction)
    if n < need:
        raise CoverageError(f"per-query CRC at 1-alpha = {1 - alpha:g} needs at least {need} labelled "
                            f"queries, got {n}")
    lam_low, lam_high = calibrate(lambda lam: predict_all(lam)[labelled], truth, np.eye(n), alpha, correction)
    return predict_all(lam_low), predict_all(0.0), predict_all(lam_high), lam_low, lam_high
