"""The LLM-predicted metric of one run, per query, as a function of CRC's lambda.

All top-k passages of all queries are stacked into flat arrays once, so evaluating
U_CRC(q, lambda) for every query is one degree shift and one bincount; CRC's binary
searches call it a few hundred times.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..trec_eval.trec_files import ranked
from .crc import degree_shift
from .label_dists import LabelDists
from .metrics import Metric, ideal_dcg


class PredictedMetric:
    def __init__(self, metric: Metric, run: Mapping[str, Mapping[str, float]], labels: LabelDists,
                 queries: Sequence[str]):
        self.queries = list(queries)
        self.gains = metric.gain(labels.values)
        weights, dists, qidx = [], [], []
        self.unlabelled = 0  # top-k passages without an LLM label (given labels.missing)
        for i, qid in enumerate(self.queries):
            top = ranked(run.get(qid, {}))[: metric.k]
            w = metric.weights(len(top))
            if metric.normalised:
                # The ideal DCG comes from the unshifted predictions, so the normaliser
                # does not move with lambda and U_CRC stays monotone in lambda.
                pool = labels.dists.get(qid, {})
                ideal = ideal_dcg(metric, np.array([p @ self.gains for p in pool.values()]))
                w = w / ideal if ideal > 0 else np.zeros_like(w)
            known = labels.dists.get(qid, {})
            for d, wd in zip(top, w):
                self.unlabelled += d not in known
                weights.append(wd)
                dists.append(labels.get(qid, d))
                qidx.append(i)
        self.weights = np.array(weights, dtype=float)
        self.dists = np.array(dists, dtype=float).reshape(len(weights), len(labels.values))
        self.qidx = np.array(qidx, dtype=np.int64)

    def __call__(self, lam: float = 0.0) -> np.ndarray:
        mu = degree_shift(self.dists, lam) @ self.gains
        return np.bincount(self.qidx, weights=self.weights * mu, minlength=len(self.queries))
