"""Waiting on the event that proves a state, instead of sleeping and assuming it came "by now".

A sleep long enough on an idle machine is too short on a loaded one (two cores, other test
runs) and needlessly long everywhere else. A test waits instead for what shows the state:
a line in a file the command writes, a request at the stand-in server (tests/openai_stub.py),
an event another thread sets, with a deadline and a message that says what never came.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float, what: str, *, proc: subprocess.Popen | None = None,
             interval: float = 0.01) -> T:
    """Poll ``predicate`` until it returns something true, and return that. Fail, naming
    ``what``, once ``timeout`` seconds passed first, or once ``proc`` (a child the state is
    awaited in) ended first (with its exit status and standard error)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"waited for {what}, but the process ended first (exit {proc.returncode}):\n"
                                 f"{err or ''}{out or ''}")
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g}s for {what}; it never came")
        time.sleep(interval)


def lines_in(path, line: str | None = None) -> int:
    """How many lines the file at ``path`` holds (equal to ``line``, if given); 0 while it
    does not exist."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return sum(1 for x in fh if line is None or x.rstrip("\n") == line)
    except FileNotFoundError:
        return 0


def running_in(thread: threading.Thread, function: str) -> bool:
    """Whether ``thread`` is inside a call of a function named ``function`` now (the state
    a test interrupts it in, where the code under test announces nothing)."""
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False
