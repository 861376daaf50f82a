"""Keep only the grades that belong to a bank as it is now (``--bank`` of exam-qrels and
exam-cover).

The grades file is append-only, so after a human edits the bank it still holds grades of
deleted items and grades of the old text of edited items. A grade is current when

- its item is in the bank, under the id in the bank file or, for an item whose text no
  longer matches that id, under the id of the new text (what exam-grade gives it by
  default; ``--keep-edited-ids`` keeps the old one), and
- it was given for the item's current text: its ``item_hash`` equals md5(text.strip()).
  A line without ``item_hash`` (written before grade lines carried it, or the
  workbench's graded files) is taken as current unless the item's text is known to have
  changed under its id.

Two items may answer to one id (a human swapped two texts, or copied a line and edited
the copy, leaving the ids): a grade belongs to the one whose text it was given for.

Kept grades carry the item's one id (the new-text id for an edited item), one grade per
pair and grader (the last line's), so EXAM-Cover and ``--label count`` count an edited
item once whichever id, or ids, it was graded under. Direct relevance grades (no
item) are kept.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterable

from ..io.bank_items import BankItem
from ..io.banks import BankReport, read_bank, read_bank_noting_repeats
from ..io.grades import Grade


@dataclass
class BankFilterStats:
    not_in_bank: int = 0
    stale: int = 0  # given for an edited item's old text

    def notices(self, name: str) -> list[str]:
        out = []
        if self.not_in_bank:
            out.append(f"{name}: {self.not_in_bank} grades of items not in the bank left out")
        if self.stale:
            out.append(f"{name}: {self.stale} grades given for an older text of an edited bank item left out "
                       "(regrade with exam-grade to replace them)")
        return out


def effective_ids(items: Iterable[BankItem]) -> dict[str, list[str]]:
    """query_id -> the ids of its items, as :func:`current_grades` names them."""
    out: dict[str, list[str]] = {}
    for item in items:
        out.setdefault(item.query_id, []).append(item.graded_id)
    return out


def read_current_bank(path: str, log, kind: str | None = None) -> list[BankItem]:
    """The bank as :func:`current_grades` takes it: ids as in the file, edits marked, and
    unique as exam-grade grades them (see ``read_bank``'s ``unique_as_graded``)."""
    return read_bank_noting_repeats(path, log, kind=kind, keep_edited_ids=True, unique_as_graded=True)


def _item_of(g: Grade, candidates: list[BankItem]) -> BankItem | None:
    """The item a grade under one of ``candidates``' ids was given for: the one whose text
    it was given for (two items may answer to one id: texts swapped between two lines, or
    a line copied and edited, keep their ids in the file), else None: stale."""
    if g.item_hash is not None:
        return next((i for i in candidates if i.text_hash == g.item_hash), None)
    # a line written before grades carried item_hash: current unless its id's text changed
    return next((i for i in candidates if not i.edited and i.item_id == g.item_id), None)


def current_grades(grades: Iterable[Grade], items: Iterable[BankItem],
                   stats: BankFilterStats | None = None) -> list[Grade]:
    """``items``: the bank as :func:`read_current_bank` reads it."""
    accepted: dict[tuple[str, str], list[BankItem]] = {}
    for item in items:
        accepted.setdefault((item.query_id, item.item_id), []).append(item)
        if item.edited:
            accepted.setdefault((item.query_id, item.graded_id), []).append(item)
    stats = stats if stats is not None else BankFilterStats()
    # by key, the last line winning: an edited item graded under its old id (exam-grade
    # --keep-edited-ids) and under its new one has two current grades of one pair, which
    # the renaming below makes one key, so it is counted once (--label count, EXAM-Cover)
    kept: dict[tuple, Grade] = {}
    for g in grades:
        if g.item_id is None:
            kept.pop(g.key, None)
            kept[g.key] = g
            continue
        candidates = accepted.get((g.query_id, g.item_id))
        if candidates is None:
            stats.not_in_bank += 1
            continue
        item = _item_of(g, candidates)
        if item is None:
            stats.stale += 1
            continue
        eid = item.graded_id
        g = g if g.item_id == eid else dataclasses.replace(g, item_id=eid)
        kept.pop(g.key, None)
        kept[g.key] = g
    return list(kept.values())


def bank_with_current_grades(bank: str, grades: list[Grade], grades_name: str, log,
                             kind: str | None = None) -> tuple[list[BankItem], list[Grade]]:
    """The bank's items under the ids exam-grade grades them by default (an edited item's
    new text's id), and those of ``grades`` that are current for them (exam-nuggets
    score, as exam-cover --bank); the notices on ``log``."""
    report = BankReport()
    items = read_bank(bank, kind=kind, report=report, keep_edited_ids=True, unique_as_graded=True)
    dropped = BankFilterStats()
    kept = current_grades(grades, items, dropped)
    said = BankReport(assigned=report.assigned, repeats=report.repeats)  # edits: said by dropped's notices
    for notice in said.notices(bank) + dropped.notices(grades_name):
        log(notice)
    graded_items = [dataclasses.replace(i, item_id=i.graded_id, edited=False) if i.edited else i for i in items]
    return graded_items, kept
