"""From topics to bank items: one generation unit per query (``dl``) or per query facet
(``car``), prompts rendered, answers parsed, failed units re-asked, ids assigned."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import InputError
from ..io.banks import BankItem, make_item_id
from .parse import parse_items
from .prompts import GenPrompt


@dataclass(frozen=True)
class Unit:
    query_id: str
    facet_id: str | None
    prompt: str

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.query_id, self.facet_id)

    @property
    def label(self) -> str:
        return self.query_id if self.facet_id is None else f"{self.query_id}/{self.facet_id}"


@dataclass
class Failure:
    unit: Unit
    reason: str
    attempts: int


@dataclass
class Outcome:
    items: list[BankItem] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    units_done: int = 0
    calls: int = 0


def build_units(topics: dict, style: str, prompt: GenPrompt, n: int, *, topics_name: str) -> list[Unit]:
    """One unit per query (dl) or per query facet (car), in topic order."""
    units = []
    for qid, topic in topics.items():
        if style == "dl":
            units.append(Unit(qid, None, prompt.render(query_text=topic.text, query_title=topic.text, n=n)))
            continue
        if not topic.subtopics:
            raise InputError(f"query {qid} has no subtopics, which --style car needs "
                             "(JSONL topics with a \"subtopics\" list)", topics_name)
        facet_ids = [f for f, _ in topic.subtopics]
        if len(set(facet_ids)) != len(facet_ids):
            dup = next(f for f in facet_ids if facet_ids.count(f) > 1)
            raise InputError(f"query {qid} has facet id {dup} twice", topics_name)
        for facet_id, facet_text in topic.subtopics:
            units.append(Unit(qid, facet_id, prompt.render(query_title=topic.text, query_subtopic=facet_text,
                                                           query_text=topic.text, n=n)))
    return units


_TOKEN = re.compile(r"\w+|[^\w\s]")


def rough_tokens(text: str) -> int:
    """Words and punctuation marks: a tokenizer-free estimate (OpenAI's BPE vocabularies
    give about 1.0-1.3 tokens per such unit on English text)."""
    return len(_TOKEN.findall(text))


def generate_bank(generator, units: list[Unit], *, kind: str, field_name: str, retries: int = 2,
                  max_items: int | None = None) -> Outcome:
    """Ask the generator for every unit; re-ask (up to ``retries`` times) the units whose
    answer held no list. Calls that failed at the transport level were already retried
    by the generator and are not repeated here."""
    out = Outcome()
    parsed: dict[tuple[str, str | None], list[str]] = {}
    pending = list(units)
    attempts: dict[tuple, int] = {}
    last_reason: dict[tuple, str] = {}
    for _round in range(retries + 1):
        if not pending:
            break
        results = generator.generate([u.prompt for u in pending], [u.key for u in pending])
        out.calls += len(pending)
        again = []
        for unit, res in zip(pending, results):
            attempts[unit.key] = attempts.get(unit.key, 0) + 1
            if res.error is not None:
                out.failures.append(Failure(unit, res.error, attempts[unit.key]))
                continue
            items = parse_items(res.text, field_name)
            if items:
                parsed[unit.key] = items[:max_items] if max_items else items
            else:
                snippet = " ".join((res.text or "").split())[:80]
                cut = " (cut off at --max-tokens)" if res.finish_reason == "length" else ""
                last_reason[unit.key] = f"no list of {field_name} in the answer{cut}: {snippet!r}"
                again.append(unit)
        pending = again
    for unit in pending:
        out.failures.append(Failure(unit, last_reason[unit.key], attempts[unit.key]))
    for unit in units:  # topic order, whatever order answers came in
        texts = parsed.get(unit.key)
        if texts is None:
            continue
        out.units_done += 1
        for text in texts:
            out.items.append(BankItem(unit.query_id, make_item_id(unit.query_id, text, unit.facet_id), kind,
                                      text, unit.facet_id))
    return out
