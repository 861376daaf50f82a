"""Finished batches written off the grading thread: the output, then the cache.

The grading thread hands each graded batch to :class:`GradeWriter` and goes on with the
next one while a thread of its own turns the results into grade lines, appends them to
the output (flushed and fsynced) and commits them to the grade cache, in that order, so
the file stays the record: what is cached is in the file. The batches waiting when the
writer comes back for more are written together (one fsync and one cache commit a
group: a disk slower than the model costs a sync per group, not per batch). The queue
between the two is short (``DEPTH`` batches), so the model cannot run far ahead of the
disk and a kill loses at most the batches in flight.

Ending the block (``with GradeWriter(...) as w``) always writes what was handed over
first, whatever ended it: an interrupt (Ctrl-C, SIGTERM) or an error of the grading
thread leaves every finished batch in the output and the cache. While it drains, an
interrupt stops only a wait for another process's lock on the cache (those batches are in
the output, which a rerun reads); a second interrupt stops at once (a torn last batch is
cut on resume). An error of the writer (a full disk, an unwritable cache) is raised in
the grading thread at its next hand-over or at the end of the block, as the same exception
the writer met, so the caller reports it as before.
"""

from __future__ import annotations

import threading
from typing import Callable, Sequence

from .cache import WaitStopped
from .handover import HandOver

#: batches waiting for the writer at most; the grading thread waits beyond that
DEPTH = 4
_POLL = 0.1  # seconds between looks at the writer while waiting on it (signals act between)


class GradeWriter:
    """``to_grades(unit, result)``: the grade lines of one graded unit. ``cache`` needs
    ``put_many(rows, identity, prompt_hash, stop=event)``; ``sink`` needs
    ``write_batch(grades)``."""

    _END = object()

    def __init__(self, sink, cache, identity: str, prompt_hash: str, to_grades: Callable, depth: int = DEPTH):
        self.sink = sink
        self.cache = cache
        self.identity = identity
        self.prompt_hash = prompt_hash
        self.to_grades = to_grades
        # C-level primitives only (grading.handover): the grading thread's hand-over and its
        # drain are Python code a signal can interrupt anywhere
        self.handover = HandOver(depth)
        self.depth = max(1, depth)
        self.error: BaseException | None = None
        self.stop = threading.Event()  # set on an interrupt: give up waiting for the cache's lock
        # released by the writer as it ends; a bare lock, whose timed acquire an interrupt
        # leaves cleanly (Thread.join and Event.wait are Python code around a Condition)
        self.running = threading.Lock()
        self.running.acquire()
        self.done = False  # True once the writer has ended (what it was handed over is written)
        self.thread = threading.Thread(target=self._run, name="exam-eval-writer", daemon=True)

    # -- the writer's thread ----------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._write_all()
        finally:
            self.done = True
            self.running.release()

    def _write_all(self) -> None:
        caching = True
        while True:
            # the batches waiting go together (one append, one fsync, one cache commit):
            # a slow disk slows the grading thread by its syncs per group, not per batch
            group = [self.handover.take()]
            group += self.handover.take_waiting(self.depth - 1)
            end = any(item is self._END for item in group)
            group = [item for item in group if item is not self._END]
            try:
                self._write(group, caching)
            except WaitStopped:
                # the interrupt's drain gave up on a locked cache: the batches are in the
                # output; the ones after them go there too, uncached, without waiting again
                caching = False
            finally:
                for _ in group:
                    self.handover.release()
            if end:
                return

    def _write(self, group: list, caching: bool) -> None:
        if self.error is not None or not group:
            return  # failed: take what comes so the grading thread never blocks, write nothing
        try:
            lines = [g for batch, _store in group for unit, result in batch for g in self.to_grades(unit, result)]
            if lines:
                self.sink.write_batch(lines)
            rows = [(unit.key, result) for batch, store in group if store and caching
                    for unit, result in batch if result.parse_ok]
            if rows:
                self.cache.put_many(rows, self.identity, self.prompt_hash, stop=self.stop)
        except WaitStopped:
            raise
        except BaseException as exc:  # noqa: BLE001 - raised in the grading thread
            self.error = exc

    # -- the grading thread -----------------------------------------------------------------
    def __enter__(self) -> GradeWriter:
        self.thread.start()
        return self

    def put(self, batch: Sequence[tuple], *, store: bool = True) -> None:
        """Hand over ``batch`` ((unit, result) pairs) to be written, and with ``store`` cached
        (a parsed result only). Waits while the queue is full; raises the writer's error."""
        self.handover.put((batch, store), self._no_error)

    def _no_error(self) -> bool:
        if self.error is not None:
            raise self.error
        return True

    def __exit__(self, exc_type, exc, tb) -> bool:
        interrupted = exc_type is not None and issubclass(exc_type, KeyboardInterrupt)
        if interrupted:
            self.stop.set()
        late = self._drain(interrupted)
        if self.error is not None and self.error is not exc and (exc is None or interrupted):
            raise self.error  # a full disk says more than the interrupt that came with it
        if late and exc is None:
            raise KeyboardInterrupt  # the signal that came while the last batches were written
        return False

    def _drain(self, interrupted: bool) -> bool:
        """Everything handed over written; True if an interrupt came meanwhile (a second
        one is raised at once)."""
        ended = late = False
        while True:
            try:
                if not ended:
                    self.handover.put_now(self._END)
                    ended = True
                if self.running.acquire(timeout=_POLL):
                    return late
            except KeyboardInterrupt:
                if interrupted or late:
                    raise
                late = True
                self.stop.set()
