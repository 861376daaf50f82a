"""Per-query rank metrics written as the CI paper's Eq. 1: U(q) = sum_d w(rank d) * mu(d),
where mu(d) is the expected gain under a label distribution.

With human labels the distribution is one-hot and the values equal trec_eval's
``ndcg_cut.k``, ``P.k`` (tests check this against pytrec_eval); with LLM label
distributions the same formula gives the predicted metric U-hat (Eq. 6).

Registry: ``METRICS`` maps a family name to a factory taking the cut-off ``k``; add a
family with one function and one line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from ..errors import UsageError
from ..trec_eval.trec_files import ranked


@dataclass(frozen=True)
class Metric:
    name: str
    k: int
    normalised: bool                              # divide by the ideal DCG (nDCG)
    weight: Callable[[np.ndarray], np.ndarray]    # 1-based ranks -> rank weights
    gain: Callable[[np.ndarray], np.ndarray]      # label values -> gains (non-decreasing)

    def weights(self, n: int) -> np.ndarray:
        return self.weight(np.arange(1, min(n, self.k) + 1, dtype=float))


def _dcg_gain(values: np.ndarray) -> np.ndarray:
    # trec_eval's ndcg uses the label itself as gain; negative labels gain nothing
    return np.maximum(np.asarray(values, dtype=float), 0.0)


def _log_discount(ranks: np.ndarray) -> np.ndarray:
    return 1.0 / np.log2(ranks + 1.0)


def dcg(k: int, rel_level: int = 1) -> Metric:
    return Metric(f"dcg@{k}", k, False, _log_discount, _dcg_gain)


def ndcg(k: int, rel_level: int = 1) -> Metric:
    return Metric(f"ndcg@{k}", k, True, _log_discount, _dcg_gain)


def precision(k: int, rel_level: int = 1) -> Metric:
    return Metric(f"p@{k}", k, False, lambda r: np.full_like(r, 1.0 / k),
                  lambda v: (np.asarray(v) >= rel_level).astype(float))


METRICS: dict[str, Callable[..., Metric]] = {
    "dcg": dcg,
    "ndcg": ndcg,
    "p": precision,
}


def parse_metric(spec: str, rel_level: int = 1) -> Metric:
    """``dcg@10``, ``ndcg@10``, ``p@5`` ... (case-insensitive; ``P_10``/``ndcg_cut_10`` also accepted)."""
    s = spec.strip().lower().replace("ndcg_cut", "ndcg")
    m = re.fullmatch(r"([a-z]+)[@_.](\d+)", s)
    if not m or m.group(1) not in METRICS or int(m.group(2)) < 1:
        raise UsageError(f"unknown metric {spec!r}; use one of " + ", ".join(f"{f}@K" for f in METRICS))
    return METRICS[m.group(1)](int(m.group(2)), rel_level)


def cover_k(metric: str) -> int | None:
    """k of exam-cover@k (exam-cover alone: 20); None for a rank metric (parse_metric's)."""
    m = metric.strip().lower().replace("_", "-")
    if m == "exam-cover":
        return 20
    if m.startswith("exam-cover@") and m[len("exam-cover@"):].isdigit() and int(m[len("exam-cover@"):]) > 0:
        return int(m[len("exam-cover@"):])
    return None


def value_range(metric: Metric, top_label: float) -> tuple[float, float]:
    """Where a query's value (and so any mean of them) can lie.

    nDCG@k and P@k: [0, 1]. DCG@k has no fixed top: it is at most a ranking of k
    passages all carrying the scale's highest label, gain(top_label) * sum of the k rank
    weights (TREC DL, labels 0-3 and k 10: 3 * 4.5436 = 13.63). ``top_label`` is the
    highest label of the human scale, the scale the intervals are about.
    """
    if metric.normalised:
        return 0.0, 1.0
    top_gain = float(metric.gain(np.array([top_label], dtype=float))[0])
    return 0.0, top_gain * float(np.sum(metric.weights(metric.k)))


def ideal_dcg(metric: Metric, gains: np.ndarray) -> float:
    top = np.sort(np.asarray(gains, dtype=float))[::-1][: metric.k]
    return float(np.sum(metric.weights(len(top)) * top))


def human_value(metric: Metric, docs_scores: Mapping[str, float], labels: Mapping[str, int]) -> float:
    """U(q) with human labels (unjudged documents count as label 0, as in trec_eval)."""
    top = ranked(docs_scores)[: metric.k]
    g = metric.gain(np.array([labels.get(d, 0) for d in top], dtype=float))
    value = float(np.sum(metric.weights(len(top)) * g))
    if metric.normalised:
        ideal = ideal_dcg(metric, metric.gain(np.array(list(labels.values()), dtype=float)))
        value = value / ideal if ideal > 0 else 0.0
    return value
