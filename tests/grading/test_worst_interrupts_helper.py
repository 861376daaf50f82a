"""The worst-interrupt helper patches Condition for the whole process: every other thread
(xdist's execnet threads are started by _thread, unknown to threading) must pass through it
untouched, or the worker itself goes down (as it did in CI: a RecursionError, then a hang)."""

import _thread
import threading

from worst_interrupts import interrupt_inside_conditions


def test_a_thread_threading_never_started_enters_conditions_while_armed(monkeypatch):
    grading: dict = {"ident": -1}
    armed = interrupt_inside_conditions(monkeypatch, grading)
    armed[0] = True
    finished = threading.Event()
    outcome: dict = {}

    def foreign():
        try:
            event = threading.Event()  # a Condition of its own
            event.set()
            outcome["set"] = event.is_set()
        except BaseException as error:  # noqa: BLE001 - the failure is what is recorded
            outcome["error"] = repr(error)[:200]
        finished.set()

    _thread.start_new_thread(foreign, ())
    assert finished.wait(10)
    assert outcome == {"set": True}
    assert armed[0] is True  # armed only for the grading thread: still waiting for it
