"""JSON Lines reading with located errors.

Every JSON input goes through :func:`iter_jsonl` (or :func:`loads_checked` for a value
read otherwise), which refuses, naming file and line, what no producer of our formats
writes and what would fail later without a location: nesting deeper than
:data:`MAX_DEPTH` levels (Python's decoder would end in a RecursionError), ``NaN`` and
``Infinity`` (not JSON; Python's decoder accepts them), and escaped lone surrogates
(``"\\ud800"``: not Unicode text, so any later hashing or writing of the string fails).
"""

from __future__ import annotations

import json
import os
import re
from itertools import accumulate
from typing import Any, Iterator

from ..errors import InputError
from .openers import display_name, iter_lines

MAX_DEPTH = 64  # our formats nest at most 6 levels; the decoder itself gives up near 1,000

# an escaped surrogate that is not half of a pair: only these can make a lone one (the
# decoder joins pairs); an escaped backslash before "u" can make a false alarm, which
# the exact check then clears
_LONE_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                          r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_NOT_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[^"\[\]{}]+')  # strings, and all else but brackets
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _constant(name: str):
    raise ValueError(f"{name} is not allowed in JSON (not a number)")


def _depth(line: str) -> int:
    """Nesting depth of a valid JSON text, counted on its brackets outside strings (C-speed
    regular expressions and iterators; walking the decoded value costs 10 times more)."""
    brackets = _NOT_BRACKET.sub("", line)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _check(value: Any, line: str) -> None:
    """Depth and lone surrogates, looked for only where the raw line could hold them."""
    if line.count("[") + line.count("{") > MAX_DEPTH and _depth(line) > MAX_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    if ("\\ud" not in line and "\\uD" not in line) or not _LONE_ESCAPE.search(line):
        return
    stack = [(value, "")]
    while stack:
        v, where = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as exc:
                bad = v[exc.start]
                raise ValueError(f"lone surrogate \\u{ord(bad):04x} in the string at {where or 'top level'} "
                                 "(an escaped half of a UTF-16 pair is not text)") from None
        elif isinstance(v, dict):
            for k, x in v.items():
                stack.append((k, f"a key of {where or 'the top level'}"))
                stack.append((x, f"{where}.{k}" if where else str(k)))
        elif isinstance(v, list):
            stack.extend((x, f"{where}[{i}]") for i, x in enumerate(v))


_DECODER = json.JSONDecoder(parse_constant=_constant)  # one decoder: json.loads would build one per call


def loads_checked(line: str) -> Any:
    """json.loads, with the refusals of the module docstring as ValueError (their reason);
    json.JSONDecodeError (also a ValueError) for invalid JSON."""
    try:
        value = _DECODER.decode(line)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    _check(value, line)
    return value


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """Yield (line number, decoded value) for every non-blank line."""
    name = display_name(path)
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            value = loads_checked(line)
        except json.JSONDecodeError as exc:
            at = "" if exc.msg.endswith(" at") else " at"  # "Unterminated string starting at"
            raise InputError(f"invalid JSON ({exc.msg}{at} column {exc.colno})", name, lineno) from None
        except ValueError as exc:
            raise InputError(str(exc), name, lineno) from None
        yield lineno, value


def require_fields(obj: Any, fields: tuple[str, ...], name: str, lineno: int) -> None:
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object, got {type(obj).__name__}", name, lineno)
    missing = [f for f in fields if f not in obj]
    if missing:
        raise InputError("missing field" + ("s " if len(missing) > 1 else " ") + ", ".join(repr(m) for m in missing), name, lineno)


def json_id(value: Any, key: str, name: str, lineno: int, *, trec: bool = True, nullable: bool = False) -> str | None:
    """An id read from JSON: a string or an integer (as hand-made files write query ids),
    never a boolean, float, list or object. A ``trec`` id (query, document) becomes one
    field of a TREC file: no white space; no id holds control characters."""
    if type(value) is str and value.isprintable() and (value.split() == [value] if trec else value.strip()):
        return value  # the common case, first
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        shown = json.dumps(value)[:40] if isinstance(value, (bool, float)) else type(value).__name__
        raise InputError(f"'{key}' must be a string{' or null' if nullable else ''}, got {shown}", name, lineno)
    value = str(value)
    if not value.strip():
        raise InputError(f"'{key}' is empty", name, lineno)
    if not value.isprintable() or (trec and value.split() != [value]):
        raise InputError(f"'{key}' {value!r} holds {'white space or ' if trec else ''}control characters"
                         + (" (not allowed in TREC files)" if trec else ""), name, lineno)
    return value


# half of a surrogate pair ("\ud83d" of a cut emoji, escaped in a model's JSON answer): no
# UTF-8 text holds it, so a string with one can be neither hashed nor written
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


#: json.dumps with these settings, built once: dumps makes a new encoder at every call
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))


def dumps(obj: Any) -> str:
    """One compact, key-order-preserving line (stable bytes for diffs and hashing).

    A lone surrogate (which a model's answer can hold: a JSON reply may escape one) becomes
    U+FFFD, so that the line can be written as UTF-8 and read back."""
    line = _ENCODER.encode(obj)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = LONE_SURROGATE.sub("\ufffd", line)
    return line
