"""Relevance labels from whatever the user has: a qrels file, an ir_datasets ID, or a
grades file (ours or the workbench's), sniffed by content, not by name."""

from __future__ import annotations

import os
import sys

from ..errors import InputError
from .grades import read_grades
from .irds import irds_qrels, looks_like_irds_id
from .openers import display_name, iter_lines
from .trec import Qrels, read_qrels


def sniff_labels(spec: str) -> str:
    """'grades', 'qrels' or 'irds'."""
    if spec != "-" and not os.path.exists(spec):
        if looks_like_irds_id(spec):
            return "irds"
        raise InputError("no such file (and not an ir_datasets ID such as msmarco-passage/trec-dl-2019/judged)", spec)
    if spec == "-":
        raise InputError("labels cannot be read from stdin (the format is sniffed); pass a file", display_name(spec))
    for _, line in iter_lines(spec):
        s = line.lstrip()
        if s:
            return "grades" if s[0] in "{[" else "qrels"
    raise InputError("file is empty", spec)


def load_labels(spec: str, *, label: str = "max", min_grade: int | None = None,
                model: str | None = None, prompt: str | None = None, kind: str | None = None,
                bank_items=None, log=None) -> Qrels:
    """Qrels from a qrels file, an ir_datasets ID, or grades.

    With ``bank_items`` (the bank's items, read with ``keep_edited_ids=True``), only
    grades of those items' current texts are used: the grades file is append-only, so
    after a bank edit it still holds grades of deleted and of edited questions (see
    :mod:`exam_eval.measures.bank_filter`). Direct relevance grades (no item) are kept.
    """
    from ..measures.exam_qrels import LabelStats, grades_to_qrels

    what = sniff_labels(spec)
    if what == "irds":
        return irds_qrels(spec)
    if what == "qrels":
        return read_qrels(spec)
    grades = read_grades(spec, model=model, prompt=prompt, kind=kind)
    if bank_items is not None:
        from ..measures.bank_filter import BankFilterStats, current_grades

        dropped = BankFilterStats()
        grades = current_grades(grades, bank_items, dropped)
        for notice in dropped.notices(spec) if log is not None else ():
            log(notice)
    stats = LabelStats()
    qrels = grades_to_qrels(grades, label=label, min_grade=min_grade, stats=stats)
    if stats.unparsed_grades and log is not None:
        log(f"{spec}: {stats.unparsed_grades} unparsed grades ignored; "
            f"{stats.unlabelled} passages had no parsed grade and get no label")
    if not qrels:
        raise InputError("no passage has a parsed grade", spec)
    return qrels


def stderr_log(prog: str):
    return lambda msg: print(f"{prog}: {msg}", file=sys.stderr)
