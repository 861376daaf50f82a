"""Topics (queries): TSV, JSONL, TREC topic files, or an ir_datasets ID.

- TSV: ``qid<TAB>text``
- JSONL: ``{"query_id", "text", "subtopics"?: [{"facet_id", "text"}] | ["text", ...]}``
  (subtopics are CAR-style facets; string facets get ids ``f1``, ``f2``...)
- TREC: ``<top><num> Number: 301 <title> ... </top>`` (title used as the text)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..errors import InputError
from .irds import irds_queries, looks_like_irds_id
from .jsonl import iter_jsonl, json_id, require_fields
from .openers import display_name, iter_lines


@dataclass
class Topic:
    query_id: str
    text: str
    subtopics: list[tuple[str, str]] = field(default_factory=list)


def _sniff(path) -> str:
    for _, line in iter_lines(path):
        s = line.strip()
        if not s:
            continue
        if s.startswith("{"):
            return "jsonl"
        if s.lower().startswith("<top"):
            return "trec"
        return "tsv"
    return "empty"


def _check_qid(qid: str, name: str, lineno: int) -> None:
    if qid.split() != [qid] or not qid.isprintable():
        raise InputError(f"query id {qid!r} holds white space or control characters (not allowed in TREC files)",
                         name, lineno)


def _read_tsv(path, name) -> dict[str, Topic]:
    topics: dict[str, Topic] = {}
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        if "\t" not in line:
            raise InputError("expected 'qid<TAB>text'", name, lineno)
        qid, text = line.split("\t", 1)
        qid, text = qid.strip(), text.strip()
        if not qid or not text:
            raise InputError("empty query id or text", name, lineno)
        _check_qid(qid, name, lineno)
        if qid in topics:
            raise InputError(f"duplicate query id {qid}", name, lineno)
        topics[qid] = Topic(qid, text)
    return topics


def _read_jsonl(path, name) -> dict[str, Topic]:
    topics: dict[str, Topic] = {}
    for lineno, obj in iter_jsonl(path):
        require_fields(obj, ("query_id", "text"), name, lineno)
        qid, text = json_id(obj["query_id"], "query_id", name, lineno), obj["text"]
        if not isinstance(text, str) or not text.strip():
            raise InputError("empty query text", name, lineno)
        if qid in topics:
            raise InputError(f"duplicate query id {qid}", name, lineno)
        subs: list[tuple[str, str]] = []
        raw = obj.get("subtopics") or []
        if not isinstance(raw, list):
            raise InputError("'subtopics' must be a list", name, lineno)
        for i, s in enumerate(raw, 1):
            if isinstance(s, str):
                subs.append((f"f{i}", s))
            elif isinstance(s, dict) and "text" in s:
                if not isinstance(s["text"], str) or not s["text"].strip():
                    raise InputError(f"subtopic {i}: 'text' must be a non-empty string", name, lineno)
                # a missing or null facet id is numbered like a string facet's (not "None")
                facet = json_id(s.get("facet_id"), "facet_id", name, lineno, trec=False, nullable=True)
                subs.append((f"f{i}" if facet is None else facet, s["text"]))
            else:
                raise InputError("a subtopic must be a string or {\"facet_id\", \"text\"}", name, lineno)
        topics[qid] = Topic(qid, text.strip(), subs)
    return topics


_TAG = re.compile(r"<(num|title|desc|narr|/top|top)>", re.I)


def _read_trec(path, name) -> dict[str, Topic]:
    topics: dict[str, Topic] = {}
    qid = title = None
    field_name = None
    start = 0
    inside = False  # between <top> and </top>
    for lineno, line in iter_lines(path):
        for part in re.split(r"(?=<)", line):
            m = _TAG.match(part)
            rest = part[m.end():] if m else part
            if m:
                tag = m.group(1).lower()
                if tag == "top":
                    qid, title, field_name, start, inside = None, None, None, lineno, True
                    continue
                if tag == "/top":
                    inside = False
                    if not qid or not title:
                        raise InputError("topic without <num> or <title>", name, start)
                    _check_qid(qid, name, start)
                    if qid in topics:
                        raise InputError(f"duplicate query id {qid}", name, start)
                    topics[qid] = Topic(qid, " ".join(title.split()))
                    field_name = None
                    continue
                field_name = tag
                if tag == "num":
                    qid = rest.replace("Number:", "").strip() or None
                elif tag == "title":
                    title = rest.replace("Topic:", "").strip()
                continue
            if field_name == "title" and rest.strip() and not rest.lstrip().startswith("</"):
                title = (title + " " + rest.strip()).strip()
    if inside:  # a cut-off file would otherwise lose its last topic without a word
        raise InputError("<top> without its </top> (a truncated file?)", name, start)
    return topics


def read_topics(spec: str | os.PathLike) -> dict[str, Topic]:
    spec_s = str(spec)
    if spec_s != "-" and not os.path.exists(spec_s) and looks_like_irds_id(spec_s):
        return {qid: Topic(qid, text) for qid, text in irds_queries(spec_s).items()}
    name = display_name(spec)
    if spec_s == "-":  # the format is sniffed, then the input read: a copy can be read twice
        from .openers import stdin_as_file

        with stdin_as_file() as copy:
            return read_topics(copy)
    kind = _sniff(spec)
    if kind == "empty":
        raise InputError("topics file is empty", name)
    topics = {"jsonl": _read_jsonl, "trec": _read_trec, "tsv": _read_tsv}[kind](spec, name)
    if not topics:
        raise InputError("no topics found", name)
    return topics
