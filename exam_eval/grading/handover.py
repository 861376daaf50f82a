"""A bounded hand-over between two threads, on C-level primitives only.

The grading thread hands batches to the writer thread and takes prepared batches from the
prefetch thread. A ``queue.Queue`` would do, but its Condition is Python code: an
interrupt (Ctrl-C, SIGTERM) landing inside it after its lock is taken leaves that lock
held for ever, and the other thread, waiting on it, hangs the command. Here the items go
through a ``SimpleQueue`` (never blocks a put) and the bound is a second ``SimpleQueue``
of ``depth`` slot tokens: one is taken for each item put and given back by the receiver
(:meth:`HandOver.release`) once it is done with the item.
"""

from __future__ import annotations

import queue
from typing import Any, Callable

#: seconds between the sender's looks at ``go_on`` while every slot is out
POLL = 0.1


class HandOver:
    def __init__(self, depth: int):
        self._items: queue.SimpleQueue = queue.SimpleQueue()
        self._slots: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(max(1, depth)):
            self._slots.put(None)

    def put(self, item: Any, go_on: Callable[[], bool]) -> bool:
        """Hand ``item`` over once a slot is free; while waiting, ``go_on()`` is asked every
        :data:`POLL` seconds (it may raise), and False from it gives up: returns False."""
        while go_on():
            try:
                self._slots.get(timeout=POLL)
            except queue.Empty:
                continue
            self._items.put(item)
            return True
        return False

    def put_now(self, item: Any) -> None:
        """Beyond the bound (an end mark, which must never wait)."""
        self._items.put(item)

    def take(self) -> Any:
        """The next item, waiting for it (a signal still interrupts the wait)."""
        return self._items.get()

    def take_waiting(self, most: int) -> list:
        """Up to ``most`` more items, of those already handed over (no wait)."""
        got = []
        while len(got) < most:
            try:
                got.append(self._items.get_nowait())
            except queue.Empty:
                break
        return got

    def release(self) -> None:
        """One item done with: its slot is free again."""
        self._slots.put(None)
