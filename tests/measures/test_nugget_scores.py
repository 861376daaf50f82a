"""Nugget scores, EXAM-Cover of reports, citation support and citation qrels, recomputed
independently: hand-checked cases, the nuggetizer's own calculate_nugget_scores, and a
large random case against a second (array) formulation."""

from __future__ import annotations

import random

import numpy as np
import pytest

from exam_eval.errors import UsageError
from exam_eval.io.bank_items import BankItem
from exam_eval.io.grades import Grade
from exam_eval.io.reports import Citation, Report, ReportSentence, sentence_id
from exam_eval.measures import nugget_scores as ns


def make_report(run, topic, texts_and_cites):
    sents = tuple(ReportSentence(sentence_id(run, topic, i, t), i, t, tuple(Citation(c) for c in cites))
                  for i, (t, cites) in enumerate(texts_and_cites, 1))
    return Report(run, topic, None, sents)


def grade(topic, doc, item, value, prompt="nuggetizer-assign", ok=True):
    return Grade(topic, doc, item, "nugget", value if ok else None, None, None, ok, "m", prompt)


def items_for(topic, importances):
    return [BankItem(topic, f"{topic}/n{i}", "nugget", f"nugget {i}", importance=imp)
            for i, imp in enumerate(importances)]


# -- hand-checked --------------------------------------------------------------------------

def test_six_scores_by_hand():
    levels = [("vital", 2), ("vital", 1), ("okay", 1), ("okay", 0)]
    s = ns.nugget_scores(levels)
    assert s["nugget_all"] == pytest.approx((1 + .5 + .5 + 0) / 4)
    assert s["nugget_all_strict"] == pytest.approx(1 / 4)
    assert s["nugget_vital"] == pytest.approx((1 + .5) / 2)
    assert s["nugget_vital_strict"] == pytest.approx(1 / 2)
    assert s["nugget_weighted"] == pytest.approx((1 * 1 + 1 * .5 + .5 * .5 + .5 * 0) / (1 + 1 + .5 + .5))
    assert s["nugget_weighted_strict"] == pytest.approx(1 / 3)


def test_no_vital_nuggets_scores_vital_zero_like_the_nuggetizer():
    s = ns.nugget_scores([("okay", 2), ("okay", 2)])
    assert s["nugget_vital"] == 0.0 and s["nugget_all"] == 1.0 and s["nugget_weighted"] == 1.0


def test_against_the_nuggetizer_reference():
    metrics = pytest.importorskip("nuggetizer.core.metrics")
    rng = random.Random(3)
    names = {0: "not_support", 1: "partial_support", 2: "support"}
    for _ in range(200):
        n = rng.randint(1, 12)
        levels = [(rng.choice(["vital", "okay"]), rng.randint(0, 2)) for _ in range(n)]
        ref = metrics.calculate_nugget_scores("q", [{"importance": imp, "assignment": names[lv]} for imp, lv in levels])
        ours = ns.nugget_scores(levels)
        assert ours["nugget_all"] == pytest.approx(ref.all_score)
        assert ours["nugget_all_strict"] == pytest.approx(ref.strict_all_score)
        assert ours["nugget_vital"] == pytest.approx(ref.vital_score)
        assert ours["nugget_vital_strict"] == pytest.approx(ref.strict_vital_score)


def test_assignment_is_the_best_sentence_and_ignores_unparsed():
    r = make_report("runA", "t1", [("first", []), ("second", []), ("third", [])])
    s1, s2, s3 = (s.doc_id for s in r.sentences)
    items = {"t1": items_for("t1", ["vital", "okay", "okay"])}
    i0, i1, i2 = (i.item_id for i in items["t1"])
    grades = [grade("t1", s1, i0, 1), grade("t1", s2, i0, 2), grade("t1", s3, i0, 0),
              grade("t1", s1, i1, 2, ok=False), grade("t1", s2, i1, 1),
              grade("t1", s1, i2, None, ok=False)]
    (a,) = ns.assign([r], grades, items, ns.Thresholds(2, 1))
    assert a.levels == {i0: 2, i1: 1, i2: 0}
    assert a.ungraded == {i2}
    # a grade of the whole report counts like a sentence's
    (a,) = ns.assign([r], grades + [grade("t1", r.doc_id, i2, 2)], items, ns.Thresholds(2, 1))
    assert a.levels[i2] == 2 and not a.ungraded


def test_self_rating_thresholds():
    th = ns.thresholds_for((0, 5))
    assert [th.level(g) for g in range(6)] == [0, 0, 1, 1, 2, 2]
    th = ns.thresholds_for((0, 5), support_min=5, partial_min=3)
    assert [th.level(g) for g in range(6)] == [0, 0, 0, 1, 1, 2]
    assert [ns.thresholds_for((0, 2)).level(g) for g in range(3)] == [0, 1, 2]
    with pytest.raises(UsageError, match="--support-min"):
        ns.thresholds_for((0, 3))
    assert ns.thresholds_for((0, 3), 3, 2) == ns.Thresholds(3, 2)
    with pytest.raises(UsageError, match="above"):
        ns.thresholds_for((0, 5), support_min=2, partial_min=4)
    assert ns.scale_of("nugget-selfrating") == (0, 5) and ns.scale_of("nuggetizer-assign") == (0, 2)


def test_report_cover_by_hand():
    a = make_report("A", "t", [("x", []), ("y", [])])
    b = make_report("B", "t", [("z", [])])
    items = {"t": items_for("t", [None] * 4)}
    ids = [i.item_id for i in items["t"]]
    grades = [grade("t", a.sentences[0].doc_id, ids[0], 2), grade("t", a.sentences[1].doc_id, ids[1], 2),
              grade("t", a.sentences[1].doc_id, ids[2], 1), grade("t", b.sentences[0].doc_id, ids[2], 2)]
    covers = ns.report_covers([a, b], grades, items, ns.Thresholds(2, 1))
    # A answers items 0 and 1 of 4; anything answers items 0, 1, 2
    assert covers[("A", "t")] == pytest.approx((2 / 4, 2 / 3))
    assert covers[("B", "t")] == pytest.approx((1 / 4, 1 / 3))


def test_citation_support_by_hand():
    r = make_report("A", "t", [("s1", ["d1", "d2"]), ("s2", ["d3"]), ("s3", [])])
    s1, s2, _ = (s.doc_id for s in r.sentences)
    grades = {("t", "d1", s1): 2, ("t", "d2", s1): 1, ("t", "d3", s2): 0}
    res = ns.citation_support(r, grades)
    assert res.precision == pytest.approx((1 + .5 + 0) / 3)
    assert res.recall == pytest.approx((1 + 0 + 0) / 3)
    assert (res.pairs, res.ungraded_pairs) == (3, 0)
    res = ns.citation_support(r, {("t", "d2", s1): 1})
    assert res.precision == pytest.approx(.5 / 3) and res.recall == pytest.approx(.5 / 3)
    assert res.ungraded_pairs == 2
    empty = ns.citation_support(make_report("A", "t", [("s", [])]), {})
    assert (empty.precision, empty.recall, empty.pairs) == (0.0, 0.0, 0)


def test_citation_qrels_by_hand():
    r1 = make_report("A", "t", [("s1", ["d1", "d2"]), ("s2", ["d1"])])
    r2 = make_report("B", "t", [("s3", ["d2", "d3"])])
    s1, s2 = (s.doc_id for s in r1.sentences)
    s3 = r2.sentences[0].doc_id
    support = {("t", "d1", s1): 1, ("t", "d1", s2): 2, ("t", "d2", s1): 2, ("t", "d2", s3): 0}
    nuggets = {("t", s1): 2, ("t", s2): 0, ("t", s3): 2}
    assert ns.citation_qrels([r1, r2], "support", support=support) == {"t": {"d1": 2, "d2": 2}}
    assert ns.citation_qrels([r1, r2], "nuggets", nuggets=nuggets) == {"t": {"d1": 2, "d2": 2, "d3": 2}}
    stats = ns.QrelsStats()
    # both: d1 = max(min(1, 2), min(2, 0)) = 1; d2 = max(min(2, 2), min(0, 2)) = 2; d3 has no support grade
    assert ns.citation_qrels([r1, r2], "both", support=support, nuggets=nuggets, stats=stats) == {"t": {"d1": 1, "d2": 2}}
    assert (stats.cited, stats.unlabelled) == (3, 1)
    with pytest.raises(UsageError):
        ns.citation_qrels([r1], "both", support=support)


# -- a large random case against an array formulation ---------------------------------------

def test_random_reports_against_an_array_formulation():
    rng = random.Random(11)
    topics = [f"t{k}" for k in range(6)]
    runs = [f"run{k}" for k in range(5)]
    items = {t: items_for(t, [rng.choice(["vital", "okay", None]) for _ in range(rng.randint(1, 9))]) for t in topics}
    reports, grades = [], []
    for run in runs:
        for t in topics:
            if rng.random() < 0.2:
                continue
            r = make_report(run, t, [(f"{run} {t} sentence {i} {rng.random()}", []) for i in range(rng.randint(1, 6))])
            reports.append(r)
            for s in r.sentences:
                for it in items[t]:
                    if rng.random() < 0.85:
                        ok = rng.random() > 0.05
                        grades.append(grade(t, s.doc_id, it.item_id, rng.randint(0, 5), "nugget-selfrating", ok))
    th = ns.thresholds_for((0, 5))
    got = {(a.run_id, a.topic_id): ns.report_nugget_scores(a, items[a.topic_id], "okay")
           for a in ns.assign(reports, grades, items, th)}
    # second formulation: a (sentence x item) grade matrix per report, -1 = no parsed grade
    for r in reports:
        its = items[r.topic_id]
        m = np.full((len(r.sentences), len(its)), -1)
        for g in grades:
            if g.query_id == r.topic_id and g.parse_ok:
                for si, s in enumerate(r.sentences):
                    for ii, it in enumerate(its):
                        if s.doc_id == g.doc_id and it.item_id == g.item_id:
                            m[si, ii] = max(m[si, ii], g.grade)
        best = m.max(axis=0)
        credit = np.where(best >= 4, 1.0, np.where(best >= 2, 0.5, 0.0))
        strict = (best >= 4).astype(float)
        vital = np.array([it.importance == "vital" for it in its])
        w = np.where(vital, 1.0, 0.5)
        want = {
            "nugget_all": credit.mean(), "nugget_all_strict": strict.mean(),
            "nugget_vital": credit[vital].mean() if vital.any() else 0.0,
            "nugget_vital_strict": strict[vital].mean() if vital.any() else 0.0,
            "nugget_weighted": (w * credit).sum() / w.sum(), "nugget_weighted_strict": (w * strict).sum() / w.sum(),
        }
        assert got[(r.run_id, r.topic_id)] == pytest.approx(want), (r.run_id, r.topic_id)
        # EXAM-Cover: items with a grade >= 4 in some sentence, over all items
        cover, _ = ns.report_covers([r], grades, items, th)[(r.run_id, r.topic_id)]
        assert cover == pytest.approx((best >= 4).sum() / len(its))


def test_average_runs_over_own_or_all_topics():
    per = {("A", "t1"): {"x": 1.0}, ("A", "t2"): {"x": 0.5}, ("B", "t1"): {"x": 0.25}}
    own = ns.average_runs(per, ["x"])
    assert own["A"]["x"][0] == pytest.approx(0.75) and own["B"]["x"] == (0.25, 0.0, 1)
    every = ns.average_runs(per, ["x"], ["t1", "t2"])
    assert every["B"]["x"][0] == pytest.approx(0.125) and every["B"]["x"][2] == 2
    se = np.std([1.0, 0.5], ddof=1) / np.sqrt(2)
    assert own["A"]["x"][1] == pytest.approx(se)
