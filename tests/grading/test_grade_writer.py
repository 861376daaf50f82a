"""The writer thread (grading.writer): graded batches are written and cached off the
grading thread, and nothing changes for the user: the same grades, the output before the
cache, every graded batch kept on an interrupt (a rerun completes the work exactly), a
writer's error raised in the grading thread as the same one-line error."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time

import pytest

from exam_eval.backends.scripted import ScriptedBackend
from exam_eval.errors import OutputError
from exam_eval.grading import engine, writer
from exam_eval.grading.cache import GradeCache, NullCache
from exam_eval.grading.output import GradesAppender, existing_keys, repair
from exam_eval.grading.prompts import get_prompt
from exam_eval.io.bank_items import make_item_id, BankItem
from waiting import running_in, wait_for
from worst_interrupts import interrupt_inside_conditions, run_as_grading_thread

PROMPT = get_prompt("question-selfrating")
BATCH = 4


def _world(n_queries=3, n_docs=6, n_items=4):
    docs, texts, items = {}, {}, {}
    for q in range(n_queries):
        qid = f"q{q}"
        docs[qid] = [f"d{q}-{d}" for d in range(n_docs)]
        texts.update({f"d{q}-{d}": f"passage {d} of query {q} " + "word " * d for d in range(n_docs)})
        items[qid] = [BankItem(qid, make_item_id(qid, t), "question", t) for t in
                      (f"question {i} about {q}?" for i in range(n_items))]
    return docs, texts, items


WORLD = _world()
PAIRS = 3 * 6 * 4


def _plan(backend, out, cache):
    units, npairs = engine.build_units(docs=WORLD[0], texts=WORLD[1], items=WORLD[2], queries={}, prompt=PROMPT,
                                       identity=backend.cache_identity)
    repair(str(out))
    return engine.plan_work(units, npairs, existing_keys(str(out)), cache, backend.model_id, PROMPT)


def _grade(backend, out, cache, sink=None):
    sink = sink or GradesAppender(str(out))
    try:
        return engine.execute(_plan(backend, out, cache), backend, PROMPT, sink, cache, batch_size=BATCH)
    finally:
        sink.close()


def _rows(path):
    return {(r["query_id"], r["doc_id"], r["item_id"]): (r["grade"], r["answer"])
            for r in map(json.loads, path.read_text().splitlines())}


def _cached_keys(path) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT COUNT(*) FROM grades").fetchone()[0]
    finally:
        db.close()


class StopAt(ScriptedBackend):
    """Raises KeyboardInterrupt (a Ctrl-C in the grading thread) at its ``stop_at``-th batch."""

    def __init__(self, stop_at: int | None = None):
        super().__init__()
        self.stop_at = stop_at
        self.batches = 0

    def grade(self, requests):
        self.batches += 1
        if self.batches == self.stop_at:
            raise KeyboardInterrupt
        return super().grade(requests)


class SlowAppender(GradesAppender):
    """Writes each batch after ``delay`` seconds, recording the thread that wrote it."""

    def __init__(self, path, delay=0.05):
        super().__init__(path)
        self.delay = delay
        self.threads = set()

    def write_batch(self, grades):
        self.threads.add(threading.current_thread().name)
        time.sleep(self.delay)
        return super().write_batch(grades)


def test_the_writer_thread_writes_the_same_grades_and_cache(tmp_path):
    """Same lines as graded one by one here, written from the writer's thread, and every
    parsed unit cached (from that thread: sqlite's same-thread check is off)."""
    out, cache_path = tmp_path / "g.jsonl", tmp_path / "c.sqlite"
    cache = GradeCache(cache_path)
    sink = SlowAppender(str(out), delay=0.0)
    backend = ScriptedBackend()
    stats = _grade(backend, out, cache, sink)
    cache.close()
    assert sink.threads == {"exam-eval-writer"}
    assert stats.graded == PAIRS and _cached_keys(cache_path) == PAIRS
    # the expected grades, computed without the engine: the back end on each request
    units, _ = engine.build_units(docs=WORLD[0], texts=WORLD[1], items=WORLD[2], queries={}, prompt=PROMPT,
                                  identity=backend.cache_identity)
    expected = {}
    for u in units.values():
        [res] = ScriptedBackend().grade([u.request])
        for p in u.pairs:
            expected[(p.query_id, p.doc_id, p.item.item_id)] = (res.grade, res.answer)
    assert _rows(out) == expected


def test_batches_waiting_for_a_slow_disk_are_written_together(tmp_path):
    """A disk slower than the model: the batches that wait meanwhile go out in one write
    (one fsync, one cache commit), whole and in order, and nothing is lost or doubled."""
    out, cache_path = tmp_path / "g.jsonl", tmp_path / "c.sqlite"
    cache = GradeCache(cache_path)
    writes = []

    class Slow(SlowAppender):
        def write_batch(self, grades):
            grades = list(grades)
            writes.append(len(grades))
            return super().write_batch(grades)

    _grade(ScriptedBackend(), out, cache, Slow(str(out), delay=0.05))
    cache.close()
    assert sum(writes) == PAIRS == len(out.read_text().splitlines()) == _cached_keys(cache_path)
    assert len(writes) < PAIRS // BATCH and max(writes) > BATCH  # grouped
    assert max(writes) <= writer.DEPTH * BATCH and all(n % BATCH == 0 for n in writes)
    whole = tmp_path / "whole.jsonl"
    _grade(ScriptedBackend(), whole, NullCache())
    assert out.read_text() == whole.read_text()  # the same lines in the same order


def test_an_interrupt_keeps_every_graded_batch_and_a_rerun_completes_the_work(tmp_path):
    """The writer lags behind (slow disk): at the interrupt several graded batches wait in
    its queue; all of them reach the output and the cache before the interrupt propagates."""
    out, cache_path = tmp_path / "g.jsonl", tmp_path / "c.sqlite"
    cache = GradeCache(cache_path)
    backend = StopAt(stop_at=7)
    sink = SlowAppender(str(out), delay=0.1)
    with pytest.raises(KeyboardInterrupt):
        _grade(backend, out, cache, sink)
    cache.close()
    graded = 6 * BATCH  # the six batches before the interrupted one
    assert sink.lines == graded == len(out.read_text().splitlines()) == _cached_keys(cache_path)
    # the rerun reads them from the output and grades exactly the rest
    rest = StopAt()
    cache = GradeCache(cache_path)
    stats = _grade(rest, out, cache)
    cache.close()
    assert stats.in_output == graded and stats.graded == PAIRS - graded == len(rest.seen)
    whole = tmp_path / "whole.jsonl"
    _grade(ScriptedBackend(), whole, NullCache())
    assert _rows(out) == _rows(whole) and len(out.read_text().splitlines()) == PAIRS


class FailOn:
    """A sink whose ``n``-th batch fails as a full disk does."""

    def __init__(self, n):
        self.n = n
        self.batches = 0
        self.lines = 0

    def write_batch(self, grades):
        self.batches += 1
        if self.batches == self.n:
            raise OutputError(f"cannot write: No space left on device; the {self.lines} grades written before are "
                              "kept", "g.jsonl")
        self.lines += len(grades)
        return len(grades)

    def close(self):
        pass


def test_a_writer_error_is_raised_in_the_grading_thread_and_stops_it(tmp_path):
    backend = StopAt()
    sink = FailOn(2)  # one write made (a batch, or the batches waiting then), the second fails
    with pytest.raises(OutputError) as exc:
        _grade(backend, tmp_path / "g.jsonl", NullCache(), sink)
    assert str(exc.value) == f"g.jsonl: cannot write: No space left on device; the {sink.lines} grades written " \
                             "before are kept"
    assert BATCH <= sink.lines <= writer.DEPTH * BATCH and sink.lines % BATCH == 0
    # the grading thread learns of it at its next hand-over: beyond the batches written, the
    # failed write's (a queue's length at most), the queue's and the two in its hands
    assert backend.batches <= sink.lines // BATCH + 2 * writer.DEPTH + 2 < PAIRS // BATCH


def test_a_writer_error_wins_over_an_interrupt_that_comes_with_it():
    """A full disk says what to do (make room); "interrupted" alone would hide it."""
    sink = FailOn(1)
    with pytest.raises(OutputError):
        with writer.GradeWriter(sink, NullCache(), "id", "h", lambda u, r: [u]) as w:
            w.put([("line", None)], store=False)
            wait_for(lambda: w.error is not None, 10, "the writer's error")
            raise KeyboardInterrupt


class Blocked:
    """A sink that blocks in its write until ``release`` is set."""

    def __init__(self):
        self.release = threading.Event()
        self.entered = threading.Event()
        self.lines = 0

    def write_batch(self, grades):
        self.entered.set()
        self.release.wait(10)
        self.lines += len(grades)
        return len(grades)


class SignalSoon:
    """SIGINT to this process once ``ready`` is set and the main thread waits in the
    writer's drain (GradeWriter._drain: the block has ended, the last batches are being
    written), unless the block has ended before (a stray signal would stop the test
    session); then ``then()``."""

    def __init__(self, ready: threading.Event, then=None):
        self.ready, self.then = ready, then
        self.ended = threading.Event()
        self.missed: str | None = None
        self.thread = threading.Thread(target=self._send, daemon=True)

    def _draining(self) -> bool:
        return self.ended.is_set() or running_in(threading.main_thread(), "_drain")

    def _send(self):
        try:
            wait_for(self.ready.is_set, 10, "the sink's write to begin")
            wait_for(self._draining, 10, "the main thread to wait in the writer's drain")
        except AssertionError as exc:
            self.missed = str(exc)
            return
        if not self.ended.is_set():
            os.kill(os.getpid(), signal.SIGINT)
            if self.then is not None:
                self.then()

    def __enter__(self):
        self.thread.start()

    def __exit__(self, *exc):
        self.ended.set()
        self.thread.join()
        assert self.missed is None, self.missed


def test_an_interrupt_while_the_last_batches_are_written_waits_for_them(sigint_raises):
    """The grading is done and the writer still writing when Ctrl-C comes: the writes end,
    then the interrupt is raised (the run says how many grades it wrote)."""
    sink = Blocked()

    def release_once_taken():
        w.stop.wait(10)  # set by the drain once it has taken the interrupt
        sink.release.set()

    with SignalSoon(sink.entered, then=release_once_taken), pytest.raises(KeyboardInterrupt):
        with writer.GradeWriter(sink, NullCache(), "id", "h", lambda u, r: [u]) as w:
            w.put([("a", None), ("b", None)], store=False)
    assert sink.lines == 2 and w.done


def test_a_second_interrupt_while_draining_stops_at_once(sigint_raises):
    sink = Blocked()
    t0 = time.monotonic()
    try:
        with SignalSoon(sink.entered), pytest.raises(KeyboardInterrupt):
            with writer.GradeWriter(sink, NullCache(), "id", "h", lambda u, r: [u]) as w:
                w.put([("a", None)], store=False)
                raise KeyboardInterrupt  # the first: the drain begins, and the second ends it
        assert time.monotonic() - t0 < 5 and sink.lines == 0 and not w.done
    finally:
        sink.release.set()


class _Sink:
    lines = 0

    def write_batch(self, lines):
        self.lines += len(lines)


def test_an_interrupt_inside_a_lock_the_hand_over_takes_cannot_hang_it(monkeypatch):
    """A sweep saw exam-grade hang for good after one Ctrl-C: it landed in queue.Queue's
    Condition between taking its lock and the code that releases it, and both threads then
    waited on that lock. Here every Condition the grading thread enters from the moment it
    ends the block raises at that worst point; the hand-over must not go through one."""
    grading: dict = {}
    armed = interrupt_inside_conditions(monkeypatch, grading)
    sink = _Sink()

    def grade():
        with writer.GradeWriter(sink, NullCache(), "id", "h", lambda u, r: [u]) as w:
            for k in range(10):
                w.put([(f"u{k}", None)], store=False)
            armed[0] = True

    outcome = run_as_grading_thread(grade, grading)
    assert outcome.get("done"), "the hand-over hung on a lock an interrupt left taken"
    assert sink.lines == 10
