"""The AutoJudge meta-evaluation figures against independent implementations on the same
inputs: scipy (Kendall), sklearn (precision/recall/F1, Jaccard, Cohen's kappa, ARI), the
krippendorff package and a coincidence-matrix alpha written here, direct loops over the
published definitions, and autojudge-evaluate itself where it is installed.

autojudge-evaluate 1.1's package imports autojudge-base, whose document module downloads
nltk data at import time (offline here: the stand-in data of autojudge_env.py serves it),
and tira (in the lock, lock/serving.in). Its two coefficient modules, pyircore.py (tau_AP_b)
and tau_gap.py, need only numpy/scipy and are loaded from the installed distribution by
file; the full LeaderboardEvaluator and qrel-evaluate comparisons import the package and
skip, naming the module, only where a dependency is missing (exam_eval[test] without make
install).
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from autojudge_env import stand_in_nltk_data

from exam_eval.stats.correlation import correlate, kendall_at_k, tau_ap, tau_ap_b, tau_gap
from exam_eval.stats.qrels_compare import MEAN, POOLED, Scale, adjusted_rand, compare_qrels

SEEDS = range(8)


def _autojudge_module(name: str):
    spec = importlib.util.find_spec("autojudge_evaluate")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("autojudge-evaluate is not installed (pip install exam_eval[autojudge-compat])")
    path = Path(list(spec.submodule_search_locations)[0]) / f"{name}.py"
    if not path.is_file():
        pytest.skip(f"autojudge-evaluate has no {name}.py")
    mod_spec = importlib.util.spec_from_file_location(f"_autojudge_{name}", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod


def _import_or_skip(name: str, tmp: Path):
    """The module imported in this process, autojudge-base's nltk data from the stand-in
    folder (autojudge_env.py); skips where a dependency is missing."""
    import nltk

    data = str(stand_in_nltk_data(tmp))
    nltk.data.path.insert(0, data)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        # make install brings tira, its one dependency nothing else needs (lock/serving.in);
        # a pip install of exam_eval[test] alone does not
        pytest.skip(f"{name} does not import here: no module {exc.name!r} (make install brings "
                    "autojudge-evaluate's dependencies: lock/no-deps.in, lock/serving.in)")
    finally:
        nltk.data.path.remove(data)


def _leaderboards(seed: int, n: int = 25, ties: bool = True):
    rng = np.random.default_rng(seed)
    names = [f"run{i:02d}" for i in range(n)]
    if ties:
        x = rng.integers(0, 6, size=n).astype(float)
        y = x + rng.integers(-2, 3, size=n)
    else:
        x = rng.normal(size=n)
        y = x + rng.normal(scale=0.8, size=n)
    return names, x, y


# --------------------------------------------------------------------------- tau_AP_b

def _tau_ap_b_loop(x, y):
    """Urbano & Marrero 2017, tau_AP_b of y's ranking against x: for every item outside
    y's top tie group, the fraction of the items strictly above it in y that are also
    strictly above it in x; averaged over those items, times 2, minus 1."""
    n = len(x)
    total, pivots = 0.0, 0
    for i in range(n):
        above = [j for j in range(n) if y[j] > y[i]]
        if not above:
            continue
        pivots += 1
        total += sum(1 for j in above if x[j] > x[i]) / len(above)
    return 2.0 * total / pivots - 1.0


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ties", [True, False])
def test_tau_ap_b_equals_definition_and_autojudge(seed, ties):
    _, x, y = _leaderboards(seed, ties=ties)
    expected = (_tau_ap_b_loop(x, y) + _tau_ap_b_loop(y, x)) / 2
    assert tau_ap_b(x, y) == pytest.approx(expected, abs=1e-12)
    pyircore = _autojudge_module("pyircore")
    assert tau_ap_b(x, y) == pytest.approx(pyircore.tauap_b(list(x), list(y)), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_tau_ap_b_without_ties_is_the_symmetric_tau_ap(seed):
    names, x, y = _leaderboards(seed, ties=False)
    # tau_ap (Yilmaz et al. 2008) is a separate implementation; without ties they coincide
    assert tau_ap_b(x, y) == pytest.approx((tau_ap(x, y, names) + tau_ap(y, x, names)) / 2, abs=1e-12)


def test_tau_ap_b_extremes_and_constant_side():
    x = np.arange(10.0)
    assert tau_ap_b(x, x) == pytest.approx(1.0)
    assert tau_ap_b(x, -x) == pytest.approx(-1.0)
    assert math.isnan(tau_ap_b(x, np.ones(10)))


# --------------------------------------------------------------------------- tau_GAP

def _tau_gap_loop(truth, pred, names):
    """Gao & Oard 2015: over pred's order (ties by name), per position the correctly
    ordered share of the truth-gap mass above it; positions with no gap mass skipped."""
    order = sorted(range(len(names)), key=lambda i: (-pred[i], names[i]))
    acc, used = 0.0, 0
    for pos in range(1, len(order)):
        i = order[pos]
        gaps = [abs(truth[j] - truth[i]) for j in order[:pos]]
        good = [abs(truth[j] - truth[i]) for j in order[:pos] if truth[j] > truth[i]]
        if sum(gaps) > 0:
            acc += sum(good) / sum(gaps)
            used += 1
    return 2.0 / used * acc - 1.0


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ties", [True, False])
def test_tau_gap_equals_definition_and_autojudge(seed, ties):
    names, x, y = _leaderboards(seed, ties=ties)
    assert tau_gap(x, y, names) == pytest.approx(_tau_gap_loop(x, y, names), abs=1e-12)
    mod = _autojudge_module("tau_gap")
    # autojudge aligns runs in sorted run-id order and breaks predicted ties by position
    assert tau_gap(x, y, names) == pytest.approx(mod.tau_gap(list(x), list(y)), abs=1e-12)


# --------------------------------------------------------------------------- kendall@k

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("k", [3, 5, 10, 40])
def test_kendall_at_k_is_scipy_on_truths_top_k(seed, k):
    names, x, y = _leaderboards(seed, ties=True)
    truth = dict(zip(names, x))
    pred = dict(zip(names, y))
    # truth's top k, ties at the cut-off to the first in truth's order (stable sort)
    top = np.argsort(-x, kind="stable")[:k]
    expected = stats.kendalltau(x[top], y[top], variant="b").statistic
    assert kendall_at_k(truth, pred, k) == pytest.approx(expected, abs=1e-12, nan_ok=True)
    r = correlate(truth, pred, top_k=(k,))
    assert r[f"kendall@{k}"] == pytest.approx(expected, abs=1e-12, nan_ok=True)
    if k >= len(names):
        assert r[f"kendall@{k}"] == pytest.approx(r["kendall_tau_b"], abs=1e-12)


def test_kendall_at_k_only_counts_shared_systems():
    truth = {"a": 9, "b": 8, "c": 7, "d": 6, "e": 5}
    pred = {"b": 1, "c": 3, "d": 2, "e": 4}  # 'a' (truth's best) is not in pred
    # top 3 among shared: b, c, d
    assert kendall_at_k(truth, pred, 3) == pytest.approx(stats.kendalltau([8, 7, 6], [1, 3, 2]).statistic)


def test_autojudge_leaderboard_evaluator_on_the_same_files(tmp_path):
    evaluation = _import_or_skip("autojudge_evaluate.evaluation", tmp_path)
    names, x, y = _leaderboards(3, ties=True)
    truth, pred = tmp_path / "truth.tot", tmp_path / "pred.tot"
    truth.write_text("".join(f"{n} m {t} {v}\n" for n, v in zip(names, x) for t in ("all",)))
    pred.write_text("".join(f"{n} m {t} {v}\n" for n, v in zip(names, y) for t in ("all",)))
    ev = evaluation.LeaderboardEvaluator(truth, truth_format="tot", eval_format="tot",
                                         correlation_methods=["kendall", "tauap_b", "tau_gap", "kendall@10"])
    got = ev.evaluate(pred)[("m", "m")]
    ours = correlate(dict(zip(names, x)), dict(zip(names, y)), top_k=(10,))
    assert ours["kendall_tau_b"] == pytest.approx(got["kendall"], abs=1e-12)
    assert ours["tau_ap_b"] == pytest.approx(got["tauap_b"], abs=1e-12)
    assert ours["tau_gap"] == pytest.approx(got["tau_gap"], abs=1e-12)
    assert ours["kendall@10"] == pytest.approx(got["kendall@10"], abs=1e-12)


# --------------------------------------------------------------------------- qrels

def _random_qrels(seed: int, truth_max: int, pred_max: int):
    rng = np.random.default_rng(seed)
    truth, pred = {}, {}
    for q in range(6):
        qid = f"q{q}"
        docs = [f"d{i}" for i in range(rng.integers(1, 25))]
        for d in docs:
            if rng.random() < 0.8:
                truth.setdefault(qid, {})[d] = int(rng.integers(-1, truth_max + 2))  # -1 and over-scale: clipped
            if rng.random() < 0.7:
                pred.setdefault(qid, {})[d] = int(rng.integers(0, pred_max + 1))
    pred.setdefault("only_pred", {})["x"] = 1
    truth.setdefault("only_truth", {})["y"] = 0
    return truth, pred


def _kripp_ordinal(a, b):
    """Krippendorff's alpha, ordinal, two coders, no missing values: from the coincidence
    matrix (Krippendorff 2011, 'Computing Krippendorff's alpha-reliability')."""
    values = sorted(set(a) | set(b))
    idx = {v: i for i, v in enumerate(values)}
    o = np.zeros((len(values), len(values)))
    for u, v in zip(a, b):  # each unit with 2 values adds 1/(2-1) to o[u,v] and o[v,u]
        o[idx[u], idx[v]] += 1
        o[idx[v], idx[u]] += 1
    n_c = o.sum(axis=1)
    n = n_c.sum()
    delta = np.zeros_like(o)
    for c in range(len(values)):
        for k in range(len(values)):
            lo, hi = min(c, k), max(c, k)
            delta[c, k] = (n_c[lo:hi + 1].sum() - (n_c[c] + n_c[k]) / 2) ** 2
    d_o = (o * delta).sum()
    d_e = (np.outer(n_c, n_c) * delta).sum() / (n - 1)
    return 1 - d_o / d_e


def _expected_topic(t_labels, p_labels, scale):
    from sklearn.metrics import (adjusted_rand_score, cohen_kappa_score, jaccard_score,
                                 precision_recall_fscore_support)
    import krippendorff

    t = np.clip(t_labels, 0, scale.truth_max)
    p = np.clip(p_labels, 0, scale.pred_max)
    tr, pr = (t >= scale.truth_min).astype(int), (p >= scale.pred_min).astype(int)
    out = {}
    if tr.any() or pr.any():
        prec, rec, f1, _ = precision_recall_fscore_support(tr, pr, average="binary", zero_division=0)
        out.update(precision=prec, recall=rec, f1=f1, jaccard=jaccard_score(tr, pr))
    for a, b in scale.kappa_pairs():
        ta, pb = (t >= a).astype(int), (p >= b).astype(int)
        if len(set(ta)) > 1 or len(set(pb)) > 1:
            out[f"kappa@{a}v{b}"] = cohen_kappa_score(ta, pb)
    if scale.truth_max == scale.pred_max:
        if len(set(t)) > 1 or len(set(p)) > 1:
            out["kappa_w"] = cohen_kappa_score(t, p, weights="linear", labels=list(range(scale.truth_max + 1)))
        if len(set(t) | set(p)) > 1:
            out["kripp_alpha"] = krippendorff.alpha(reliability_data=np.vstack([t, p]),
                                                    level_of_measurement="ordinal")
            assert out["kripp_alpha"] == pytest.approx(_kripp_ordinal(list(t), list(p)), abs=1e-9)
    out["ari"] = adjusted_rand_score(tr, pr)
    return out


SCALES = [Scale(1, 1, 1, 1), Scale(3, 3, 2, 2), Scale(3, 5, 2, 4), Scale(2, 2, 1, 2)]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("scale", SCALES, ids=lambda s: f"{s.truth_max}-{s.pred_max}-{s.truth_min}-{s.pred_min}")
def test_qrels_comparison_equals_sklearn_and_krippendorff(seed, scale):
    pytest.importorskip("sklearn")
    pytest.importorskip("krippendorff")
    truth, pred = _random_qrels(seed, scale.truth_max, scale.pred_max)
    topics = sorted(set(truth) | set(pred))
    rows = {r.topic: r for r in compare_qrels(truth, pred, topics, scale)}
    per_topic: dict[str, list[float]] = {}
    t_all, p_all = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for q in topics:
            docs = sorted(set(truth.get(q, {})) | set(pred.get(q, {})))
            t = np.array([truth.get(q, {}).get(d, 0) for d in docs])
            p = np.array([pred.get(q, {}).get(d, 0) for d in docs])
            t_all.append(t)
            p_all.append(p)
            expected = _expected_topic(t, p, scale)
            for col, got in rows[q].values.items():
                if col in expected:
                    assert got == pytest.approx(expected[col], abs=1e-12), (q, col)
                    per_topic.setdefault(col, []).append(expected[col])
                else:
                    assert math.isnan(got), (q, col)
            tc, pc = np.clip(t, 0, scale.truth_max), np.clip(p, 0, scale.pred_max)
            tr, pr = tc >= scale.truth_min, pc >= scale.pred_min
            assert rows[q].counts == (int((tr & pr).sum()), int((~tr & pr).sum()), int((tr & ~pr).sum()))
        pooled = _expected_topic(np.concatenate(t_all), np.concatenate(p_all), scale)
    for col, vals in per_topic.items():
        assert rows[MEAN].values[col] == pytest.approx(np.mean(vals), abs=1e-12), col
    for col, v in pooled.items():
        assert rows[POOLED].values[col] == pytest.approx(v, abs=1e-12), col
    assert "only_pred" in rows and "only_truth" in rows


@pytest.mark.parametrize("seed", range(30))
def test_adjusted_rand_equals_sklearn(seed):
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 2, size=rng.integers(1, 12)), None
    b = rng.integers(0, 3, size=len(a))
    assert adjusted_rand(a, b) == pytest.approx(adjusted_rand_score(a, b), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_autojudge_qrel_evaluate_on_the_same_qrels(seed, tmp_path):
    nde = _import_or_skip("autojudge_evaluate.nugget_doc_eval", tmp_path)
    from autojudge_base.qrels import QrelRow, Qrels as AJQrels

    scale = Scale(3, 3, 2, 2)
    truth, pred = _random_qrels(seed, 3, 3)
    to_aj = lambda q: AJQrels(rows=[QrelRow(t, d, g) for t, docs in q.items() for d, g in docs.items()])
    ov = {r.topic_id: r for r in nde.set_overlap(to_aj(truth), to_aj(pred), truth_relevance_threshold=2,
                                                   predict_relevance_threshold=2)}
    ag = {r.topic_id: r for r in nde.grade_agreement(to_aj(truth), to_aj(pred), truth_max_grade=3,
                                                       predict_max_grade=3, truth_relevance_threshold=2,
                                                       predict_relevance_threshold=2)}
    rows = {r.topic: r for r in compare_qrels(truth, pred, sorted(set(truth) | set(pred)), scale)}
    for q, r in ag.items():
        ours = rows[q].values
        for col, theirs in (("jaccard", r.jaccard), ("kappa_w", r.kappa_weighted), ("kripp_alpha", r.kripp_alpha),
                            ("ari", r.ari), ("kappa@2v2", r.kappa_binary[(2, 2)])):
            assert ours[col] == pytest.approx(theirs, abs=1e-12, nan_ok=True), (q, col)
    for q, r in ov.items():
        assert (rows[q].values["precision"], rows[q].values["recall"], rows[q].values["f1"]) == pytest.approx(
            (r.precision, r.recall, r.f1), abs=1e-12)
