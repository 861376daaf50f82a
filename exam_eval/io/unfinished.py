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

import os
import threading

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
