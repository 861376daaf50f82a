"""Opening inputs (path, ``-``, ``.gz``): every failure to read becomes one
:class:`InputError` naming the file (the entry point prints it as one line, exit 2).
Writing outputs is :mod:`exam_eval.io.outputs`.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import stat
import sys
import tempfile
import zlib
from dataclasses import dataclass
from typing import IO, Iterator

from ..errors import InputError
from . import unfinished

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


def not_a_dir_reason(path: str) -> str:
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
            raise InputError(f"no such file: {not_a_dir_reason(os.fspath(path))}", name) from None
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
