"""An assessor's labels: an append-only log, each line on disk before it is acknowledged.

``labels/NAME.jsonl`` holds one event a line, ``{"event": "label", "qid", "docno",
"label", "note", "time"}``, ``{"event": "cannot_judge", "qid", "docno", "note", "time"}``
or ``{"event": "undo", "qid", "docno", "time"}``; the labels are the log replayed (an undo
takes back the newest label still standing, a later label of a pair revises it). Nothing is
ever rewritten, so a kill -9 at any moment loses at most the line being written, whose
label the page was never told was kept; such a torn last line is dropped on reading,
with a notice. One server writes a label folder at a time (an advisory lock the kernel
drops with the process, kill -9 included).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Callable

from ..errors import InputError, OutputError, UsageError
from ..io.openers import display_name

#: a label; one taken back (the newest); a pair that cannot be judged (not a label)
EVENTS = ("label", "undo", "cannot_judge")
ASSESSOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
LABELS_DIR = "labels"
LOCK_FILE = ".server.lock"


def check_assessor(name: str) -> str:
    if not ASSESSOR.fullmatch(name) or name.endswith(".jsonl"):
        raise UsageError(f"assessor name {name!r}: use 1-40 letters, digits, '.', '_' or '-' (a file name)")
    return name


@dataclass
class Labels:
    """One assessor's labels as the log says now. ``pairs`` and ``top``: the design's pairs
    and the scale's top label, which every event read or written must keep to."""
    path: str
    given: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)   # pair -> (label, note)
    #: pairs the assessor could not judge (a broken or unreadable passage) -> note: kept
    #: apart from the labels, never a 0, in no qrels
    cannot: dict[tuple[str, str], str] = field(default_factory=dict)
    stack: list[tuple[str, str]] = field(default_factory=list)   # pairs done, oldest first (undo's order)
    pairs: frozenset | None = None
    top: int | None = None
    #: the length of the log's whole lines where it ends in a torn one (a kill mid-write, a
    #: write cut short): cut there, its bytes kept beside, before the next event is appended
    whole: int | None = None
    log: Callable[[str], None] = lambda msg: None

    def check(self, obj, where: str = "", lineno: int | None = None) -> tuple[str, str]:
        """The event's pair, where the event is one of the design: else one line naming
        WHERE and LINENO (bad input, exit 2)."""
        def bad(reason: str) -> InputError:
            return InputError(f"not a label event: {reason}", where or None, lineno)

        if not isinstance(obj, dict):
            raise bad("not a JSON object")
        event = obj.get("event")
        if event not in EVENTS:
            raise bad(f"event {_shown(event)} is not one of {', '.join(EVENTS)}")
        qid, docno = obj.get("qid"), obj.get("docno")
        if not isinstance(qid, str) or not isinstance(docno, str):
            raise bad(f"qid {_shown(qid)} and docno {_shown(docno)} must be strings")
        if self.pairs is not None and (qid, docno) not in self.pairs:
            raise bad(f"the pair {qid} {docno!r} is not one of the design's (design.json)")
        if event == "label":
            label = obj.get("label")
            top = self.top if self.top is not None else 9
            if type(label) is not int or not 0 <= label <= top:
                raise bad(f"label {_shown(label)} is not an integer 0-{top} (the design's scale)")
        if event != "undo" and not isinstance(obj.get("note", ""), str):
            raise bad(f"note {_shown(obj.get('note'))} is not a string")
        return qid, docno

    def done(self, pair: tuple[str, str]) -> bool:
        """Labelled, or marked as not to be judged."""
        return pair in self.given or pair in self.cannot

    def apply(self, obj: dict, where: str = "", lineno: int | None = None) -> None:
        pair = self.check(obj, where, lineno)
        if obj["event"] == "undo":
            if not self.stack or self.stack[-1] != pair:
                raise InputError(f"undo of {pair[0]} {pair[1]}, which is not the newest label", where or None, lineno)
            self.stack.pop()
            self.given.pop(pair, None)
            self.cannot.pop(pair, None)
            return
        # a label of a pair done before revises it: the newer event stands, the older stays in the log
        if self.done(pair):
            self.stack.remove(pair)
            self.given.pop(pair, None)
            self.cannot.pop(pair, None)
        if obj["event"] == "label":
            self.given[pair] = (obj["label"], obj.get("note") or "")
        else:
            self.cannot[pair] = obj.get("note") or ""
        self.stack.append(pair)

    def append(self, obj: dict) -> None:
        """The event on disk (every byte written, then fsync'd), then in memory. A write
        that fails or falls short (a full disk) is taken back, so the log stays whole lines
        and nothing later merges into the fragment; the OSError goes up, and the page says
        the label was not kept."""
        obj = {**obj, "time": round(time.time(), 3)}
        self.check(obj, self.path)
        line = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
        folder = os.path.dirname(self.path)
        if not os.path.isdir(folder):
            os.makedirs(folder, exist_ok=True)
            sync_folder(os.path.dirname(folder) or ".")   # the labels/ folder's entry, durable
        new = not os.path.exists(self.path)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if new:
                sync_folder(folder)   # the new log's entry: a label in a file no folder names is lost
            if self.whole is not None:
                self._cut_torn_tail(fd)
            start = os.fstat(fd).st_size
            try:
                write_all(fd, line)
                os.fsync(fd)
            except OSError:
                self._take_back(fd, start)
                raise
        finally:
            os.close(fd)
        self.apply(obj)

    def _take_back(self, fd: int, start: int) -> None:
        try:
            os.ftruncate(fd, start)
            os.fsync(fd)
        except OSError:
            self.whole = start   # cut before the next event is appended

    def _cut_torn_tail(self, fd: int) -> None:
        """The torn last line's bytes go to NAME.jsonl.torn-K (kept, for a person to read),
        then the log is cut to its whole lines."""
        size = os.fstat(fd).st_size
        keep = self.whole
        if keep < size:
            with open(self.path, "rb") as f:
                f.seek(keep)
                torn = f.read()
            side = _free_name(self.path + ".torn-")
            sfd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                write_all(sfd, torn)
                os.fsync(sfd)
            finally:
                os.close(sfd)
            sync_folder(os.path.dirname(self.path))
            os.ftruncate(fd, keep)
            os.fsync(fd)
            self.log(f"{display_name(self.path)}: its torn last line ({len(torn)} bytes) was cut before this label "
                     f"was appended; its bytes are kept in {display_name(side)}")
        self.whole = None


def _shown(value) -> str:
    return json.dumps(value) if isinstance(value, (str, bool)) or value is None else repr(value)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[n:]


def _free_name(prefix: str) -> str:
    k = 1
    while os.path.lexists(f"{prefix}{k}"):
        k += 1
    return f"{prefix}{k}"


def sync_folder(path: str) -> None:
    """A folder's entries on disk (a file created in it survives a power cut)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def labels_path(folder: str, assessor: str) -> str:
    return os.path.join(folder, LABELS_DIR, f"{check_assessor(assessor)}.jsonl")


def read_labels(path: str, log=lambda msg: None, *, pairs=None, top: int | None = None) -> Labels:
    """An assessor's log replayed. ``pairs`` and ``top`` (the design's): an event naming
    another pair, or a label off the scale, is one line naming file and line (exit 2).
    A torn last line (a kill mid-write) is left out with a notice, and cut, its bytes kept
    beside, before the next append."""
    labels = Labels(path, pairs=None if pairs is None else frozenset(pairs), top=top, log=log)
    if not os.path.exists(path):
        return labels
    name = display_name(path)
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    torn = lines.pop()   # after the last newline: empty, or a line cut off by a kill
    if torn:
        labels.whole = len(data) - len(torn)
        log(f"{name}: its last line was cut off before it was kept (a label the page never showed as "
            "given); it is left out")
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise InputError(f"not a label event ({type(exc).__name__}: {exc})", name, lineno) from None
        labels.apply(obj, name, lineno)
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
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputError(f"cannot write: {exc.strerror or exc}", display_name(self.path)) from None
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
        """Who holds the folder, for a second server's message; a disk too full for these
        few bytes has no room for a label either: the server does not start."""
        try:
            os.ftruncate(self.fd, 0)
            data = text.encode("utf-8")
            if os.pwrite(self.fd, data, 0) != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError as exc:
            raise OutputError(f"cannot write: {exc.strerror or exc} (no label could be kept)",
                              display_name(self.path)) from None

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)   # the lock goes with it
            self.fd = None
