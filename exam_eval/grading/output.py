"""The append-only grades file that survives SIGKILL.

Each write (a batch, or the batches that waited for the disk together) is appended,
flushed and fsynced as a whole: plain JSONL lines, or for a
``.gz`` output one complete gzip member per write (gzip readers concatenate members).
A kill can only tear the last write; :func:`repair` cuts a torn final line (or a torn
final gzip member) before the file is read or appended to again, so a rerun ends with
exactly the grades of an uninterrupted run.

One writer per file: :class:`OutputLock` holds an exclusive ``flock`` on the output from
the moment its resume keys are read until the last batch is written, so a second process
aimed at the same file is refused at once instead of grading everything again and
appending duplicates. The kernel drops the lock when its holder dies, SIGKILL included,
so a killed run never blocks its rerun.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import stat
import zlib
from typing import Iterable

from ..errors import InputError, OutputError
from ..io.grades import Grade, grade_line
from .grade_files import iter_grades
from ..io import unfinished
from ..io.openers import copy_named
from ..io.outputs import check_output, write_error


def _is_gzip_path(path: str) -> bool:
    return path.endswith(".gz")


_GZIP_MAGIC = b"\x1f\x8b"


def _member(data: bytes, offset: int) -> tuple[int | None, str | None]:
    """The gzip member at ``offset``: (where it ends, None) when complete, (None, None)
    when the data ends inside it, (None, why) when it cannot be read."""
    d = zlib.decompressobj(wbits=31)
    try:
        d.decompress(data[offset:])
    except zlib.error as exc:
        return None, str(exc)
    return (len(data) - len(d.unused_data) if d.eof else None), None


def _valid_gzip_prefix(data: bytes) -> tuple[int, str | None]:
    """Length of the longest prefix of ``data`` made of complete gzip members, and why the
    member after it cannot be read where that is damage rather than an end cut short."""
    offset = 0
    while offset < len(data):
        end, damage = _member(data, offset)
        if end is None:
            return offset, damage
        offset = end
    return offset, None


def _valid_length(data: bytes, path: str) -> int:
    """Where a torn tail begins (``len(data)`` where there is none). A writer killed
    mid-batch leaves at most its last line or gzip member cut short (or followed by the
    zeros a crash can leave); unreadable bytes that complete members follow (a member
    damaged in place, a torn shard concatenated before another) are no torn tail:
    cutting there would throw away every grade after them, so that is an InputError."""
    if data[:2] != _GZIP_MAGIC:
        return data.rfind(b"\n") + 1 if data and not data.endswith(b"\n") else len(data)
    keep, damage = _valid_gzip_prefix(data)
    if damage is None:
        return keep
    start = data.find(_GZIP_MAGIC, keep + 1)
    while start != -1:
        if _member(data, start)[0] is not None:
            lines = gzip.decompress(data[:keep]).count(b"\n") if keep else 0
            why = damage.rsplit(": ", 1)[-1]  # "Error -3 while decompressing data: incorrect data check"
            raise InputError(f"the gzip member at byte {keep} is damaged ({why}) and complete members follow it: "
                             "not a torn last batch, so nothing is cut; repair the file or write to another -o",
                             path, lines + 1)
        start = data.find(_GZIP_MAGIC, start + 1)
    return keep


def check_form(path: str, head: bytes) -> None:
    """Grades are appended as gzip members to a .gz output and as plain lines otherwise;
    an existing file of the other form would become unreadable (readers go by content)."""
    if not head or (head[:2] == _GZIP_MAGIC) == _is_gzip_path(path):
        return
    if _is_gzip_path(path):
        raise InputError("holds plain text but its name ends in .gz, and grades are appended to a .gz output "
                         "compressed: rename it without .gz (or gzip it) to resume it", path)
    raise InputError("holds gzip data but its name does not end in .gz, and grades are appended to it as plain "
                     "lines: rename it with .gz (or gunzip it) to resume it", path)


def _resumable(path: str) -> bool:
    """A regular file can be resumed; a device or FIFO (``-o /dev/stdout``) is written anew."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _check_torn_batch(data: bytes, keep: int, path: str) -> None:
    """What is about to be cut must be what a killed writer of grades leaves: a grade line
    cut short (a JSON object's start, or the zeros a crash can leave) after lines that are
    all grades. Anything else (notes, a qrels file, a bank given as -o) is the user's and
    is refused before a byte of it changes."""
    end = keep
    if data[:2] != _GZIP_MAGIC:
        tail = data[keep:].rstrip(b"\0")
        if tail and not tail.startswith(b"{"):
            raise InputError("the last line has no newline and is not a grade line: not a torn batch of grades, so "
                             "nothing is cut; is this a grades file? (write to another -o)",
                             path, data.count(b"\n", 0, keep) + 1)
        try:
            json.loads(tail)
            end = keep + len(tail)  # a whole line without its newline: it must be a grade line too
        except ValueError:
            pass
    if end:
        with copy_named(data[:end], path) as copy:
            for _ in iter_grades(copy):  # an InputError names the file and the line
                pass


def repair(path: str) -> int:
    """Cut a torn tail left by a killed writer; returns the number of bytes removed."""
    if not _resumable(path):
        return 0
    with open(path, "rb") as fh:
        data = fh.read()
    check_form(path, data[:2])
    keep = _valid_length(data, path)
    removed = len(data) - keep
    if removed:
        _check_torn_batch(data, keep, path)
        with open(path, "r+b") as fh:
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
    return removed


def _keys(grades, engines: dict | None, retry_unparsed: bool = False) -> set[tuple]:
    # the last line for a key is the grade readers see: a pair graded for an edited passage
    # and then for the text restored has two lines, and only the last may say "done"
    last: dict[tuple, tuple | None] = {}
    for _, g in grades:
        last[g.key] = None if retry_unparsed and not g.parse_ok else g.resume_key
        if engines is not None:
            engines.setdefault((g.model, g.prompt), set()).add((g.engine, g.grader_hash))
    return {k for k in last.values() if k is not None}


def existing_keys(path: str, *, read_only: bool = False, engines: dict | None = None,
                  retry_unparsed: bool = False) -> set[tuple]:
    """Resume keys (``Grade.resume_key``) of the grades already in ``path``; with
    ``engines``, also collects the (engine, grader_hash) pairs recorded per (model,
    prompt) into it. ``retry_unparsed``: a pair whose last line is unparsed is not done.

    Normally called after :func:`repair`; with ``read_only`` (``--dry-run``) a torn tail
    is skipped in a private copy instead of being cut from the file.
    """
    if os.path.isdir(path):
        raise OutputError("cannot write: is a directory", path)
    if not _resumable(path) or os.path.getsize(path) == 0:
        return set()
    if read_only:
        with open(path, "rb") as fh:
            data = fh.read()
        check_form(path, data[:2])
        keep = _valid_length(data, path)
        if keep < len(data):
            _check_torn_batch(data, keep, path)
            with copy_named(data[:keep], path) as copy:
                return _keys(iter_grades(copy), engines, retry_unparsed)
    return _keys(iter_grades(path), engines, retry_unparsed)


def _lock_holder(st: os.stat_result) -> int | None:
    """The pid holding a ``flock`` on the file ``st`` describes, from /proc/locks (Linux);
    None where that cannot be told (another system, another pid namespace)."""
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            table = fh.read().splitlines()
    except OSError:
        return None
    exact = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    by_inode = []
    for line in table:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 00:2f:123 0 EOF"; waiters carry "->" and hold nothing
        if len(fields) < 6 or fields[1] != "FLOCK" or "->" in fields:
            continue
        pid, where = fields[4], fields[5]
        if not pid.isdigit() or pid == "0":
            continue
        if where == exact:
            return int(pid)
        if where.rsplit(":", 1)[-1] == str(st.st_ino):
            by_inode.append(int(pid))  # overlay and FUSE file systems report another device
    return by_inode[0] if len(set(by_inode)) == 1 else None


class OutputLock:
    """An exclusive ``flock`` on the grades file itself (created empty when missing), held
    until :meth:`release`. Not a pid file: the kernel drops it with its holder, however
    that dies. A file created here and still empty at release (the run failed before its
    first batch) is removed, so no 0-byte output is left behind."""

    def __init__(self, path: str):
        self.path = path
        self.real = path
        self.fd: int | None = None
        self.created = False
        self.token: int | None = None

    def _open(self) -> None:
        self.real = os.path.realpath(self.path)  # a symlink's target, created where missing
        try:
            self.fd = os.open(self.real, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            self.created = True
            # an exit that skips release (a second Ctrl-C) removes it too while still empty
            self.token = unfinished.begun(self.real, only_if_empty=True)
        except FileExistsError:
            self.fd = os.open(self.real, os.O_RDWR | os.O_CLOEXEC)
            self.created = False

    def acquire(self) -> OutputLock:
        try:
            import fcntl
        except ImportError:  # not a POSIX system: no lock to take
            return self
        for _ in range(10):
            try:
                self._open()
            except FileNotFoundError as exc:
                if not os.path.isdir(os.path.dirname(self.real) or "."):  # no folder to create it in
                    raise write_error(self.path, exc) from None
                continue  # removed between our two opens: start again
            except OSError as exc:
                raise write_error(self.path, exc) from None
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = _lock_holder(os.fstat(self.fd))
                self._close()
                who = "another process" if pid is None else f"another process (pid {pid})"
                raise OutputError(f"is being written by {who}; wait for it to end, or write to another file",
                                  self.path) from None
            except OSError:  # a file system without locks: run unguarded, as before
                return self
            # the holder we waited behind may have removed the file (an empty output of a
            # failed run): a lock on an unlinked inode guards nothing
            try:
                same = os.path.samestat(os.fstat(self.fd), os.stat(self.real))
            except FileNotFoundError:
                same = False
            if same:
                return self
            self._close()
        raise OutputError("cannot lock: the file keeps being replaced", self.path)

    def _close(self) -> None:
        unfinished.finished(self.token)
        self.token = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def file_id(self) -> tuple[int, int] | None:
        """(device, inode) of the locked file; None where no lock is held."""
        if self.fd is None:
            return None
        st = os.fstat(self.fd)
        return st.st_dev, st.st_ino

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            st = os.fstat(self.fd)
            # still locked, so nobody appends to it; but only if the path is still this file
            # (another run's new file there is not ours to remove)
            if self.created and st.st_size == 0 and os.path.samestat(st, os.stat(self.real)):
                os.unlink(self.real)
        except OSError:
            pass
        finally:
            self._close()


def _fsync(fh) -> None:
    try:
        os.fsync(fh.fileno())
    except OSError as exc:
        if exc.errno != errno.EINVAL:  # a pipe or device (-o /dev/stdout) cannot be synced
            raise


class GradesAppender:
    """Opens the file only at the first write, so a run that fails before grading
    anything never leaves a new, empty output behind (a session's :class:`OutputLock`
    removes the empty file it created). Whether it can be written is checked at once,
    before a model is loaded."""

    def __init__(self, path: str | None, locked: tuple[int, int] | None = None):
        self.path = None if path == "-" else path
        self._fh = None
        self.lines = 0
        # (device, inode) of the file the session's lock holds: the first write must open
        # that one, not another put at the same path meanwhile (make's `rm -f` and a new
        # run's file, while this run still loaded its model)
        self.locked = locked
        check_output(self.path, append=True)

    def _open(self):
        if self._fh is None:
            if self.path is None:
                import sys

                self._fh = sys.stdout
            else:
                try:
                    self._fh = open(self.path, "ab")
                except OSError as exc:
                    raise write_error(self.path, exc) from None
                st = os.fstat(self._fh.fileno())
                if self.locked is not None and (st.st_dev, st.st_ino) != self.locked:
                    self._fh.close()
                    self._fh = None
                    raise OutputError("was removed and made anew while this run held it (another run writes it "
                                      "now): this run's grades are not added to it", self.path)
        return self._fh

    def _fail(self, exc: OSError, start: int | None) -> OutputError:
        """Cut the failed batch off (no torn line is left) and say that the rest is kept."""
        fh, self._fh = self._fh, None
        if start is not None:
            try:
                os.ftruncate(fh.fileno(), start)
            except OSError:
                pass  # a device or FIFO: nothing to cut
        try:
            fh.raw.close()  # not fh.close(): that would retry the buffered bytes
        except OSError:
            pass
        reason = write_error(self.path, exc).reason
        if start is None:
            return OutputError(reason, self.path)
        if not self.lines:
            return OutputError(f"{reason}; no grades were added to it, run the same command again once there "
                               "is room", self.path)
        return OutputError(f"{reason}; the {self.lines} grades written before are kept, run the same command "
                           "again to resume", self.path)

    def write_batch(self, grades: Iterable[Grade]) -> int:
        text = "".join(grade_line(g) for g in grades)
        if not text:
            return 0
        with unfinished.interrupts_deferred():
            self._write(text)
            n = text.count("\n")
            self.lines += n
        return n

    def _write(self, text: str) -> None:
        fh = self._open()
        if self.path is None:
            fh.write(text)
            fh.flush()
            return
        payload = text.encode("utf-8")
        if _is_gzip_path(self.path):
            payload = gzip.compress(payload, mtime=0)
        try:
            start = fh.tell()
        except OSError:  # not seekable
            start = None
        try:
            fh.write(payload)
            fh.flush()
            _fsync(fh)
        except OSError as exc:  # ENOSPC, EDQUOT, EFBIG, EIO
            raise self._fail(exc, start) from None

    def close(self) -> None:
        if self._fh is not None and self.path is not None:
            self._fh.close()
        self._fh = None
