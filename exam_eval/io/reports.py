"""RAG reports (TREC RAG 24-26, RAGTIME, DRAGUN, NeuCLIR, TREC AutoJudge): the data model.

A report is one JSONL line per (run, topic): ``metadata`` (``run_id``, ``topic_id``,
``team_id``), ``responses`` (sentences with ``citations``) and ``references``. Tracks
spell citations three ways, and all three become :class:`Citation` here:

- document ids (NeuCLIR): ``"citations": ["doc1", "doc2"]``
- indices into ``references`` (RAG 24): ``"citations": [0, 2]``
- document id -> confidence (RAGTIME): ``"citations": {"doc1": 0.9}``

Ids follow the generated-response segments of :mod:`exam_eval.grading.segment`, so a
grade stays attached to a sentence exactly as long as its text is unchanged:

- sentence: ``run_id/topic_id/N-md5(text)[:10]`` (N = 1-based position in the report)
- whole report: ``run_id/topic_id/report-md5(full text)[:10]``

This module is the contract between report reading (loading, validation, grading) and
report scoring (nugget scores, EXAM-Cover of reports, document qrels from citations).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ..grading.segment import segment_id


@dataclass(frozen=True)
class Citation:
    doc_id: str
    confidence: float | None = None  # RAGTIME's doc id -> confidence maps; None elsewhere


@dataclass(frozen=True)
class ReportSentence:
    doc_id: str  # stable id, see module docstring; the "passage id" grades are keyed by
    index: int  # 1-based position in the report
    text: str
    citations: tuple[Citation, ...] = ()


@dataclass(frozen=True)
class Report:
    run_id: str
    topic_id: str
    team_id: str | None
    sentences: tuple[ReportSentence, ...]
    references: tuple[str, ...] = ()
    source: str | None = None  # file the report came from, for messages
    line: int | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)  # other metadata, kept

    @property
    def text(self) -> str:
        """The whole report: its sentences joined by single spaces."""
        return " ".join(s.text for s in self.sentences)

    @property
    def doc_id(self) -> str:
        return report_id(self.run_id, self.topic_id, self.text)

    def cited_doc_ids(self) -> list[str]:
        """Every document the report cites, first citation first, each once."""
        seen: dict[str, None] = {}
        for s in self.sentences:
            for c in s.citations:
                seen.setdefault(c.doc_id, None)
        return list(seen)


def sentence_id(run_id: str, topic_id: str, index: int, text: str) -> str:
    return segment_id(run_id, topic_id, index, text)


def report_id(run_id: str, topic_id: str, text: str) -> str:
    digest = hashlib.md5(text.encode("utf-8")).hexdigest()[:10]
    return f"{run_id}/{topic_id}/report-{digest}"
