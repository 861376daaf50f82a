"""Rank correlation between two leaderboards (truth = official, pred = automatic).

Spearman, Kendall tau-b and Pearson come from scipy. tau-a and tau-AP are not in
scipy, so they are computed here from their definitions (O(n^2), n is a number of
systems, so this is never slow).
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
from scipy import stats

KEYS = ("spearman", "kendall_tau_b", "kendall_tau_a", "tau_ap", "pearson", "n")


def common_systems(truth: Mapping[str, float], pred: Mapping[str, float]) -> list[str]:
    return sorted(set(truth) & set(pred))


def kendall_tau_a(x: np.ndarray, y: np.ndarray) -> float:
    """(concordant - discordant) / (n choose 2); tied pairs count as neither."""
    n = len(x)
    if n < 2:
        return math.nan
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
    if n < 2:
        return math.nan
    if names is None:
        names = [str(i) for i in range(n)]
    order = sorted(range(n), key=lambda i: (-pred[i], names[i]))
    t = truth[order]
    total = 0.0
    for i in range(1, n):
        total += np.count_nonzero(t[:i] > t[i]) / i
    return float(2.0 * total / (n - 1) - 1.0)


def correlate(truth: Mapping[str, float], pred: Mapping[str, float]) -> dict:
    """Correlation of two leaderboards over the systems present in both.

    Higher is better on both sides (negate rank columns before calling). Values are
    NaN when fewer than two systems are shared or a side is constant.
    """
    names = common_systems(truth, pred)
    n = len(names)
    out = {k: math.nan for k in KEYS}
    out["n"] = n
    if n < 2:
        return out
    x = np.array([float(truth[s]) for s in names])
    y = np.array([float(pred[s]) for s in names])
    constant = np.all(x == x[0]) or np.all(y == y[0])
    if not constant:
        out["spearman"] = float(stats.spearmanr(x, y).statistic)
        out["kendall_tau_b"] = float(stats.kendalltau(x, y, variant="b").statistic)
        out["pearson"] = float(stats.pearsonr(x, y).statistic)
    out["kendall_tau_a"] = kendall_tau_a(x, y)
    out["tau_ap"] = tau_ap(x, y, names)
    return out
