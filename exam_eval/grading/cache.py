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
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Iterable, Sequence

from .types import GradeResult
from ..errors import InputError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS grades (
    key TEXT PRIMARY KEY, answer TEXT, grade INTEGER, probs TEXT, parse_ok INTEGER NOT NULL,
    backend TEXT, prompt_hash TEXT, created REAL);
CREATE TABLE IF NOT EXISTS throughput (
    backend TEXT PRIMARY KEY, pairs INTEGER NOT NULL, seconds REAL NOT NULL, updated REAL);
"""


def user_cache_dir() -> Path:
    """exam_eval's folder under the user's cache ($XDG_CACHE_HOME or ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "exam_eval"


def default_cache_path() -> Path:
    env = os.environ.get("EXAM_EVAL_CACHE")
    return Path(env) if env else user_cache_dir() / "grades.sqlite"


def unit_key(identity: str, prompt_hash: str, query: str | None, item: str | None, passage: str,
             answer_keys: Sequence[str] | None) -> str:
    payload = json.dumps([identity, prompt_hash, query, item, passage, list(answer_keys or [])],
                         ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class NullCache:
    """``--no-cache``: same interface, remembers nothing."""

    def get_many(self, keys: Iterable[str]) -> dict[str, GradeResult]:
        return {}

    def put_many(self, rows, backend: str, prompt_hash: str) -> None:
        pass

    def record_throughput(self, backend: str, pairs: int, seconds: float) -> None:
        pass

    def throughput(self, backend: str) -> float | None:
        return None

    def close(self) -> None:
        pass


class GradeCache(NullCache):
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(self.path), timeout=120)
            # WAL with synchronous=NORMAL: a commit per batch costs no fsync, and a killed
            # process loses nothing (only a power cut can drop the last commits, which the
            # fsynced output file still holds). WAL needs local disk, not NFS.
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise InputError(f"cannot use as grade cache: {exc}", str(path)) from None
        except OSError as exc:
            raise InputError(f"cannot create grade cache: {exc.strerror}", str(path)) from None

    def get_many(self, keys: Iterable[str]) -> dict[str, GradeResult]:
        keys = list(keys)
        out: dict[str, GradeResult] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            marks = ",".join("?" * len(chunk))
            for key, answer, grade, probs, ok in self.db.execute(
                    f"SELECT key, answer, grade, probs, parse_ok FROM grades WHERE key IN ({marks})", chunk):
                out[key] = GradeResult(answer, grade, json.loads(probs) if probs else None, bool(ok))
        return out

    def put_many(self, rows: Iterable[tuple[str, GradeResult]], backend: str, prompt_hash: str) -> None:
        now = time.time()
        with self.db:  # one transaction = one commit per batch
            self.db.executemany(
                "INSERT OR REPLACE INTO grades VALUES (?,?,?,?,?,?,?,?)",
                [(k, r.answer, r.grade, None if r.probs is None else json.dumps(r.probs), int(r.parse_ok),
                  backend, prompt_hash, now) for k, r in rows])

    def record_throughput(self, backend: str, pairs: int, seconds: float) -> None:
        if pairs <= 0 or seconds <= 0:
            return
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO throughput VALUES (?,?,?,?)",
                            (backend, pairs, seconds, time.time()))

    def throughput(self, backend: str) -> float | None:
        row = self.db.execute("SELECT pairs, seconds FROM throughput WHERE backend = ?", (backend,)).fetchone()
        return row[0] / row[1] if row else None

    def close(self) -> None:
        self.db.close()
