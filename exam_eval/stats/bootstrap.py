"""Empirical bootstrap interval for a mean, from the human-labelled queries only.

This is the baseline of the CI paper (DiCiccio & Efron 1996): resample the n
per-query values with replacement, and use the quantiles of delta* = mean* - mean
(the "empirical" or basic bootstrap): [mean - delta*_(1-alpha/2), mean - delta*_(alpha/2)].
"""

from __future__ import annotations

import os
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


#: bytes per (sample, query) cell of the bootstrap's draws: multinomial's int64 counts and
#: their float copy
DRAW_BYTES = 16


def affordable_samples(queries: int, share: float = 0.5) -> int | None:
    """The most bootstrap samples of ``queries`` queries whose draws fit in ``share`` of the
    machine's memory (None where the memory cannot be read)."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None
    return int(memory * share) // (DRAW_BYTES * max(1, queries))


def empirical_bootstrap(values: np.ndarray, alpha: float, samples: int, rng: np.random.Generator) -> Interval:
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n < 2:
        raise CoverageError(f"the bootstrap needs at least 2 labelled queries, got {n}")
    mean = float(values.mean())
    means = rng.multinomial(n, np.full(n, 1.0 / n), size=samples) @ values / n
    lo_q, hi_q = np.quantile(means - mean, [alpha / 2, 1 - alpha / 2])
    return Interval(mean - float(hi_q), mean, mean - float(lo_q))
