"""Files this process has begun and not yet finished, for an exit that skips every
``finally``: a second Ctrl-C or SIGTERM ends a command at once (``os._exit``, see
``commands._base.stop_on_signals``), and must not leave behind what the first one's
orderly ending would have removed: a temp file of an atomic write, or the empty grades
file that exam-grade created to lock it.

Only the main thread's signal handler calls :func:`remove_all`; writers register and
forget from any thread, so the table is guarded by a lock the handler never waits on. A
forked worker (``parallel.fork_map``) inherits the table and the handler: it removes
nothing of its parent's.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Iterator

_files: dict[int, tuple[str, bool, int]] = {}  # token -> (path, only when empty, pid)
_lock = threading.Lock()
_next = iter(range(1, 1 << 62))


def begun(path: str, *, only_if_empty: bool = False) -> int:
    """``path`` is being written by this process; the token is for :func:`finished`."""
    with _lock:
        token = next(_next)
        _files[token] = (path, only_if_empty, os.getpid())
    return token


def finished(token: int | None) -> None:
    """``path`` is complete (renamed into place, holding data) or already removed."""
    if token is not None:
        with _lock:
            _files.pop(token, None)


def remove_all() -> None:
    """Remove every file begun and not finished (the empty ones only, where so asked).
    Called on the way out of the process; never raises."""
    if not _lock.acquire(blocking=False):
        return  # a writer holds the table at this instant: leave it rather than hang the exit
    try:
        pending = list(_files.values())
        _files.clear()
    finally:
        _lock.release()
    me = os.getpid()
    for path, only_if_empty, pid in pending:
        if pid != me:
            continue  # a forked worker inherits the table: the files are its parent's to remove
        try:
            if not only_if_empty or os.stat(path).st_size == 0:
                os.unlink(path)
        except OSError:
            pass


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C (or SIGTERM made an interrupt) inside the block takes effect at its end: in
    the middle of a batch's write once the batch is on disk and counted, so "N grades
    written" is what the file holds; between a temp file's creation and its registration
    here once it is known, so that the interrupt's ending removes it.
    Only the main thread's Python-level handlers are deferred, and only the first signal:
    a second one acts at once (a write blocked on a pipe nobody reads can still be ended)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    import signal

    caught: list[tuple[int, object]] = []
    saved = {}

    def defer(signum, frame):
        if caught:
            saved[signum](signum, frame)
        caught.append((signum, frame))

    for sig in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(sig)
        if callable(handler):  # SIG_DFL and SIG_IGN raise nothing: left as they are
            saved[sig] = signal.signal(sig, defer)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        if caught:
            signum, frame = caught[0]
            saved[signum](signum, frame)  # what the signal would have done: raise, or exit
