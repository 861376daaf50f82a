"""From topics to bank items: one generation unit per query (``dl``) or per query facet
(``car``), prompts rendered, answers parsed, failed units re-asked, ids assigned.

Answers that parse are kept in the grade cache (keyed by the generator's settings and the
whole rendered prompt) as each batch of calls comes back, those that came before an
interrupt included: a rerun asks only for what is left."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import InputError
from ..grading.asking import RETRY_TEMPERATURE
from ..grading.cache import NullCache, unit_key
from ..grading.types import NOT_ASKED_AGAIN, NOT_SENT, GradeResult, InterruptedBatch
from ..io.bank_items import make_item_id, BankItem
from .parse import parse_items
from .prompts import GenPrompt

#: recorded beside cached answers; the key holds the whole rendered prompt
ANSWER_HASH = "genq-generate"


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
    from_cache: int = 0  # units answered by the cache
    pending: int = 0  # units whose (re-)ask went to a batch file: answered in a later round, not written


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


def dry_run_text(units: list[Unit], kept: int, prompt: GenPrompt) -> str:
    """What ``--dry-run`` prints: every prompt with its rough token count, then the totals."""
    out, total = [], 0
    for unit in units:
        tokens = rough_tokens(unit.prompt)
        total += tokens
        out.append(f"### {unit.label}  ({tokens} tokens)\n{unit.prompt}\n\n")
    out.append(f"# {len(units)} calls ({kept} queries/facets already in the merged bank), "
               f"{total} input tokens, prompt {prompt.name} [{prompt.source}]; tokens are a rough "
               "count of words and punctuation marks; re-asked unparseable answers add calls\n")
    return "".join(out)


def answer_key(identity: str, unit: Unit) -> str:
    """The cache key of a unit's answer: the generator's settings and the prompt it is shown."""
    return unit_key(identity, ANSWER_HASH, None, unit.prompt, "", None)


def generate_bank(generator, units: list[Unit], *, kind: str, field_name: str, retries: int = 2,
                  max_items: int | None = None, cache=None, identity: str = "") -> Outcome:
    """Ask the generator for every unit; re-ask (up to ``retries`` times, at temperature
    0.2 as the nuggetizer re-asks, or the generator's own where higher) the units whose
    answer held no list. Calls that failed at the transport level were already retried
    by the generator and are not repeated here. ``cache`` (a grade cache) answers the
    units it holds and keeps every answer that parses, as each batch comes back."""
    cache = NullCache() if cache is None else cache
    out = Outcome()
    parsed: dict[tuple[str, str | None], list[str]] = {}
    keys = {unit.key: answer_key(identity, unit) for unit in units}
    known = cache.get_many(set(keys.values()))
    for unit in units:
        row = known.get(keys[unit.key])
        items = parse_items(row.answer or "", field_name) if row is not None else []
        if items:  # the field asked for may differ from the one the cached answer was kept for
            parsed[unit.key] = items[:max_items] if max_items else items
            out.from_cache += 1

    def keep(done: list[tuple[Unit, str]]) -> None:
        if done:
            cache.put_many([(keys[u.key], GradeResult(text, None, None, True)) for u, text in done], identity,
                           ANSWER_HASH)

    pending = [u for u in units if u.key not in parsed]
    attempts: dict[tuple, int] = {}
    last_reason: dict[tuple, str] = {}
    # a re-ask at the first ask's temperature (0 by default) gets the same answer: it goes
    # at the nuggetizer's 0.2, or the generator's own temperature where that is higher
    reask = max(float(getattr(generator, "temperature", 0.0) or 0.0), RETRY_TEMPERATURE)
    for round_ in range(retries + 1):
        if not pending:
            break
        try:
            prompts, ukeys = [u.prompt for u in pending], [u.key for u in pending]
            results = (generator.generate(prompts, ukeys) if round_ == 0
                       else generator.generate(prompts, ukeys, temperature=reask))
        except InterruptedBatch as stop:  # the answers that came were paid for: kept for the rerun
            keep([(u, res.text) for u, res in zip(pending, stop.results or ())
                  if res is not None and getattr(res, "error", None) is None and res.text
                  and parse_items(res.text, field_name)])
            raise
        again = []
        done = []
        for unit, res in zip(pending, results):
            if res.error == NOT_SENT:  # taken down for a batch file (--batch-out): a later round answers it
                out.pending += 1
                continue
            if res.error == NOT_ASKED_AGAIN:  # no results file has the re-ask: the last answer stands
                out.failures.append(Failure(unit, last_reason[unit.key], attempts[unit.key]))
                continue
            if getattr(res, "attempts", 1):  # not one never sent (server down, no answer in the files)
                out.calls += 1
                attempts[unit.key] = attempts.get(unit.key, 0) + 1
            if res.error is not None:
                out.failures.append(Failure(unit, res.error, attempts.get(unit.key, 0)))
                continue
            items = parse_items(res.text, field_name)
            if items:
                parsed[unit.key] = items[:max_items] if max_items else items
                done.append((unit, res.text))
            else:
                snippet = " ".join((res.text or "").split())[:80]
                cut = " (cut off at --max-tokens)" if res.finish_reason == "length" else ""
                last_reason[unit.key] = f"no list of {field_name} in the answer{cut}: {snippet!r}"
                again.append(unit)
        keep(done)
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
