"""A second Ctrl-C (or SIGTERM) ends a command at once, skipping every ``finally``; what
the first one's orderly ending would have removed must go all the same: the temp file of
an atomic write (-o of every command) and the empty grades file exam-grade created to lock
it. A grades file that holds grades is kept, and a forked worker that gets the signal
removes nothing of its parent's.

Each case is a real process that takes the commands' signal handling and signals itself,
so the timing is exact: the second signal lands inside the write."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import os, signal, sys, time
from exam_eval.commands._base import stop_on_signals
signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal, started in the background too
stop_on_signals()
def first_then_second():
    try:
        os.kill(os.getpid(), signal.SIGINT)  # the first: KeyboardInterrupt, an orderly ending begins
    except KeyboardInterrupt:
        os.kill(os.getpid(), signal.SIGINT)  # the second lands inside that ending: exit at once
    time.sleep(30)
    sys.exit("the second signal did not end the process")
"""


def _run(body: str, cwd: Path) -> subprocess.CompletedProcess:
    code = PRELUDE + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_an_atomic_write_leaves_no_temp_file(tmp_path):
    r = _run("""
        from exam_eval.io.outputs import atomic_output
        with atomic_output("out.txt") as fh:
            fh.write("half of it\\n" * 1000)
            fh.flush()
            assert any(n.startswith(".out.txt.") for n in os.listdir("."))
            first_then_second()
    """, tmp_path)
    assert r.returncode == 130, r.stderr
    assert os.listdir(tmp_path) == []


def test_a_stdin_copy_leaves_no_temp_file(tmp_path):
    r = _run("""
        import tempfile
        from exam_eval.io.openers import copy_named
        with copy_named(b"q1 0 d1 1\\n", "<stdin>") as path:
            print(path, flush=True)
            first_then_second()
    """, tmp_path)
    assert r.returncode == 130, r.stderr
    copy = r.stdout.strip()
    assert copy and not os.path.exists(copy)


def test_the_empty_locked_grades_file_goes_and_one_with_grades_stays(tmp_path):
    r = _run("""
        from exam_eval.grading.output import OutputLock
        empty = OutputLock("empty.jsonl").acquire()
        full = OutputLock("full.jsonl").acquire()
        with open("full.jsonl", "a") as fh:
            fh.write('{"a": 1}\\n')
        open("theirs.jsonl", "w").close()
        existing = OutputLock("theirs.jsonl").acquire()  # not created here: never removed
        first_then_second()
    """, tmp_path)
    assert r.returncode == 130, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["full.jsonl", "theirs.jsonl"]
    assert (tmp_path / "full.jsonl").read_text() == '{"a": 1}\n'


def test_a_released_lock_is_forgotten(tmp_path):
    """A run that ended in order and wrote nothing removed its empty file itself; a file of
    that name made later (by anyone) is not removed by this process's later exit."""
    r = _run("""
        from exam_eval.grading.output import OutputLock
        OutputLock("g.jsonl").acquire().release()
        assert not os.path.exists("g.jsonl")
        open("g.jsonl", "w").close()
        first_then_second()
    """, tmp_path)
    assert r.returncode == 130, r.stderr
    assert os.listdir(tmp_path) == ["g.jsonl"]


def test_a_forked_worker_removes_nothing_of_its_parents(tmp_path):
    r = _run("""
        from exam_eval.io.outputs import atomic_output
        with atomic_output("out.txt") as fh:
            fh.write("x")
            fh.flush()
            pid = os.fork()
            if pid == 0:  # a worker of parallel.fork_map: same handlers, same table
                from exam_eval.commands._base import exit_on_next_signal
                exit_on_next_signal()  # as after a first Ctrl-C: the next signal exits at once
                os.kill(os.getpid(), signal.SIGINT)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 130, status
            assert [n for n in os.listdir(".") if n.startswith(".out.txt.")], "the worker removed it"
        print("parent done", flush=True)
    """, tmp_path)
    assert r.returncode == 0 and "parent done" in r.stdout, r.stderr
    assert os.listdir(tmp_path) == ["out.txt"] and (tmp_path / "out.txt").read_text() == "x"
