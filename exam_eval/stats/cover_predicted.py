"""EXAM-Cover@k predicted from LLM grades, as a function of CRC's lambda.

EXAM-Cover(q) is the mean over the query's items of "some top-k passage answers it"
(grade >= tau). With a probability p(d, i) that passage d answers item i, the item is
covered with probability 1 - prod_d (1 - p(d, i)) (passages taken as independent), and
the expected cover is the mean of those. Each item is then a two-label distribution
{0: not covered, 1: covered} with weight 1/|items|, so the same degree shift, PPI and
CRC machinery as for rank metrics applies.

p(d, i) is P(grade >= tau) under the grade's ``probs`` (or 0/1 from a hard grade; an
unparsed grade answers nothing); with the calibrated mapping it is
P(human grade >= tau | LLM grade), counted on the labelled queries' passage-item pairs
that both graded.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np

from ..io.grades import Grade
from ..trec_eval.trec_files import ranked
from .crc import degree_shift
from .label_dists import item_dist

VALUES = np.array([0.0, 1.0])


class AnswerProbs:
    """p(d, i) per query: qid -> doc -> item -> probability that d answers i."""

    def __init__(self, probs: dict[str, dict[str, dict[str, float]]], items: dict[str, set[str]]):
        self.probs = probs
        self.items = items

    @classmethod
    def from_grades(cls, grades: Iterable[Grade], min_grade: int, source: str = "grades",
                    mapping: Mapping[int, float] | None = None) -> "AnswerProbs":
        probs: dict[str, dict[str, dict[str, float]]] = {}
        items: dict[str, set[str]] = {}
        for g in grades:
            if g.item_id is None:
                continue
            items.setdefault(g.query_id, set()).add(g.item_id)
            d = item_dist(g, source)
            if d is None:
                p = 0.0
            elif mapping is not None:
                p = sum(pr * mapping.get(label, mapping["_unseen"]) for label, pr in d.items())
            else:
                p = sum(pr for label, pr in d.items() if label >= min_grade)
            probs.setdefault(g.query_id, {}).setdefault(g.doc_id, {})[g.item_id] = float(p)
        return cls(probs, items)


def calibrate_answers(llm: Iterable[Grade], human: Iterable[Grade], labelled: Iterable[str], min_grade: int,
                      source: str = "grades", smoothing: float = 1.0) -> dict:
    """P(human grade >= tau | LLM grade = l) on the labelled queries, Laplace-smoothed
    (``_unseen``: an LLM grade never seen next to a human grade gets the overall rate)."""
    wanted = set(labelled)
    truth = {(g.query_id, g.doc_id, g.item_id): g.grade >= min_grade
             for g in human if g.query_id in wanted and g.item_id is not None and g.grade is not None}
    hits: dict[int, float] = {}
    seen: dict[int, float] = {}
    for g in llm:
        key = (g.query_id, g.doc_id, g.item_id)
        if key not in truth:
            continue
        d = item_dist(g, source)
        if d is None:
            continue
        for label, pr in d.items():
            seen[label] = seen.get(label, 0.0) + pr
            hits[label] = hits.get(label, 0.0) + pr * truth[key]
    total_seen, total_hits = sum(seen.values()), sum(hits.values())
    mapping = {label: (hits[label] + smoothing * 0.5) / (seen[label] + smoothing) for label in seen}
    mapping["_unseen"] = (total_hits + smoothing * 0.5) / (total_seen + smoothing)
    return mapping


class PredictedCover:
    def __init__(self, answers: AnswerProbs, run: Mapping[str, Mapping[str, float]], queries: Sequence[str],
                 k: int = 20):
        self.queries = list(queries)
        self.gains = VALUES
        weights, dists, qidx = [], [], []
        self.unlabelled = 0  # top-k passages without any grade for the query
        for qi, qid in enumerate(self.queries):
            items = sorted(answers.items.get(qid, ()))
            top = ranked(run.get(qid, {}))[:k]
            graded = answers.probs.get(qid, {})
            self.unlabelled += sum(d not in graded for d in top)
            for item in items:
                miss = 1.0
                for d in top:
                    miss *= 1.0 - graded.get(d, {}).get(item, 0.0)
                weights.append(1.0 / len(items))
                dists.append([miss, 1.0 - miss])
                qidx.append(qi)
        self.weights = np.array(weights, dtype=float)
        self.dists = np.array(dists, dtype=float).reshape(len(weights), 2)
        self.qidx = np.array(qidx, dtype=np.int64)

    def __call__(self, lam: float = 0.0) -> np.ndarray:
        mu = degree_shift(self.dists, lam) @ self.gains
        return np.bincount(self.qidx, weights=self.weights * mu, minlength=len(self.queries))
