"""RAG reports -> the passages exam-grade grades: one per sentence, or one per report.

A graded unit is a :class:`~exam_eval.grading.segment.Segment` like a segment of a
generated response, so reports pool, deduplicate, cache, resume and rank exactly as
``--responses`` do. Its id is the report module's stable id (``run/topic/N-md5`` for a
sentence, ``run/topic/report-md5`` for the whole report), so a grade stays with a
sentence as long as its text is unchanged.

With ``cited`` texts, the context a prompt sees is the sentence (or report) followed by
the texts of the documents it cites::

    <sentence>

    Cited documents:
    [doc1] <text of doc1>
    [doc2] <text of doc2>

Back ends that truncate cut the end of the context, so the sentence itself always
survives and the cited texts give way first. The context is part of the cache key, so
grades with and without cited texts never mix in the cache.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from ..io.reports import Report
from .segment import Segment

UNITS = ("sentence", "report")

# Prompts written for a whole answer. The AutoNuggetizer judges the report as one passage
# (its sentences joined); graded per sentence, its prompt gives other numbers (a nugget
# spread over two sentences is found in neither). Other prompts default to sentences:
# the best sentence wins, and a grade stays attached to a sentence when others change.
WHOLE_REPORT_PROMPTS = ("nuggetizer-assign",)


def default_unit(prompt_id: str) -> str:
    """The grading unit a prompt is meant for (see the README's table of methods)."""
    return "report" if prompt_id in WHOLE_REPORT_PROMPTS else "sentence"
CITED_HEADER = "Cited documents:"


def with_cited(text: str, doc_ids: Iterable[str], cited: Mapping[str, str]) -> str:
    lines = [f"[{d}] {' '.join(cited[d].split())}" for d in dict.fromkeys(doc_ids) if (cited.get(d) or "").strip()]
    return text if not lines else text + "\n\n" + CITED_HEADER + "\n" + "\n".join(lines)


def report_segments(reports: Iterable[Report], unit: str = "sentence",
                    cited: Mapping[str, str] | None = None) -> list[Segment]:
    """The units to grade; blank sentences are left out (there is nothing to grade)."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    out: list[Segment] = []
    for r in reports:
        if unit == "report":
            if r.text.strip():
                text = r.text if cited is None else with_cited(r.text, r.cited_doc_ids(), cited)
                out.append(Segment(r.topic_id, r.run_id, r.doc_id, text, 1, (r.source, r.line)))
            continue
        for s in r.sentences:
            if not s.text.strip():
                continue
            text = s.text if cited is None else with_cited(s.text, (c.doc_id for c in s.citations), cited)
            out.append(Segment(r.topic_id, r.run_id, s.doc_id, text, s.index, (r.source, r.line)))
    return out
