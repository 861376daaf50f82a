"""trec_eval -Z: per-query values as z-scores against a reference file.

The file has lines ``qid measure mean stddev`` (get_zscores.c: four whitespace-separated
fields; trec_eval reads the numbers with atof, where "abc" is 0: exam-qrels refuses what is
not a number, and reads the "nan" and "inf" that trec_eval prints, which its test suite's
file holds). Each per-query value, whatever the measure, becomes (value - mean) / stddev (convert_zscores.c), computed before values are accumulated, so
summaries average z-scores; a query or value the file lacks, or a stddev of 0 with the
value off the mean, gives trec_eval's MISSING_ZSCORE_VALUE, -1000000.

trec_eval looks values up by a binary search whose upper bound is one past the end of
the query's entries; a name that sorts after all of a query's names is then compared
with the next query's first entry, and takes its mean and stddev when it matches. That
lookup is reproduced here (a search that would run past the last entry of the file,
where trec_eval reads beyond its array, finds nothing).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import InputError
from .c_numbers import exact_fields, strict_number
from ..io.openers import display_name
from .registry import Request

MISSING_ZSCORE_VALUE = -1000000.0


@dataclass
class ZScores:
    entries: list[tuple[str, str, float, float]]   # (qid, measure, mean, stddev), sorted as strcmp
    qids: list[str]                               # distinct qids, sorted
    starts: list[int]                             # index in entries of each qid's first line

    def _find_qid(self, qid: str) -> int | None:
        start, end = 0, len(self.qids)
        while start <= end:
            cur = (start + end) // 2
            if cur >= len(self.qids):
                return None
            if qid < self.qids[cur]:
                end = cur - 1
            elif qid > self.qids[cur]:
                start = cur + 1
            else:
                return cur
        return None

    def lookup(self, qid: str, measure: str) -> tuple[float, float] | None | bool:
        """(mean, stddev); None when the value is missing; False when the query is."""
        q = self._find_qid(qid)
        if q is None:
            return False
        base = self.starts[q]
        count = (self.starts[q + 1] if q + 1 < len(self.starts) else len(self.entries)) - base
        start, end = 0, count
        while start <= end:
            cur = (start + end) // 2
            if base + cur >= len(self.entries):
                return None
            name = self.entries[base + cur][1]
            if measure < name:
                end = cur - 1
            elif measure > name:
                start = cur + 1
            else:
                return self.entries[base + cur][2:]
        return None


def read_zscores(path: str | os.PathLike) -> ZScores:
    name = display_name(path)
    entries = []
    for lineno, (qid, measure, mean, stddev) in exact_fields(path, "qid measure mean stddev", "get_zscores"):
        entries.append((qid, measure, strict_number(mean, "mean", name, lineno, finite=False),
                        strict_number(stddev, "stddev", name, lineno, finite=False)))
    if not entries:
        raise InputError("z-scores file is empty (trec_eval: Cannot read zscores file)", name)
    entries.sort(key=lambda e: (e[0], e[1]))
    qids, starts = [], []
    for i, e in enumerate(entries):
        if not qids or qids[-1] != e[0]:
            qids.append(e[0])
            starts.append(i)
    return ZScores(entries, qids, starts)


def zscore(value: float, reference: tuple[float, float] | None) -> float:
    if reference is None:
        return MISSING_ZSCORE_VALUE
    mean, stddev = reference
    if stddev:
        return (value - mean) / stddev
    return 0.0 if value == mean else MISSING_ZSCORE_VALUE


def apply_zscores(per_query: dict[str, dict[str, float]], requests: list[Request], zscores: ZScores) -> None:
    """Replace, in place, every numeric per-query value by its z-score."""
    for qid, values in per_query.items():
        for r in requests:
            if r.measure.value in ("float", "long") and r.measure.agg not in ("runid", "num_q"):
                for name in r.names:
                    if name in values:
                        found = zscores.lookup(qid, name)
                        values[name] = zscore(values[name], found or None)


__all__ = ["MISSING_ZSCORE_VALUE", "ZScores", "read_zscores", "apply_zscores", "zscore"]
