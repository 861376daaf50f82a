"""The graded data the oversight analyses share: grades indexed by query, item and
passage, plus the texts a human needs to read them (item texts, passage texts)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import InputError, UsageError
from ..io.banks import read_bank
from ..io.bank_items import BankItem
from ..grading.grade_files import read_grades
from ..io.grades import Grade
from ..io.jsonl import iter_jsonl
from ..io.openers import display_name
from ..io.passages import read_passages

DEFAULT_MIN_GRADE = 4      # tau of the EXAM and workbench papers
DEFAULT_RELEVANT_MIN = 1   # TREC DL uses 2 (graded 0-3 labels); say so on the command line


@dataclass
class GradeTable:
    """Item-level grades (direct relevance grades, item_id None, are not about a bank)."""

    # query -> item -> doc -> Grade
    by_item: dict[str, dict[str, dict[str, Grade]]] = field(default_factory=dict)
    # query -> doc -> item -> Grade
    by_doc: dict[str, dict[str, dict[str, Grade]]] = field(default_factory=dict)
    unparsed: int = 0
    total: int = 0

    @classmethod
    def from_grades(cls, grades: Iterable[Grade]) -> GradeTable:
        table = cls()
        for g in grades:
            if g.item_id is None:
                continue
            table.total += 1
            table.unparsed += not g.parse_ok
            table.by_item.setdefault(g.query_id, {}).setdefault(g.item_id, {})[g.doc_id] = g
            table.by_doc.setdefault(g.query_id, {}).setdefault(g.doc_id, {})[g.item_id] = g
        return table

    def queries(self) -> list[str]:
        return sorted(self.by_item)

    def items(self, qid: str) -> list[str]:
        return sorted(self.by_item.get(qid, {}))


def extracted_answers(paths, prompt: str, model: str | None = None) -> dict[tuple[str, str, str], str]:
    """(query, doc, item) -> answer of an extraction prompt, to show beside the grades of
    a rating prompt: the workbench's "informational answer extraction"."""
    out = {}
    for g in read_grades(paths, prompt=prompt, model=model):
        if g.item_id is not None and g.answer is not None:
            out[(g.query_id, g.doc_id, g.item_id)] = g.answer
    return out


def covers(g: Grade | None, min_grade: int) -> bool:
    """An unparsed grade never counts: it is a failure, not a zero or a hit."""
    return g is not None and g.parse_ok and g.grade is not None and g.grade >= min_grade


def judged_relevant(label: int | None, relevant_min: int) -> bool:
    return label is not None and label >= relevant_min


def judged_nonrelevant(label: int | None, relevant_min: int) -> bool:
    # negative labels are trec_eval's "judged as unjudged": neither relevant nor not
    return label is not None and 0 <= label < relevant_min


def load_bank(path: str | os.PathLike | None) -> dict[str, BankItem]:
    if path is None:
        return {}
    out: dict[str, BankItem] = {}
    for item in read_bank(path):  # ids are unique per query; here they key items alone
        first = out.setdefault(item.item_id, item)
        if first.text != item.text:
            raise InputError(f"item_id {item.item_id} names different texts in queries {first.query_id} and "
                             f"{item.query_id}; exam-verify needs ids unique across queries", display_name(path))
    return out


def embedded_texts(paths: Iterable[str | os.PathLike]) -> dict[tuple[str, str], str]:
    """Passage texts carried by the workbench's graded runs-with-text files.

    Our own grades JSONL has no texts; reading stops at its first line.
    """
    texts: dict[tuple[str, str], str] = {}
    for path in paths:
        for _, obj in iter_jsonl(path):
            if not isinstance(obj, list):
                break
            if len(obj) != 2 or not isinstance(obj[1], list):
                continue  # read_grades already reported malformed lines
            qid = str(obj[0])
            for para in obj[1]:
                if isinstance(para, dict) and isinstance(para.get("text"), str):
                    texts[(qid, str(para.get("paragraph_id")))] = para["text"]
    return texts


def passage_texts(grade_paths: Iterable[str | os.PathLike], passages: str | None,
                  wanted: set[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(query, doc) -> text: embedded texts first, then ``--passages`` for the rest."""
    texts = embedded_texts(grade_paths)
    missing = {doc for qid, doc in wanted if (qid, doc) not in texts}
    if passages and missing:
        found = read_passages(passages, wanted=missing)
        for qid, doc in wanted:
            if (qid, doc) not in texts and doc in found:
                texts[(qid, doc)] = found[doc]
    return texts


def item_label(item_id: str, bank: dict[str, BankItem]) -> str:
    item = bank.get(item_id)
    return item.text if item is not None else item_id


def check_bank_matches(table: GradeTable, bank: dict[str, BankItem], bank_path) -> None:
    """A bank that shares no item with the grades is almost surely the wrong file."""
    if not bank:
        return
    graded = {i for q in table.by_item.values() for i in q}
    if graded and not graded & set(bank):
        raise InputError("no item of this bank occurs in the grades (wrong bank file?)",
                         display_name(bank_path))


def one_line(text: str) -> str:
    """Tabs and newlines would break a TSV row; collapse all whitespace runs."""
    return " ".join(str(text).split())


def load_grade_table(grades_path, model, prompt, kind, bank_path, queries=()):
    """The grades as a GradeTable, and the bank (item id -> item) they must match. A
    query of ``queries`` (-q) that the grades lack is refused: its empty table, exit 0,
    reads as "nothing to see" where the id was mistyped."""
    grades = read_grades(grades_path, model=model, prompt=prompt, kind=kind)
    table = GradeTable.from_grades(grades)
    if not table.by_item:
        raise InputError("no grades of bank items (only direct relevance grades?)", grades_path)
    missing = [q for q in queries if q not in table.by_item]
    if missing:
        shown = ", ".join(table.queries()[:5])
        raise UsageError(f"-q {missing[0]}: {display_name(grades_path)} holds no grades of that query "
                         f"(its queries: {shown}{' ...' if len(table.by_item) > 5 else ''})")
    bank = load_bank(bank_path)
    check_bank_matches(table, bank, bank_path)
    return table, bank


def extraction_answers(grades_path, prompt, path):
    """--extraction-prompt's answers from ``path`` (default: the grades file), or None."""
    if prompt is None:
        if path is not None:
            raise UsageError("--extraction-grades needs --extraction-prompt")
        return None
    return extracted_answers(path or grades_path, prompt)
