"""Relevance labels from whatever the user has (a qrels file, an ir_datasets ID, or
grades, sniffed by exam_eval.io.label_sources): grades become labels as exam-qrels makes them."""

from __future__ import annotations

from ..errors import InputError
from ..grading.grade_files import read_grades
from ..io.irds import irds_qrels
from ..io.label_sources import looks_like_grades, refuse_unused_grade_options, sniff_labels
from ..io.openers import display_name
from ..trec_eval.trec_files import Qrels, read_qrels
from .bank_filter import BankFilterStats, current_grades
from .exam_qrels import LabelStats, grades_to_qrels


def load_labels(spec: str, *, label: str = "max", min_grade: int | None = None,
                model: str | None = None, prompt: str | None = None, kind: str | None = None,
                bank_items=None, log=None) -> Qrels:
    """Qrels from a qrels file, an ir_datasets ID, or grades.

    With ``bank_items`` (the bank's items, as ``bank_filter.read_current_bank`` reads them), only
    grades of those items' current texts are used: the grades file is append-only, so
    after a bank edit it still holds grades of deleted and of edited questions (see
    :mod:`exam_eval.measures.bank_filter`). Direct relevance grades (no item) are kept.
    """
    what = sniff_labels(spec)
    if what == "irds":
        return irds_qrels(spec)
    if what == "qrels":
        return read_qrels(spec)
    grades = read_grades(spec, model=model, prompt=prompt, kind=kind)
    dropped = BankFilterStats()
    if bank_items is not None:
        grades = current_grades(grades, bank_items, dropped)
        if not grades:  # the refusal is the one line, so it says why
            raise InputError(f"no grade is of an item of the bank as it is now ({dropped.not_in_bank} of items "
                             f"not in it, {dropped.stale} of an edited item's older text)", spec)
    stats = LabelStats()
    qrels = grades_to_qrels(grades, label=label, min_grade=min_grade, stats=stats)
    if not qrels:
        raise InputError(f"no passage has a parsed grade ({stats.unparsed_grades} unparsed grades)", spec)
    for notice in dropped.notices(spec) if log is not None else ():
        log(notice)
    if stats.unparsed_grades and log is not None:
        log(f"{spec}: {stats.unparsed_grades} unparsed grades ignored; "
            f"{stats.unlabelled} passages had no parsed grade and get no label")
    if label != "max" and min_grade is not None and stats.top_grade is not None and min_grade > stats.top_grade \
            and log is not None:  # every label 0: most likely a threshold on another scale
        log(f"{spec}: no grade reaches --min-grade {min_grade} (the highest is {stats.top_grade}): every label is 0")
    return qrels


def read_llm_qrels(path: str, model, prompt, kind, log) -> Qrels:
    """An LLM side of a comparison: qrels, or grades read as labels (the maximum grade over
    a query's items), as exam-correlate reads them."""
    if not looks_like_grades(path):
        refuse_unused_grade_options(path, "a qrels file", {"--model": model, "--prompt": prompt, "--kind": kind})
        return read_qrels(path)
    stats = LabelStats()
    qrels = grades_to_qrels(read_grades(path, model=model, prompt=prompt, kind=kind), label="max", stats=stats)
    if not qrels:
        raise InputError(f"no passage has a parsed grade ({stats.unparsed_grades} unparsed grades)", display_name(path))
    if stats.unlabelled or stats.unparsed_grades:
        log(f"{display_name(path)}: {stats.unparsed_grades} unparsed grade(s) ignored; "
            f"{stats.unlabelled} passage(s) without any parsed grade left unlabelled")
    return qrels


def read_human_qrels(spec: str) -> Qrels:
    """Human judgments: a qrels file or an ir_datasets ID, resolved as exam-qrels does
    (an existing path first, then an ID)."""
    if spec == "-":
        return read_qrels(spec)
    what = sniff_labels(spec)
    if what == "irds":
        return irds_qrels(spec)
    if what == "grades":
        raise InputError("human judgments must be a qrels file or an ir_datasets ID, not grades", display_name(spec))
    return read_qrels(spec)
