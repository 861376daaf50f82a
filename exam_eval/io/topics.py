"""Topics (queries): TSV, JSONL, TREC topic files, or an ir_datasets ID.

- TSV: ``qid<TAB>text``
- JSONL: ``{"query_id", "text", "subtopics"?: [{"facet_id", "text"}] | ["text", ...],
  "description"?, "narrative"?}`` (subtopics are CAR-style facets; string facets get ids
  ``f1``, ``f2``...)
- TREC: ``<top><num> Number: 301 <title> ... <desc> ... <narr> ... </top>`` (title used as
  the text; description and narrative kept for the assessors' page)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..errors import InputError
from .irds import irds_queries, looks_like_irds_id, refuse_unknown_id
from .jsonl import iter_jsonl, json_id, require_fields
from .openers import display_name, iter_lines, stdin_as_file


@dataclass
class Topic:
    query_id: str
    text: str
    subtopics: list[tuple[str, str]] = field(default_factory=list)
    #: what a TREC topic says beyond its title: shown to human assessors (exam-verify label)
    description: str = ""
    narrative: str = ""


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
        more = {}
        for key in ("description", "narrative"):
            value = obj.get(key)
            if value is not None and not isinstance(value, str):
                raise InputError(f"'{key}' must be a string", name, lineno)
            more[key] = " ".join((value or "").split())
        topics[qid] = Topic(qid, text.strip(), subs, **more)
    return topics


_TAG = re.compile(r"<(num|title|desc|narr|/top|top)>", re.I)


def _read_trec(path, name) -> dict[str, Topic]:
    topics: dict[str, Topic] = {}
    qid = title = None
    more: dict[str, str] = {}
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
                    more = {"desc": "", "narr": ""}
                    continue
                if tag == "/top":
                    inside = False
                    if not qid or not title:
                        raise InputError("topic without <num> or <title>", name, start)
                    _check_qid(qid, name, start)
                    if qid in topics:
                        raise InputError(f"duplicate query id {qid}", name, start)
                    topics[qid] = Topic(qid, " ".join(title.split()),
                                        description=_after_label(more.get("desc", ""), "Description:"),
                                        narrative=_after_label(more.get("narr", ""), "Narrative:"))
                    field_name = None
                    continue
                field_name = tag
                if tag == "num":
                    qid = rest.replace("Number:", "").strip() or None
                elif tag == "title":
                    title = rest.replace("Topic:", "").strip()
                elif tag in ("desc", "narr"):
                    more[tag] = rest.strip()
                continue
            if field_name == "title" and rest.strip() and not rest.lstrip().startswith("</"):
                title = (title + " " + rest.strip()).strip()
            elif field_name in ("desc", "narr") and rest.strip() and not rest.lstrip().startswith("</"):
                more[field_name] = (more.get(field_name, "") + " " + rest.strip()).strip()
    if inside:  # a cut-off file would otherwise lose its last topic without a word
        raise InputError("<top> without its </top> (a truncated file?)", name, start)
    return topics


def _after_label(text: str, label: str) -> str:
    text = " ".join(text.split())
    return text[len(label):].strip() if text.lower().startswith(label.lower()) else text


def read_topics(spec: str | os.PathLike) -> dict[str, Topic]:
    spec_s = str(spec)
    # an existing path wins over an ID of the same name (looks_like_irds_id checks)
    if looks_like_irds_id(spec_s):
        return {qid: Topic(qid, text, description=desc, narrative=narr)
                for qid, (text, desc, narr) in irds_queries(spec_s, details=True).items()}
    refuse_unknown_id(spec_s)
    name = display_name(spec)
    if spec_s == "-":  # the format is sniffed, then the input read: a copy can be read twice
        with stdin_as_file() as copy:
            return read_topics(copy)
    kind = _sniff(spec)
    if kind == "empty":
        raise InputError("topics file is empty", name)
    topics = {"jsonl": _read_jsonl, "trec": _read_trec, "tsv": _read_tsv}[kind](spec, name)
    if not topics:
        raise InputError("no topics found", name)
    return topics
