"""An interrupt at its worst point: inside a Condition, its lock taken (shared by the
hand-over tests of the grade writer and the prefetch thread)."""

from __future__ import annotations

import threading


def interrupt_inside_conditions(monkeypatch, grading: dict) -> list:
    """Patch ``threading.Condition.__enter__`` so that, once armed, the next Condition the
    thread ``grading["ident"]`` enters raises KeyboardInterrupt after taking its lock,
    which nothing will release. Returns the switch: ``armed[0] = True`` arms it (a plain
    list, as setting an Event enters a Condition itself)."""
    real_enter = threading.Condition.__enter__
    armed = [False]

    def enter(self):
        got = real_enter(self)
        # get_ident, not current_thread: on a thread threading never started (a C
        # library's), current_thread builds a _DummyThread, whose Event enters a Condition,
        # which comes back here without end (a RecursionError that took a CI worker down).
        if armed[0] and threading.get_ident() == grading.get("ident"):
            armed[0] = False
            raise KeyboardInterrupt  # the lock is held and nothing will release it
        return got

    monkeypatch.setattr(threading.Condition, "__enter__", enter)
    return armed


def run_as_grading_thread(body, grading: dict, seconds: float = 10) -> dict:
    """``body()`` in a daemon thread recorded as ``grading["thread"]``, waited for at most
    ``seconds``: {"interrupted": True} where it raised KeyboardInterrupt, "done" once it
    ended (missing: it hung)."""
    outcome: dict = {}

    def run():
        grading["thread"] = threading.current_thread()
        grading["ident"] = threading.get_ident()
        try:
            body()
        except KeyboardInterrupt:
            outcome["interrupted"] = True
        outcome["done"] = True

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    return outcome
