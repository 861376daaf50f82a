"""Predicted qrels against truth qrels, per topic, as the TREC AutoJudge evaluator
(autojudge-evaluate 1.1, ``qrel-evaluate``) computes it, plus pooled figures.

Per topic the units are the union of the documents either side lists (any label);
a document one side lacks gets label 0 there. Labels are clipped to 0..max per side
(negative trec_eval labels become 0). Then:

- precision / recall / F1 of the predicted relevant set (label >= pred_min) against the
  truth's (label >= truth_min); defined only for topics where a side has a relevant
  document (0 when the denominator is 0, as autojudge-evaluate does);
- Jaccard = tp / (tp + fp + fn) over the same sets (NaN when both are empty);
- Cohen's kappa of the two binary decisions for every pair of thresholds
  (truth >= a for a in 1..truth_max, pred >= b for b in 1..pred_max);
- linear-weighted kappa and Krippendorff's alpha (ordinal, the two label sides as two
  coders, the documents as units) on the clipped labels, only when both sides have
  the same scale (truth_max == pred_max), else NaN;
- adjusted Rand index of the two binary decisions.

Kappa and alpha are NaN where undefined (both sides constant). The ``mean`` row is the
mean over topics of each defined value (autojudge-evaluate's MEAN row); the ``pooled``
row takes every (topic, document) unit of those topics at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..trec_eval.trec_files import Qrels
from .kappa import confusion, kappa_from_matrix

MEAN, POOLED = "mean", "pooled"


@dataclass
class Scale:
    truth_max: int = 1
    pred_max: int = 1
    truth_min: int = 1
    pred_min: int = 1

    def kappa_pairs(self) -> list[tuple[int, int]]:
        return [(a, b) for a in range(1, self.truth_max + 1) for b in range(1, self.pred_max + 1)]


@dataclass
class Row:
    topic: str
    values: dict[str, float]      # column -> value (NaN where undefined)
    counts: tuple[int, int, int] | None  # tp, fp, fn; None on the mean row


def columns(scale: Scale) -> list[str]:
    return (["precision", "recall", "f1", "tp", "fp", "fn", "jaccard"]
            + [f"kappa@{a}v{b}" for a, b in scale.kappa_pairs()]
            + ["kappa_w", "kripp_alpha", "ari"])


def align(truth: Qrels, pred: Qrels, topics: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """topic -> (truth labels, predicted labels) over the union of the topic's documents."""
    out = {}
    for q in topics:
        t, p = truth.get(q, {}), pred.get(q, {})
        docs = sorted(set(t) | set(p))
        out[q] = (np.array([t.get(d, 0) for d in docs], dtype=np.int64),
                  np.array([p.get(d, 0) for d in docs], dtype=np.int64))
    return out


def adjusted_rand(a: np.ndarray, b: np.ndarray) -> float:
    """Adjusted Rand index of two labelings from their pair counts (Hubert & Arabie 1985):
    2 (tp tn - fn fp) / ((tp + fn)(fn + tn) + (tp + fp)(fp + tn)), 1 when no pair disagrees."""
    n = len(a)
    if n == 0:
        return math.nan
    _, ai = np.unique(a, return_inverse=True)
    _, bi = np.unique(b, return_inverse=True)
    table = np.zeros((ai.max() + 1, bi.max() + 1), dtype=np.float64)
    np.add.at(table, (ai, bi), 1)
    sum_sq = (table ** 2).sum()
    rows, cols = table.sum(axis=1), table.sum(axis=0)
    # ordered pairs, as sklearn's pair_confusion_matrix counts them
    tp = sum_sq - n
    fp = (cols ** 2).sum() - sum_sq
    fn = (rows ** 2).sum() - sum_sq
    tn = n * n - fp - fn - sum_sq
    if fn == 0 and fp == 0:
        return 1.0
    return float(2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn)))


def _kripp_alpha(t: np.ndarray, p: np.ndarray) -> float:
    import krippendorff

    try:
        v = krippendorff.alpha(reliability_data=np.vstack([t, p]).astype(float), level_of_measurement="ordinal")
    except (ValueError, ZeroDivisionError):  # one value in the whole domain: alpha is undefined
        return math.nan
    return float(v) if v is not None else math.nan


def _constant(v: np.ndarray) -> bool:
    return len(v) == 0 or bool(np.all(v == v[0]))


def compare_units(t: np.ndarray, p: np.ndarray, scale: Scale) -> tuple[dict[str, float], tuple[int, int, int]]:
    t = np.clip(t, 0, scale.truth_max)
    p = np.clip(p, 0, scale.pred_max)
    tr, pr = t >= scale.truth_min, p >= scale.pred_min
    tp, fp, fn = int(np.sum(tr & pr)), int(np.sum(~tr & pr)), int(np.sum(tr & ~pr))
    vals: dict[str, float] = {}
    if tr.any() or pr.any():
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        vals.update(precision=prec, recall=rec, f1=2 * prec * rec / (prec + rec) if prec + rec else 0.0,
                    jaccard=tp / (tp + fp + fn))
    else:
        vals.update(precision=math.nan, recall=math.nan, f1=math.nan, jaccard=math.nan)
    for a, b in scale.kappa_pairs():
        ta, pb = t >= a, p >= b
        vals[f"kappa@{a}v{b}"] = (math.nan if _constant(ta) and _constant(pb)
                                  else kappa_from_matrix(confusion(ta, pb, [False, True])))
    same_scale = scale.truth_max == scale.pred_max
    if not same_scale or (_constant(t) and _constant(p)):
        vals["kappa_w"] = math.nan
    else:
        vals["kappa_w"] = kappa_from_matrix(confusion(t, p, list(range(scale.truth_max + 1))), "linear")
    vals["kripp_alpha"] = _kripp_alpha(t, p) if same_scale else math.nan
    vals["ari"] = adjusted_rand(tr, pr)
    return vals, (tp, fp, fn)


def compare_qrels(truth: Qrels, pred: Qrels, topics: list[str], scale: Scale) -> list[Row]:
    """Per-topic rows, then the ``mean`` and ``pooled`` rows."""
    aligned = align(truth, pred, topics)
    rows = []
    for q, (t, p) in aligned.items():
        vals, counts = compare_units(t, p, scale)
        rows.append(Row(q, vals, counts))
    cols = [c for c in columns(scale) if c not in ("tp", "fp", "fn")]
    mean = {}
    for c in cols:
        defined = [r.values[c] for r in rows if not math.isnan(r.values[c])]
        mean[c] = float(np.mean(defined)) if defined else math.nan
    rows.append(Row(MEAN, mean, None))
    if aligned:
        t_all = np.concatenate([t for t, _ in aligned.values()])
        p_all = np.concatenate([p for _, p in aligned.values()])
        vals, counts = compare_units(t_all, p_all, scale)
        rows.append(Row(POOLED, vals, counts))
    return rows


def _fmt(v: float) -> str:
    return "nan" if math.isnan(v) else f"{v:.4f}"


def render(rows: list[Row], scale: Scale) -> str:
    cols = columns(scale)
    lines = ["\t".join(["topic", *cols])]
    for r in rows:
        cells = []
        for c in cols:
            if c in ("tp", "fp", "fn"):
                cells.append("" if r.counts is None else str(r.counts[("tp", "fp", "fn").index(c)]))
            else:
                cells.append(_fmt(r.values[c]))
        lines.append("\t".join([r.topic, *cells]))
    return "\n".join(lines) + "\n"
