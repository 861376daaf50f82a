"""Opening inputs (path, ``-``, ``.gz``) and writing outputs atomically.

Every failure to read or write becomes one :class:`InputError` / :class:`OutputError`
naming the file (the entry point prints it as one line, exit 2); a reader that goes away
(``... | head``) becomes :class:`OutputClosed`, which the entry point ends quietly.
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
import zlib
from dataclasses import dataclass
from typing import IO, Iterator

from ..errors import InputError, OutputClosed, OutputError, UsageError
from . import unfinished

STDOUT_NAME = "<stdout>"


#: temp files standing in for another input (standard input, a file's readable part),
#: and the name messages give them: the user's, never the temp file's
_COPIES: dict[str, str] = {}


def display_name(path: str | os.PathLike) -> str:
    return "<stdin>" if str(path) == "-" else _COPIES.get(str(path), str(path))


@contextlib.contextmanager
def copy_named(data: bytes, name: str) -> Iterator[str]:
    """``data`` in a temp file that messages call ``name``, for a reader that takes a path."""
    fd, path = tempfile.mkstemp(prefix="exam_eval-copy-", suffix=".gz" if data[:2] == b"\x1f\x8b" else "")
    token = unfinished.begun(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        _COPIES[path] = name
        yield path
    finally:
        _COPIES.pop(path, None)
        with contextlib.suppress(OSError):
            os.unlink(path)
        unfinished.finished(token)


@contextlib.contextmanager
def stdin_as_file() -> Iterator[str]:
    """Standard input copied whole into a temp file, for a reader that looks at its input
    twice (to sniff the format, then to read it); messages name it ``<stdin>``."""
    with copy_named(slurp("-").raw, "<stdin>") as path:
        yield path


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


def _is_gzip(raw: IO[bytes]) -> bool:
    head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
    return head == b"\x1f\x8b"


def _file_in_the_way(path: str) -> str | None:
    """The nearest ancestor of ``path`` that exists but is not a directory (ENOTDIR's culprit)."""
    parent = os.path.dirname(os.path.normpath(path))  # as given: relative stays relative
    while parent:
        if os.path.lexists(parent):
            return None if os.path.isdir(parent) else parent
        if parent == os.path.dirname(parent):
            break
        parent = os.path.dirname(parent)
    return None


def _not_a_dir_reason(path: str) -> str:
    culprit = _file_in_the_way(path)
    return f"{culprit} is a file, not a directory" if culprit else "a component of the path is not a directory"


# a corrupt deflate stream (a flipped byte in a .gz) raises zlib.error, which is no OSError
_READ_ERRORS = (OSError, EOFError, zlib.error)


def _read_reason(exc: BaseException) -> str:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    return f"cannot read: {reason}" + (" (truncated or corrupt gzip?)" if isinstance(exc, (EOFError, zlib.error)) else "")


def _endless(fd: int) -> bool:
    """Whether ``fd`` is a device whose reading may never end (/dev/zero, /dev/urandom, a
    disk): a character or block device other than a terminal (typed input ends) and the
    null device (empty)."""
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    if stat.S_ISBLK(st.st_mode):
        return True
    if not stat.S_ISCHR(st.st_mode) or os.isatty(fd):
        return False
    try:
        return st.st_rdev != os.stat(os.devnull).st_rdev
    except OSError:
        return True


def _refuse_endless(fd: int, name: str) -> None:
    if _endless(fd):
        raise InputError("is a device, not a file: reading it would not end", name)


# A pipe named by path (`exam-qrels <(zcat grades.gz)`, /dev/fd/63) can be read once, but
# readers sniff a format and then read again: the first open reads it whole, and every open
# serves those bytes. Keyed by the pipe's inode as well, since /dev/fd/63 names the next
# pipe too.
_PIPES: dict[tuple, bytes] = {}


def _pipe_bytes(path: str | os.PathLike) -> bytes | None:
    """The bytes of the pipe at ``path``, read once; None for anything else (``-`` included)."""
    if str(path) == "-":
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISFIFO(st.st_mode):
        return None
    key = (os.fspath(path), st.st_dev, st.st_ino)
    if key not in _PIPES:
        try:
            with open(path, "rb") as fh:
                _PIPES[key] = fh.read()
        except OSError as exc:
            raise InputError(_read_reason(exc), display_name(path)) from None
    return _PIPES[key]


@contextlib.contextmanager
def open_binary(path: str | os.PathLike, *, raw: bytes | None = None) -> Iterator[IO[bytes]]:
    """Open an input as bytes (path or ``-``); gzip is detected by magic bytes, not only by suffix.

    ``raw``: the input's bytes, read already (by :func:`slurp`), read through the same layers.
    """
    name = display_name(path)
    if raw is None:
        raw = _pipe_bytes(path)
    if raw is not None:
        buffered = io.BufferedReader(io.BytesIO(raw))
        close = True
    elif str(path) == "-":
        stdin = sys.stdin.buffer
        with contextlib.suppress(AttributeError, OSError, ValueError):  # a replaced stdin has no descriptor
            _refuse_endless(stdin.fileno(), name)
        buffered = stdin if hasattr(stdin, "peek") else io.BufferedReader(stdin)
        close = False
    else:
        try:
            buffered = open(path, "rb")
        except FileNotFoundError:
            raise InputError("no such file", name) from None
        except IsADirectoryError:
            raise InputError("is a directory, expected a file", name) from None
        except NotADirectoryError:
            raise InputError(f"no such file: {_not_a_dir_reason(os.fspath(path))}", name) from None
        except PermissionError:
            raise InputError("permission denied", name) from None
        except OSError as exc:  # ELOOP, ENAMETOOLONG, EIO, ...
            raise InputError(f"cannot open: {exc.strerror or exc}", name) from None
        try:
            _refuse_endless(buffered.fileno(), name)
        except InputError:
            buffered.close()
            raise
        close = True
    try:
        try:
            gz = _is_gzip(buffered)
        except OSError as exc:  # EISDIR on read, EIO
            raise InputError(_read_reason(exc), name) from None
        yield gzip.GzipFile(fileobj=buffered) if gz else buffered
    finally:
        if close:
            buffered.close()


@contextlib.contextmanager
def open_text(path: str | os.PathLike, *, raw: bytes | None = None) -> Iterator[IO[str]]:
    """Open a text input (UTF-8, a leading byte-order mark dropped); see :func:`open_binary`.
    Line readers use :func:`iter_lines`, which names the line of a decoding error."""
    name = display_name(path)
    with open_binary(path, raw=raw) as stream:
        text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline=None)
        try:
            yield text
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", name) from None
        except _READ_ERRORS as exc:  # truncated or corrupt gzip, EIO, EISDIR on read
            raise InputError(_read_reason(exc), name) from None
        finally:
            text.detach()


def _decoded(raw: bytes, name: str, lineno: int) -> str:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start + 1} of the line)", name, lineno) from None
    if "\x00" in line:  # C readers (trec_eval, pytrec_eval) would cut the line there
        raise InputError("NUL byte in the line (binary data, not text)", name, lineno)
    return line


def iter_lines(path: str | os.PathLike, *, raw: bytes | None = None) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its end) of a UTF-8 text input.

    Lines are decoded one by one, so invalid UTF-8 is reported on the line that holds
    it; a byte-order mark at the start of the file is dropped; a bare CR ends a line as
    in text mode; a truncated or corrupt gzip stream is reported on the line where it
    breaks off.
    """
    name = display_name(path)
    with open_binary(path, raw=raw) as fh:
        lineno = 0
        try:
            for chunk in fh:
                if chunk.endswith(b"\n"):
                    chunk = chunk[:-1]
                if b"\r" in chunk:
                    parts = (chunk[:-1] if chunk.endswith(b"\r") else chunk).split(b"\r")
                    for part in parts[:-1]:
                        lineno += 1
                        yield lineno, _decoded(part, name, lineno).removeprefix("\ufeff" if lineno == 1 else "")
                    chunk = parts[-1]
                lineno += 1
                line = _decoded(chunk, name, lineno)
                yield lineno, (line.removeprefix("\ufeff") if lineno == 1 else line)
        except _READ_ERRORS as exc:
            raise InputError(_read_reason(exc), name, lineno + 1) from None


@dataclass
class Slurped:
    """An input read whole: ``raw`` as read (what :func:`iter_lines` takes back, so that a
    line-by-line reading sees the very same bytes, stdin included), ``data`` decompressed,
    or None where decompressing failed (the line reader then reports that as it always has)."""

    raw: bytes
    data: bytes | None


def slurp(path: str | os.PathLike) -> Slurped | None:
    """The whole input in memory, for the bulk readers; None for a file that cannot be
    opened or read (the line reader then opens it again and names the reason)."""
    try:
        if str(path) == "-":
            with contextlib.suppress(AttributeError, OSError, ValueError):
                _refuse_endless(sys.stdin.buffer.fileno(), display_name(path))
            raw = sys.stdin.buffer.read()
        elif (piped := _pipe_bytes(path)) is not None:
            raw = piped
        else:
            with open(path, "rb") as fh:
                if _endless(fh.fileno()):
                    return None  # the line reader opens it again and says why
                raw = fh.read()
    except OSError:
        if str(path) == "-":
            raise InputError("cannot read", display_name(path)) from None
        return None
    if raw[:2] != b"\x1f\x8b":
        return Slurped(raw, raw)
    try:
        # the same reader as open_text's, so that what it accepts is the same
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as gz:
            return Slurped(raw, gz.read())
    except _READ_ERRORS:
        return Slurped(raw, None)


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
        reason = _not_a_dir_reason(display)
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


def existing_non_regular(path: str) -> bool:
    """A device, FIFO or socket (``/dev/null``, ``/dev/stdout``, a named pipe): written in
    place, never replaced by a renamed temp file."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode) and not os.path.isdir(path)
    except OSError:
        return False


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
def atomic_output(path: str | os.PathLike | None, *, binary: bool = False, append: bool = False) -> Iterator[IO]:
    """Write to stdout (None or ``-``) or to PATH via a temp file renamed on success.

    On any exception the temp file is removed, so a failed command never leaves a
    half-written output behind. Paths ending in ``.gz`` are gzip-compressed. A symlink
    is written through (its target is replaced, the link kept); a device or FIFO
    (``/dev/stdout``, a named pipe) is written in place. Every failure to create, write,
    flush, sync or rename is one :class:`OutputError` naming PATH.
    """
    if path is None or str(path) == "-":
        out = sys.stdout.buffer if binary else sys.stdout
        yield out
        out.flush()
        return
    path = os.fspath(path)
    gz = path.endswith(".gz")
    if os.path.isdir(path):
        raise OutputError("cannot write: is a directory", path)
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
