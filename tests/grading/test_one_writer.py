"""One writer per grades file: a second exam-grade aimed at an output another live process
is writing is refused at once (one line naming the file and the first process, exit 2),
whether both start together or the second once the first holds the file; a writer killed
by SIGKILL never blocks its rerun; two processes sharing one sqlite cache both finish.
Real subprocesses on the demo collection with the scripted back end; duplicate keys are
counted from the file itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from exam_eval.backends.scripted import ScriptedBackend
from exam_eval.errors import OutputError
from exam_eval.grading.output import _lock_holder
from exam_eval.grading.session import GradingSession
from child_env import CTRL_C_REACHES, ChildEnv
from waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
ENV = ChildEnv(PYTHONPATH=str(ROOT), EXAM_EVAL_PROGRESS="0")
CMD = [sys.executable, "-c", CTRL_C_REACHES + "import exam_eval.commands.grade as m; m.main()"]
PAIRS = 1060  # the demo pool (top 20 of good.run and poor.run) times its questions


def _args(tmp_path, out, *extra, cache="cache.sqlite"):
    return ["--backend", "scripted", "--prompt", "question-selfrating", "--bank", DEMO / "questions.jsonl",
            "--passages", DEMO / "passages.jsonl", DEMO / "good.run", DEMO / "poor.run",
            "--cache", tmp_path / cache, "-o", out, *extra]


def _start(args) -> subprocess.Popen:
    return subprocess.Popen(CMD + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV)


def _keys(path: Path) -> Counter:
    return Counter((r["query_id"], r["doc_id"], r["item_id"])
                   for r in map(json.loads, path.read_text().splitlines()))


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _holder(path: Path) -> int | None:
    """The pid holding the lock on the file at ``path`` (None: none, or no file yet)."""
    try:
        return _lock_holder(path.stat())
    except FileNotFoundError:
        return None


def _check_refused(err: str, out: Path, pid: int) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0] == (f"exam-grade: {out}: is being written by another process (pid {pid}); "
                        "wait for it to end, or write to another file"), err


# a writer that would take about 35 s: certainly still writing when the other one starts,
# whatever the machine's load; the tests interrupt it once the other is refused
SLOW = ("-O", "delay=0.5", "--batch-size", "16")


def _run(args) -> subprocess.CompletedProcess:
    return subprocess.run(CMD + [str(a) for a in args], capture_output=True, text=True, env=ENV, timeout=120)


def _complete(out: Path, tmp_path: Path) -> None:
    """Rerun to the end (not blocked by any lock); every key is then in the file once."""
    rerun = _run(_args(tmp_path, out))
    assert rerun.returncode == 0, rerun.stderr
    keys = _keys(out)
    assert len(keys) == PAIRS and set(keys.values()) == {1}


def _finish(proc: subprocess.Popen, out: Path, tmp_path: Path) -> None:
    """Interrupt the slow writer (its whole batches stay) and complete the work."""
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    _complete(out, tmp_path)


def test_two_writers_started_together_write_every_key_once(tmp_path):
    out = tmp_path / "g.jsonl"
    a, b = _start(_args(tmp_path, out, *SLOW)), _start(_args(tmp_path, out, *SLOW))
    deadline = time.monotonic() + 60
    while a.poll() is None and b.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    refused, writer = (a, b) if a.poll() is not None else (b, a)
    _, err = refused.communicate(timeout=60)
    assert refused.returncode == 2, err
    _check_refused(err, out, writer.pid)
    assert writer.poll() is None
    _finish(writer, out, tmp_path)


def test_a_second_writer_once_the_first_holds_the_file_is_refused_at_once(tmp_path):
    out = tmp_path / "g.jsonl"
    first = _start(_args(tmp_path, out, *SLOW))
    # once the first holds the file's lock (as /proc/locks, which names it in the refusal,
    # tells), not after a time that a loaded machine may need just to start the interpreter
    wait_for(lambda: _holder(out) == first.pid, 60, "the first writer to lock the output", proc=first)
    t0 = time.monotonic()
    second = _run(_args(tmp_path, out, *SLOW))
    refused_after = time.monotonic() - t0
    assert second.returncode == 2, second.stderr
    _check_refused(second.stderr, out, first.pid)
    # refused after reading the inputs, before grading anything: the interpreter's start-up
    # dominates (a second or two here), far below the first writer's run
    assert refused_after < 10, refused_after
    assert first.poll() is None
    _finish(first, out, tmp_path)


def test_sigkill_leaves_no_lock_behind(tmp_path):
    out = tmp_path / "g.jsonl"
    args = _args(tmp_path, out, "-O", "delay=0.02", "--batch-size", "8")
    proc = _start(args)
    deadline = time.monotonic() + 60
    while _lines(out) < 40 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert 0 < _lines(out) < PAIRS
    _complete(out, tmp_path)


def test_sigkill_before_the_first_batch_then_rerun(tmp_path):
    """Killed after taking the lock (the output exists, empty) but before any grade."""
    out = tmp_path / "g.jsonl"
    proc = _start(_args(tmp_path, out, "-O", "delay=5", "--batch-size", "4"))
    deadline = time.monotonic() + 60
    while not out.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert out.exists() and out.stat().st_size == 0
    _complete(out, tmp_path)


def test_two_outputs_sharing_one_cache_both_finish(tmp_path):
    """sqlite's own locking (WAL, a busy timeout) serialises the two writers' commits."""
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    procs = [_start(_args(tmp_path, o, "-O", "delay=0.005", "--batch-size", "4")) for o in (one, two)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert _keys(one) == _keys(two) and len(_keys(one)) == PAIRS
    import sqlite3

    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT COUNT(*) FROM grades").fetchone()[0] > 0


# ---- in process: the session (exam-grade, exam-nuggets support, api.grade) ----------------

def session_inputs():
    """A scripted back end, its prompt and the units of 2 pairs."""
    from exam_eval.grading import engine
    from exam_eval.grading.prompts import get_prompt
    from exam_eval.io.bank_items import make_item_id, BankItem

    backend = ScriptedBackend(script=lambda r, t: "4")
    prompt = get_prompt("question-selfrating")
    docs = {"q1": ["d1", "d2"]}
    items = {"q1": [BankItem("q1", make_item_id("q1", "why?"), "question", "why?")]}
    units = engine.build_units(docs=docs, texts={"d1": "one", "d2": "two"}, items=items, queries={},
                               prompt=prompt, identity=backend.cache_identity)
    return backend, prompt, units


def test_a_session_holds_its_output_until_closed(tmp_path):
    out = tmp_path / "g.jsonl"
    backend, prompt, units = session_inputs()
    with GradingSession(backend, prompt, output=str(out)) as first:
        first.plan(*units)
        with GradingSession(backend, prompt, output=str(out)) as second, pytest.raises(OutputError) as refused:
            second.plan(*units)
        assert str(refused.value) == (f"{out}: is being written by another process (pid {os.getpid()}); "
                                      "wait for it to end, or write to another file")
        first.run()
    with GradingSession(backend, prompt, output=str(out)) as again:  # released: resumes
        assert again.plan(*units).stats.in_output == 2


def test_an_output_created_by_the_lock_is_removed_when_nothing_was_written(tmp_path):
    out = tmp_path / "g.jsonl"
    backend, prompt, units = session_inputs()
    with GradingSession(backend, prompt, output=str(out)) as s:
        s.plan(*units)
        assert out.exists()
    assert not out.exists()
    out.write_text("")  # an empty file the user made stays
    with GradingSession(backend, prompt, output=str(out)) as s:
        s.plan(*units)
    assert out.exists()


def test_a_dangling_symlink_output_is_written_through(tmp_path):
    link, target = tmp_path / "g.jsonl", tmp_path / "target.jsonl"
    link.symlink_to(target.name)
    backend, prompt, units = session_inputs()
    with GradingSession(backend, prompt, output=str(link)) as s:
        s.plan(*units)
        s.run()
    assert link.is_symlink() and len(target.read_text().splitlines()) == 2


def test_exam_nuggets_support_has_one_writer_too(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    report = {"metadata": {"run_id": "r", "topic_id": "t1", "team_id": "x"},
              "responses": [{"text": "Alpha is true.", "citations": ["d1"]},
                            {"text": "Beta as well.", "citations": ["d2"]}], "references": []}
    (runs / "r.jsonl").write_text(json.dumps(report) + "\n")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": d, "text": f"{d} says so"}) + "\n" for d in ("d1", "d2")))
    out = tmp_path / "support.jsonl"
    cmd = [sys.executable, "-c", "import exam_eval.commands.nuggets as m; m.main()", "support", "--reports", str(runs),
           "--passages", str(corpus), "--backend", "scripted", "--no-cache", "-o", str(out), "--batch-size", "1"]
    first = subprocess.Popen(cmd + ["-O", "delay=30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=ENV)
    deadline = time.monotonic() + 60
    while not out.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    second = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=120)
    assert second.returncode == 2, second.stderr
    assert second.stderr.splitlines() == [f"exam-nuggets: {out}: is being written by another process "
                                          f"(pid {first.pid}); wait for it to end, or write to another file"]
    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 130, err
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    keys = [(g["query_id"], g["doc_id"], g["item_id"]) for g in map(json.loads, out.read_text().splitlines())]
    assert len(keys) == 2 == len(set(keys))
