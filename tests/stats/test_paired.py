"""exam_eval.stats.paired against independent references: scipy.stats.ttest_rel for the
paired t-test, scipy.stats.permutation_test (paired, the mean difference as statistic) for
the randomization test and its inverted interval, Holm and Bonferroni written out by hand,
PPI's Eq. 8-11 written out. Real run differences come from DL19's NIST qrels through
pytrec_eval (skipped without ../shared/data); synthetic ones run everywhere."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from exam_eval.stats.paired import adjust, pairs, ppi_test, randomization, sign_patterns, t_test
from tests.dl19_reference import ndcg10_per_query


def _mean_diff(x, y, axis=-1):
    return np.mean(x - y, axis=axis)


def _scipy_randomization(x, y, resamples, seed=0):
    return stats.permutation_test((x, y), _mean_diff, permutation_type="samples", vectorized=True,
                                  n_resamples=resamples, alternative="two-sided", rng=np.random.default_rng(seed))


@pytest.fixture(scope="module")
def dl19_values(shared_data):
    """nDCG@10 per query (all 43 judged queries; a missing query 0, as trec_eval -c) of 6 runs."""
    names = ("idst_bert_p1", "idst_bert_p2", "p_bert", "TUW19-p1-f", "bm25base_p", "bm25tuned_p")
    d = shared_data / "dl19"
    return dict(zip(names, ndcg10_per_query(d, [d / "runs" / f"{n}.run" for n in names])))


# ----------------------------------------------------------------------------- t-test

def test_t_test_is_scipys_ttest_rel_on_dl19_runs(dl19_values):
    names = list(dl19_values)
    idx = pairs(names)
    x = np.array([dl19_values[names[a]] for a, _ in idx])
    y = np.array([dl19_values[names[b]] for _, b in idx])
    for alpha in (0.05, 0.01):
        res = t_test(x - y, alpha)
        for k in range(len(idx)):
            ref = stats.ttest_rel(x[k], y[k])
            ci = ref.confidence_interval(1 - alpha)
            assert res.p[k] == pytest.approx(ref.pvalue, rel=1e-10, abs=1e-300)
            assert (res.lower[k], res.upper[k]) == pytest.approx((ci.low, ci.high), rel=1e-10)
            assert res.difference[k] == pytest.approx(np.mean(x[k] - y[k]), abs=1e-15)
    # the two BERT runs differ by little, BERT and BM25 by much: the test sees both
    p = dict(zip(idx, t_test(x - y, 0.05).p))
    assert p[(0, 1)] > 0.05 and p[(0, 4)] < 1e-6


def test_t_test_on_synthetic_differences_is_scipys():
    rng = np.random.default_rng(3)
    x = rng.normal(0.5, 0.2, (7, 12))
    y = x + rng.normal(-0.03, 0.1, (7, 12))
    res = t_test(x - y, 0.05)
    ref = stats.ttest_rel(x, y, axis=1)
    np.testing.assert_allclose(res.p, ref.pvalue, rtol=1e-10)
    np.testing.assert_allclose(res.lower, ref.confidence_interval(0.95).low, rtol=1e-10)


def test_a_constant_difference_has_a_p_value_scipy_cannot_give():
    """scipy's ttest_rel says nan for identical runs, which no correction could rank: here
    identical runs do not differ (p 1), and runs apart by the same amount on every query do (p 0)."""
    res = t_test(np.array([[0.0] * 5, [0.1] * 5]), 0.05)
    assert res.p.tolist() == [1.0, 0.0]
    assert res.lower.tolist() == res.upper.tolist() == pytest.approx([0.0, 0.1])


# ----------------------------------------------------------------------------- randomization

def test_randomization_is_scipys_exact_permutation_test_on_dl19(dl19_values):
    """10 queries: 1,024 sign patterns, all of them, in both."""
    x, y = dl19_values["idst_bert_p1"][:10], dl19_values["bm25base_p"][:10]
    u, v = dl19_values["p_bert"][10:20], dl19_values["TUW19-p1-f"][10:20]
    res = randomization(np.array([x - y, u - v]), 0.05, 5000, np.random.default_rng(0))
    for k, (a, b) in enumerate(((x, y), (u, v))):
        ref = _scipy_randomization(a, b, np.inf)
        assert res.p[k] == pytest.approx(ref.pvalue, abs=1e-12)
        assert res.difference[k] == pytest.approx(ref.statistic, abs=1e-15)


def test_randomization_interval_is_the_inverted_exact_test(dl19_values):
    """Just inside each bound scipy's exact test keeps p above alpha, just outside below."""
    d = dl19_values["idst_bert_p2"][:11] - dl19_values["bm25tuned_p"][:11]
    res = randomization(d, 0.05, 4096, np.random.default_rng(0))
    lo, hi, eps = res.lower[0], res.upper[0], 1e-6
    assert lo < d.mean() < hi

    def p_at(delta):
        return _scipy_randomization(d - delta, np.zeros_like(d), np.inf).pvalue

    assert p_at(lo + eps) > 0.05 and p_at(hi - eps) > 0.05
    assert p_at(lo - eps) <= 0.05 and p_at(hi + eps) <= 0.05
    assert (res.p[0] <= 0.05) == (not lo <= 0 <= hi)


def test_randomization_monte_carlo_agrees_with_scipys_within_its_error(dl19_values):
    """43 queries: 2^43 patterns, so both draw; p within five standard errors of each other."""
    names = [("idst_bert_p1", "p_bert"), ("TUW19-p1-f", "bm25base_p"), ("bm25base_p", "bm25tuned_p")]
    d = np.array([dl19_values[a] - dl19_values[b] for a, b in names])
    res = randomization(d, 0.05, 20000, np.random.default_rng(1))
    for k, (a, b) in enumerate(names):
        ref = _scipy_randomization(dl19_values[a], dl19_values[b], 20000, seed=2).pvalue
        err = math.sqrt(max(ref, 1e-4) * (1 - min(ref, 0.9999)) / 20000)
        assert res.p[k] == pytest.approx(ref, abs=5 * 2 * err + 2 / 20000), (a, b, res.p[k], ref)
        assert res.p[k] >= 1 / 20001  # the observed pattern counts: never 0


def test_randomization_bounds_too_few_queries_and_seeds():
    # 4 queries: the smallest possible p is 2/16 > 0.05, so no shift is rejected: the
    # interval runs to the bound given (the metric's range of differences)
    d = np.array([[0.2, 0.3, 0.25, 0.4]])
    res = randomization(d, 0.05, 1000, np.random.default_rng(0), bound=1.0)
    assert res.p[0] == pytest.approx(_scipy_randomization(d[0], np.zeros(4), np.inf).pvalue) == 0.125
    assert (res.lower[0], res.upper[0]) == (-1.0, 1.0)
    signs, exact = sign_patterns(4, 1000, np.random.default_rng(0))
    assert exact and len(signs) == 16 and len({tuple(s) for s in signs}) == 16
    signs, exact = sign_patterns(20, 1000, np.random.default_rng(0))
    assert not exact and signs.shape == (1000, 20) and set(np.unique(signs)) == {-1.0, 1.0}
    rng_d = np.random.default_rng(9).normal(0.05, 0.1, (3, 30))
    one = randomization(rng_d, 0.05, 3000, np.random.default_rng(5))
    two = randomization(rng_d, 0.05, 3000, np.random.default_rng(5))
    assert one.p.tolist() == two.p.tolist() and one.upper.tolist() == two.upper.tolist()


# ----------------------------------------------------------------------------- corrections

def _holm_by_hand(p):
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out, running = [0.0] * m, 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p[i]))
        out[i] = running
    return out


def test_holm_and_bonferroni_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> 0.06 (monotone)
    assert adjust(p, "holm").tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust(p, "bonferroni").tolist() == pytest.approx([0.04, 0.16, 0.12, 0.02])
    assert adjust(p, "none").tolist() == p
    assert adjust([0.5, 0.6], "holm").tolist() == [1.0, 1.0]  # capped


def test_holm_on_dl19_pairs_is_the_hand_computation(dl19_values):
    names = list(dl19_values)
    idx = pairs(names)
    p = [stats.ttest_rel(dl19_values[names[a]], dl19_values[names[b]]).pvalue for a, b in idx]
    got = adjust(t_test(np.array([dl19_values[names[a]] - dl19_values[names[b]] for a, b in idx]), 0.05).p, "holm")
    np.testing.assert_allclose(got, _holm_by_hand(p), rtol=1e-9)
    assert len(idx) == 15 and 0 < sum(g < 0.05 for g in got) < 15  # some pairs differ, some do not


def test_pairs_all_or_against_a_baseline():
    assert pairs(["a", "b", "c"]) == [(0, 1), (0, 2), (1, 2)]
    assert pairs(["a", "b", "c"], "b") == [(0, 1), (2, 1)]


# ----------------------------------------------------------------------------- PPI on differences

def test_ppi_on_differences_is_the_closed_form():
    rng = np.random.default_rng(11)
    truth = rng.normal(0.05, 0.1, (3, 15))
    pred_l = truth + rng.normal(0.02, 0.05, (3, 15))
    pred_u = rng.normal(0.07, 0.1, (3, 28))
    res = ppi_test(truth, pred_l, pred_u, 0.05)
    for k in range(3):
        n, big_n = 15, 28
        err = [truth[k, i] - pred_l[k, i] for i in range(n)]
        est = sum(pred_u[k]) / big_n + sum(err) / n
        var = (sum((e - sum(err) / n) ** 2 for e in err) / (n - 1) / n
               + sum((v - sum(pred_u[k]) / big_n) ** 2 for v in pred_u[k]) / (big_n - 1) / big_n)
        half = 1.959963984540054 * math.sqrt(var)
        assert res.difference[k] == pytest.approx(est, abs=1e-12)
        assert (res.lower[k], res.upper[k]) == pytest.approx((est - half, est + half), abs=1e-12)
        assert res.p[k] == pytest.approx(2 * stats.norm.sf(abs(est) / math.sqrt(var)), rel=1e-9)


def test_tuned_ppi_picks_the_variance_minimising_lambda_per_pair():
    rng = np.random.default_rng(12)
    truth = rng.normal(0.0, 0.1, (2, 20))
    pred_l = np.array([0.5 * truth[0] + rng.normal(0, 0.02, 20), rng.normal(0, 0.1, 20)])  # useful, useless
    pred_u = np.array([rng.normal(0, 0.05, 40), rng.normal(0, 0.1, 40)])
    res = ppi_test(truth, pred_l, pred_u, 0.05, tuned=True)
    grid = np.linspace(0, 1, 2001)
    for k in range(2):
        var = [g ** 2 * np.var(pred_u[k], ddof=1) / 40 + np.var(truth[k] - g * pred_l[k], ddof=1) / 20 for g in grid]
        assert res.lam[k] == pytest.approx(grid[int(np.argmin(var))], abs=1e-3)
    assert res.lam[0] > 0.8 and res.lam[1] < 0.3
