"""Empirical bootstrap interval for a mean, from the human-labelled queries only.

This is the baseline of the CI paper (DiCiccio & Efron 1996): resample the n
per-query values with replacement, and use the quantiles of delta* = mean* - mean
(the "empirical" or basic bootstrap): [mean - delta*_(1-alpha/2), mean - delta*_(alpha/2)].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .crc import CoverageError


@dataclass
class Interval:
    lower: float
    estimate: float
    upper: float

    @property
    def width(self) -> float:
        return self.upper - self.lower


def empirical_bootstrap(values: np.ndarray, alpha: float, samples: int, rng: np.random.Generator) -> Interval:
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n < 2:
        raise CoverageError(f"the bootstrap needs at least 2 labelled queries, got {n}")
    mean = float(values.mean())
    means = rng.multinomial(n, np.full(n, 1.0 / n), size=samples) @ values / n
    lo_q, hi_q = np.quantile(means - mean, [alpha / 2, 1 - alpha / 2])
    return Interval(mean - float(hi_q), mean, mean - float(lo_q))
