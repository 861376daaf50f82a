"""Judgment-group qrels (trec_eval -R qrels_jg): ``qid jg docno label``.

As get_qrels_jg.c reads them: four whitespace-separated fields (no blank lines), the
second naming the judgment group (the user who judged) where plain qrels have an
ignored iteration field; a label is read with atol; a document judged twice by one
group is an error.
"""

from __future__ import annotations

import os

from ..errors import InputError
from .c_numbers import checked_label, exact_fields
from ..io.openers import display_name

QrelsJG = dict[str, dict[str, dict[str, int]]]    # qid -> judgment group -> docno -> label


def read_qrels_jg(path: str | os.PathLike) -> QrelsJG:
    name = display_name(path)
    out: QrelsJG = {}
    where: dict[tuple[str, str, str], int] = {}
    for lineno, (qid, jg, docno, label) in exact_fields(path, "qid jg docno label", "get_qrels_jg"):
        key = (qid, jg, docno)
        if key in where:
            raise InputError(f"duplicate judgment of {docno} for query {qid} by group {jg} "
                             f"(first on line {where[key]})", name, lineno)
        where[key] = lineno
        out.setdefault(qid, {}).setdefault(jg, {})[docno] = checked_label(label, name, lineno)
    if not out:
        raise InputError("qrels_jg file is empty (trec_eval: Cannot read qrels file)", name)
    return out
