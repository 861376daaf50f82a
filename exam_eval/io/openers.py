"""Opening inputs (path, ``-``, ``.gz``) and writing outputs atomically."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import sys
import tempfile
from typing import IO, Iterator

from ..errors import InputError


def display_name(path: str | os.PathLike) -> str:
    return "<stdin>" if str(path) == "-" else str(path)


def _is_gzip(raw: IO[bytes]) -> bool:
    head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
    return head == b"\x1f\x8b"


@contextlib.contextmanager
def open_text(path: str | os.PathLike) -> Iterator[IO[str]]:
    """Open a text input; gzip is detected by magic bytes, not only by suffix."""
    name = display_name(path)
    if str(path) == "-":
        raw = sys.stdin.buffer
        buffered = raw if hasattr(raw, "peek") else io.BufferedReader(raw)
        close = False
    else:
        try:
            buffered = open(path, "rb")
        except FileNotFoundError:
            raise InputError("no such file", name) from None
        except IsADirectoryError:
            raise InputError("is a directory, expected a file", name) from None
        except PermissionError:
            raise InputError("permission denied", name) from None
        close = True
    try:
        stream: IO[bytes] = gzip.GzipFile(fileobj=buffered) if _is_gzip(buffered) else buffered
        text = io.TextIOWrapper(stream, encoding="utf-8", newline=None)
        try:
            yield text
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", name) from None
        except (OSError, EOFError) as exc:  # truncated or corrupt gzip
            raise InputError(f"cannot read: {exc}", name) from None
        finally:
            text.detach()
    finally:
        if close:
            buffered.close()


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without trailing newline)."""
    name = display_name(path)
    with open_text(path) as fh:
        lineno = 0
        try:
            for lineno, line in enumerate(fh, 1):
                yield lineno, line.rstrip("\n").rstrip("\r")
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", name, lineno + 1) from None
        except (OSError, EOFError) as exc:
            raise InputError(f"cannot read: {exc}", name, lineno + 1) from None


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike | None, *, binary: bool = False, append: bool = False) -> Iterator[IO]:
    """Write to stdout (None or ``-``) or to PATH via a temp file renamed on success.

    On any exception the temp file is removed, so a failed command never leaves a
    half-written output behind. Paths ending in ``.gz`` are gzip-compressed.
    """
    if path is None or str(path) == "-":
        out = sys.stdout.buffer if binary else sys.stdout
        yield out
        out.flush()
        return
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        if append and os.path.exists(path):
            with open(path, "rb") as src, open(tmp, "wb") as dst:
                dst.write(src.read())
        mode = "ab" if append else "wb"
        if path.endswith(".gz"):
            raw: IO[bytes] = gzip.open(tmp, mode)
        else:
            raw = open(tmp, mode)
        with raw:
            if binary:
                yield raw
            else:
                text = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
                yield text
                text.flush()
                text.detach()
        # mkstemp makes the file 0600; an output file should get the user's usual mode
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
