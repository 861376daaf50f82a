"""An assessor's labels: an append-only log, each line on disk before it is acknowledged.

``labels/NAME.jsonl`` holds one event a line, ``{"event": "label", "qid", "docno",
"label", "note", "time"}`` or ``{"event": "undo", "qid", "docno", "time"}``; the labels
are the log replayed (an undo takes back the newest label still standing). Nothing is
ever rewritten, so a kill -9 at any moment loses at most the line being written, whose
label the page was never told was kept; such a torn last line is dropped on reading,
with a notice. One server writes a label folder at a time (an advisory lock the kernel
drops with the process, kill -9 included).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from dataclasses import dataclass, field

from ..errors import InputError, UsageError
from ..io.openers import display_name

ASSESSOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
LABELS_DIR = "labels"
LOCK_FILE = ".server.lock"


def check_assessor(name: str) -> str:
    if not ASSESSOR.fullmatch(name) or name.endswith(".jsonl"):
        raise UsageError(f"assessor name {name!r}: use 1-40 letters, digits, '.', '_' or '-' (a file name)")
    return name


@dataclass
class Labels:
    """One assessor's labels as the log says now."""
    path: str
    given: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)   # pair -> (label, note)
    stack: list[tuple[str, str]] = field(default_factory=list)   # labelled pairs, oldest first (undo's order)

    def apply(self, obj: dict, where: str = "", lineno: int = 0) -> None:
        pair = (str(obj["qid"]), str(obj["docno"]))
        if obj["event"] == "label":
            if pair in self.given:
                self.stack.remove(pair)
            self.given[pair] = (int(obj["label"]), str(obj.get("note") or ""))
            self.stack.append(pair)
        elif obj["event"] == "undo":
            if not self.stack or self.stack[-1] != pair:
                raise InputError(f"undo of {pair[0]} {pair[1]}, which is not the newest label", where, lineno)
            self.stack.pop()
            del self.given[pair]
        else:
            raise InputError(f"unknown event {obj['event']!r}", where, lineno)

    def append(self, obj: dict) -> None:
        """The event on disk (written, flushed, fsync'd), then in memory."""
        obj = {**obj, "time": round(time.time(), 3)}
        line = json.dumps(obj, ensure_ascii=False) + "\n"
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        self.apply(obj)


def labels_path(folder: str, assessor: str) -> str:
    return os.path.join(folder, LABELS_DIR, f"{check_assessor(assessor)}.jsonl")


def read_labels(path: str, log=lambda msg: None) -> Labels:
    labels = Labels(path)
    if not os.path.exists(path):
        return labels
    name = display_name(path)
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    torn = lines.pop()   # after the last newline: empty, or a line cut off by a kill
    if torn.strip():
        log(f"{name}: its last line was cut off before it was kept (a label the page never showed as "
            "given); it is left out")
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
            labels.apply(obj, name, lineno)
        except InputError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            raise InputError(f"not a label event ({type(exc).__name__}: {exc})", name, lineno) from None
    return labels


def assessors(folder: str) -> list[str]:
    d = os.path.join(folder, LABELS_DIR)
    if not os.path.isdir(d):
        return []
    return sorted(f[:-len(".jsonl")] for f in os.listdir(d) if f.endswith(".jsonl") and ASSESSOR.fullmatch(f[:-6]))


class OneWriter:
    """The folder's lock, held while the server runs; a second server is refused."""

    def __init__(self, folder: str):
        self.path = os.path.join(folder, LOCK_FILE)
        self.fd: int | None = None

    def __enter__(self) -> "OneWriter":
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 200).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise InputError(f"another labelling server writes this folder ({holder}); one server per label "
                             "folder: open its page, or stop it first", display_name(os.path.dirname(self.path)
                                                                                   or ".")) from None
        self.fd = fd
        return self

    def say_holder(self, text: str) -> None:
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, text.encode("utf-8"), 0)

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)   # the lock goes with it
            self.fd = None
