"""The EXAM measures in one table: each one's name, its family and whether a topic may
leave it undefined. What reads it: ``exam-nuggets score`` and :func:`exam_eval.api.nugget_scores`
compute and print the measures in the table's order (``SCORE_MEASURES``, and
``SUPPORT_MEASURES`` with citation-support grades, through
:mod:`exam_eval.measures.nugget_scores`), ``exam-nuggets -m`` lists the names, the
assignment-file scores take ``NUGGET_MEASURES``, and exam-cover's leaderboard and the API
take a run's EXAM-Cover values from :func:`cover_values`. Adding a measure is a row here
and its computation in ``nugget_scores`` (nugget, support) or ``exam_cover`` (cover); what
each one means is written in man exam-nuggets, DESCRIPTION. trec_eval's measures have
their own registry, :mod:`exam_eval.trec_eval.registry`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExamMeasure:
    name: str
    family: str  # nugget (AutoNuggetizer scores), cover (EXAM-Cover), support (citation support)
    #: a topic, not a run, may leave the value undefined (None for every run there)
    topic_defined: bool = False


TABLE: tuple[ExamMeasure, ...] = (
    ExamMeasure("nugget_all", "nugget"),  # all nuggets: support 1, partial support 0.5
    ExamMeasure("nugget_all_strict", "nugget"),  # partial support 0
    ExamMeasure("nugget_vital", "nugget"),  # vital nuggets only
    ExamMeasure("nugget_vital_strict", "nugget"),
    ExamMeasure("nugget_weighted", "nugget"),  # vital weight 1, okay 0.5
    ExamMeasure("nugget_weighted_strict", "nugget"),
    ExamMeasure("exam_cover", "cover"),  # the fraction of the topic's bank items answered
    ExamMeasure("n_exam_cover", "cover", topic_defined=True),  # over the items any passage answers
    ExamMeasure("support_precision", "support"),  # mean support of the cited (sentence, document) pairs
    ExamMeasure("support_recall", "support"),  # mean over the sentences of their best citation's support
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
