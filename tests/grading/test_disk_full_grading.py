"""A full disk under exam-grade's grade cache or its outputs (issue 21 item 3): one line
naming the file, exit 2, no traceback; the grades file keeps whole batches only and a
rerun completes it without duplicates; nothing empty is left behind (no 0-byte output, no
empty folder) when not even the first batch fits. The disk is a real small tmpfs (root
only, skipped elsewhere); one in-process case raises sqlite's own error and runs anywhere."""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from pathlib import Path

from tests.io.test_output_failures import one_line_failure, run, small_tmpfs

from exam_eval.grading.cache import CacheError, GradeCache
from exam_eval.grading.session import GradingSession

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
PAIRS = 1060  # the demo pool (top 20 of good.run and poor.run) times its questions
GRADE = ["--backend", "scripted", "--prompt", "question-selfrating", "--bank", DEMO / "questions.jsonl",
         "--passages", DEMO / "passages.jsonl", DEMO / "good.run", DEMO / "poor.run", "--batch-size", "8"]


def _keys(path: Path) -> Counter:
    return Counter((r["query_id"], r["doc_id"], r["item_id"]) for r in map(json.loads, path.read_text().splitlines()))


def _fill(folder: Path) -> None:
    """Take every free block of the file system under ``folder``."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 512):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def test_a_full_cache_disk_keeps_the_output_whole_and_resumable(tmp_path):
    out = tmp_path / "g.jsonl"
    with small_tmpfs(tmp_path / "small", "64k") as small:
        cache = small / "cache.sqlite"
        r = run("exam-grade", *GRADE, "--cache", cache, "-o", out)
        line = one_line_failure(r, "exam-grade", f"{cache}: cannot write the grade cache: database or disk is full; "
                                f"the ", f" grades written to {out} are kept", "run the same command again to resume")
    kept = int(line.split("; the ")[1].split()[0])
    keys = _keys(out)
    assert 0 < kept == sum(keys.values()) == len(keys) < PAIRS
    r = run("exam-grade", *GRADE, "--cache", tmp_path / "cache.sqlite", "-o", out)
    assert r.returncode == 0, r.stderr
    assert f"{kept} already in output" in r.stderr
    keys = _keys(out)
    assert len(keys) == PAIRS and set(keys.values()) == {1}


def test_a_cache_that_cannot_even_be_created_leaves_nothing(tmp_path):
    """The default cache's folder is made (here $EXAM_EVAL_CACHE's, on a full disk); a
    --cache FILE in a missing folder is refused before any work."""
    import subprocess

    from tests.io.test_output_failures import ENV, command

    out = tmp_path / "g.jsonl"
    with small_tmpfs(tmp_path / "small", "64k") as small:
        _fill(small)
        cache = small / "cache" / "grades.sqlite"
        r = subprocess.run([*command("exam-grade"), *map(str, GRADE), "-o", str(out)], stderr=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True, env={**ENV, "EXAM_EVAL_CACHE": str(cache)}, timeout=300)
        one_line_failure(r, "exam-grade", f"{cache}: cannot use as grade cache: ")
        assert sorted(p.name for p in small.rglob("*")) == ["filler"]  # no sqlite file, no empty folder
        r = run("exam-grade", *GRADE, "--cache", cache, "-o", out)
        one_line_failure(r, "exam-grade", f"--cache {cache}: no such folder {cache.parent}", code=1)
        assert sorted(p.name for p in small.rglob("*")) == ["filler"]
    assert not out.exists()


def test_not_even_the_first_batch_fits_no_empty_output_is_left(tmp_path):
    with small_tmpfs(tmp_path / "small", "64k") as small:
        _fill(small)
        out = small / "g.jsonl"
        r = run("exam-grade", *GRADE, "--no-cache", "-o", out)
        one_line_failure(r, "exam-grade", f"{out}: cannot write: No space left on device; no grades were added")
        assert sorted(p.name for p in small.iterdir()) == ["filler"]


def test_a_run_folder_that_cannot_be_written_is_not_left_empty(tmp_path):
    responses = tmp_path / "answers.jsonl"
    responses.write_text("".join(json.dumps({"query_id": "101", "run_id": name, "text": f"Bees make honey ({name})."})
                                 + "\n" for name in ("gen1", "gen2")))
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join(x + "\n" for x in (DEMO / "questions.jsonl").read_text().splitlines()
                            if json.loads(x)["query_id"] == "101"))
    out = tmp_path / "g.jsonl"
    with small_tmpfs(tmp_path / "small", "64k") as small:
        _fill(small)
        runs = small / "runs"
        r = run("exam-grade", "--backend", "scripted", "--prompt", "question-selfrating", "--bank", bank, "--responses", responses, "--responses-run-out", f"{runs}/", "--no-cache",
                "-o", out)
        one_line_failure(r, "exam-grade", "gen1.run: cannot write: No space left on device")
        assert sorted(p.name for p in small.iterdir()) == ["filler"]
    assert not out.exists()  # the grades file the run had locked (and so created) is gone too


class _FullDisk:
    """A sqlite connection whose writes fail as on a full disk."""

    def __init__(self, db):
        self.db = db

    def __enter__(self):
        return self.db.__enter__()

    def __exit__(self, *exc):
        return self.db.__exit__(*exc)

    def executemany(self, *args):
        raise sqlite3.OperationalError("database or disk is full")

    def __getattr__(self, name):
        return getattr(self.db, name)


def test_sqlite_full_error_is_a_cache_error_after_the_output(tmp_path):
    """Without a tmpfs: the error sqlite raises on a full disk, from the cache's own write."""
    from test_one_writer import session_inputs

    out = tmp_path / "g.jsonl"
    backend, prompt, units = session_inputs()
    with GradingSession(backend, prompt, output=str(out), cache_path=str(tmp_path / "c.sqlite")) as s:
        s.plan(*units)
        assert isinstance(s.cache, GradeCache)
        s.cache.db = _FullDisk(s.cache.db)
        try:
            s.run()
        except CacheError as exc:
            assert str(exc) == (f"{tmp_path / 'c.sqlite'}: cannot write the grade cache: database or disk is full; "
                                f"the 2 grades written to {out} are kept, make room (or use another cache) and run "
                                "the same command again to resume")
        else:
            raise AssertionError("a failed cache write passed unnoticed")
    assert sum(_keys(out).values()) == 2
