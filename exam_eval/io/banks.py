"""Question / nugget banks.

Our format: JSONL, one item per line::

    {"query_id", "item_id", "kind": "question"|"nugget", "text", "facet_id"?, "answers"?}

``item_id = query_id[/facet_id]/md5(text.strip())`` — identical to the reference
workbench, so grades stay attached to a question a human did not change. Readers also
accept the workbench's bank files (one line per query or facet, ``items`` or the old
``questions`` key), converting them on the fly with their ids preserved.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from ..errors import InputError
from .jsonl import dumps, iter_jsonl, require_fields
from .openers import atomic_output, display_name

KINDS = ("question", "nugget")


def make_item_id(query_id: str, text: str, facet_id: str | None = None) -> str:
    digest = hashlib.md5(text.strip().encode("utf-8")).hexdigest()
    prefix = f"{query_id}/{facet_id}" if facet_id else str(query_id)
    return f"{prefix}/{digest}"


@dataclass
class BankItem:
    query_id: str
    item_id: str
    kind: str
    text: str
    facet_id: str | None = None
    answers: list[str] | None = None
    extra: dict = field(default_factory=dict)  # unknown keys, kept so a rewrite loses nothing

    def to_json(self) -> dict:
        obj = {"query_id": self.query_id, "item_id": self.item_id, "kind": self.kind, "text": self.text}
        if self.facet_id is not None:
            obj["facet_id"] = self.facet_id
        if self.answers is not None:
            obj["answers"] = self.answers
        obj.update(self.extra)
        return obj


_OUR_KEYS = {"query_id", "item_id", "kind", "text", "facet_id", "answers"}


def _item_from_ours(obj: dict, name: str, lineno: int) -> BankItem:
    require_fields(obj, ("query_id", "item_id", "kind", "text"), name, lineno)
    if obj["kind"] not in KINDS:
        raise InputError(f"kind must be 'question' or 'nugget', got {obj['kind']!r}", name, lineno)
    if not isinstance(obj["text"], str) or not obj["text"].strip():
        raise InputError("empty item text", name, lineno)
    answers = obj.get("answers")
    if answers is not None:
        if isinstance(answers, str):
            answers = [answers]
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise InputError("'answers' must be a list of strings", name, lineno)
    facet = obj.get("facet_id")
    return BankItem(
        query_id=str(obj["query_id"]),
        item_id=str(obj["item_id"]),
        kind=obj["kind"],
        text=obj["text"],
        facet_id=None if facet is None else str(facet),
        answers=answers,
        extra={k: v for k, v in obj.items() if k not in _OUR_KEYS},
    )


def _items_from_workbench(obj: dict, name: str, lineno: int) -> Iterator[BankItem]:
    """The workbench's per-query line: ``items`` (current) or ``questions`` (old)."""
    entries = obj.get("items") if "items" in obj else obj.get("questions")
    if not isinstance(entries, list):
        raise InputError("workbench bank line without an 'items' or 'questions' list", name, lineno)
    qid = str(obj.get("query_id"))
    facet = obj.get("facet_id")
    for entry in entries:
        if not isinstance(entry, dict):
            raise InputError("workbench bank item is not an object", name, lineno)
        if "question_id" in entry:
            kind, item_id, text = "question", entry.get("question_id"), entry.get("question_text")
        elif "nugget_id" in entry:
            kind, item_id, text = "nugget", entry.get("nugget_id"), entry.get("nugget_text")
        else:
            raise InputError("workbench bank item without question_id or nugget_id", name, lineno)
        if not isinstance(text, str) or item_id is None:
            raise InputError(f"workbench bank item {item_id!r} without text", name, lineno)
        efacet = entry.get("facet_id", facet)
        answers = entry.get("answers") or entry.get("correct")
        if isinstance(answers, str):
            answers = [answers]
        yield BankItem(str(entry.get("query_id", qid)), str(item_id), kind, text,
                       None if efacet is None else str(efacet), answers or None)


def _item_from_tqa(obj: dict, name: str, lineno: int) -> BankItem:
    """One multiple-choice question per line (``qid``, ``question``, ``correct``)."""
    text = obj.get("question")
    if not isinstance(text, str) or not text.strip():
        raise InputError("multiple-choice line without question text", name, lineno)
    correct = obj.get("correct")
    if correct is None and obj.get("choices") and obj.get("correctKey") is not None:
        choices = obj["choices"]
        if isinstance(choices, dict):
            correct = choices.get(obj["correctKey"])
    facet = obj.get("facet_id")
    extra = {}
    if obj.get("choices"):
        extra["choices"] = obj["choices"]
    return BankItem(str(obj["query_id"]), str(obj["qid"]), "question", text,
                    None if facet is None else str(facet), [str(correct)] if correct else None, extra)


def iter_bank(path: str | os.PathLike) -> Iterator[tuple[int, BankItem]]:
    """Items with the line they came from, from any supported bank format."""
    name = display_name(path)
    for lineno, obj in iter_jsonl(path):
        if not isinstance(obj, dict):
            raise InputError("expected a JSON object", name, lineno)
        if "items" in obj or "questions" in obj:
            for item in _items_from_workbench(obj, name, lineno):
                yield lineno, item
        elif "qid" in obj and "question" in obj:
            yield lineno, _item_from_tqa(obj, name, lineno)
        else:
            yield lineno, _item_from_ours(obj, name, lineno)


def read_bank(path: str | os.PathLike, *, kind: str | None = None, allow_empty: bool = False) -> list[BankItem]:
    """All items (optionally one kind).

    An exact repeat (same id, same text: generators do repeat themselves) is dropped;
    the same id with a different text is an error naming both lines.
    """
    name = display_name(path)
    items: list[BankItem] = []
    seen: dict[str, tuple[int, str]] = {}
    for lineno, item in iter_bank(path):
        if item.item_id in seen:
            first_line, first_text = seen[item.item_id]
            if first_text == item.text:
                continue
            raise InputError(f"item_id {item.item_id} already used for another text on line {first_line}", name, lineno)
        seen[item.item_id] = (lineno, item.text)
        if kind is None or item.kind == kind:
            items.append(item)
    if not items and not allow_empty:
        raise InputError("bank has no items" + (f" of kind {kind!r}" if kind else ""), name)
    return items


def items_by_query(items: Iterable[BankItem]) -> dict[str, list[BankItem]]:
    out: dict[str, list[BankItem]] = {}
    for item in items:
        out.setdefault(item.query_id, []).append(item)
    return out


def write_bank(items: Iterable[BankItem], path: str | os.PathLike | None) -> None:
    with atomic_output(path) as out:
        for item in items:
            out.write(dumps(item.to_json()) + "\n")
