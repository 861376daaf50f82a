"""What a differential sweep of the intervals against ppi_py and a from-the-paper
implementation found: PPI's z at a tiny alpha, probs over a prompt's word labels, and a
distribution that sums to 0. References are scipy's quantiles and the prompts' own
label -> grade tables, never this code's output."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from exam_eval.errors import InputError
from exam_eval.grading.prompts import REGISTRY
from exam_eval.grading.grade_files import read_grades
from exam_eval.io.grades import Grade
from exam_eval.stats import label_dists
from exam_eval.stats.ppi import ppi_mean


@pytest.mark.parametrize("alpha", [0.05, 1e-10, 1e-17, 1e-300])
def test_ppi_half_width_is_a_finite_multiple_of_the_standard_error(alpha):
    rng = np.random.default_rng(3)
    truth, pred_l, pred_u = rng.normal(size=8), rng.normal(size=8), rng.normal(size=40)
    r = ppi_mean(truth, pred_l, pred_u, alpha)
    sd = math.sqrt(np.var(pred_u, ddof=1) / 40 + np.var(truth - pred_l, ddof=1) / 8)
    assert math.isfinite(r.lower) and math.isfinite(r.upper)
    assert r.upper - r.estimate == pytest.approx(stats.norm.isf(alpha / 2) * sd, rel=1e-12)
    same = ppi_mean(np.ones(4), np.ones(4), np.ones(10), alpha)  # no variance at all: a point, not nan
    assert same.lower == same.estimate == same.upper == 1.0


@pytest.mark.parametrize("prompt", ["sun", "faggioli-b", "ci-robust04", "nuggetizer-assign", "thomas"])
def test_probs_over_word_labels_are_distributions_over_the_prompts_grades(prompt):
    p = REGISTRY[prompt]
    weights = np.arange(1, len(p.labels) + 1, dtype=float)
    probs = {lab: float(w / weights.sum()) for lab, w in zip(p.labels, weights)}
    g = Grade("q", "d", "q/i", "question", p.scale[1], probs, None, True, "m", prompt)
    dists, unparsed = label_dists.from_grades([g])
    expected = {p.scale[0] + i: w / weights.sum() for i, w in enumerate(weights)}  # labels[i] -> scale[0] + i
    got = dict(zip(dists.values.astype(int).tolist(), dists.get("q", "d").tolist()))
    assert unparsed == 0 and got == pytest.approx({**{v: 0.0 for v in got}, **expected})


def test_probs_that_sum_to_zero_are_refused_with_the_line(tmp_path):
    path = tmp_path / "g.jsonl"
    row = {"query_id": "q", "doc_id": "d", "item_id": "q/i", "kind": "question", "grade": 1, "answer": "1",
           "parse_ok": True, "model": "m", "prompt": "question-selfrating"}
    path.write_text(json.dumps({**row, "probs": {"0": 0.5, "1": 0.5}}) + "\n"
                    + json.dumps({**row, "doc_id": "e", "probs": {"0": 0, "1": 0.0}}) + "\n")
    with pytest.raises(InputError) as err:
        read_grades(str(path))
    assert err.value.line == 2 and "sum to 0" in err.value.reason
