"""Persistent grade cache (sqlite3): work done once is never paid for again.

Key: sha256 over the back end's identity (model and decoding options), the prompt hash,
the query text when the prompt shows it, the item text, the passage text and the
answer keys — everything that can change a grade, and nothing else (not the doc id or
the item id, so identical texts under other ids are graded once, and an edited bank
regrades only the items whose text changed).

The database also remembers the throughput of past runs per back end, which is what
``exam-grade --dry-run`` uses to estimate the time of the next one. sqlite's own
locking lets shards on one machine (``make -j``) share a cache file; on a cluster give
every array task its own cache or put it on a local disk (sqlite over NFS is unsafe).
A commit is all or nothing, so two processes never tear the cache; one waits for the
other's lock up to two minutes, in steps short enough that Ctrl-C still stops it at once
(inside one sqlite call a signal is not handled until the call returns).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Iterable, Sequence

from .types import GradeResult
from ..io.judge_detail import NO_DETAIL, JudgeDetail
from ..io.outputs import check_database_file
from ..errors import InputError, OutputError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS grades (
    key TEXT PRIMARY KEY, answer TEXT, grade INTEGER, probs TEXT, parse_ok INTEGER NOT NULL,
    backend TEXT, prompt_hash TEXT, created REAL, detail TEXT);
CREATE TABLE IF NOT EXISTS throughput (
    backend TEXT PRIMARY KEY, pairs INTEGER NOT NULL, seconds REAL NOT NULL, updated REAL);
"""
BUSY_WAIT = 120.0  # seconds to wait for another process's lock on the cache, in all
_BUSY_STEP = 0.25  # sqlite's own busy timeout per try; between tries signals are handled
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


class WaitStopped(Exception):
    """A wait for another process's lock given up because the run is stopping (``stop``
    was set by an interrupt): the batch is in the output, not in the cache."""


def _patiently(action, *args, stop=None):
    """``action(*args)``, tried again while another process holds the lock, up to BUSY_WAIT
    or until ``stop`` (a threading.Event) is set."""
    deadline = time.monotonic() + BUSY_WAIT
    while True:
        try:
            return action(*args)
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorcode", None) in (_SQLITE_BUSY, _SQLITE_LOCKED) \
                or "locked" in str(exc)
            if busy and stop is not None and stop.is_set():
                raise WaitStopped from None
            if not busy or time.monotonic() >= deadline:
                raise


class CacheError(OutputError):
    """The cache cannot be read or written (disk full, I/O error, locked past the busy
    timeout, not a database): one line naming the cache file, exit 2. The grades file is
    the record and is written first, so it stays intact whatever happens here."""


def user_cache_dir() -> Path:
    """exam_eval's folder under the user's cache ($XDG_CACHE_HOME or ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "exam_eval"


def default_cache_path() -> Path:
    env = os.environ.get("EXAM_EVAL_CACHE")
    return Path(env) if env else user_cache_dir() / "grades.sqlite"


def cache_file(cache_path: str | None, no_cache: bool) -> str | Path | None:
    """--cache / --no-cache: the cache to use, or None."""
    if no_cache:
        return None

    return cache_path or default_cache_path()


def unit_key(identity: str, prompt_hash: str, query: str | None, item: str | None, passage: str,
             answer_keys: Sequence[str] | None) -> str:
    payload = _json([identity, prompt_hash, query, item, passage, list(answer_keys or [])])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class UnitKeys:
    """:func:`unit_key` for the many units of one grader and prompt, equal to it byte for
    byte: the two fixed parts are hashed once, and a text met again (a passage once per
    question of its query, a question once per passage) is not JSON-encoded again. What
    planning a pool of 100,000 pairs spent most of its time on."""

    #: texts kept encoded: the planner meets a passage once per question of its query in a
    #: row, and a question once per passage of its query, so a bounded number catches the
    #: repeats without keeping a second copy of a large pool's texts
    KEEP = 8192

    def __init__(self, identity: str, prompt_hash: str):
        self._head = hashlib.sha256(("[" + _json(identity) + "," + _json(prompt_hash) + ",").encode("utf-8"))
        self._part = functools.lru_cache(maxsize=self.KEEP)(_json_bytes)

    def __call__(self, query: str | None, item: str | None, passage: str, answer_keys: Sequence[str] | None) -> str:
        h = self._head.copy()
        part = self._part
        h.update(b",".join((part(query), part(item), part(passage),
                            _json(list(answer_keys or [])).encode("utf-8") if answer_keys else b"[]")) + b"]")
        return h.hexdigest()


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _json_bytes(text: str | None) -> bytes:
    return _json(text).encode("utf-8")


def known_identities(path) -> set[str]:
    """The back-end identities (``Backend.cache_identity``) a cache file holds grades or
    throughputs of, read without creating or changing anything; empty where it cannot be
    read. For naming the setting a refused resume differs in."""
    if not path or not os.path.isfile(path):
        return set()
    try:
        db = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True, timeout=_BUSY_STEP)
    except sqlite3.Error:
        return set()
    try:
        rows = db.execute("SELECT DISTINCT backend FROM grades UNION SELECT backend FROM throughput").fetchall()
    except sqlite3.Error:
        return set()
    finally:
        db.close()
    return {r[0] for r in rows if isinstance(r[0], str)}


def _detail(text: str | None) -> JudgeDetail:
    """A row's ``detail``; what cannot be read is left out (the row is still a grade)."""
    try:
        obj = json.loads(text) if text else None
    except ValueError:
        return NO_DETAIL
    return JudgeDetail.from_json(obj) if isinstance(obj, dict) else NO_DETAIL


class NullCache:
    """``--no-cache``: same interface, remembers nothing."""

    def get_many(self, keys: Iterable[str]) -> dict[str, GradeResult]:
        return {}

    def put_many(self, rows, backend: str, prompt_hash: str, *, stop=None) -> None:
        pass

    def record_throughput(self, backend: str, pairs: int, seconds: float) -> None:
        pass

    def throughput(self, backend: str) -> float | None:
        return None

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ServerCache:
    """A cache seen from one server: grades are taken from it and put into it under keys
    that name the server too, so that two servers serving other weights under one model
    name never share (an OpenAI-compatible server's name says nothing of its weights). The
    unit keys themselves stay the grader's (--shard splits by them, on any host)."""

    def __init__(self, inner, server: str):
        self.inner, self.server = inner, server

    def _key(self, key: str) -> str:
        return hashlib.sha256(f"{key}\x00{self.server}".encode("utf-8")).hexdigest()

    def get_many(self, keys: Iterable[str]) -> dict[str, GradeResult]:
        mine = {self._key(k): k for k in keys}
        return {mine[k]: v for k, v in self.inner.get_many(mine).items()}

    def put_many(self, rows, backend: str, prompt_hash: str, *, stop=None) -> None:
        self.inner.put_many(((self._key(k), r) for k, r in rows), backend + self.server, prompt_hash, stop=stop)

    def record_throughput(self, backend: str, pairs: int, seconds: float) -> None:
        self.inner.record_throughput(backend + self.server, pairs, seconds)

    def throughput(self, backend: str) -> float | None:
        return self.inner.throughput(backend + self.server)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def server_scoped(cache, server: str):
    """``cache`` as ``server`` sees it (itself where there is no server to name)."""
    return ServerCache(cache, server) if server and type(cache) is not NullCache else cache


class GradeCache(NullCache):
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        check_database_file(self.path)  # $EXAM_EVAL_CACHE too: a folder or /dev/null is no cache
        new = not self.path.exists()
        self._new_dirs = [d for d in self.path.parents if not d.exists()]  # deepest first
        self.db = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # written from the grading run's writer thread, read and closed from the main
            # one, never both at once (grading.writer joins before the main thread goes on)
            self.db = sqlite3.connect(str(self.path), timeout=_BUSY_STEP, check_same_thread=False)
            # WAL with synchronous=NORMAL: a commit per batch costs no fsync, and a killed
            # process loses nothing (only a power cut can drop the last commits, which the
            # fsynced output file still holds). WAL needs local disk, not NFS.
            _patiently(self.db.execute, "PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            _patiently(self.db.executescript, _SCHEMA)
            _patiently(self._add_detail_column)
        except sqlite3.DatabaseError as exc:
            self._drop_unfinished(new)
            raise InputError(f"cannot use as grade cache: {exc}", str(path)) from None
        except OSError as exc:
            self._drop_unfinished(new)
            raise InputError(f"cannot create grade cache: {exc.strerror}", str(path)) from None

    def _add_detail_column(self) -> None:
        """``detail``: a grade's label mass, fallback reason, reasoning and served model
        (io.judge_detail.JudgeDetail, JSON), added to a cache an older exam_eval made; its rows
        read as having none."""
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(grades)")}
        if "detail" not in columns:
            with self.db:
                self.db.execute("ALTER TABLE grades ADD COLUMN detail TEXT")

    def _drop_unfinished(self, new: bool) -> None:
        """A cache this run began to create and could not finish (a full disk) is removed,
        with the folders made for it: it holds nothing, and a broken one would fail the
        next run too."""
        if self.db is not None:
            self.db.close()
        if new:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(OSError):
                    os.unlink(f"{self.path}{suffix}")
        for folder in self._new_dirs:
            with contextlib.suppress(OSError):
                folder.rmdir()

    def _fetch(self, sql: str, args) -> list[tuple]:
        return self.db.execute(sql, args).fetchall()

    def _error(self, doing: str, exc: sqlite3.Error) -> CacheError:
        return CacheError(f"cannot {doing} the grade cache: {exc}", str(self.path))

    def get_many(self, keys: Iterable[str]) -> dict[str, GradeResult]:
        keys = list(keys)
        out: dict[str, GradeResult] = {}
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                rows = _patiently(self._fetch, f"SELECT key, answer, grade, probs, parse_ok, detail FROM grades "
                                                f"WHERE key IN ({marks})", chunk)
                for key, answer, grade, probs, ok, detail in rows:
                    out[key] = GradeResult(answer, grade, json.loads(probs) if probs else None, bool(ok),
                                           detail=_detail(detail))
        except sqlite3.Error as exc:
            raise self._error("read", exc) from None
        return out

    def put_many(self, rows: Iterable[tuple[str, GradeResult]], backend: str, prompt_hash: str, *,
                 stop=None) -> None:
        """One commit. ``stop``: an event that, once set, ends a wait for another process's
        lock with :class:`WaitStopped`."""
        now = time.time()
        values = [(k, r.answer, r.grade, None if r.probs is None else json.dumps(r.probs), int(r.parse_ok),
                   backend, prompt_hash, now, json.dumps(r.detail.to_json()) if r.detail != NO_DETAIL else None)
                  for k, r in rows]

        def commit():
            with self.db:  # one transaction = one commit per batch; a failed one is rolled back
                self.db.executemany("INSERT OR REPLACE INTO grades (key, answer, grade, probs, parse_ok, backend, "
                                    "prompt_hash, created, detail) VALUES (?,?,?,?,?,?,?,?,?)", values)

        try:
            _patiently(commit, stop=stop)
        except sqlite3.Error as exc:  # "database or disk is full", "disk I/O error", "database is locked"
            raise self._error("write", exc) from None

    def record_throughput(self, backend: str, pairs: int, seconds: float) -> None:
        if pairs <= 0 or seconds <= 0:
            return

        def commit():
            with self.db:
                self.db.execute("INSERT OR REPLACE INTO throughput VALUES (?,?,?,?)",
                                (backend, pairs, seconds, time.time()))

        try:
            _patiently(commit)
        except sqlite3.Error:
            pass  # only --dry-run's estimate needs it: not worth failing a finished run

    def throughput(self, backend: str) -> float | None:
        try:
            rows = _patiently(self._fetch, "SELECT pairs, seconds FROM throughput WHERE backend = ?", (backend,))
        except sqlite3.Error as exc:
            raise self._error("read", exc) from None
        return rows[0][0] / rows[0][1] if rows else None

    def close(self) -> None:
        try:
            self.db.close()
        except sqlite3.Error:  # whatever failed was reported already; every commit is on disk
            pass
