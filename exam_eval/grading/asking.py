"""Ask a chat model many questions whose answers must parse, the way the AutoNuggetizer
asks: first at temperature 0, and an answer that does not parse is asked again at
temperature 0.2 (nuggetizer ``models/nuggetizer.py``: ``temperature = 0.2`` after a
failed ``ast.literal_eval``), at most ``retries`` more times. The nuggetizer allows 500
tries; the bound here is a flag, so a model that never answers in the format costs a
few calls, not hundreds.

The persistent grade cache (:mod:`exam_eval.grading.cache`) keeps every answer that
parsed, keyed by the caller (model, prompt and every text the prompt shows); an answer
that never parsed and a call that failed are not cached, so a rerun asks again. Work is
done in chunks and each chunk's answers are committed before the next is sent; on an
interrupt the answers of the chunk in flight that came (and parsed) are committed too, so
only the calls still out are lost, and the rerun takes the rest from the cache.
A chunk is CHUNK conversations, or what the chat model asks for (``chunk_size``: a local
model answers a few batches at a time, where 256 conversations can be hours of work).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..io.jsonl import LONE_SURROGATE
from .types import NO_ANSWER, NOT_ASKED_AGAIN, NOT_SENT, GradeResult, InterruptedBatch
from .cache import NullCache

RETRY_TEMPERATURE = 0.2
CHUNK = 256


@dataclass
class Ask:
    key: str  # cache key: everything that can change the answer
    messages: list[dict]
    #: this question's reading of an answer, where it is not the Asker's (e.g. a listwise
    #: window: a label for each of its nuggets)
    parse: Callable[[str], Any] | None = None


@dataclass
class Answer:
    text: str | None  # the last answer (None: the call failed)
    value: Any  # the parsed answer; None when it never parsed or the call failed
    calls: int = 0  # calls made in this run (0: from the cache)
    error: str | None = None  # why the call failed for good (HTTP errors after the client's retries)
    #: not answered yet: the request went to a batch file (--batch-out) and its answer
    #: comes in a later round; neither final nor failed, and nothing of it is written
    pending: bool = False

    @property
    def parsed(self) -> bool:
        return self.value is not None


@dataclass
class AskStats:
    asked: int = 0  # distinct questions
    from_cache: int = 0
    calls: int = 0  # model calls made, re-asks included
    unparsed: int = 0  # questions whose answers never parsed
    failed: int = 0  # questions whose calls failed
    not_sent: int = 0  # questions whose (re-)ask went to a batch file: answered in a later round
    no_answer: int = 0  # questions the batch results files do not answer (nothing called: not "failed")

    def add(self, other: AskStats) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def summary(self) -> str:
        return (f"{self.asked} prompts: {self.calls} calls, {self.from_cache} from cache, "
                f"{self.unparsed} unparsed after the re-asks, {self.failed} failed"
                + (f", {self.no_answer} without an answer in the results files" if self.no_answer else "")
                + (f", {self.not_sent} written to the batch file" if self.not_sent else ""))


@dataclass
class Asker:
    """``chat``: a chat model (:mod:`exam_eval.backends.chat`); ``parse(text)`` returns the
    parsed value or None; ``prompt_hash`` is recorded beside cached answers."""

    chat: Any
    parse: Callable[[str], Any]
    retries: int = 5
    cache: Any = field(default_factory=NullCache)
    prompt_hash: str = ""
    on_chunk: Callable[[int], None] | None = None
    stats: AskStats = field(default_factory=AskStats)
    #: why calls failed for good (error message -> calls), for the command to say
    errors: dict[str, int] = field(default_factory=dict)

    def failure_summary(self) -> str | None:
        if not self.errors:
            return None
        msg, n = max(self.errors.items(), key=lambda kv: kv[1])
        return f"most frequent error ({n}x): {msg}"

    def ask(self, asks: Sequence[Ask]) -> dict[str, Answer]:
        """Answers by key (identical keys are asked once)."""
        unique = list({a.key: a for a in asks}.values())
        by_key = {a.key: a for a in unique}
        times: dict[str, int] = {}  # how often each key is asked (the progress counts every one)
        for a in asks:
            times[a.key] = times.get(a.key, 0) + 1
        self.stats.asked += len(unique)
        out: dict[str, Answer] = {}
        for key, row in self.cache.get_many(a.key for a in unique).items():
            value = self._parse(by_key[key], row.answer or "")
            if value is not None:
                out[key] = Answer(row.answer, value)
        self.stats.from_cache += len(out)
        todo = [a for a in unique if a.key not in out]
        if self.on_chunk is not None and out:
            self.on_chunk(sum(times[k] for k in out))  # answered already (by the cache)
        size = max(1, int(getattr(self.chat, "chunk_size", None) or CHUNK))
        for start in range(0, len(todo), size):
            chunk = todo[start:start + size]
            try:
                got = self._ask_chunk(chunk)
            except InterruptedBatch as stop:  # the answers that came were paid for: kept for the rerun
                self._keep(getattr(stop, "answers", {}))
                raise
            out.update(got)
            self._keep(got)
            if self.on_chunk is not None:  # a failed call is not done: the bar does not pass it
                done = sum(times[a.key] for a in chunk if got[a.key].error is None and not got[a.key].pending)
                if done:
                    self.on_chunk(done)
        return out

    def _parse(self, ask: Ask, text: str) -> Any:
        return (ask.parse or self.parse)(text)

    def _keep(self, answers: dict[str, Answer]) -> None:
        self.cache.put_many([(k, GradeResult(a.text, None, None, True)) for k, a in answers.items() if a.parsed],
                            self.chat.cache_identity, self.prompt_hash)

    def _ask_chunk(self, chunk: Sequence[Ask]) -> dict[str, Answer]:
        answers = {a.key: Answer(None, None) for a in chunk}
        pending = list(chunk)
        temperature = 0.0
        for _round in range(self.retries + 1):
            if not pending:
                break
            try:
                results = self.chat.chat([a.messages for a in pending], temperature=temperature)
            except InterruptedBatch as stop:  # what came before the interrupt (None: no answer)
                for a, res in zip(pending, stop.results):
                    if res is not None and res.error is None and res.text is not None:
                        answers[a.key].text, answers[a.key].value = res.text, self._parse(a, res.text)
                stop.answers = answers
                raise
            again = []
            for a, res in zip(pending, results):
                ans = answers[a.key]
                if res.error == NOT_SENT:  # taken down for a batch file: answered in a later round
                    ans.pending = True
                    continue
                if res.error == NOT_ASKED_AGAIN:  # a re-ask no batch file holds: the last answer stands
                    continue
                if res.attempts:  # not one sent where the server was down or an earlier prompt too long
                    ans.calls += 1
                    self.stats.calls += 1
                if res.error is not None:  # the client already retried it; a rerun asks again
                    ans.text, ans.error = None, res.error
                    self.errors[res.error] = self.errors.get(res.error, 0) + 1
                    continue
                ans.text, ans.value = res.text, self._parse(a, res.text or "")
                if ans.value is None:
                    again.append(a)
            pending = again
            temperature = RETRY_TEMPERATURE
        self.stats.unparsed += sum(1 for a in answers.values() if a.error is None and not a.parsed and not a.pending)
        self.stats.no_answer += sum(1 for a in answers.values() if a.error == NO_ANSWER)
        self.stats.failed += sum(1 for a in answers.values() if a.error is not None and a.error != NO_ANSWER)
        self.stats.not_sent += sum(1 for a in answers.values() if a.pending)
        return answers


def parse_python_list(text: str) -> list[str] | None:
    """The nuggetizer's reading of every answer: drop code fences, then
    ``ast.literal_eval``; here the value must also be a list (or tuple) of strings, as
    each element is used as a string (``.lower()``, a nugget text)."""
    import ast

    t = (text or "").replace("```python", "").replace("```", "").strip()
    try:
        value = ast.literal_eval(t)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        return None
    if any(LONE_SURROGATE.search(v) for v in value):  # could be neither hashed, sent nor written
        return None
    return list(value)
