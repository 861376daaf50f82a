"""Question / nugget banks.

Our format: JSONL, one item per line::

    {"query_id", "item_id", "kind": "question"|"nugget", "text", "facet_id"?, "answers"?}

``item_id = query_id[/facet_id]/md5(text.strip())`` — identical to the reference
workbench, so grades stay attached to a question a human did not change. Readers also
accept the workbench's bank files (one line per query or facet, ``items`` or the old
``questions`` key) and multiple-choice banks (one question per line: ``qid``,
``question``, ``choices``, ``correctKey``, ``correct``; the correct choice's text becomes
``answers``), converting them on the fly with their ids preserved.

Human edits (our format and the workbench's):

- an item without an id (added by hand) gets ``query_id[/facet_id]/md5(text.strip())``
  on reading; :class:`BankReport` counts them so commands can say so;
- an id of the form ``query_id[/facet_id]/<32 hex digits>`` whose digest is neither
  md5(text.strip()) nor md5(text) (the workbench's older banks hashed unstripped text:
  79 DL19 and 48 DL20 ids, which are not edits) belongs to a text a human changed. The
  item then gets the id of its new text, so grades of the old text never stand for it;
  with ``keep_edited_ids`` it keeps the old id (and is marked ``edited``).
- ids of any other form are the user's own names and are kept as they are. So are the
  ids of multiple-choice files, which hash something other than the question text; an
  item converted from one carries ``"item_id_kept": true`` in our format, so that the
  file ``exam-genq import`` writes keeps those ids when it is read in turn.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import InputError
from .bank_items import (
    IMPORTANCE,
    KINDS,
    BankItem,
    id_fits_text,
    make_item_id,
)
from .jsonl import dumps, iter_jsonl, json_id, require_fields
from .nugget_banks import items_from_track_bank, query_texts, write_autojudge_bank, write_nuggetizer_bank
from .openers import display_name
from .outputs import atomic_output
from .reports import read_requests

_OUR_KEYS = {"query_id", "item_id", "kind", "text", "facet_id", "answers", "importance"}
#: our format's mark of an id that names, not hashes, its text (a multiple-choice file's)
ID_KEPT = "item_id_kept"


def _importance(value, name: str, lineno: int) -> str | None:
    """The nuggetizer's "vital"/"okay" (any case); null means not given."""
    if value is None:
        return None
    if not isinstance(value, str) or value.strip().lower() not in IMPORTANCE:
        raise InputError(f"importance must be 'vital' or 'okay', got {value!r}", name, lineno)
    return value.strip().lower()


def _item_from_ours(obj: dict, name: str, lineno: int) -> BankItem:
    require_fields(obj, ("query_id", "kind", "text"), name, lineno)
    if obj["kind"] not in KINDS:
        raise InputError(f"kind must be 'question' or 'nugget', got {obj['kind']!r}", name, lineno)
    if not isinstance(obj["text"], str):
        raise InputError(f"text must be a string, got {type(obj['text']).__name__}", name, lineno)
    if not obj["text"].strip():
        raise InputError("empty item text", name, lineno)
    answers = obj.get("answers")
    if answers is not None:
        if isinstance(answers, str):
            answers = [answers]
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise InputError("'answers' must be a list of strings", name, lineno)
    item_id = obj.get("item_id")
    return BankItem(
        query_id=json_id(obj["query_id"], "query_id", name, lineno),
        item_id=None if item_id is None or item_id == "" else json_id(item_id, "item_id", name, lineno, trec=False),
        kind=obj["kind"],
        text=obj["text"],
        facet_id=json_id(obj.get("facet_id"), "facet_id", name, lineno, trec=False, nullable=True),
        answers=answers,
        extra={k: v for k, v in obj.items() if k not in _OUR_KEYS},
        importance=_importance(obj.get("importance"), name, lineno),
    )


def _items_from_workbench(obj: dict, name: str, lineno: int) -> Iterator[BankItem]:
    """The workbench's per-query line: ``items`` (current) or ``questions`` (old)."""
    entries = obj.get("items") if "items" in obj else obj.get("questions")
    if not isinstance(entries, list):
        raise InputError("workbench bank line without an 'items' or 'questions' list", name, lineno)
    qid = json_id(obj.get("query_id"), "query_id", name, lineno)
    facet = json_id(obj.get("facet_id"), "facet_id", name, lineno, trec=False, nullable=True)
    # the line's query text travels with its items (exam-nuggets bank writes it out)
    query_text = obj.get("query_text")
    shared = {"query_text": query_text} if isinstance(query_text, str) and query_text.strip() else {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise InputError("workbench bank item is not an object", name, lineno)
        # a hand-added item may lack its id: the text key tells the kind
        if "question_id" in entry or "question_text" in entry:
            kind, item_id, text = "question", entry.get("question_id"), entry.get("question_text")
        elif "nugget_id" in entry or "nugget_text" in entry:
            kind, item_id, text = "nugget", entry.get("nugget_id"), entry.get("nugget_text")
        else:
            raise InputError("workbench bank item without question_text or nugget_text", name, lineno)
        if text is not None and not isinstance(text, str):
            raise InputError(f"workbench bank item text must be a string, got {type(text).__name__}", name, lineno)
        if text is None or not text.strip():
            raise InputError(f"workbench bank item {item_id!r} without text", name, lineno)
        efacet = json_id(entry.get("facet_id", facet), "facet_id", name, lineno, trec=False, nullable=True)
        answers = entry.get("answers") or entry.get("correct")
        if isinstance(answers, str):
            answers = [answers]
        if answers and not (isinstance(answers, list) and all(isinstance(a, str) for a in answers)):
            raise InputError("'answers' must be a list of strings", name, lineno)
        item_id = None if item_id in (None, "") else json_id(item_id, kind + "_id", name, lineno, trec=False)
        yield BankItem(json_id(entry.get("query_id", qid), "query_id", name, lineno), item_id, kind, text,
                       efacet, answers or None, dict(shared),
                       importance=_importance(entry.get("importance"), name, lineno))


def _choice_text(choice) -> str | None:
    """A choice's text: a string, or TQA's ``{"processedText"|"rawText"|"text": ...}``."""
    if isinstance(choice, str):
        return choice
    if isinstance(choice, dict):
        for key in ("text", "processedText", "rawText"):
            if isinstance(choice.get(key), str):
                return choice[key]
    return None


def _choices_map(choices, name: str, lineno: int) -> dict[str, str]:
    """Choices keyed by their answer key: a dict, a list of strings (keys a, b, c ...,
    and the 0-based position), or a list of ``{"key", "text"}``."""
    out: dict[str, str] = {}
    if isinstance(choices, dict):
        items = list(choices.items())
    elif isinstance(choices, list):
        items = []
        for i, c in enumerate(choices):
            key = c.get("key", c.get("label")) if isinstance(c, dict) else None
            items.append((str(key) if key is not None else chr(ord("a") + i) if i < 26 else str(i), c))
            if key is None:
                items.append((str(i), c))
    else:
        raise InputError("'choices' must be an object or a list", name, lineno)
    for key, c in items:
        text = _choice_text(c)
        if text is None:
            raise InputError(f"choice {key!r} has no text", name, lineno)
        out[str(key)] = text
    return out


def _item_from_tqa(obj: dict, name: str, lineno: int) -> BankItem | None:
    """One multiple-choice question per line (``qid``, ``question``, ``choices``,
    ``correctKey``, ``correct``), the shape of manual exam banks with answer keys.

    The correct choice's text becomes the item's answer (``correct`` when given as text,
    else ``choices[correctKey]``). The id is kept as it is: these files hash the unstripped
    text. A line without question text (null or blank) cannot be graded and returns None:
    the reference CAR file has such lines where a generated Python list was split into
    lines (``question_set = [``, blank lines).
    """
    text = obj.get("question")
    if text is not None and not isinstance(text, str):
        raise InputError("'question' must be a string", name, lineno)
    if text is None or not text.strip():
        return None
    if obj.get("query_id") is None:
        raise InputError("multiple-choice line without 'query_id'", name, lineno)
    qid = json_id(obj["query_id"], "query_id", name, lineno)
    item_id = json_id(obj["qid"], "qid", name, lineno, trec=False)
    choices = obj.get("choices")
    key = obj.get("correctKey")
    correct = obj.get("correct")
    answer = None
    extra: dict = {ID_KEPT: True}
    if choices:
        by_key = _choices_map(choices, name, lineno)
        extra["choices"] = choices
        if key is not None:
            if str(key) not in by_key:
                raise InputError(f"correctKey {key!r} is not one of the choices ({', '.join(by_key)})", name, lineno)
            answer = by_key[str(key)]
            extra["correctKey"] = key
    if answer is None and correct is not None:
        if isinstance(correct, dict):
            correct = _choice_text(correct)
        if not isinstance(correct, str):
            raise InputError("'correct' must be the correct answer's text", name, lineno)
        answer = correct
    facet = json_id(obj.get("facet_id"), "facet_id", name, lineno, trec=False, nullable=True)
    return BankItem(qid, item_id, "question", text, facet, [answer] if answer and answer.strip() else None, extra)


@dataclass
class BankReport:
    """What reading a bank changed: ids given to hand-added items, ids of edited texts."""

    assigned: list[tuple[int, str]] = field(default_factory=list)  # (lineno, new id)
    edited: list[tuple[int, str, str]] = field(default_factory=list)  # (lineno, id in file, id used)
    keep_edited_ids: bool = False
    repeats: list[tuple[int, str]] = field(default_factory=list)  # (lineno, item id) of dropped exact repeats

    def notices(self, name: str) -> list[str]:
        out = []
        if self.assigned:
            lines = ", ".join(str(n) for n, _ in self.assigned[:5]) + (", ..." if len(self.assigned) > 5 else "")
            out.append(f"{name}: {len(self.assigned)} items without item_id were given "
                       f"query_id[/facet_id]/md5(text) ids (lines {lines})")
        if self.edited:
            lineno, old, new = self.edited[0]
            what = ("kept as given (--keep-edited-ids); their grades must match the new text"
                    if self.keep_edited_ids else "treated as new items with new ids")
            out.append(f"{name}: {len(self.edited)} items have a text that no longer matches their item_id "
                       f"(edited by hand?), {what}; e.g. line {lineno}: {old}"
                       + ("" if self.keep_edited_ids else f" -> {new}"))
        if self.repeats:
            out.append(repeats_notice(name, self.repeats))
        return out


def read_bank_noting_repeats(path: str, log: Callable[[str], None], **kwargs) -> list[BankItem]:
    """:func:`read_bank`, saying on ``log`` how many exact repeats were dropped."""
    repeats: list = []
    items = read_bank(path, repeats=repeats, **kwargs)
    if repeats:
        log(repeats_notice(path, repeats))
    return items


def repeats_notice(name: str, repeats: list[tuple[int, str]]) -> str:
    lineno, item_id = repeats[0]
    return (f"{name}: {len(repeats)} exact repeats of an item (same query, id and text) dropped; "
            f"e.g. line {lineno}: {item_id}")


def _settle_id(item: BankItem, lineno: int, report: BankReport | None, keep_edited_ids: bool) -> BankItem:
    if item.item_id is None:
        item.item_id = make_item_id(item.query_id, item.text, item.facet_id)
        if report is not None:
            report.assigned.append((lineno, item.item_id))
    elif item.extra.get(ID_KEPT) is not True and not id_fits_text(item.item_id, item.query_id, item.text,
                                                                   item.facet_id):
        old = item.item_id
        if keep_edited_ids:
            item.edited = True
        else:
            item.item_id = make_item_id(item.query_id, item.text, item.facet_id)
            item.written_id = old
        if report is not None:
            report.edited.append((lineno, old, item.item_id))
    return item


def iter_bank(path: str | os.PathLike, *, skipped: list | None = None, report: BankReport | None = None,
              keep_edited_ids: bool = False) -> Iterator[tuple[int, BankItem]]:
    """Items with the line they came from, from any supported bank format.

    Multiple-choice lines without question text are skipped; when ``skipped`` is a list,
    ``(lineno, reason)`` is appended to it for each, so a command can report them.
    Ids are settled as the module docstring says; ``report`` collects what changed.
    """
    name = display_name(path)
    if report is not None:
        report.keep_edited_ids = keep_edited_ids
    for lineno, obj in iter_jsonl(path):
        if not isinstance(obj, dict):
            raise InputError("expected a JSON object", name, lineno)
        if "nuggets" in obj or "nugget_bank" in obj or "claim_bank" in obj:  # the nuggetizer's and AutoJudge's formats
            for item in items_from_track_bank(obj, name, lineno):
                yield lineno, item
        elif "items" in obj or "questions" in obj:
            for item in _items_from_workbench(obj, name, lineno):
                yield lineno, _settle_id(item, lineno, report, keep_edited_ids)
        elif "qid" in obj and "question" in obj:
            item = _item_from_tqa(obj, name, lineno)
            if item is None:
                if skipped is not None:
                    skipped.append((lineno, "multiple-choice line without question text"))
                continue
            yield lineno, item
        else:
            yield lineno, _settle_id(_item_from_ours(obj, name, lineno), lineno, report, keep_edited_ids)


def read_bank(path: str | os.PathLike, *, kind: str | None = None, allow_empty: bool = False,
              skipped: list | None = None, repeats: list | None = None, report: BankReport | None = None,
              keep_edited_ids: bool = False, unique_as_graded: bool = False) -> list[BankItem]:
    """All items (optionally one kind).

    An exact repeat (same id, same text: generators do repeat themselves, e.g. 3 of the 464
    DL19 nuggets) is dropped, and noted as ``(lineno, item_id)`` in ``repeats`` when given
    (else in ``report.repeats``, which its notices mention); the same id with a different
    text is an error naming both lines. Ids are unique per query. ``skipped``,
    ``report``, ``keep_edited_ids``: see :func:`iter_bank`. ``unique_as_graded`` (with
    ``keep_edited_ids``): the ids must be unique as exam-grade gives them by default (an
    edited item under its new text's id), not as written: a line copied and then edited
    keeps its original's id in the file, and the ``--bank`` filter takes grades under
    either id.
    """
    name = display_name(path)
    items: list[BankItem] = []
    # ids key data per query (grades are keyed by query, passage and item), so the same id
    # under two queries is two items: AutoJudge's ids are md5(text), without the query
    seen: dict[tuple[str, str], tuple[int, BankItem]] = {}
    # the ids as the lines give them: one id for two texts is refused even where an edited
    # text gets its own id (a line copied and its copy edited: which one did the id mean?)
    written: dict[tuple[str, str], tuple[int, str]] = {}
    for lineno, item in iter_bank(path, skipped=skipped, report=report, keep_edited_ids=keep_edited_ids):
        first_line, first_text = written.setdefault((item.query_id, item.written_id or item.item_id),
                                                    (lineno, item.text))
        if first_text != item.text:
            raise InputError(f"item_id {item.written_id or item.item_id} of query {item.query_id} already used for "
                             f"another text on line {first_line}", name, lineno)
        key = (item.query_id, item.graded_id if unique_as_graded else item.item_id)
        if key in seen:
            first_line, first = seen[key]
            first_text, first_kind, first_importance = first.text, first.kind, first.importance
            if first_text == item.text and first_kind != item.kind:
                # one id, two items: their grades would be one; dropping one hid it
                raise InputError(f"item_id {item.item_id} of query {item.query_id} is a {first_kind} on line "
                                 f"{first_line} and a {item.kind} here (the same text): give one its own item_id",
                                 name, lineno)
            if first_text == item.text and first_importance and item.importance and first_importance != item.importance:
                # not a repeat: which importance counts? (the first one did, silently)
                raise InputError(f"item_id {item.item_id} of query {item.query_id} is {first_importance} on line "
                                 f"{first_line} and {item.importance} here (the same text): keep one line", name, lineno)
            if first_text == item.text:
                first.importance = first_importance or item.importance  # the repeat may be the one that has it
                if repeats is not None:
                    repeats.append((lineno, item.item_id))
                elif report is not None:
                    report.repeats.append((lineno, item.item_id))
                continue
            raise InputError(f"item_id {item.item_id} of query {item.query_id} already used for another text "
                             f"on line {first_line}", name, lineno)
        seen[key] = (lineno, item)
        if kind is None or item.kind == kind:
            items.append(item)
    if not items and not allow_empty:
        raise InputError("bank has no items" + (f" of kind {kind!r}" if kind else ""), name)
    return items


def require_bank_topics(reports: Iterable, items: Mapping[str, Sequence[BankItem]], bank_name: str) -> None:
    """Refuse reports none of which is on a topic the bank has items for (nothing to
    assign or score), naming a few of the bank's topics."""
    if not any(items.get(r.topic_id) for r in reports):
        raise InputError(f"no report is on a topic of the bank (bank topics: {', '.join(sorted(items)[:5])} ...)",
                         bank_name)


def items_by_query(items: Iterable[BankItem]) -> dict[str, list[BankItem]]:
    out: dict[str, list[BankItem]] = {}
    for item in items:
        out.setdefault(item.query_id, []).append(item)
    return out


def write_bank(items: Iterable[BankItem], path: str | os.PathLike | None) -> None:
    with atomic_output(path) as out:
        for item in items:
            out.write(dumps(item.to_json()) + "\n")


def convert_bank(bank: str, target: str, output: str | None, *, topics: str | None = None, kind: str | None = None,
                 default_importance: str = "vital", log=lambda msg: None) -> None:
    """exam-nuggets bank: BANK (any format read_bank reads) written as ``target``: ours,
    nuggetizer or autojudge; ``topics`` gives the query texts the other two formats hold
    (else the texts the bank carries). ``log`` hears what was filled in by default."""
    report = BankReport()
    items = read_bank(bank, kind=kind, report=report)
    for notice in report.notices(bank):
        log(notice)
    queries = {}
    if topics:
        queries = read_requests(topics)
    if target == "ours":
        write_bank(items, output)
    elif target == "nuggetizer":
        write_nuggetizer_bank(items, output, queries, default_importance)
        unlabelled = sum(1 for i in items if i.importance is None)
        if unlabelled:
            log(f"{unlabelled} of {len(items)} items have no importance and are written as {default_importance} "
                "(--default-importance)")
    else:
        write_autojudge_bank(items, output, queries)
    if target != "ours":
        without = sorted({i.query_id for i in items} - set(query_texts(items, queries)))
        if without:
            log(f"{len(without)} topics have no query text (e.g. {', '.join(without[:3])}); "
                "give --topics to fill it in")
