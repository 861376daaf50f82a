"""Rank correlation between two leaderboards (truth = official, pred = automatic).

Spearman, Kendall tau-b and Pearson come from scipy. tau-a, tau-AP, tau-AP-b and
tau-GAP are not in scipy, so they are computed here from their definitions (O(n^2), n
is a number of systems, so this is never slow). The AutoJudge meta-evaluation's own
coefficients (autojudge-evaluate 1.1: ``kendall``, ``tauap_b``, ``tau_gap``,
``kendall@k``) are defined exactly as there; see tau_ap_b, tau_gap and kendall_at_k.
"""

from __future__ import annotations

import math
import warnings
from typing import Mapping

import numpy as np
from scipy import stats

BASE_KEYS = ("spearman", "kendall_tau_b", "kendall_tau_a", "tau_ap", "tau_ap_b", "tau_gap", "pearson")
KEYS = BASE_KEYS + ("n",)  # plus one kendall@K per cut-off asked for, see keys()
DEFAULT_TOP_K = (10,)      # autojudge-evaluate's kendall@10


def keys(top_k=DEFAULT_TOP_K) -> tuple[str, ...]:
    return BASE_KEYS + tuple(f"kendall@{k}" for k in top_k) + ("n",)


def common_systems(truth: Mapping[str, float], pred: Mapping[str, float]) -> list[str]:
    return sorted(set(truth) & set(pred))


def _constant(values) -> bool:
    a = np.asarray(values, dtype=float)
    return bool(np.all(a == a[0]))


def kendall_tau_a(x: np.ndarray, y: np.ndarray) -> float:
    """(concordant - discordant) / (n choose 2); tied pairs count as neither."""
    n = len(x)
    if n < 2:
        return math.nan
    with np.errstate(over="ignore"):  # 1e308 - -1e308 is inf, whose sign is right
        dx = np.sign(x[:, None] - x[None, :])
        dy = np.sign(y[:, None] - y[None, :])
    upper = np.triu_indices(n, k=1)
    return float((dx * dy)[upper].sum() / (n * (n - 1) / 2))


def tau_ap(truth: np.ndarray, pred: np.ndarray, names: list[str] | None = None) -> float:
    """AP rank correlation (Yilmaz, Aslam & Robertson 2008) of pred's ordering against truth.

    Systems are ordered best first by pred (ties broken by name, so the value is
    deterministic); C(i) counts the systems above position i in pred's ordering that
    truth also places strictly above system i. Errors near the top cost more than
    errors near the bottom, which is what a leaderboard's reader cares about.
    """
    n = len(truth)
    if n < 2 or _constant(truth) or _constant(pred):
        # a constant side orders nothing: the value would follow the names' order
        return math.nan
    if names is None:
        names = [str(i) for i in range(n)]
    order = sorted(range(n), key=lambda i: (-pred[i], names[i]))
    t = truth[order]
    total = 0.0
    for i in range(1, n):
        total += np.count_nonzero(t[:i] > t[i]) / i
    return float(2.0 * total / (n - 1) - 1.0)


def _tau_ap_b_one(x: np.ndarray, y: np.ndarray) -> float:
    """tau_AP with ties (Urbano & Marrero 2017), y's ordering against x.

    Every item i that y does not place in its top tie group is a pivot: p(i) items
    lie strictly above it in y, c(i) of them also strictly above it in x; the
    coefficient is 2/|pivots| * sum c(i)/p(i) - 1. Ties in x count as discordant.
    """
    above_y = y[None, :] > y[:, None]  # [i, j]: j strictly above i in y
    above_x = x[None, :] > x[:, None]
    p = above_y.sum(axis=1)
    c = (above_y & above_x).sum(axis=1)
    pivots = p > 0
    if not pivots.any():
        return math.nan
    return float(2.0 / pivots.sum() * (c[pivots] / p[pivots]).sum() - 1.0)


def tau_ap_b(x: np.ndarray, y: np.ndarray) -> float:
    """Symmetric tau_AP_b: the mean of tau_AP_b(y vs x) and tau_AP_b(x vs y), as
    autojudge-evaluate's ``tauap_b`` (pyircore). NaN when a side is constant
    (autojudge-evaluate scores an all-tied side 0.0 instead)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    return (_tau_ap_b_one(x, y) + _tau_ap_b_one(y, x)) / 2.0


def tau_gap(truth: np.ndarray, pred: np.ndarray, names: list[str]) -> float:
    """tau_GAP (Gao & Oard 2015): head-weighted and gap-sensitive.

    Systems in pred's order (ties by name); at each position i, the share of the truth
    gap mass |truth_j - truth_i| over the systems j above it that pred orders as truth
    does; 2/(positions used) * sum - 1. Positions whose pairs are all truth-tied are
    left out; NaN when every pair is. Asymmetric: truth gives the gaps, pred the order.
    """
    n = len(truth)
    if n < 2 or _constant(pred):  # (a constant truth has no gaps: NaN below)
        return math.nan
    order = sorted(range(n), key=lambda i: (-pred[i], names[i]))
    t = np.asarray(truth, dtype=float)[order]
    above = np.tri(n, k=-1, dtype=bool)             # [i, j], j < i: j above i in pred's order
    with np.errstate(over="ignore", invalid="ignore"):
        gap = np.abs(t[None, :] - t[:, None])
        # a row with a gap past float's range takes its halves (exact, and the ratio is
        # the same); scaling the values instead made a gap of 1e-300 beside 1e300 zero
        gap = np.where(np.isinf(gap).any(axis=1, keepdims=True), np.abs(t[None, :] / 2 - t[:, None] / 2), gap)
    gap = np.where(above, gap, 0.0)
    top = gap.max(axis=1, keepdims=True)
    gap = np.divide(gap, top, out=np.zeros_like(gap), where=top > 0)  # each row at most 1: its sums stay finite
    gaps = gap.sum(axis=1)
    correct = np.where(t[None, :] > t[:, None], gap, 0.0).sum(axis=1)
    used = gaps > 0
    if not used.any():
        return math.nan
    return float(2.0 / used.sum() * (correct[used] / gaps[used]).sum() - 1.0)


def top_k_systems(truth: Mapping[str, float], systems: set[str], k: int) -> list[str]:
    """The k best of ``systems`` by truth; ties at the cut-off go to the system that
    comes first in ``truth``'s order (its file order), as autojudge-evaluate does."""
    ranked = sorted((s for s in truth if s in systems), key=lambda s: -truth[s])  # stable
    return ranked[:k]


def kendall_at_k(truth: Mapping[str, float], pred: Mapping[str, float], k: int) -> float:
    """Kendall's tau-b over the k systems the truth ranks best (among those in both)."""
    top = top_k_systems(truth, set(truth) & set(pred), k)
    if len(top) < 2:
        return math.nan
    x = np.array([float(truth[s]) for s in top])
    y = np.array([float(pred[s]) for s in top])
    if np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    with warnings.catch_warnings():  # as in correlate
        warnings.simplefilter("ignore")
        return float(stats.kendalltau(x, y, variant="b").statistic)


def _in_range(v: np.ndarray) -> np.ndarray:
    """``v`` scaled (by a power of two) so that Pearson's sums of squares neither overflow
    nor underflow: 1e308 twice made its mean inf and the coefficient NaN. Pearson does
    not change under a positive scale."""
    top = float(np.max(np.abs(v)))
    if top == 0.0 or 1e-100 < top < 1e100:
        return v
    return np.ldexp(v, -math.frexp(top)[1])


def correlate(truth: Mapping[str, float], pred: Mapping[str, float], top_k=DEFAULT_TOP_K) -> dict:
    """Correlation of two leaderboards over the systems present in both.

    Higher is better on both sides (negate rank columns before calling). Values are
    NaN when fewer than two systems are shared or a side is constant. ``truth``'s
    iteration order breaks ties at kendall@K's cut-off.
    """
    names = common_systems(truth, pred)
    n = len(names)
    out = {k: math.nan for k in keys(top_k)}
    out["n"] = n
    if n < 2:
        return out
    x = np.array([float(truth[s]) for s in names])
    y = np.array([float(pred[s]) for s in names])
    constant = np.all(x == x[0]) or np.all(y == y[0])
    if not constant:
        # values are taken as they are, float noise of recomputed means included, as
        # autojudge-evaluate takes them; scipy's note on near-constant input would be a raw
        # Python warning among our lines on stderr
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out["spearman"] = float(stats.spearmanr(x, y).statistic)
            out["kendall_tau_b"] = float(stats.kendalltau(x, y, variant="b").statistic)
            out["pearson"] = float(stats.pearsonr(_in_range(x), _in_range(y)).statistic)
    out["kendall_tau_a"] = kendall_tau_a(x, y)
    out["tau_ap"] = tau_ap(x, y, names)
    out["tau_ap_b"] = tau_ap_b(x, y)
    out["tau_gap"] = tau_gap(x, y, names)
    for k in top_k:
        out[f"kendall@{k}"] = kendall_at_k(truth, pred, k)
    return out
