"""Leaderboard correlation: scipy's coefficients, and tau-a / tau-AP against direct loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from exam_eval.stats.correlation import correlate, kendall_tau_a, tau_ap


def _board(rng, n, ties):
    names = [f"sys{i:02d}" for i in range(n)]
    if ties:
        x = rng.integers(0, 5, size=n).astype(float)
        y = x + rng.integers(-1, 2, size=n)
    else:
        x = rng.normal(size=n)
        y = x + rng.normal(scale=0.7, size=n)
    return names, x, y


def _tau_a_loop(x, y):
    n = len(x)
    s = 0
    for i in range(n):
        for j in range(i + 1, n):
            a, b = x[i] - x[j], y[i] - y[j]
            if a * b > 0:
                s += 1
            elif a * b < 0:
                s -= 1
    return s / (n * (n - 1) / 2)


def _tau_ap_loop(truth, pred, names):
    """Yilmaz et al. 2008: tau_AP = 2/(N-1) * sum_{i=2..N} C(i)/(i-1) - 1 over pred's order."""
    order = sorted(range(len(names)), key=lambda i: (-pred[i], names[i]))
    total = 0.0
    for pos in range(1, len(order)):
        item = order[pos]
        correct = sum(1 for above in order[:pos] if truth[above] > truth[item])
        total += correct / pos
    return 2.0 / (len(order) - 1) * total - 1.0


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("ties", [False, True])
def test_matches_scipy_and_direct_loops(seed, ties):
    rng = np.random.default_rng(seed)
    names, x, y = _board(rng, 25, ties)
    r = correlate(dict(zip(names, x)), dict(zip(names, y)))
    assert r["n"] == 25
    assert r["spearman"] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert r["kendall_tau_b"] == pytest.approx(stats.kendalltau(x, y, variant="b").statistic, abs=1e-12)
    assert r["pearson"] == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)
    assert r["kendall_tau_a"] == pytest.approx(_tau_a_loop(x, y), abs=1e-12)
    assert r["tau_ap"] == pytest.approx(_tau_ap_loop(x, y, names), abs=1e-12)
    if ties:
        # with ties tau-a counts tied pairs as 0 in the numerator but not out of the denominator
        assert abs(r["kendall_tau_a"]) <= abs(r["kendall_tau_b"]) + 1e-12


def test_tau_a_equals_tau_b_without_ties():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=30), rng.normal(size=30)
    assert kendall_tau_a(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)


def test_extremes_and_top_weighting():
    names = [f"s{i}" for i in range(6)]
    x = np.arange(6.0)
    assert tau_ap(x, x, names) == pytest.approx(1.0)
    assert tau_ap(x, -x, names) == pytest.approx(-1.0)
    # one swap at the top costs tau-AP more than one swap at the bottom; tau-a is blind to where
    top = x.copy(); top[[5, 4]] = top[[4, 5]]
    bottom = x.copy(); bottom[[0, 1]] = bottom[[1, 0]]
    assert tau_ap(x, top, names) < tau_ap(x, bottom, names)
    assert kendall_tau_a(x, top) == pytest.approx(kendall_tau_a(x, bottom))


def test_only_common_systems_and_degenerate_cases():
    r = correlate({"a": 1, "b": 2, "c": 3, "x": 9}, {"a": 1, "b": 2, "c": 3, "y": 0})
    assert r["n"] == 3 and r["spearman"] == pytest.approx(1.0)
    r = correlate({"a": 1}, {"a": 2})
    assert r["n"] == 1 and math.isnan(r["spearman"]) and math.isnan(r["tau_ap"])
    r = correlate({"a": 1, "b": 1, "c": 1}, {"a": 1, "b": 2, "c": 3})  # constant truth
    assert math.isnan(r["kendall_tau_b"]) and r["kendall_tau_a"] == 0.0


def _exact_pearson(x, y) -> float:
    """Pearson in exact rational arithmetic (the square root at the end)."""
    from fractions import Fraction

    fx, fy = [Fraction(v) for v in x], [Fraction(v) for v in y]
    mx, my = sum(fx) / len(fx), sum(fy) / len(fy)
    sxy = sum((a - mx) * (b - my) for a, b in zip(fx, fy))
    sxx, syy = sum((a - mx) ** 2 for a in fx), sum((b - my) ** 2 for b in fy)
    r2 = sxy * sxy / (sxx * syy)  # exact, in [0, 1]
    return math.sqrt(float(r2)) * (1 if sxy > 0 else -1)


def _exact_tau_gap(truth, pred, names) -> float:
    """tau_GAP by its definition, the gaps as exact fractions."""
    from fractions import Fraction

    order = sorted(range(len(names)), key=lambda i: (-pred[i], names[i]))
    shares = []
    for pos in range(1, len(order)):
        i = order[pos]
        gaps = [abs(Fraction(truth[j]) - Fraction(truth[i])) for j in order[:pos]]
        good = [g for j, g in zip(order[:pos], gaps) if truth[j] > truth[i]]
        if sum(gaps):
            shares.append(sum(good) / sum(gaps))
    return float(2 * sum(shares) / len(shares) - 1)


@pytest.mark.parametrize("truth, pred", [
    ([1e308, 1e308, 0.0, 1.0], [4, 3, 1, 2]),            # 1e308 twice: the mean overflowed, Pearson was NaN
    ([1.7976931348623157e308, -1.7976931348623157e308, 3.0], [1, 3, 2]),
    ([1e-300, 0.0, 1e300], [3, 2, 1]),                    # a gap of 1e-300 beside 1e300: tau_gap was -1
    ([5e-310, 0.0, 2e-310, 1e-320], [1, 2, 3, 4]),        # subnormal values
    ([1e-200, 3e-200, 2e-200], [2e200, 1e200, 3e200]),
])
def test_values_at_the_float_limits(truth, pred):
    names = [f"s{i}" for i in range(len(truth))]
    r = correlate(dict(zip(names, truth)), dict(zip(names, map(float, pred))))
    assert r["tau_gap"] == pytest.approx(_exact_tau_gap(truth, pred, names), abs=1e-12)
    assert r["pearson"] == pytest.approx(_exact_pearson(truth, pred), abs=1e-9)
