"""Cohen's kappa (plain and weighted) against the definition, and the agreement tables."""

from __future__ import annotations

import math

import numpy as np
import pytest

from exam_eval.trec_eval.trec_files import read_qrels
from exam_eval.stats.agreement import agreement, render_agreement
from exam_eval.stats.kappa import binary_kappa, confusion, kappa_from_matrix


def _kappa_definition(table, weights=None):
    """kappa = (p_o - p_e) / (1 - p_e), weighted: 1 - sum w*o / sum w*e, by explicit loops."""
    k = len(table)
    total = sum(sum(r) for r in table)
    rows = [sum(r) / total for r in table]
    cols = [sum(table[i][j] for i in range(k)) / total for j in range(k)]
    if weights is None:
        po = sum(table[i][i] for i in range(k)) / total
        pe = sum(rows[i] * cols[i] for i in range(k))
        return (po - pe) / (1 - pe)
    num = den = 0.0
    for i in range(k):
        for j in range(k):
            d = abs(i - j) / (k - 1)
            w = d if weights == "linear" else d * d
            num += w * table[i][j] / total
            den += w * rows[i] * cols[j]
    return 1 - num / den


TABLES = [
    [[20, 5], [10, 15]],
    [[45, 15], [25, 15]],
    [[3, 1, 0, 0], [2, 5, 1, 0], [0, 2, 6, 2], [1, 0, 3, 9]],
    [[10, 0, 3], [4, 7, 1], [0, 6, 12]],
]


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_kappa_matches_definition(table, weights):
    if weights and len(table) == 2:
        # with two categories every weighting is the same kappa
        assert kappa_from_matrix(np.array(table), weights) == pytest.approx(_kappa_definition(table))
    assert kappa_from_matrix(np.array(table), weights) == pytest.approx(_kappa_definition(table, weights))


def test_textbook_value():
    # Cohen's classic 2x2 example: p_o = 0.7, p_e = 0.5 -> kappa = 0.4
    assert kappa_from_matrix(np.array([[20, 5], [10, 15]])) == pytest.approx(0.4)


def test_binary_kappa_and_degenerate():
    a = [1, 1, 0, 0, 1, 0, 1, 1]
    b = [1, 0, 0, 0, 1, 1, 1, 1]
    m = confusion(list(map(bool, a)), list(map(bool, b)), [False, True])
    assert binary_kappa(a, b) == pytest.approx(_kappa_definition(m.tolist()))
    assert math.isnan(binary_kappa([1, 1, 1], [1, 1, 1]))  # chance agreement is total


def _qrels(rows):
    q = {}
    for qid, doc, label in rows:
        q.setdefault(qid, {})[doc] = label
    return q


def test_agreement_counts_and_kappas():
    human = _qrels([("1", "a", 0), ("1", "b", 1), ("1", "c", 2), ("1", "d", 3), ("1", "e", 0),
                    ("2", "a", 2), ("2", "b", 0), ("2", "c", 3), ("2", "z", 1)])
    llm = _qrels([("1", "a", 0), ("1", "b", 4), ("1", "c", 5), ("1", "d", 1), ("1", "e", 0), ("1", "extra", 5),
                  ("2", "a", 4), ("2", "b", 0), ("2", "c", 5)])
    a = agreement(human, llm, human_min=2, llm_min=4)
    assert a.n_pairs == 8 and a.human_only == 1 and a.llm_only == 1
    # pooled: pairs (h>=2, l>=4): 1c T/T, 1d T/F, 2a T/T, 2c T/T, 1b F/T, 1a,1e,2b F/F
    assert (a.binary.tp, a.binary.fn, a.binary.fp, a.binary.tn) == (3, 1, 1, 3)
    assert a.kappa == pytest.approx(_kappa_definition([[3, 1], [1, 3]]))
    t1 = _kappa_definition([[1, 1], [1, 2]])   # topic 1: tp=1 fp=1 / fn=1 tn=2
    t2 = _kappa_definition([[2, 0], [0, 1]])   # topic 2: perfect
    assert a.topic_kappa["1"] == pytest.approx(t1) and a.topic_kappa["2"] == pytest.approx(t2)
    assert a.mean_topic_kappa == pytest.approx((t1 + t2) / 2)
    # LENIENT counts LLM >= 1: 1b,1c,1d,2a,2c relevant by the LLM
    assert (a.lenient.tp, a.lenient.fp, a.lenient.fn, a.lenient.tn) == (4, 1, 0, 3)
    assert a.graded.sum() == 8 and a.graded.shape == (len(a.llm_labels), len(a.human_labels))
    # graded kappas on the union 0..5 of labels
    union = sorted(set(a.human_labels) | set(a.llm_labels))
    pairs = [(0, 0), (4, 1), (5, 2), (1, 3), (0, 0), (4, 2), (0, 0), (5, 3)]
    square = [[sum(1 for l, h in pairs if l == r and h == c) for c in union] for r in union]
    assert a.kappa_quadratic == pytest.approx(_kappa_definition(square, "quadratic"))
    text = render_agreement(a)
    assert "kappa\t" in text and "LENIENT" in text and "STRICT" in text


def test_dl19_question_selfrating(shared_data):
    d = shared_data / "dl19"
    human = read_qrels(d / "qrels.txt")
    llm = read_qrels(d / "llm-qrels" / "QuestionSelfRatedUnanswerablePromptWithChoices.qrels")
    a = agreement(human, llm, human_min=2, llm_min=4)
    assert a.n_pairs == 9260 and a.human_only == 0 and a.llm_only == 11060 - 9260
    tp = sum(1 for q, docs in human.items() for d_, h in docs.items() if h >= 2 and llm[q][d_] >= 4)
    fn = sum(1 for q, docs in human.items() for d_, h in docs.items() if h >= 2 and llm[q][d_] < 4)
    fp = sum(1 for q, docs in human.items() for d_, h in docs.items() if h < 2 and llm[q][d_] >= 4)
    tn = 9260 - tp - fn - fp
    assert (a.binary.tp, a.binary.fn, a.binary.fp) == (tp, fn, fp)
    assert a.kappa == pytest.approx(_kappa_definition([[tp, fp], [fn, tn]]))
    assert a.n_topics == 43


def test_weighted_kappas_go_by_label_value_where_a_label_never_occurs():
    """Labels 0, 1 and 3 (no 2): 1 and 3 are two steps apart, as on the whole 0..3 scale,
    not neighbours (sklearn's cohen_kappa_score weighs positions among the labels seen)."""
    pairs = [(0, 0), (1, 1), (3, 3), (1, 3), (3, 1), (0, 1), (3, 3), (0, 0), (1, 0), (0, 3), (3, 3)]  # (llm, human)
    human = _qrels([("1", f"d{i}", h) for i, (_, h) in enumerate(pairs)])
    llm = _qrels([("1", f"d{i}", l_) for i, (l_, _) in enumerate(pairs)])
    a = agreement(human, llm, human_min=1, llm_min=1)
    scale = [0, 1, 2, 3]
    full = [[sum(1 for l_, h in pairs if l_ == r and h == c) for c in scale] for r in scale]
    assert a.kappa_linear == pytest.approx(_kappa_definition(full, "linear"))
    assert a.kappa_quadratic == pytest.approx(_kappa_definition(full, "quadratic"))
    seen = [0, 1, 3]
    packed = [[sum(1 for l_, h in pairs if l_ == r and h == c) for c in seen] for r in seen]
    assert a.kappa_linear != pytest.approx(_kappa_definition(packed, "linear"), abs=1e-3)  # the check can fail
    assert a.kappa_quadratic != pytest.approx(_kappa_definition(packed, "quadratic"), abs=1e-4)
    assert a.kappa_graded == pytest.approx(_kappa_definition(packed)) == pytest.approx(_kappa_definition(full))
