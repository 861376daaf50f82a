"""The grading engine: plan the work, do each piece once, never lose finished work.

Vocabulary:

- a **pair** is one output line: (query, passage, bank item or None for direct prompts);
- a **unit** is one model call: all pairs whose texts are identical (same prompt,
  item text, passage text, query text where the prompt shows it, answer keys) share
  one unit, graded once; its key is also the persistent cache key.

Order of work: pairs already in the output are skipped (resume: same query, passage,
item id *and* item text, model, prompt id and prompt text; see :func:`is_done`); units found in the
cache are written first without touching the model; the rest is graded in batches sorted
by input length (less padding, and the longest batch runs first so an out-of-memory
error shows up at once). Every graded batch goes to a writer thread (grading.writer) that
appends and fsyncs its grades, then commits them to the cache, while the model grades the
next: an interrupt loses nothing, a kill at most the few batches handed over and not yet
written. An answer that did not parse is written (parse_ok false) but not cached, so a run
into a new output asks again. The local models' prompts are tokenized a chunk ahead in a
prefetch thread (:func:`prepared_chunks`, :class:`Prefetch`) while the model grades the current
one; on a GPU they are batched by tokens, and a back end that computes on its own
(``overlaps``: torch on CUDA) is handed the next batch before the current one is read
back, so the device never waits for the host's bookkeeping between batches.

``--shard i/n`` splits by unit key, so identical texts always land in the same shard and
deduplication still works inside each shard.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from ..errors import InputError, UsageError
from ..io.bank_items import BankItem
from ..io.grades import Grade
from .cache import NullCache, UnitKeys
from .fitting import Batch, BatchLimit, submit_fitting
from .handover import HandOver
from .output import GradesAppender
from .writer import GradeWriter
from .types import CUT_OFF_REASONING, GradeRequest, GradeResult, InterruptedBatch, padded_width
from .types import Grader as Backend  # the engine needs only this much of a back end


@dataclass
class Pair:
    query_id: str
    doc_id: str
    item: BankItem | None


@dataclass
class Unit:
    key: str
    request: GradeRequest
    pairs: list[Pair] = field(default_factory=list)

    @property
    def length(self) -> int:
        return len(self.request.context) + len(self.request.item_text or "")


@dataclass
class Stats:
    pool: int = 0  # pooled passages with text
    missing: int = 0  # pooled passages without text
    pairs: int = 0  # pairs in this shard
    in_output: int = 0  # pairs already in the output (resume)
    from_cache: int = 0  # pairs answered by the persistent cache
    graded: int = 0  # model calls made (units graded)
    deduplicated: int = 0  # pairs that reused a unit graded in this run
    failed: int = 0  # units whose model call failed (not written; a rerun retries them)
    unparsed: int = 0  # pairs written with parse_ok false
    units_to_grade: int = 0
    seconds: float = 0.0
    device_memory: str | None = None  # batches split where the device ran out of memory (fitting)
    # pairs of a scored prompt whose grade was read from the answer's text, by reason, and
    # answers cut off while reasoning (JudgeDetail.fallback)
    fallbacks: dict = field(default_factory=dict)
    scored: int = 0  # pairs of a scored prompt graded in this run (label mass measured or read from text)

    def summary(self, failed: str = "failed") -> str:
        """``failed``: what a pair without a grade is called (from results files: "without
        an answer", where nothing was called that could fail)."""
        return (f"{self.pairs} pairs: {self.graded} graded, {self.from_cache} from cache, "
                f"{self.deduplicated} deduplicated, {self.in_output} already in output, "
                f"{self.failed} {failed}, {self.unparsed} unparsed")

    def count(self, unit_pairs: int, result) -> None:
        """Note what a graded unit's result says about the judge."""
        detail = result.detail
        if detail.label_mass is not None or (detail.fallback and detail.fallback != CUT_OFF_REASONING):
            self.scored += unit_pairs
        if detail.fallback:
            self.fallbacks[detail.fallback] = self.fallbacks.get(detail.fallback, 0) + unit_pairs

    def judge_notes(self) -> list[str]:
        """What the summary says of the judge: scored grades read from the text and why,
        and answers cut off while reasoning."""
        notes = []
        cut = self.fallbacks.get(CUT_OFF_REASONING, 0)
        read = {k: v for k, v in self.fallbacks.items() if k != CUT_OFF_REASONING}
        if read:
            why = "; ".join(f"{k}: {v}" for k, v in sorted(read.items(), key=lambda kv: (-kv[1], kv[0])))
            notes.append(f"{sum(read.values())} of {self.scored} scored pairs were read from the answer's text, "
                         f"as generate mode reads it ({why})")
        if cut:
            notes.append(f"{cut} answers were cut off while reasoning (unparsed): raise --max-tokens (a reasoning "
                         "judge may think for thousands of tokens) or ask for less thinking (-O reasoning_effort=low, "
                         "-O chat_template_kwargs='{\"enable_thinking\": false}')")
        return notes


@dataclass
class Plan:
    units_cached: list[Unit]
    units_todo: list[Unit]
    cached_results: dict[str, GradeResult]
    stats: Stats


def parse_shard(spec: str | None) -> tuple[int, int] | None:
    if spec is None:
        return None
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise UsageError(f"--shard must be I/N (1 <= I <= N), got {spec!r}") from None
    if not (n >= 1 and 1 <= i <= n):
        raise UsageError(f"--shard must be I/N (1 <= I <= N), got {spec!r}")
    return i, n


def in_shard(key: str, shard: tuple[int, int] | None) -> bool:
    if shard is None:
        return True
    i, n = shard
    return int(hashlib.sha256(key.encode()).hexdigest()[:15], 16) % n == i - 1


def build_units(
    *,
    docs: dict[str, Sequence[str]],
    texts: dict[str, str],
    items: dict[str, list[BankItem]] | None,
    queries: dict[str, str],
    prompt,
    identity: str,
    shard: tuple[int, int] | None = None,
) -> tuple[dict[str, Unit], int]:
    """Units (insertion-ordered) and the number of pairs in this shard.

    ``items`` None means a direct prompt: one pair per (query, passage).
    """
    uses_query = "query" in prompt.placeholders
    unit_key = UnitKeys(identity, prompt.hash)
    units: dict[str, Unit] = {}
    npairs = 0
    for qid, doc_ids in docs.items():
        query = queries.get(qid, "")
        per_query = [None] if items is None else items.get(qid, [])
        for doc in doc_ids:
            passage = texts[doc]
            for item in per_query:
                item_text = None if item is None else item.text
                keys = tuple(item.answers) if item is not None and item.answers else None
                key = unit_key(query if uses_query else None, item_text, passage, keys)
                if not in_shard(key, shard):
                    continue
                unit = units.get(key)
                if unit is None:
                    unit = units[key] = Unit(key, GradeRequest(prompt, query, item_text, passage, keys))
                unit.pairs.append(Pair(qid, doc, item))
                npairs += 1
    return units, npairs


def input_hash(request: GradeRequest, shown: bool | None = None) -> str:
    """What the model is shown of a pair besides the item and the prompt's template: the
    passage (with whatever was added to it), the query where the prompt shows it, the
    answer keys. Recorded in every grade line (``Grade.input_hash``), so that a resume
    regrades a pair whose passage, query or keys changed since it was graded."""
    if shown is None:  # whether the prompt shows the query (the caller may know it once for all)
        shown = "query" in request.prompt.placeholders
    return _input_digest(request.query if shown else None, request.context, request.answer_keys or ())


@functools.lru_cache(maxsize=4096)
def _input_digest(query: str | None, context: str, keys: tuple[str, ...]) -> str:
    # kept for the passages at hand: each is graded with every question of its query, one
    # unit after another (the texts' own hashes, cached in the strings, find it again)
    # joined with NUL, which no reader lets into a text: cheaper than JSON on the hot path
    payload = "\x00".join((f"{int(query is not None)}{len(keys)}", query or "", context, *keys))
    return hashlib.md5(payload.encode("utf-8", "surrogatepass")).hexdigest()


def grader_hash(identity: str) -> str:
    """The grader's settings (``Backend.cache_identity``) as a grade line records them."""
    return hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16]


def output_key(pair: Pair, model: str, prompt, inputs: str | None = None) -> tuple:
    """The resume key of the line this pair would write (see ``Grade.resume_key``)."""
    item = pair.item
    return (pair.query_id, pair.doc_id, None if item is None else item.item_id,
            None if item is None else item.text_hash, model, prompt.id, prompt.hash, inputs)


def is_done(pair: Pair, model: str, prompt, done: set[tuple], inputs: str | None = None) -> bool:
    """In the output for the same texts; a line written before grade lines carried
    ``item_hash``, ``prompt_hash`` or ``input_hash`` matches on what it has, unless the
    item's text is known to have changed under its id (``BankItem.edited``)."""
    key = output_key(pair, model, prompt, inputs)
    if key in done:
        return True
    item_hashes = (key[3],) if pair.item is not None and pair.item.edited else (key[3], None)
    return any(key[:3] + (ih,) + key[4:6] + (ph, inh) in done
               for ih in item_hashes for ph in (key[6], None) for inh in (inputs, None))


def _stale_score(result: GradeResult, prompt, grader) -> bool:
    """A scored grade cached before label masses were recorded (an older exam_eval): it
    may contradict what the judge wrote, so it is graded again."""
    return (grader is not None and prompt.mode == "score" and result.probs is not None and result.detail.label_mass is None
            and getattr(grader, "min_label_mass", 0) > 0 and getattr(grader, "reports_label_mass", False))


def plan_work(units: dict[str, Unit], npairs: int, done: set[tuple], cache, model: str, prompt,
              grader=None) -> Plan:
    """``done``: resume keys of the output's lines (``Grade.resume_key``)."""
    stats = Stats(pairs=npairs)
    pending: list[Unit] = []
    shown = "query" in prompt.placeholders
    for unit in units.values():
        if not done:  # a new output: nothing to look up (a pool of 100,000 pairs saved a second)
            if unit.pairs:
                pending.append(Unit(unit.key, unit.request, list(unit.pairs)))
            continue
        inputs = input_hash(unit.request, shown)
        left = [p for p in unit.pairs if not is_done(p, model, prompt, done, inputs)]
        stats.in_output += len(unit.pairs) - len(left)
        if left:
            pending.append(Unit(unit.key, unit.request, left))
    # an unparsed answer is not final: a rerun asks again (older caches may hold some)
    cached = {k: r for k, r in cache.get_many(u.key for u in pending).items()
              if r.parse_ok and not _stale_score(r, prompt, grader)}
    units_cached = [u for u in pending if u.key in cached]
    todo = [u for u in pending if u.key not in cached]
    stats.from_cache = sum(len(u.pairs) for u in units_cached)
    # longest first: padding waste is smallest within a length-sorted batch, and an
    # out-of-memory error surfaces in the first batch rather than after hours
    todo.sort(key=lambda u: (-u.length, u.key))
    stats.units_to_grade = len(todo)
    return Plan(units_cached, todo, cached, stats)


def _grades_for(unit: Unit, result: GradeResult, model: str, prompt, engine: str | None = None,
                grader: str | None = None, shown: bool | None = None) -> list[Grade]:
    inputs = input_hash(unit.request, shown)
    detail = result.detail.rounded()
    return [
        Grade(
            query_id=p.query_id, doc_id=p.doc_id,
            item_id=None if p.item is None else p.item.item_id,
            kind=None if p.item is None else p.item.kind,
            grade=result.grade if result.parse_ok else None,
            probs=result.probs, answer=result.answer, parse_ok=bool(result.parse_ok and result.grade is not None),
            model=model, prompt=prompt.id, prompt_hash=prompt.hash, engine=engine,
            item_hash=None if p.item is None else p.item.text_hash, input_hash=inputs, grader_hash=grader,
            detail=detail,
        )
        for p in unit.pairs
    ]


def is_failed_call(result: GradeResult) -> bool:
    """No output at all (an HTTP error after all retries): transient, so neither
    written nor cached; a rerun tries again."""
    return bool(getattr(result, "failed", False))


def _unparsed(unit: Unit, result: GradeResult) -> int:
    """Pairs of ``unit`` written with parse_ok false (as :func:`_grades_for` writes them)."""
    return 0 if result.parse_ok and result.grade is not None else len(unit.pairs)


def execute(
    plan: Plan,
    backend: Backend,
    prompt,
    out: GradesAppender,
    cache=None,
    *,
    batch_size: int | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> Stats:
    """Write cached grades, then grade the rest batch by batch; a writer thread appends
    each graded batch to ``out`` and commits it to ``cache`` (:class:`GradeWriter`).
    KeyboardInterrupt propagates once every graded batch is safely on disk."""
    cache = cache or NullCache()
    stats = plan.stats
    model = backend.model_id
    engine_name = backend.engine
    grader = grader_hash(backend.cache_identity)
    shown = "query" in prompt.placeholders

    def to_grades(unit: Unit, result: GradeResult) -> list[Grade]:
        return _grades_for(unit, result, model, prompt, engine_name, grader, shown)

    size = max(1, batch_size or backend.batch_size)
    # a fixed --batch-size wins; otherwise a back end may batch by tokens (on a GPU)
    limit = BatchLimit(size, None if batch_size else _token_budget(backend, prompt))
    multiple = getattr(backend, "pad_multiple", 1)
    start = time.monotonic()
    stop = threading.Event()
    with Prefetch(prepared_chunks(plan.units_todo, backend, size, stop=stop), stop) as ahead, \
            GradeWriter(out, cache, backend.cache_identity, prompt.hash, to_grades) as writer:
        cached = [(u, plan.cached_results[u.key]) for u in plan.units_cached]
        stats.unparsed += sum(_unparsed(u, r) for u, r in cached)
        writer.put(cached, store=False)

        def finish(batch: list[Unit], results: Sequence[GradeResult]) -> None:
            if len(results) != len(batch):
                raise RuntimeError(f"back end {backend.name} returned {len(results)} results for {len(batch)} requests")
            done: list[tuple[Unit, GradeResult]] = []
            for unit, result in zip(batch, results):
                if is_failed_call(result):
                    stats.failed += 1
                    continue
                stats.graded += 1
                stats.deduplicated += len(unit.pairs) - 1
                stats.unparsed += _unparsed(unit, result)
                stats.count(len(unit.pairs), result)
                # unparsed: written (and counted), not cached; a new -o or --retry-unparsed asks again
                done.append((unit, result))
            writer.put(done)
            if on_batch is not None:  # a failed call is not done: the bar stops short of 100% by its pairs
                on_batch(sum(len(u.pairs) for u, _ in done))

        if getattr(backend, "overlaps", False):
            # the device computes batch k+1 while batch k is read back and handed to the writer
            submit, ahead_by = backend.submit, 1
        else:
            def submit(requests):
                results = backend.grade(requests)
                return lambda: results

            ahead_by = 0
        # (units, read) of the batches started and not yet read back, in order; a batch that
        # ran the device out of memory is started as several (fitting.submit_fitting)
        running: collections.deque = collections.deque()
        try:
            for batch in (b for chunk, lengths in ahead for b in cut(chunk, lengths, limit, multiple)):
                try:
                    submit_fitting(backend, submit, batch, limit, running)
                except InterruptedBatch as cut_short:
                    # what the batch got before the interrupt (an endpoint's answers)
                    running.append((cut_short.units, lambda got=cut_short.results: got))
                    raise KeyboardInterrupt from None
                while len(running) > ahead_by:
                    units, read = running.popleft()
                    finish(units, read())
        finally:
            # an interrupt or an error while a batch starts keeps those already computed
            while running:
                units, read = running.popleft()
                finish(units, read())
    stats.device_memory = limit.note()
    stats.seconds = time.monotonic() - start
    if stats.graded:
        cache.record_throughput(backend.cache_identity, stats.graded, stats.seconds)
    return stats


def _token_budget(backend: Backend, prompt) -> int | None:
    """Padded prompt tokens per batch where the back end batches by tokens (on a GPU):
    fewer where ``prompt`` generates, whose cache grows with every token."""
    pick = getattr(backend, "token_budget_for", None)
    return pick(prompt) if pick is not None else getattr(backend, "token_budget", None)


#: units whose prompts are prepared at once (the prefetch thread's unit of work); large,
#: so that distinct passages are tokenized in few large calls, and so that on a GPU the
#: batches cut from a chunk sorted by token count are narrow: of DL19's whole pool (31,250
#: pairs, the 131,072-token budget, T5 batches padded to a multiple of 8) 95.7% of the
#: padded tokens are prompt at 8,192 against 93.2% at 2,048, in 24 batch shapes against 32
#: (bench/studies/batch_shapes.py).
LOOKAHEAD = 8192
#: the first chunk's units (at least two batches), doubling up to LOOKAHEAD: the model
#: waits for the first chunk's tokenizing only
FIRST_CHUNK = 256
#: a chunk's prompts are made this many at a time, with a look at ``stop`` in between, so
#: that an interrupt waits for at most this many (a fraction of a second), not a chunk
PREPARE_PIECE = 2048


def batches(units: list[Unit], backend: Backend, size: int, token_budget: int | None = None,
            stop: threading.Event | None = None, limit: BatchLimit | None = None) -> Iterator[Batch]:
    """The plan's batches, prepared and cut in one thread (:func:`prepared_chunks`, then
    :func:`cut`): what the grading loop does across two."""
    limit = limit or BatchLimit(size, token_budget)
    multiple = getattr(backend, "pad_multiple", 1)
    for chunk, lengths in prepared_chunks(units, backend, size, stop):
        yield from cut(chunk, lengths, limit, multiple)


def prepared_chunks(units: list[Unit], backend: Backend, size: int,
                    stop: threading.Event | None = None) -> Iterator[tuple[list[Unit], list[int] | None]]:
    """The plan's chunks (:func:`chunks`) with their prompts' token counts. A back end with
    ``prepare`` (the local models) gets its prompts' token ids made here, a chunk at a time:
    this runs in the prefetch thread, a whole chunk ahead of the grading. Otherwise the
    counts are None. Stops between pieces of PREPARE_PIECE prompts once ``stop`` is set."""
    prepare = getattr(backend, "prepare", None)
    for chunk in chunks(units, size):
        lengths = None
        if prepare is not None:
            lengths = []
            for start in range(0, len(chunk), PREPARE_PIECE):
                if stop is not None and stop.is_set():
                    return
                got = prepare([u.request for u in chunk[start:start + PREPARE_PIECE]])
                if got is None:
                    lengths = None
                    break
                lengths += got
        yield chunk, lengths


def cut(chunk: list[Unit], lengths: list[int] | None, limit: BatchLimit, multiple: int = 1) -> Iterator[Batch]:
    """One prepared chunk's batches. With a token limit (padded tokens per batch) and the
    token counts, the chunk sorted by token count, longest first, and cut where the next
    unit would overflow the limit, counting the width the back end pads a batch to
    (``multiple``). Otherwise ``limit.units`` units per batch, in the plan's order.
    ``limit`` (:class:`fitting.BatchLimit`) is read at every cut, in the grading thread,
    so a limit lowered meanwhile (the device ran out of memory) cuts the batches still to come."""
    if lengths is None or not limit.tokens:
        b = 0
        while b < len(chunk):
            n = max(1, limit.units)
            yield Batch(chunk[b:b + n], None if lengths is None else lengths[b:b + n], multiple)
            b += n
        return
    order = sorted(range(len(chunk)), key=lambda i: -lengths[i])
    batch: list[int] = []
    width = 0
    for i in order:
        if batch and padded_width(max(width, lengths[i]), multiple) * (len(batch) + 1) > limit.tokens:
            yield Batch([chunk[j] for j in batch], [lengths[j] for j in batch], multiple)
            batch, width = [], 0
        batch.append(i)
        width = max(width, lengths[i])
    if batch:
        yield Batch([chunk[j] for j in batch], [lengths[j] for j in batch], multiple)


def chunks(units: list[Unit], size: int) -> Iterator[list[Unit]]:
    """The prefetch thread's chunks: whole batches of ``size``, FIRST_CHUNK units (or two
    batches) at first, doubling up to LOOKAHEAD (or 16 batches)."""
    whole = max(LOOKAHEAD, size * 16)
    whole -= whole % size
    step = min(whole, max(2 * size, FIRST_CHUNK - FIRST_CHUNK % size))
    start = 0
    while start < len(units):
        yield units[start:start + step]
        start += step
        step = min(whole, step * 2)


class Prefetch:
    """Runs an iterator ahead of its consumer in a thread (``with Prefetch(it) as ahead:
    for item in ahead``): the grading loop's is :func:`prepared_chunks`, so that tokenizing
    the next chunk overlaps the model's work on this one. ``depth`` items at most are made
    beyond the one in use (whose slot is given back when the next is asked for): at depth 1
    the thread makes the next chunk while this one is graded, and no more. An error in the
    thread is raised here; leaving the block (an interrupt included) stops the thread."""

    _END = object()

    def __init__(self, source: Iterator, stop: threading.Event | None = None, depth: int = 1):
        self.source = source
        # C-level primitives only (grading.handover): an interrupt landing inside a
        # queue.Queue's Condition would leave this thread waiting on its lock for ever
        self.handover = HandOver(depth)
        #: set on leaving the block; ``source`` may watch it too (batches' ``stop``)
        self.stop = stop or threading.Event()
        self.thread = threading.Thread(target=self._run, name="exam-eval-prefetch", daemon=True)

    def _put(self, item) -> bool:
        return self.handover.put(item, lambda: not self.stop.is_set())

    def _run(self) -> None:
        try:
            for item in self.source:
                if not self._put((item, None)):
                    return
            self._put((self._END, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the grading thread, raised there
            self._put((None, exc))

    def __enter__(self) -> Prefetch:
        self.thread.start()
        return self

    def __iter__(self):
        in_use = False
        while True:
            if in_use:
                self.handover.release()  # the item before this one is done with
            item, exc = self.handover.take()
            in_use = True
            if exc is not None:
                raise exc
            if item is self._END:
                return
            yield item

    def __exit__(self, *exc) -> None:
        self.stop.set()
        # the thread ends at its next check (prepared_chunks: every PREPARE_PIECE prompts); left
        # running, it could still be inside the tokenizer's native code at the process's end
        self.thread.join()


def estimate_seconds(units: int, rate: float | None) -> float | None:
    return None if not rate else units / rate


def check_bank_coverage(items: dict[str, list[BankItem]], docs: dict[str, Sequence[str]], bank_name: str) -> list[str]:
    """Queries of the bank with pooled passages; none at all is bad input."""
    covered = [q for q in items if docs.get(q)]
    if not covered:
        sample = ", ".join(sorted(items)[:5])
        pooled = ", ".join(sorted(docs)[:5]) or "none"
        raise InputError(f"no bank query has pooled passages (bank queries: {sample}...; pooled queries: {pooled})",
                         bank_name)
    return covered
