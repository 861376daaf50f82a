"""Nugget banks in the formats RAG tracks exchange, read into and written from BankItems.

**Nuggetizer** (castorini/nuggetizer, the AutoNuggetizer of the TREC 2024 RAG track):
JSONL, one line per topic::

    {"qid": "q1", "query": "What is Python?",
     "nuggets": [{"text": "Python is a programming language", "importance": "vital"}, ...]}

(an assignment output adds ``"assignment"`` to each nugget; it is ignored here). The
nuggets have no ids: on reading, each gets ours, ``qid/md5(text.strip())``, so grades of
an unchanged nugget stay attached.

**AutoJudge NuggetBank v3** (trec-auto-judge/auto-judge-base, ``autojudge_base.nugget_data``):
JSONL, one ``NuggetBank`` per topic::

    {"query_id": "q1", "title_query": "...", "format_version": "v3",
     "nugget_bank": {"<question text>": {"question": ..., "question_id": ..., "query_id": ...,
                                          "answers": {"<answer>": {"answer": ...}}, "importance": ...}},
     "claim_bank": {"<claim text>": {"claim": ..., "claim_id": ..., "query_id": ..., "importance": ...}}}

Questions become ``question`` items (answers kept as answer keys), claims ``nugget``
items. Ids are kept as written; where one is missing it is computed as AutoJudge does
(md5 of the text, no query prefix), so both tools name the item alike. The list form of
``nugget_bank``/``claim_bank`` (submission files) is read too. An importance other than
vital/okay (AutoJudge allows any int or string) is kept in ``extra["importance"]``.

Writing: :func:`write_nuggetizer_bank` and :func:`write_autojudge_bank`; item ids survive
an AutoJudge round trip (they are its question_id/claim_id), and a nuggetizer round trip
whenever the ids follow our md5 rule. :func:`write_assignment_lines` writes report
assignments as the nuggetizer's assign step does (its ``nuggetizer metrics`` and
``calculate_nugget_scores`` read them).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator, Mapping

from ..errors import InputError
from .bank_items import IMPORTANCE, BankItem, make_item_id
from .jsonl import dumps, json_id
from .outputs import atomic_output

FORMATS = ("ours", "nuggetizer", "autojudge")


def _importance_of(value, name: str, lineno: int, *, strict: bool) -> tuple[str | None, dict]:
    if value is None:
        return None, {}
    if isinstance(value, str) and value.strip().lower() in IMPORTANCE:
        return value.strip().lower(), {}
    if strict:
        raise InputError(f"importance must be 'vital' or 'okay', got {value!r}", name, lineno)
    return None, {"importance": value}


def _text(obj: dict, key: str, name: str, lineno: int) -> str:
    text = obj.get(key)
    if text is not None and not isinstance(text, str):
        raise InputError(f"{key!r} must be a string, got {type(text).__name__}", name, lineno)
    if text is None or not text.strip():
        raise InputError(f"nugget without {key!r} text", name, lineno)
    return text


def _from_nuggetizer(obj: dict, name: str, lineno: int) -> Iterator[BankItem]:
    qid = obj.get("qid", obj.get("query_id"))
    if qid is None:
        raise InputError("nuggetizer line without 'qid'", name, lineno)
    qid = json_id(qid, "qid", name, lineno)
    nuggets = obj.get("nuggets")
    if not isinstance(nuggets, list):
        raise InputError("'nuggets' must be a list", name, lineno)
    for n in nuggets:
        if isinstance(n, str):  # create output without scores: plain strings
            n = {"text": n}
        if not isinstance(n, dict):
            raise InputError("a nugget must be an object or a string", name, lineno)
        text = _text(n, "text", name, lineno)
        importance, extra = _importance_of(n.get("importance"), name, lineno, strict=True)
        if isinstance(obj.get("query"), str) and obj["query"].strip():
            extra["query_text"] = obj["query"]
        yield BankItem(str(qid), make_item_id(str(qid), text), "nugget", text, importance=importance, extra=extra)


def _answers(value) -> list[str] | None:
    if value is None:
        return None
    entries = value.values() if isinstance(value, dict) else value
    out = []
    for a in entries if isinstance(entries, Iterable) and not isinstance(entries, str) else [entries]:
        text = a.get("answer") if isinstance(a, dict) else a
        if isinstance(text, str) and text.strip():
            out.append(text)
    return out or None


def _from_autojudge(obj: dict, name: str, lineno: int) -> Iterator[BankItem]:
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        raise InputError("NuggetBank 'metadata' must be an object", name, lineno)
    qid = obj.get("query_id") or meta.get("topic_id") or meta.get("query_id")
    if qid is None:
        raise InputError("NuggetBank without 'query_id'", name, lineno)
    qid = json_id(qid, "query_id", name, lineno)
    for bank_key, kind, text_key, id_key in (("nugget_bank", "question", "question", "question_id"),
                                              ("claim_bank", "nugget", "claim", "claim_id")):
        bank = obj.get(bank_key)
        if bank is None:
            continue
        if isinstance(bank, dict):
            entries = list(bank.values())
        elif isinstance(bank, list):
            entries = bank
        else:
            raise InputError(f"'{bank_key}' must be an object or a list", name, lineno)
        for entry in entries:
            if not isinstance(entry, dict):
                raise InputError(f"'{bank_key}' entry is not an object", name, lineno)
            text = _text(entry, text_key, name, lineno)
            item_id = entry.get(id_key) or hashlib.md5(text.encode("utf-8")).hexdigest()
            item_id = json_id(item_id, id_key, name, lineno, trec=False)
            importance, extra = _importance_of(entry.get("importance"), name, lineno, strict=False)
            if isinstance(obj.get("title_query"), str) and obj["title_query"].strip():
                extra["query_text"] = obj["title_query"]
            answers = _answers(entry.get("answers")) if kind == "question" else None
            yield BankItem(json_id(entry.get("query_id") or qid, "query_id", name, lineno), item_id, kind, text, None, answers,
                           extra, importance=importance)


def items_from_track_bank(obj: dict, name: str, lineno: int) -> Iterator[BankItem]:
    """One line of a nuggetizer or AutoJudge bank (see the module docstring)."""
    if "nugget_bank" in obj or "claim_bank" in obj:
        yield from _from_autojudge(obj, name, lineno)
    else:
        yield from _from_nuggetizer(obj, name, lineno)


def query_texts(items: Iterable[BankItem], queries: Mapping[str, str] | None = None) -> dict[str, str]:
    """Query text per topic: the text the bank's items carry (``query_text``: a workbench
    line's, a nuggetizer "query", an AutoJudge "title_query", a bank made by exam-genq
    nuggetize), else the given ``queries`` (--topics fills in only what is missing)."""
    out = dict(queries or {})
    out.update((i.query_id, i.extra["query_text"]) for i in items
               if isinstance(i.extra.get("query_text"), str) and i.extra["query_text"].strip())
    return out


def _by_query(items: Iterable[BankItem]) -> dict[str, list[BankItem]]:
    out: dict[str, list[BankItem]] = {}
    for item in items:
        out.setdefault(item.query_id, []).append(item)
    return out


def write_nuggetizer_bank(items: Iterable[BankItem], path: str | os.PathLike | None,
                          queries: Mapping[str, str] | None = None, default_importance: str = "vital") -> int:
    """One nuggetizer line per topic (every item becomes a nugget text); returns the lines."""
    items = list(items)
    queries = query_texts(items, queries)
    n = 0
    with atomic_output(path) as out:
        for qid, group in _by_query(items).items():
            nuggets = [{"text": i.text, "importance": i.importance or default_importance} for i in group]
            out.write(dumps({"qid": qid, "query": queries.get(qid, ""), "nuggets": nuggets}) + "\n")
            n += 1
    return n


def write_autojudge_bank(items: Iterable[BankItem], path: str | os.PathLike | None,
                         queries: Mapping[str, str] | None = None) -> int:
    """One AutoJudge NuggetBank (v3) line per topic: questions in nugget_bank, nuggets
    (claims) in claim_bank; returns the lines."""
    items = list(items)
    queries = query_texts(items, queries)
    n = 0
    with atomic_output(path) as out:
        for qid, group in _by_query(items).items():
            bank: dict = {"query_id": qid}
            if queries.get(qid):
                bank["title_query"] = queries[qid]
            bank["format_version"] = "v3"
            questions: dict = {}
            claims: dict = {}
            for i in group:
                if i.kind == "question":
                    entry = {"question": i.text, "question_id": i.item_id, "query_id": qid}
                    if i.answers:
                        entry["answers"] = {a: {"answer": a} for a in i.answers}
                    target = questions
                else:
                    entry = {"claim": i.text, "claim_id": i.item_id, "query_id": qid}
                    target = claims
                if i.importance is not None:
                    entry["importance"] = i.importance
                target.setdefault(i.text, entry)
            if questions:
                bank["nugget_bank"] = questions
            if claims:
                bank["claim_bank"] = claims
            out.write(dumps(bank) + "\n")
            n += 1
    return n


ASSIGNMENT_LABELS = ("not_support", "partial_support", "support")


def write_assignment_lines(assignments, items: Mapping[str, list[BankItem]], out,
                           default_importance: str = "vital") -> int:
    """One line per report into the open text stream ``out``, the nuggetizer's assign
    output: ``{"qid", "run_id", "nuggets": [{"text", "importance", "assignment"}]}``
    (``assignments``: measures.nugget_scores.Assignment). Returns the lines written."""
    n = 0
    for a in assignments:
        nuggets = [{"text": i.text, "importance": i.importance or default_importance,
                    "assignment": ASSIGNMENT_LABELS[a.levels[i.item_id]]} for i in items[a.topic_id]]
        out.write(dumps({"qid": a.topic_id, "run_id": a.run_id, "nuggets": nuggets}) + "\n")
        n += 1
    return n
