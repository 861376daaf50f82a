"""The EXAM measures in one table: each one's name, what it says, how one topic's value is
computed and how a run's topics are aggregated. ``exam-nuggets score``, ``exam-cover``
and :mod:`exam_eval.api` read their names and help from here; adding a measure is a row
here and its per-topic function (trec_eval's measures have their own registry,
:mod:`exam_eval.trec_eval.registry`)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class ExamMeasure:
    name: str
    family: str  # nugget (AutoNuggetizer scores), cover (EXAM-Cover), support (citation support)
    help: str
    #: the function giving one topic's value(s), as module:function (imported when asked for:
    #: the measure modules import this table)
    per_topic: str
    aggregate: str
    #: a topic, not a run, may leave the value undefined (None for every run there)
    topic_defined: bool = False

    @property
    def compute(self) -> Callable:
        module, function = self.per_topic.split(":")
        return getattr(importlib.import_module(module), function)


_MEAN = "mean over the run's topics (with --complete / complete=: over every topic, missing ones 0)"
_SCORES = "exam_eval.measures.nugget_scores:nugget_scores"
_COVER = "exam_eval.measures.exam_cover:exam_cover"
_SUPPORT = "exam_eval.measures.nugget_scores:citation_support"

TABLE: tuple[ExamMeasure, ...] = (
    ExamMeasure("nugget_all", "nugget", "all nuggets: support 1, partial support 0.5", _SCORES, _MEAN),
    ExamMeasure("nugget_all_strict", "nugget", "all nuggets: support 1, partial support 0", _SCORES, _MEAN),
    ExamMeasure("nugget_vital", "nugget", "vital nuggets only: support 1, partial support 0.5", _SCORES, _MEAN),
    ExamMeasure("nugget_vital_strict", "nugget", "vital nuggets only: support 1, partial support 0", _SCORES, _MEAN),
    ExamMeasure("nugget_weighted", "nugget", "vital weight 1, okay 0.5: support 1, partial support 0.5",
                _SCORES, _MEAN),
    ExamMeasure("nugget_weighted_strict", "nugget", "vital weight 1, okay 0.5: support 1, partial support 0",
                _SCORES, _MEAN),
    ExamMeasure("exam_cover", "cover", "fraction of the topic's bank items the report (or top-k) answers",
                _COVER, _MEAN),
    ExamMeasure("n_exam_cover", "cover", "exam_cover over the items any graded passage answers",
                _COVER, _MEAN + "; topics where no item is answerable are left out", topic_defined=True),
    ExamMeasure("support_precision", "support", "mean support of the cited (sentence, document) pairs: "
                "support 1, partial support 0.5", _SUPPORT, _MEAN),
    ExamMeasure("support_recall", "support", "mean over the sentences of their best citation's support",
                _SUPPORT, _MEAN),
)


def names(*families: str) -> tuple[str, ...]:
    return tuple(m.name for m in TABLE if m.family in families)


NUGGET_MEASURES = names("nugget")
COVER_MEASURES = names("cover")
SUPPORT_MEASURES = names("support")
#: what exam-nuggets score and api.nugget_scores compute without citation-support grades
SCORE_MEASURES = names("nugget", "cover")
TOPIC_DEFINED = frozenset(m.name for m in TABLE if m.topic_defined)


def cover_values(result) -> dict[str, float | None]:
    """A run's EXAM-Cover means (:class:`exam_eval.measures.exam_cover.CoverResult`):
    n_exam_cover None where no topic defines it (undefined, not 0)."""
    return {"exam_cover": result.mean, "n_exam_cover": result.n_mean if result.n_defined else None}
