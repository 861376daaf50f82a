"""The bank item: one exam question or nugget, and how its id is made from its text.

A leaf of exam_eval.io: the bank readers (banks.py, nugget_banks.py) and everything that
handles items import it; it imports nothing of exam_eval.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

KINDS = ("question", "nugget")


def text_hash(text: str) -> str:
    """md5 of the stripped text: the digest of an item id, also written on every grade line
    (``item_hash``) so a grade can be matched to the text it was given for."""
    return hashlib.md5(text.strip().encode("utf-8")).hexdigest()


def make_item_id(query_id: str, text: str, facet_id: str | None = None) -> str:
    prefix = f"{query_id}/{facet_id}" if facet_id else str(query_id)
    return f"{prefix}/{text_hash(text)}"


def id_digest(item_id: str, query_id: str, facet_id: str | None) -> str | None:
    """The md5 digest of an id of the form ``query_id[/facet_id]/<md5>``; None for other ids."""
    prefix = f"{query_id}/{facet_id}/" if facet_id else f"{query_id}/"
    if not item_id.startswith(prefix):
        return None
    digest = item_id[len(prefix):]
    if len(digest) == 32 and all(c in "0123456789abcdef" for c in digest):
        return digest
    return None


def id_fits_text(item_id: str, query_id: str, text: str, facet_id: str | None = None) -> bool:
    """False only for a hashed id whose digest belongs to another text (a human edit)."""
    digest = id_digest(item_id, query_id, facet_id)
    if digest is None:
        return True
    # the workbench's older banks hashed the unstripped text
    return digest in (text_hash(text), hashlib.md5(text.encode("utf-8")).hexdigest())


@dataclass
class BankItem:
    query_id: str
    item_id: str
    kind: str
    text: str
    facet_id: str | None = None
    answers: list[str] | None = None
    extra: dict = field(default_factory=dict)  # unknown keys, kept so a rewrite loses nothing
    edited: bool = False  # the text changed under this (kept) id; grades must match text_hash
    importance: str | None = None  # "vital" | "okay" (RAG nugget scores); None: not given
    #: the id the line gave, where the item now has its text's id instead (an edited text)
    written_id: str | None = field(default=None, repr=False, compare=False)

    @property
    def graded_id(self) -> str:
        """The id exam-grade grades the item under by default: its text's id where the
        text was edited under a kept id (``edited``), else its own."""
        return make_item_id(self.query_id, self.text, self.facet_id) if self.edited else self.item_id

    @property
    def text_hash(self) -> str:
        # kept with the text it was made from (the text may be set anew): every grade line
        # of the item asks again, one for each passage it is graded on
        known = self.__dict__.get("_hashed")
        if known is None or known[0] is not self.text:
            known = self.__dict__["_hashed"] = (self.text, text_hash(self.text))
        return known[1]

    def to_json(self) -> dict:
        obj = {"query_id": self.query_id, "item_id": self.item_id, "kind": self.kind, "text": self.text}
        if self.facet_id is not None:
            obj["facet_id"] = self.facet_id
        if self.answers is not None:
            obj["answers"] = self.answers
        if self.importance is not None:
            obj["importance"] = self.importance
        obj.update(self.extra)
        return obj


IMPORTANCE = ("vital", "okay")
