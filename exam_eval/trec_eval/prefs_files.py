"""Preference judgments (trec_eval -R prefs and -R qrels_prefs).

prefs:       ``qid jg jsg docno rel_level`` (get_prefs.c): judgment group (a user),
             judgment sub-group, and a level that only orders the documents of a
             sub-group (0 meaning non-relevant).
qrels_prefs: an ordinary qrels file read as prefs (get_qrels_prefs.c): the iteration
             field is the judgment group, every line in sub-group "0".
Levels are read with atof into C floats (single precision), as trec_eval stores them;
every line must have exactly its fields (a blank line is malformed, as in qrels).
"""

from __future__ import annotations

import os

from ..errors import InputError
from .c_numbers import c_float, exact_fields, strict_number
from ..io.openers import display_name

Pref = tuple[str, str, float, str]        # (jg, jsg, rel_level, docno)
Prefs = dict[str, list[Pref]]             # qid -> its preference lines


def _read(path: str | os.PathLike, with_jsg: bool) -> Prefs:
    name = display_name(path)
    shape = "qid jg jsg docno rel_level" if with_jsg else "qid jg docno rel_level"
    out: Prefs = {}
    for lineno, fields in exact_fields(path, shape, "get_prefs" if with_jsg else "get_qrels_prefs"):
        if with_jsg:
            qid, jg, jsg, docno, level = fields
        else:
            (qid, jg, docno, level), jsg = fields, "0"
        value = c_float(strict_number(level, "rel_level", name, lineno, finite=False))
        if value != value:
            raise InputError(f"rel_level {level!r} is not a number (trec_eval's ordering of NaN levels is undefined)",
                             name, lineno)
        out.setdefault(qid, []).append((jg, jsg, value, docno))
    if not out:
        raise InputError("preference file is empty (trec_eval: Cannot read prefs file)", name)
    return out


def read_prefs(path: str | os.PathLike) -> Prefs:
    return _read(path, with_jsg=True)


def read_qrels_prefs(path: str | os.PathLike) -> Prefs:
    return _read(path, with_jsg=False)
