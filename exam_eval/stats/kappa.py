"""Cohen's kappa from a confusion matrix: plain, linear- and quadratic-weighted.

Rows are rater A's categories, columns rater B's, both indexed by the same ordered
category list (so weights can use the distance between category positions, as
sklearn's ``cohen_kappa_score`` does).
"""

from __future__ import annotations

import math

import numpy as np


def confusion(a, b, categories) -> np.ndarray:
    index = {c: i for i, c in enumerate(categories)}
    m = np.zeros((len(categories), len(categories)), dtype=np.int64)
    if len(a):
        np.add.at(m, (np.array([index[x] for x in a]), np.array([index[y] for y in b])), 1)
    return m


def kappa_from_matrix(m: np.ndarray, weights: str | None = None, values=None) -> float:
    """kappa = 1 - sum(w * observed) / sum(w * expected); NaN when chance agreement is total.

    ``values``: the label of each row (and column), for weights by label value: with
    labels 0, 1 and 3 observed, 1 and 3 are two steps apart, as in the matrix over the
    whole scale 0..3 (whose empty rows change nothing), not neighbours. Without, the
    positions are the values."""
    m = np.asarray(m, dtype=float)
    total = m.sum()
    k = m.shape[0]
    if total == 0 or k < 2:
        return math.nan
    i, j = np.indices(m.shape)
    if values is not None:
        v = np.asarray(values, dtype=float)
        i, j = v[i], v[j]
        k = int(v.max() - v.min()) + 1
    if weights is None:
        w = (i != j).astype(float)
    elif weights == "linear":
        w = np.abs(i - j) / (k - 1)
    elif weights == "quadratic":
        w = ((i - j) / (k - 1)) ** 2
    else:
        raise ValueError(f"unknown kappa weights {weights!r}")
    expected = np.outer(m.sum(axis=1), m.sum(axis=0)) / total
    denom = (w * expected).sum()
    if denom == 0:
        return math.nan
    return float(1.0 - (w * m).sum() / denom)


def binary_kappa(a, b) -> float:
    """kappa of two boolean sequences."""
    return kappa_from_matrix(confusion(list(map(bool, a)), list(map(bool, b)), [False, True]))
