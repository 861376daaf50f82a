"""Writing outputs atomically (a temp file renamed on success, never a half-written file),
the names output folders give their files, and standard output whose failures say what
happened. Every failure to write becomes one :class:`OutputError` naming the file (the
entry point prints it as one line, exit 2); a reader that goes away (``... | head``)
becomes :class:`OutputClosed`, which the entry point ends quietly.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import os
import stat
import sys
import tempfile
from typing import IO, Iterator

from ..errors import InputError, OutputClosed, OutputError, UsageError
from . import unfinished
from .openers import not_a_dir_reason

STDOUT_NAME = "<stdout>"


#: the longest file name most file systems take (NAME_MAX), in bytes
_NAME_MAX = 255
#: what atomic_output's temp file adds to a name: "." NAME "." 8 random characters ".tmp"
_TEMP_EXTRA = 14


def file_name_problem(name: str, suffix: str) -> str | None:
    """Why ``name`` + ``suffix`` cannot be a file's name inside an output folder (None when
    it can): run ids come from the participants' files, and "../x" or "/etc/x" would write
    outside the folder (or over an input of the same command)."""
    if name in (".", ".."):
        return "is a folder's name"
    for sep in filter(None, (os.sep, os.altsep)):
        if sep in name:
            return f"holds {sep!r}"
    if "\0" in name:
        return "holds NUL"
    if len(f"{name}{suffix}".encode("utf-8", "surrogatepass")) > _NAME_MAX - _TEMP_EXTRA:
        # the file is written as .NAME.XXXXXXXX.tmp first (atomic_output): that name must fit too
        return f"is too long for a file name ({_NAME_MAX - _TEMP_EXTRA} bytes with {suffix}, for its temp file's sake)"
    return None


# --------------------------------------------------------------------------- outputs

class NamedOutputRaw(io.FileIO):
    """A FileIO whose write failures name the output. The buffered and text layers above
    it stay in C; only whole buffers (8 KiB) pass through this Python method, so the cost
    is nil, and every path to the file (write, flush, close) reports the same way."""

    def __init__(self, file, mode: str = "wb", *, display: str, closefd: bool = True):
        super().__init__(file, mode, closefd=closefd)
        self.display = display

    def write(self, data) -> int:
        try:
            return super().write(data)
        except BrokenPipeError:
            raise OutputClosed() from None
        except OSError as exc:
            raise write_error(self.display, exc) from None


def write_error(display: str, exc: OSError, directory: str | None = None) -> OutputError:
    """One readable reason for an OSError met while creating or writing an output."""
    code = exc.errno
    if code == errno.ENOENT:
        reason = f"no such directory: {directory}" if directory else "no such file or directory"
    elif code == errno.ENOTDIR:
        reason = not_a_dir_reason(display)
    elif code == errno.EISDIR:
        reason = "is a directory"
    elif code in (errno.EACCES, errno.EPERM):
        reason = f"permission denied (directory {directory})" if directory else "permission denied"
    else:
        reason = exc.strerror or str(exc)
    return OutputError(f"cannot write: {reason}", display)


def _shown_dir(path: str) -> str:
    """The output's folder as the user wrote it (relative stays relative)."""
    return os.path.dirname(path) or "."


#: what an existing path other than a regular file or a folder is, by ``stat.S_IFMT``
_SPECIAL = {stat.S_IFCHR: "a character device", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
            stat.S_IFBLK: "a block device"}
#: written in place (never replaced by a renamed temp file): ``/dev/null``, ``/dev/stdout``
#: on a terminal or pipe, a named pipe to another program
IN_PLACE = frozenset({"a character device", "a FIFO"})


def special_kind(path: str | os.PathLike) -> str | None:
    """What PATH (a link followed) is when it is there and neither a regular file nor a
    folder: "a character device", "a FIFO", "a socket" or "a block device"; else None."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return _SPECIAL.get(stat.S_IFMT(mode))


def existing_non_regular(path: str | os.PathLike) -> bool:
    """A character device or FIFO (``/dev/null``, ``/dev/stdout``, a named pipe): written
    in place, never replaced by a renamed temp file (which would turn the machine's
    ``/dev/null`` into a regular file, for every program, when run as root)."""
    return special_kind(path) in IN_PLACE


def refuse_special(path: str | os.PathLike, display: str | None = None) -> None:
    """A socket or a block device cannot be an output: a socket cannot be opened as a
    file, and writing over a disk's device is never what ``-o`` meant. One line, before
    any work; a character device or FIFO passes (written in place)."""
    kind = special_kind(path)
    if kind is not None and kind not in IN_PLACE:
        raise OutputError(f"cannot write: is {kind}, not a file (a file, a FIFO or a character device such as "
                          "/dev/null can be an output)", display or os.fspath(path))


def check_database_file(path: str | os.PathLike, display: str | None = None) -> None:
    """A file that a library opens and changes in place, with files of its own beside it
    (the grade cache: SQLite's -wal, -shm and -journal): it must be a regular file (a link
    to one is followed) or not there yet. A folder, device, FIFO or socket is refused in
    one line before anything is created beside it."""
    shown = display or os.fspath(path)
    if os.path.isdir(path):
        raise OutputError("cannot use as the cache: is a folder; give the cache's file name "
                          "(e.g. DIR/grades.sqlite)", shown)
    kind = special_kind(path)
    if kind is not None:
        raise OutputError(f"cannot use as the cache: is {kind}, not a file (the cache is an SQLite "
                          "database, written in place with files beside it); give a file name", shown)


def check_output(path: str | os.PathLike | None, *, append: bool = False) -> None:
    """Fail before any work when PATH cannot be written: a missing folder, a file in the
    way, a directory given as the file, no permission, a read-only file system.

    The folder is probed by creating (and removing) the very temp file atomic_output
    will use, so the answer holds for root, ACLs and read-only mounts alike.
    """
    if path is None or str(path) == "-":
        return
    path = os.fspath(path)
    if path == "":
        raise UsageError("empty output file name")
    if path.endswith(tuple(filter(None, (os.sep, os.altsep)))):
        # a file's path with a trailing separator: os.replace would still write the file
        raise OutputError("cannot write: names a folder (it ends with a separator); give a file name", path)
    if os.path.isdir(path):
        raise OutputError("cannot write: is a directory", path)
    refuse_special(path)
    if existing_non_regular(path):
        if not os.access(path, os.W_OK):
            raise OutputError("cannot write: permission denied", path)
        return
    if append and os.path.exists(path):
        try:
            with open(path, "ab"):
                pass
        except OSError as exc:
            raise write_error(path, exc) from None
        return
    real = os.path.realpath(path)
    directory = os.path.dirname(real)
    with unfinished.interrupts_deferred():  # not between the probe's creation and its removal
        try:
            fd, probe = tempfile.mkstemp(prefix="." + os.path.basename(real) + ".", suffix=".tmp", dir=directory)
        except OSError as exc:
            raise write_error(path, exc, _shown_dir(path)) from None
        os.close(fd)
        os.unlink(probe)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def _layers(raw: NamedOutputRaw, *, binary: bool, gz: bool) -> Iterator[IO]:
    """Buffered (and gzip, and text) layers over ``raw``; flushed down to raw on success."""
    buffered = io.BufferedWriter(raw)
    # deterministic gzip bytes: no temp-file name and no timestamp in the header
    inner: IO[bytes] = gzip.GzipFile(filename="", mode="wb", fileobj=buffered, mtime=0) if gz else buffered
    if binary:
        yield inner
    else:
        text = io.TextIOWrapper(inner, encoding="utf-8", newline="\n")
        yield text
        text.flush()
        text.detach()
    if gz:
        inner.close()  # writes the gzip trailer into ``buffered``
    buffered.flush()
    buffered.detach()


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike | None, *, binary: bool = False, append: bool = False,
                  gz: bool | None = None) -> Iterator[IO]:
    """Write to stdout (None or ``-``) or to PATH via a temp file renamed on success.

    On any exception the temp file is removed, so a failed command never leaves a
    half-written output behind. Paths ending in ``.gz`` are gzip-compressed. A symlink
    is written through (its target is replaced, the link kept); a device or FIFO
    (``/dev/stdout``, a named pipe) is written in place, never renamed over; a socket or
    block device is refused. ``gz``: compress or not whatever the name says (None: by the
    name). Every failure to create, write, flush, sync or rename is one
    :class:`OutputError` naming PATH.
    """
    if path is None or str(path) == "-":
        out = sys.stdout.buffer if binary else sys.stdout
        yield out
        out.flush()
        return
    path = os.fspath(path)
    gz = path.endswith(".gz") if gz is None else gz
    if os.path.isdir(path):
        raise OutputError("cannot write: is a directory", path)
    refuse_special(path)
    if existing_non_regular(path):
        try:
            raw = NamedOutputRaw(path, "ab" if append else "wb", display=path)
        except OSError as exc:
            raise write_error(path, exc) from None
        with raw, _layers(raw, binary=binary, gz=gz) as fh:
            yield fh
        return

    real = os.path.realpath(path)
    directory = os.path.dirname(real)
    raw = tmp = None
    try:
        # an interrupt between the temp file's creation and its registration would leave it
        # behind: Ctrl-C and SIGTERM wait until it is known (and then interrupt at once)
        with unfinished.interrupts_deferred():
            try:
                fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(real) + ".", suffix=".tmp", dir=directory)
            except OSError as exc:
                raise write_error(path, exc, _shown_dir(path)) from None
            token = unfinished.begun(tmp)
        raw = NamedOutputRaw(fd, "wb", display=path)
        if append and os.path.exists(real):
            try:
                with open(real, "rb") as src:
                    while chunk := src.read(1 << 20):
                        raw.write(chunk)
            except OSError as exc:
                raise InputError(f"cannot read: {exc.strerror}", path) from None
        with _layers(raw, binary=binary, gz=gz) as fh:
            yield fh
        try:
            # the data must be on disk before the rename makes it the output; a late
            # ENOSPC/EDQUOT/EIO (NFS, delayed allocation) shows up here, not later
            os.fsync(raw.fileno())
            raw.close()
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 -> the user's usual mode
            os.replace(tmp, real)
        except OSError as exc:
            raise write_error(path, exc, _shown_dir(path)) from None
        unfinished.finished(token)
    except BaseException:
        if tmp is None:  # no temp file was made
            raise
        if raw is not None:
            # drop what is still buffered above raw: their flush on garbage collection
            # then meets a closed file instead of writing anywhere
            with contextlib.suppress(Exception):
                raw.close()
        else:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        unfinished.finished(token)
        raise


def ensure_output_dir(path: str | os.PathLike) -> None:
    """Create the output folder PATH (and its parents) or fail with one line naming it."""
    path = os.fspath(path)
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError:
        raise OutputError("cannot create the folder: a file of that name exists", path) from None
    except OSError as exc:
        raise write_error(path, exc) from None


@contextlib.contextmanager
def output_folder(path: str | os.PathLike) -> Iterator[str]:
    """The output folder PATH, created for the files the block writes into it; when the
    block fails (a full disk before the first file), a folder created here is removed
    again if it is still empty, so a failed command leaves no empty folder behind."""
    path = os.fspath(path)
    created = not os.path.isdir(path)
    ensure_output_dir(path)
    try:
        yield path
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(path)  # refuses a folder that is not empty: nothing written is lost
        raise


# --------------------------------------------------------------------------- stdout

class StdoutGuard:
    """Standard output as a text stream whose failures say what happened: ENOSPC
    (``> /dev/full``) is an :class:`OutputError` on ``<stdout>``, a closed pipe is
    :class:`OutputClosed`. Installed by the entry point around a command."""

    def __init__(self) -> None:
        self.saved = None

    def install(self) -> None:
        old = sys.stdout
        try:
            fd = old.fileno()
        except (AttributeError, OSError, ValueError):  # no real stdout (closed, captured)
            return
        with contextlib.suppress(OSError, ValueError):
            old.flush()
        raw = NamedOutputRaw(fd, "wb", display=STDOUT_NAME, closefd=False)
        buffered = io.BufferedWriter(raw)
        sys.stdout = io.TextIOWrapper(buffered, encoding=old.encoding or "utf-8", errors=old.errors or "strict",
                                      newline=None, line_buffering=bool(getattr(old, "line_buffering", False)))
        self.saved = old

    def flush(self) -> None:
        """Push what is buffered now, inside the entry point, so a failure is reported."""
        if self.saved is not None:
            sys.stdout.flush()

    def restore(self) -> None:
        if self.saved is None:
            return
        ours, sys.stdout, self.saved = sys.stdout, self.saved, None
        try:
            ours.flush()
            ours.detach()
        except (Exception, OutputClosed):
            # the failure was reported already; close the raw layer (fd 1 stays open) so
            # that the bytes still buffered above it are dropped, not retried at exit
            with contextlib.suppress(Exception):
                ours.buffer.raw.close()


def silence_stdout() -> None:
    """After a closed pipe: point fd 1 at /dev/null so no later flush can fail."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ else 1)
        os.close(devnull)
