"""Spurious bank items: items that reach grade >= tau on many passages a human judged
non-relevant. They make false-positive labels and should be removed or reworded."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO

from ..trec_eval.trec_files import Qrels
from .table import (
    GradeTable,
    covers,
    item_label,
    judged_nonrelevant,
    judged_relevant,
    one_line,
)


@dataclass
class SpuriousItem:
    query_id: str
    item_id: str
    nonrel_hits: int      # judged non-relevant passages graded >= tau
    nonrel_graded: int    # judged non-relevant passages graded at all (parsed)
    rel_hits: int
    rel_graded: int
    unjudged_hits: int

    @property
    def precision(self) -> float | None:
        """Of the judged passages this item covers, the fraction judged relevant."""
        judged = self.nonrel_hits + self.rel_hits
        return self.rel_hits / judged if judged else None


def spurious_items(table: GradeTable, qrels: Qrels, *, min_grade: int, relevant_min: int,
                   top: int | None = None, min_count: int = 1,
                   queries: Iterable[str] | None = None) -> list[SpuriousItem]:
    """Per query, items with at least ``min_count`` non-relevant hits, most hits first."""
    wanted = set(queries) if queries else None
    out: list[SpuriousItem] = []
    for qid in table.queries():
        if wanted is not None and qid not in wanted:
            continue
        labels = qrels.get(qid, {})
        found = []
        for item_id, docs in table.by_item[qid].items():
            s = SpuriousItem(qid, item_id, 0, 0, 0, 0, 0)
            for doc, g in docs.items():
                if not g.parse_ok:
                    continue
                label = labels.get(doc)
                hit = covers(g, min_grade)
                if judged_nonrelevant(label, relevant_min):
                    s.nonrel_graded += 1
                    s.nonrel_hits += hit
                elif judged_relevant(label, relevant_min):
                    s.rel_graded += 1
                    s.rel_hits += hit
                elif label is None:
                    s.unjudged_hits += hit
            if s.nonrel_hits >= min_count:
                found.append(s)
        found.sort(key=lambda s: (-s.nonrel_hits, s.item_id))
        out.extend(found[:top] if top else found)
    return out


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}"


def write_spurious_tsv(rows: list[SpuriousItem], out: IO[str], bank: dict) -> None:
    out.write("query_id\titem_id\tnonrel_hits\tnonrel_graded\trel_hits\trel_graded\tunjudged_hits\tprecision\titem_text\n")
    for s in rows:
        out.write(f"{s.query_id}\t{s.item_id}\t{s.nonrel_hits}\t{s.nonrel_graded}\t{s.rel_hits}\t{s.rel_graded}"
                  f"\t{s.unjudged_hits}\t{_fmt(s.precision)}\t{one_line(item_label(s.item_id, bank))}\n")


def write_spurious_text(rows: list[SpuriousItem], out: IO[str], bank: dict) -> None:
    """The paper's listing: ``(count) item text`` grouped by query."""
    current = None
    for s in rows:
        if s.query_id != current:
            if current is not None:
                out.write("\n")
            out.write(f"== query {s.query_id}\n")
            current = s.query_id
        out.write(f"  ({s.nonrel_hits}) {one_line(item_label(s.item_id, bank))}"
                  f"   [relevant hits {s.rel_hits}, precision {_fmt(s.precision)}; {s.item_id}]\n")
