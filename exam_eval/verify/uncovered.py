"""Uncovered passages: passages judged relevant that no bank item grades >= tau —
evidence that the bank misses something the assessors found relevant."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO

from ..trec_eval.trec_files import Qrels
from .table import GradeTable, covers, item_label, judged_relevant, one_line


@dataclass
class UncoveredPassage:
    query_id: str
    doc_id: str
    label: int
    max_grade: int | None   # None: every grade of this passage failed to parse
    best_item: str | None   # an item reaching max_grade (smallest id on ties)
    items_graded: int


@dataclass
class UncoveredResult:
    passages: list[UncoveredPassage]
    # relevant passages that were never graded: not evidence about the bank, but the
    # user should know the analysis could not look at them
    ungraded: dict[str, list[str]]


def uncovered_passages(table: GradeTable, qrels: Qrels, *, min_grade: int, relevant_min: int,
                       queries: Iterable[str] | None = None) -> UncoveredResult:
    wanted = set(queries) if queries else None
    found: list[UncoveredPassage] = []
    ungraded: dict[str, list[str]] = {}
    for qid in sorted(set(table.by_doc) | set(qrels)):
        if wanted is not None and qid not in wanted:
            continue
        graded = table.by_doc.get(qid, {})
        for doc, label in qrels.get(qid, {}).items():
            if not judged_relevant(label, relevant_min):
                continue
            grades = graded.get(doc)
            if not grades:
                ungraded.setdefault(qid, []).append(doc)
                continue
            if any(covers(g, min_grade) for g in grades.values()):
                continue
            parsed = [(g.grade, item) for item, g in grades.items() if g.parse_ok and g.grade is not None]
            best = min(parsed, key=lambda t: (-t[0], t[1])) if parsed else None
            found.append(UncoveredPassage(qid, doc, label, best[0] if best else None,
                                          best[1] if best else None, len(grades)))
    found.sort(key=lambda p: (p.query_id, -p.label, p.doc_id))
    for docs in ungraded.values():
        docs.sort()
    return UncoveredResult(found, ungraded)


def write_uncovered_tsv(res: UncoveredResult, out: IO[str], bank: dict, texts: dict) -> None:
    out.write("query_id\tdoc_id\tjudgment\tmax_grade\titems_graded\tbest_item\tpassage_text\n")
    for p in res.passages:
        out.write(f"{p.query_id}\t{p.doc_id}\t{p.label}\t{'-' if p.max_grade is None else p.max_grade}"
                  f"\t{p.items_graded}\t{p.best_item or '-'}\t{one_line(texts.get((p.query_id, p.doc_id), ''))}\n")


def write_uncovered_text(res: UncoveredResult, out: IO[str], bank: dict, texts: dict) -> None:
    current = None
    for p in res.passages:
        if p.query_id != current:
            if current is not None:
                out.write("\n")
            out.write(f"== query {p.query_id}\n")
            current = p.query_id
        best = "unparsed" if p.max_grade is None else str(p.max_grade)
        out.write(f"  {p.doc_id}  (judged: {p.label}, best grade: {best}"
                  + (f" for: {one_line(item_label(p.best_item, bank))}" if p.best_item else "") + ")\n")
        text = one_line(texts.get((p.query_id, p.doc_id), ""))
        if text:
            out.write(f"      {text}\n")
