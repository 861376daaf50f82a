"""Interval methods: degree shift (Eq. 16-19), PPI closed form, coverage in simulations
with known truth, per-query CRC, refusals; and the per-query metrics against pytrec_eval."""

from __future__ import annotations

import math

import numpy as np
import pytest
import pytrec_eval

from exam_eval.io.grades import Grade
from exam_eval.stats import label_dists
from exam_eval.stats.bootstrap import empirical_bootstrap
from exam_eval.stats.crc import (CoverageError, crc_dataset, crc_per_query, degree_shift, min_labelled_per_query,
                                 threshold)
from exam_eval.stats.metrics import human_value, parse_metric
from exam_eval.stats.ppi import ppi_mean, tuned_lambda
from exam_eval.stats.predicted import PredictedMetric

VALUES = np.arange(4.0)
W = 1 / np.log2(np.arange(1, 11) + 1.0)


# ----------------------------------------------------------------------------- degree shift

def _shift_loop(p, lam):
    """Eq. 16-18 literally: remove lambda mass from the lowest (lambda>0) or highest labels."""
    p = list(p)
    order = range(len(p)) if lam >= 0 else range(len(p) - 1, -1, -1)
    left = abs(lam)
    q = p[:]
    for r in order:
        take = min(q[r], left)
        q[r] -= take
        left -= take
    s = sum(q)
    return [v / s for v in q]


@pytest.mark.parametrize("lam", [0.0, 0.05, 0.3, 0.61, 0.9, -0.05, -0.3, -0.61, -0.9])
def test_degree_shift_matches_definition(lam):
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(4), size=20)
    got = degree_shift(p, lam)
    want = np.array([_shift_loop(row, lam) for row in p])
    np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(got.sum(axis=1), 1.0)


def test_degree_shift_monotone_and_limits():
    rng = np.random.default_rng(2)
    p = rng.dirichlet(np.ones(4), size=50)
    lams = np.linspace(-0.999, 0.999, 41)
    mu = np.array([degree_shift(p, lam) @ VALUES for lam in lams])
    assert np.all(np.diff(mu, axis=0) >= -1e-12)
    assert np.allclose(degree_shift(p, 1 - 1e-12) @ VALUES, 3.0)
    assert np.allclose(degree_shift(p, -1 + 1e-12) @ VALUES, 0.0)
    one_hot = np.eye(4)[[1, 2]]
    # a one-hot distribution cannot move: why hard labels need the calibrated mapping
    np.testing.assert_allclose(degree_shift(one_hot, 0.7), one_hot)


# ----------------------------------------------------------------------------- PPI closed form

def test_ppi_lambda_one_is_the_closed_form():
    rng = np.random.default_rng(5)
    u = rng.normal(5, 2, 30)
    uhat_lab = u + rng.normal(0.5, 1, 30)
    uhat_unl = rng.normal(5.5, 2, 70)
    alpha = 0.05
    r = ppi_mean(u, uhat_lab, uhat_unl, alpha, lam=1.0)
    # Eq. 8 / 10 / 11 written out
    n, big_n = len(u), len(uhat_unl)
    est = sum(uhat_unl) / big_n + sum(u[i] - uhat_lab[i] for i in range(n)) / n
    err = [u[i] - uhat_lab[i] for i in range(n)]
    s_err = sum((e - sum(err) / n) ** 2 for e in err) / (n - 1)
    s_pred = sum((x - sum(uhat_unl) / big_n) ** 2 for x in uhat_unl) / (big_n - 1)
    half = 1.959963984540054 * math.sqrt(s_err / n + s_pred / big_n)
    assert r.estimate == pytest.approx(est, abs=1e-12)
    assert (r.lower, r.upper) == pytest.approx((est - half, est + half), abs=1e-12)
    assert r.lam == 1.0


def test_tuned_lambda_minimises_the_variance():
    rng = np.random.default_rng(6)
    u = rng.normal(5, 2, 40)
    uhat_lab = 0.5 * u + rng.normal(0, 1.5, 40)
    uhat_unl = 0.5 * rng.normal(5, 2, 200) + rng.normal(0, 1.5, 200)
    lam = tuned_lambda(u, uhat_lab, uhat_unl)
    grid = np.linspace(0, 1, 2001)
    var = [g ** 2 * np.var(uhat_unl, ddof=1) / 200 + np.var(u - g * uhat_lab, ddof=1) / 40 for g in grid]
    assert lam == pytest.approx(grid[int(np.argmin(var))], abs=1e-3)
    tuned = ppi_mean(u, uhat_lab, uhat_unl, 0.05, lam=None)
    plain = ppi_mean(u, uhat_lab, uhat_unl, 0.05, lam=1.0)
    assert tuned.width <= plain.width + 1e-12


def test_bootstrap_is_the_basic_bootstrap():
    rng = np.random.default_rng(7)
    x = rng.exponential(size=25)
    r = empirical_bootstrap(x, 0.1, 4000, np.random.default_rng(0))
    # independent resampling loop with the same generator stream
    g = np.random.default_rng(0)
    counts = g.multinomial(25, np.full(25, 1 / 25), size=4000)
    means = np.array([np.repeat(x, c).mean() for c in counts])
    lo, hi = np.quantile(means - x.mean(), [0.05, 0.95])
    assert (r.lower, r.upper) == pytest.approx((x.mean() - hi, x.mean() - lo), abs=1e-12)


# ----------------------------------------------------------------------------- simulations

def _population(seed, size=20000, bias=0.5):
    """Queries with 10 ranked passages; human labels 0-3; an LLM that is biased upwards
    and noisy, with a full distribution over the labels."""
    rng = np.random.default_rng(seed)
    quality = rng.beta(2, 2, size=size)
    h = rng.binomial(3, quality[:, None] * np.linspace(1, 0.4, 10)[None, :]).astype(float)
    noisy = h + bias + rng.normal(0, 0.8, size=h.shape)
    logits = -((VALUES[None, None, :] - noisy[..., None]) ** 2)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    return h, p / p.sum(-1, keepdims=True)


H, P = _population(0)
U_POP = (H * W).sum(1)
ALPHA = 0.1
REPS = 200


def _sample(rep, big_n):
    rr = np.random.default_rng([11, rep])
    sel = rr.choice(len(U_POP), big_n, replace=False)
    p = P[sel]
    return U_POP[sel], (lambda lam: (W * (degree_shift(p, lam) @ VALUES)).sum(1)), rr


def test_ppi_covers_the_expected_metric():
    truth = U_POP.mean()  # the query population's mean: what PPI estimates
    hits = {"plain": 0, "tuned": 0}
    n, big_n, reps = 60, 400, 5 * REPS  # cheap, so more repetitions: less binomial noise
    for rep in range(reps):
        u, pred, _ = _sample(rep, big_n)
        u0 = pred(0.0)
        for name, lam in (("plain", 1.0), ("tuned", None)):
            r = ppi_mean(u[:n], u0[:n], u0[n:], ALPHA, lam)
            hits[name] += r.lower <= truth <= r.upper
    for name, h in hits.items():
        assert h / reps >= 1 - ALPHA - 0.02, (name, h / reps)


def test_crc_covers_the_metric_of_the_evaluated_queries():
    hits, widths = 0, []
    n, big_n = 30, 100
    for rep in range(REPS):
        u, pred, rr = _sample(rep, big_n)
        r = crc_dataset(pred, np.arange(n), u[:n], ALPHA, 500, rr)
        hits += r.lower <= u.mean() <= r.upper
        widths.append(r.upper - r.lower)
        assert r.lam_low <= r.lam_high
    assert hits / REPS >= 1 - ALPHA - 0.02
    # and it is informative: narrower than the range of possible DCG@10 by far
    assert np.mean(widths) < 0.2 * 3 * W.sum()


def test_per_query_crc_coverage_on_unlabelled_queries():
    cover = []
    n, big_n = 45, 100
    for rep in range(100):
        u, pred, _ = _sample(rep, big_n)
        lo, mid, hi, lam_low, lam_high = crc_per_query(pred, np.arange(n), u[:n], ALPHA, correction="crc")
        cover.append(np.mean((lo[n:] <= u[n:]) & (u[n:] <= hi[n:])))
        assert np.all(lo <= hi)  # (both bounds may lie on one side of the prediction)
    assert np.mean(cover) >= 1 - ALPHA - 0.02


def test_crc_refuses_with_too_few_labelled_queries():
    u, pred, rr = _sample(0, 50)
    need = min_labelled_per_query(0.05)
    assert need == 20 and threshold(0.05, need) > 1e-9 and threshold(0.05, need - 1) < 1e-9
    with pytest.raises(CoverageError, match="needs at least 20"):
        crc_per_query(pred, np.arange(10), u[:10], 0.05)
    with pytest.raises(CoverageError):
        crc_dataset(pred, np.arange(1), u[:1], 0.05, 500, rr)
    with pytest.raises(CoverageError):
        ppi_mean(u[:1], u[:1], u[1:], 0.05)


def test_crc_refuses_when_no_shift_can_reach_the_truth():
    # the LLM is certain every passage has label 0 while humans say 3 (one-hot: no shift helps)
    p = np.tile(np.eye(4)[0], (40, 10, 1))
    pred = lambda lam: (W * (degree_shift(p, lam) @ VALUES)).sum(1)
    with pytest.raises(CoverageError, match="cannot reach"):
        crc_dataset(pred, np.arange(30), np.full(30, 3 * W.sum()), 0.05, 500, np.random.default_rng(0))


# ----------------------------------------------------------------------------- metrics vs pytrec_eval

def _random_run_qrels(seed, nq=8, ndocs=30):
    rng = np.random.default_rng(seed)
    run, qrels = {}, {}
    for q in range(nq):
        qid = f"q{q}"
        docs = [f"d{i}" for i in range(ndocs)]
        scores = np.round(rng.normal(size=ndocs), 1)  # rounding makes score ties
        run[qid] = {d: float(s) for d, s in zip(docs, scores)}
        judged = rng.choice(ndocs, size=ndocs * 2 // 3, replace=False)
        qrels[qid] = {docs[i]: int(rng.integers(0, 4)) for i in judged}
        qrels[qid][f"unretrieved{q}"] = 3
    return run, qrels


@pytest.mark.parametrize("seed", range(3))
def test_human_metrics_equal_pytrec_eval(seed):
    run, qrels = _random_run_qrels(seed)
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "P.5", "P.10"})
    res = ev.evaluate(run)
    for qid in qrels:
        assert human_value(parse_metric("ndcg@10"), run[qid], qrels[qid]) == pytest.approx(res[qid]["ndcg_cut_10"], abs=1e-9)
        assert human_value(parse_metric("p@10"), run[qid], qrels[qid]) == pytest.approx(res[qid]["P_10"], abs=1e-9)
        assert human_value(parse_metric("P_5"), run[qid], qrels[qid]) == pytest.approx(res[qid]["P_5"], abs=1e-9)


def test_dcg_is_the_papers_formula_and_predicted_metric_agrees_on_one_hot_labels():
    run, qrels = _random_run_qrels(4)
    from exam_eval.trec_eval.trec_files import ranked
    m = parse_metric("dcg@10")
    for qid in qrels:
        top = ranked(run[qid])[:10]
        want = sum(max(qrels[qid].get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(top))
        assert human_value(m, run[qid], qrels[qid]) == pytest.approx(want)
    queries = sorted(qrels)
    for spec in ("dcg@10", "ndcg@10", "p@5"):
        met = parse_metric(spec)
        pred = PredictedMetric(met, run, label_dists.from_qrels(qrels), queries)
        human = [human_value(met, run[q], qrels[q]) for q in queries]
        np.testing.assert_allclose(pred(0.0), human, atol=1e-12)


def test_grade_distributions_use_the_max_over_items():
    def g(item, probs=None, grade=None, ok=True):
        return Grade("q", "d", item, "question", grade, probs, None, ok, "m", "p")

    grades = [g("i1", {"0": 0.5, "1": 0.3, "2": 0.2}, 0), g("i2", {"0": 0.1, "1": 0.6, "2": 0.3}, 1),
              g("i3", None, None, ok=False)]
    dists, unparsed = label_dists.from_grades(grades)
    assert unparsed == 1
    a, b = [0.5, 0.3, 0.2], [0.1, 0.6, 0.3]
    want = [sum(a[i] * b[j] for i in range(3) for j in range(3) if max(i, j) == r) for r in range(3)]
    np.testing.assert_allclose(dists.get("q", "d"), want)
    np.testing.assert_allclose(dists.values, [0, 1, 2])


def test_calibrated_mapping_is_conditional_frequency():
    human = {"a": {"1": 0, "2": 1, "3": 1, "4": 2}, "b": {"1": 2}}
    llm = label_dists.from_qrels({"a": {"1": 0, "2": 5, "3": 5, "4": 5}, "b": {"1": 0}})
    mapped = label_dists.calibrated(llm, human, ["a"], smoothing=1.0)
    # LLM 5 seen with human 1, 1, 2 -> counts (0,2,1) + 1 each -> (1,3,2)/6
    np.testing.assert_allclose(mapped.get("a", "2"), [1 / 6, 3 / 6, 2 / 6])
    # LLM 0 seen once with human 0 in query a (b is not labelled) -> (2,1,1)/4
    np.testing.assert_allclose(mapped.get("b", "1"), [2 / 4, 1 / 4, 1 / 4])
    np.testing.assert_allclose(mapped.values, [0, 1, 2])


# ----------------------------------------------------------------------------- EXAM-Cover

def _cover_grades(seed, nq=6, ndocs=12, nitems=5, with_probs=False):
    from exam_eval.io.grades import Grade
    rng = np.random.default_rng(seed)
    grades, run = [], {}
    for q in range(nq):
        qid = f"q{q}"
        run[qid] = {f"d{d}": float(rng.normal()) for d in range(ndocs)}
        for d in range(ndocs - 2):  # two passages stay ungraded: they answer nothing
            for i in range(nitems):
                grade = int(rng.integers(0, 6))
                probs = None
                if with_probs:
                    p = rng.dirichlet(np.ones(6))
                    probs = {str(k): float(v) for k, v in enumerate(p)}
                    grade = int(np.argmax(p))
                grades.append(Grade(qid, f"d{d}", f"{qid}/i{i}", "question", grade, probs, str(grade), True, "m", "p"))
    return grades, run


def test_predicted_cover_with_hard_grades_equals_exam_cover():
    from exam_eval.measures.exam_cover import build_index, exam_cover
    from exam_eval.stats.cover_predicted import AnswerProbs, PredictedCover

    grades, run = _cover_grades(0)
    queries = sorted(run)
    for k, tau in ((5, 4), (10, 3), (20, 5)):
        want = exam_cover(build_index(grades, tau), run, k, complete=True).per_query
        got = PredictedCover(AnswerProbs.from_grades(grades, tau), run, queries, k)(0.0)
        np.testing.assert_allclose(got, [want[q][0] for q in queries], atol=1e-12)


def test_predicted_cover_with_probabilities_is_the_expected_cover():
    from exam_eval.trec_eval.trec_files import ranked
    from exam_eval.stats.cover_predicted import AnswerProbs, PredictedCover

    grades, run = _cover_grades(1, nq=2, ndocs=5, nitems=3, with_probs=True)
    tau, k = 4, 3
    got = PredictedCover(AnswerProbs.from_grades(grades, tau), run, sorted(run), k)(0.0)
    # Monte Carlo: draw every grade from its distribution, compute the cover, average
    rng = np.random.default_rng(0)
    by = {(g.query_id, g.doc_id, g.item_id): np.array([g.probs[str(i)] for i in range(6)]) for g in grades}
    for qi, qid in enumerate(sorted(run)):
        top = ranked(run[qid])[:k]
        items = [f"{qid}/i{i}" for i in range(3)]
        sims = []
        for _ in range(4000):
            covered = [any(rng.choice(6, p=by[(qid, d, it)]) >= tau for d in top if (qid, d, it) in by)
                       for it in items]
            sims.append(np.mean(covered))
        assert got[qi] == pytest.approx(np.mean(sims), abs=0.02)
