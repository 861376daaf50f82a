"""Passage texts: JSONL ``{"doc_id","text"}`` (optional ``query_id``; the id may also be
``docno``, as in TIRA/ir_datasets local corpora such as the AutoJudge spot-check data),
TSV ``doc_id<TAB>text``, or an ir_datasets ID (its docs_store)."""

from __future__ import annotations

import os

from ..errors import InputError
from .irds import irds_docs, looks_like_irds_id, refuse_unknown_id
from .jsonl import iter_jsonl, json_id, require_fields
from .openers import display_name, iter_lines


def _first_char(path) -> str:
    for _, line in iter_lines(path):
        if line.strip():
            return line.lstrip()[0]
    return ""


def read_passages(spec: str | os.PathLike, wanted: set[str] | None = None) -> dict[str, str]:
    """doc_id -> text, optionally only the ``wanted`` ids (saves memory on big files).

    The same doc_id twice with different texts is an error; the same text twice (one
    passage judged for several queries) is fine.
    """
    spec_s = str(spec)
    # an existing path wins over an ID of the same name (looks_like_irds_id checks)
    if looks_like_irds_id(spec_s):
        return irds_docs(spec_s, wanted)
    refuse_unknown_id(spec_s)
    name = display_name(spec)
    out: dict[str, str] = {}
    where: dict[str, int] = {}
    lines = 0

    def add(doc_id: str, text, lineno: int) -> None:
        nonlocal lines
        lines += 1
        if not isinstance(text, str):
            raise InputError(f"text of {doc_id} is not a string", name, lineno)
        if wanted is not None and doc_id not in wanted:
            return
        if doc_id in out and out[doc_id] != text:
            raise InputError(f"doc_id {doc_id} has a different text on line {where[doc_id]}", name, lineno)
        out[doc_id] = text
        where.setdefault(doc_id, lineno)

    if spec_s != "-" and _first_char(spec) == "{":
        for lineno, obj in iter_jsonl(spec):
            if isinstance(obj, dict) and "doc_id" not in obj and "docno" in obj:
                obj = dict(obj, doc_id=obj["docno"])
            require_fields(obj, ("doc_id", "text"), name, lineno)
            add(json_id(obj["doc_id"], "doc_id", name, lineno), obj["text"], lineno)
    else:
        for lineno, line in iter_lines(spec):
            if not line.strip():
                continue
            if "\t" not in line:
                if spec_s == "-" and line.lstrip().startswith("{"):  # the JSONL sniff reads the input twice
                    raise InputError("JSONL passages cannot be read from stdin (the format is sniffed); "
                                     "pass a file, or TSV on stdin", name, lineno)
                raise InputError("expected 'doc_id<TAB>text' or a JSON object", name, lineno)
            doc_id, text = line.split("\t", 1)
            add(doc_id.strip(), text, lineno)
    if not lines:  # an empty file gave every passage "no text" without a word on the file
        raise InputError("no passages: the file is empty", name)
    return out
