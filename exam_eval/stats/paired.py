"""Paired tests of run differences: which runs of a leaderboard really differ.

Two runs scored on the same queries are compared through their per-query differences
d(q) = U_a(q) - U_b(q); whether their two confidence intervals overlap is the wrong test
(the queries are shared, so it is far too conservative). Every function here takes the
differences of many pairs at once, one pair per row and one query per column, so that a
37-run leaderboard's 666 pairs (and the bench's thousands of draws) stay array operations.

- ``t_test``: the paired t-test and its t interval of the mean difference.
- ``randomization``: the two-sided paired randomization (sign-flip) test of the mean
  difference, exact where 2^n sign patterns fit in ``samples``, else Monte Carlo; its
  interval is the test inverted (the shifts delta it does not reject), so that 0 lies
  outside the interval exactly where p < alpha.
- ``ppi_test``: prediction-powered inference on the differences (CI paper, section 4):
  human differences on the labelled queries, LLM-predicted differences on the rest.
- ``adjust``: Holm's step-down or Bonferroni's adjustment of the p-values of a family.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from .ppi import ppi_rows

CORRECTIONS = ("holm", "bonferroni", "none")


@dataclass
class Paired:
    """One entry per pair: the estimated mean difference, its interval, the p-value of
    'no difference'. ``lam`` is PPI's lambda (nan for the human-only tests)."""
    difference: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    p: np.ndarray
    lam: np.ndarray | None = None


def _rows(d) -> np.ndarray:
    d = np.asarray(d, dtype=float)
    return d[None, :] if d.ndim == 1 else d


def _normal_or_t(estimate, se, alpha: float, df: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """lower, upper, two-sided p of estimate / se against N(0, 1) (df None) or Student's t.
    se = 0 (every difference equal): p is 1 where the estimate is 0, else 0, and the interval
    a point; scipy's ttest_rel says nan there, which no correction could rank."""
    dist = stats.norm if df is None else stats.t(df)
    half = dist.isf(alpha / 2) * se  # isf, not ppf(1 - alpha/2): exact at tiny alpha
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.abs(estimate) / se
    p = np.where(se > 0, 2 * dist.sf(np.where(se > 0, z, 0.0)), np.where(estimate == 0, 1.0, 0.0))
    return estimate - half, estimate + half, np.minimum(p, 1.0)


def t_test(d, alpha: float) -> Paired:
    """Paired t-test of mean(d) = 0 per row, with the t interval of the mean."""
    d = _rows(d)
    n = d.shape[1]
    if n < 2:
        raise ValueError(f"the t-test needs at least 2 queries, got {n}")
    mean = d.mean(axis=1)
    se = d.std(axis=1, ddof=1) / np.sqrt(n)
    lo, hi, p = _normal_or_t(mean, se, alpha, n - 1)
    return Paired(mean, lo, hi, p)


def sign_patterns(n: int, samples: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """(signs, exact): every one of the 2^n patterns where they fit in ``samples`` (as
    scipy's permutation_test goes exact), else ``samples`` random ones."""
    if n < 63 and 2 ** n <= samples:
        codes = np.arange(2 ** n, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64)[None, :]
        return (codes & 1) * 2.0 - 1.0, True
    return rng.integers(0, 2, size=(samples, n)) * 2.0 - 1.0, False


#: (pair, pattern) cells held at once by the randomization test: its block of pairs holds
#: a few float arrays of this many cells (16 MB each)
_CELLS = 2_000_000


def randomization(d, alpha: float, samples: int, rng: np.random.Generator, bound: float = np.inf) -> Paired:
    """Two-sided paired randomization test of mean(d) = 0 per row: each query's difference
    keeps or flips its sign (a and b swapped on it), the statistic is the mean difference
    (scipy.stats.permutation_test(..., permutation_type='samples') with the same statistic).
    p = share of patterns with |mean| >= the observed one (Monte Carlo: (count + 1) / (samples
    + 1), the observed pattern counted once); one set of patterns serves every row.

    The interval holds every shift delta whose test of mean(d - delta) = 0 has p > alpha.
    A pattern s is as extreme as the observed one at shift delta where |N_s - delta f_s| >=
    |m - delta| (N_s its mean, f_s the mean of its signs, m the observed mean): between the
    two roots (m - N_s) / (1 - f_s) and (m + N_s) / (1 + f_s), an interval around m. So the
    count of extreme patterns only falls as delta leaves m, and each bound is an order
    statistic of the roots, exact for the patterns drawn, no search. Where even the far
    shifts keep p above alpha (2 / 2^n > alpha: too few queries) the bound is +-``bound``."""
    d = _rows(d)
    signs, exact = sign_patterns(d.shape[1], samples, rng)
    block = max(1, _CELLS // len(signs))
    parts = [_randomization_block(d[i:i + block], signs, exact, alpha, bound) for i in range(0, len(d), block)]
    p, lower, upper = (np.concatenate(x) for x in zip(*parts))
    return Paired(d.mean(axis=1), lower, upper, p)


def _randomization_block(d: np.ndarray, signs: np.ndarray, exact: bool, alpha: float, bound: float):
    n, total = d.shape[1], len(signs)
    null = d @ signs.T / n
    mean = d.mean(axis=1)[:, None]
    # scipy's tolerance: a pattern equal to the observed one up to rounding counts
    count = (np.abs(null) >= np.abs(mean) * (1 - 100 * np.finfo(float).eps)).sum(axis=1)
    p = count / total if exact else (count + 1) / (total + 1)
    # p(delta) > alpha while more than `need` patterns are as extreme (the observed one aside)
    need = int(np.floor(alpha * total if exact else alpha * (total + 1) - 1))
    f = signs.sum(axis=1) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        one = np.where(f < 1, (mean - null) / (1 - f), np.inf)   # all signs kept: extreme at every shift
        two = np.where(f > -1, (mean + null) / (1 + f), np.inf)  # all flipped: likewise
    low = np.where(np.isinf(one) | np.isinf(two), -np.inf, np.minimum(one, two))
    high = np.where(np.isinf(one) | np.isinf(two), np.inf, np.maximum(one, two))
    if need < 0:  # alpha below the smallest p the patterns can give: no shift is ever rejected
        return p, np.full(len(d), -bound), np.full(len(d), bound)
    if need >= total:  # alpha so large that every shift is rejected: the interval is the estimate
        return p, mean[:, 0], mean[:, 0]
    # the (need + 1)-th largest upper root, the (need + 1)-th smallest lower root
    upper = -np.partition(-high, need, axis=1)[:, need]
    lower = np.partition(low, need, axis=1)[:, need]
    return p, np.clip(lower, -bound, bound), np.clip(upper, -bound, bound)


def ppi_test(truth, pred_labelled, pred_unlabelled, alpha: float, tuned: bool = False) -> Paired:
    """PPI on per-query differences: ``truth`` the human differences of the labelled queries,
    ``pred_*`` the LLM-predicted differences of the labelled and unlabelled ones (rows:
    pairs). Normal interval as stats/ppi.py's; p of estimate / standard error."""
    est, se, lam = ppi_rows(_rows(truth), _rows(pred_labelled), _rows(pred_unlabelled), None if tuned else 1.0)
    lo, hi, p = _normal_or_t(est, se, alpha, None)
    return Paired(est, lo, hi, p, lam)


def adjust(p, correction: str) -> np.ndarray:
    """p-values adjusted for the family they were computed in: Holm's step-down (the
    k-th smallest times m - k + 1, never below an earlier one), Bonferroni's (times m), or
    none; capped at 1."""
    p = np.asarray(p, dtype=float)
    m = p.shape[-1]
    if correction == "none":
        return p.copy()
    if correction == "bonferroni":
        return np.minimum(p * m, 1.0)
    if correction != "holm":
        raise ValueError(correction)
    order = np.argsort(p, axis=-1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=-1) * (m - np.arange(m))
    stepped = np.minimum(np.maximum.accumulate(ranked, axis=-1), 1.0)
    out = np.empty_like(stepped)
    np.put_along_axis(out, order, stepped, axis=-1)
    return out


def pairs(names: list[str], baseline: str | None = None) -> list[tuple[int, int]]:
    """(a, b) index pairs: every pair in the runs' order, or each other run against the
    baseline (a the run, b the baseline: a positive difference is an improvement)."""
    if baseline is None:
        return [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]
    b = names.index(baseline)
    return [(i, b) for i in range(len(names)) if i != b]
