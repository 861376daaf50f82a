"""EXAM-Qrels: passage relevance labels derived from grades.

- ``max`` (default): the highest grade any of the query's items got on the passage
  (the EXAM++ / workbench default);
- ``count``: how many items reached ``min_grade``;
- ``binary``: 1 if any item reached ``min_grade``, else 0.
Direct relevance prompts (no bank item) give the passage's label directly; ``count``
and ``binary`` treat them like one item.

Grades that could not be parsed (``parse_ok`` false) never count. A passage whose every
grade is unparsed gets no label at all; the number of such passages is reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..errors import UsageError
from ..io.grades import Grade
from ..trec_eval.trec_files import Qrels

LABEL_MODES = ("max", "count", "binary")


@dataclass
class LabelStats:
    passages: int = 0
    unlabelled: int = 0   # every grade unparsed
    unparsed_grades: int = 0
    top_grade: int | None = None  # the highest parsed grade


def grades_to_qrels(grades: Iterable[Grade], label: str = "max", min_grade: int | None = None,
                    stats: LabelStats | None = None) -> Qrels:
    if label not in LABEL_MODES:
        raise UsageError(f"unknown label mode {label!r}; choose one of {', '.join(LABEL_MODES)}")
    if label != "max" and min_grade is None:
        raise UsageError(f"--label {label} needs --min-grade")
    best: dict[tuple[str, str], int | None] = {}
    hits: dict[tuple[str, str], int] = {}
    unparsed = 0
    for g in grades:
        key = (g.query_id, g.doc_id)
        if not g.parse_ok or g.grade is None:
            unparsed += 1
            best.setdefault(key, None)
            continue
        prev = best.get(key)
        if prev is None or g.grade > prev:
            best[key] = g.grade
        if min_grade is not None and g.grade >= min_grade:
            hits[key] = hits.get(key, 0) + 1
    qrels: Qrels = {}
    unlabelled = 0
    for (qid, doc), top in best.items():
        if top is None:
            unlabelled += 1
            continue
        if label == "max":
            value = top
        elif label == "count":
            value = hits.get((qid, doc), 0)
        else:
            value = 1 if hits.get((qid, doc), 0) else 0
        qrels.setdefault(qid, {})[doc] = value
    if stats is not None:
        stats.passages = len(best) - unlabelled
        stats.unlabelled = unlabelled
        stats.unparsed_grades = unparsed
        stats.top_grade = max((g for g in best.values() if g is not None), default=None)
    return qrels
