"""Verify grading: for each bank item, the graded passages sorted by grade with the
grader's answer, so a human can see whether high grades mean real answers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO

from ..trec_eval.trec_files import Qrels
from .table import GradeTable, item_label, one_line


@dataclass
class GradedPassage:
    doc_id: str
    grade: int | None
    parse_ok: bool
    answer: str | None
    label: int | None
    extracted: str | None = None


@dataclass
class ItemGrading:
    query_id: str
    item_id: str
    passages: list[GradedPassage]


def _order(p: GradedPassage):
    # best grades first; unparsed outputs last (they are failures to look at, not zeros)
    return (p.grade is None, -(p.grade or 0), p.doc_id)


def verify_grading(table: GradeTable, qrels: Qrels | None = None, *, queries: Iterable[str] | None = None,
                   top: int | None = None, extracted: dict | None = None) -> list[ItemGrading]:
    wanted = set(queries) if queries else None
    out = []
    for qid in table.queries():
        if wanted is not None and qid not in wanted:
            continue
        labels = (qrels or {}).get(qid, {})
        for item_id in table.items(qid):
            graded = [GradedPassage(doc, g.grade, g.parse_ok, g.answer, labels.get(doc),
                                    (extracted or {}).get((qid, doc, item_id)))
                      for doc, g in table.by_item[qid][item_id].items()]
            graded.sort(key=_order)
            out.append(ItemGrading(qid, item_id, graded[:top] if top else graded))
    return out


def _grade_str(p: GradedPassage) -> str:
    return "unparsed" if p.grade is None else str(p.grade)


def _label_str(label: int | None) -> str:
    return "-" if label is None else str(label)


def write_grading_tsv(rows: list[ItemGrading], out: IO[str], bank: dict, texts: dict) -> None:
    out.write("query_id\titem_id\tgrade\tjudgment\tdoc_id\tanswer\textracted_answer\titem_text\tpassage_text\n")
    for r in rows:
        item_text = one_line(item_label(r.item_id, bank))
        for p in r.passages:
            out.write("\t".join([r.query_id, r.item_id, _grade_str(p), _label_str(p.label), p.doc_id,
                                 one_line(p.answer or ""), one_line(p.extracted or ""), item_text,
                                 one_line(texts.get((r.query_id, p.doc_id), ""))]) + "\n")


def write_grading_text(rows: list[ItemGrading], out: IO[str], bank: dict, texts: dict, width: int = 200) -> None:
    for r in rows:
        out.write(f"== {r.item_id}  (query {r.query_id})\n   {one_line(item_label(r.item_id, bank))}\n")
        for p in r.passages:
            answer = one_line(p.answer or "")
            extra = f"  extracted: {one_line(p.extracted)}" if p.extracted is not None else ""
            out.write(f"  (grade: {_grade_str(p)}, judged: {_label_str(p.label)}) {p.doc_id}  answer: {answer}{extra}\n")
            text = one_line(texts.get((r.query_id, p.doc_id), ""))
            if text:
                out.write("      " + (text if len(text) <= width else text[: width - 3] + "...") + "\n")
        out.write("\n")
