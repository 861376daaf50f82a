"""Judgment-group qrels (trec_eval -R qrels_jg): ``qid jg docno label``.

As get_qrels_jg.c reads them: four whitespace-separated fields (no blank lines), the
second naming the judgment group (the user who judged) where plain qrels have an
ignored iteration field; a label is read with atol; a document judged twice by one
group is an error.
"""

from __future__ import annotations

import os

from ..errors import InputError
from .c_numbers import c_atol
from .openers import display_name, iter_lines

QrelsJG = dict[str, dict[str, dict[str, int]]]    # qid -> judgment group -> docno -> label


def read_qrels_jg(path: str | os.PathLike) -> QrelsJG:
    name = display_name(path)
    out: QrelsJG = {}
    where: dict[tuple[str, str, str], int] = {}
    for lineno, line in iter_lines(path):
        fields = line.split()
        if len(fields) != 4:
            raise InputError(f"expected 4 fields 'qid jg docno label', found {len(fields)} "
                             "(trec_eval.get_qrels_jg: Malformed line)", name, lineno)
        qid, jg, docno, label = fields
        key = (qid, jg, docno)
        if key in where:
            raise InputError(f"duplicate judgment of {docno} for query {qid} by group {jg} "
                             f"(first on line {where[key]})", name, lineno)
        where[key] = lineno
        out.setdefault(qid, {}).setdefault(jg, {})[docno] = c_atol(label)
    if not out:
        raise InputError("qrels_jg file is empty (trec_eval: Cannot read qrels file)", name)
    return out
