"""Lines and numbers as trec_eval's C code reads, stores and divides them.

Its readers of qrels_jg, prefs and z-score files take exactly the fields of their format
on every line (a blank line is malformed, unlike in a run).

trec_eval reads parameters, labels and levels with atol / atof (the longest numeric
prefix, 0 when there is none), keeps run scores and preference levels in C floats
(single precision: scores that differ only beyond it tie), and divides by zero into
IEEE infinities and NaNs (0/0 is a negative NaN on x86, printed "-nan"). The label bound
and the ranking order by C float are exam_eval.io.trec_rules (io's files follow them too).
"""

from __future__ import annotations

import math
import os
import re
from typing import Iterator

from ..errors import InputError
from ..io.openers import display_name, iter_lines
from ..io.trec_rules import LABEL_MAX


_ATOL = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")
_ATOF = re.compile(r"[ \t\n\v\f\r]*([+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan))", re.I)


# characters str.split() splits at and trec_eval (C's isspace) does not: U+00A0, U+2028,
# U+3000, NEL, the separators 0x1C-0x1F. trec_eval reads one as part of an id; split here
# it would silently make another line of it (a docno "d1<NBSP>x" became "d1" and a 5th field)
_ODD_SPACE = re.compile(r"[^\S \t\n\r\v\f]")


def c_fields(line: str, name: str, lineno: int) -> list[str]:
    """The fields of a TREC line, split where trec_eval splits (ASCII white space).
    A line holding other white space is refused: ids hold no white space (exam_eval(7)),
    and splitting it either way would read another line than trec_eval or exam_eval's
    other files do."""
    odd = _ODD_SPACE.search(line)
    if odd:
        raise InputError(f"holds {_named(odd.group())}, white space that trec_eval does not split fields at "
                         "(only at ASCII white space); ids may hold no white space", name, lineno)
    return line.split()


def _named(char: str) -> str:
    import unicodedata

    return f"U+{ord(char):04X} ({unicodedata.name(char, 'a control character').lower()})"


def exact_fields(path: str | os.PathLike, shape: str, reader: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each line, which must hold the fields of ``shape``
    ("qid jg docno label"); ``reader`` names trec_eval's function, for its message."""
    name = display_name(path)
    width = len(shape.split())
    for lineno, line in iter_lines(path):
        fields = c_fields(line, name, lineno)
        if len(fields) != width:
            raise InputError(f"expected {width} fields '{shape}', found {len(fields)} "
                             f"(trec_eval.{reader}: Malformed line)", name, lineno)
        yield lineno, fields


_LONG_MIN, _LONG_MAX = -(2 ** 63), 2 ** 63 - 1


def c_atol(text: str) -> int:
    """glibc's atol (strtol): a number past a C long's range is clamped to it."""
    m = _ATOL.match(text)
    if not m:
        return 0
    digits = m.group(1)
    if len(digits.lstrip("+-").lstrip("0")) > 19:  # past any long, and maybe past int()'s 4300 digits
        return _LONG_MIN if digits.startswith("-") else _LONG_MAX
    return min(max(int(digits), _LONG_MIN), _LONG_MAX)


def strict_number(text: str, what: str, name: str, lineno: int, *, integer: bool = False,
                  finite: bool = True) -> float | int:
    """``text`` read as a number (an integer when ``integer``; finite when ``finite``), the
    same number trec_eval's atof/atol read; anything else is refused naming file and line.
    trec_eval reads "high" or "1.5" as 0 or 1 without a word; Python alone takes digit-group
    underscores (1_0) and non-ASCII digits, which trec_eval reads otherwise."""
    try:
        if "_" in text or not text.isascii():
            raise ValueError(text)
        value = int(text) if integer else float(text)
    except ValueError:
        raise InputError(f"{what} {text!r} is not {'an integer' if integer else 'a number'}", name, lineno) from None
    if finite and not math.isfinite(value):
        raise InputError(f"{what} {text!r} is not finite", name, lineno)
    return value


def checked_label(text: str, name: str, lineno: int) -> int:
    """A relevance label: an integer within LABEL_MAX either way."""
    label = strict_number(text, "relevance label", name, lineno, integer=True)
    if not -LABEL_MAX <= label <= LABEL_MAX:
        raise InputError(f"relevance label {text} is out of range (at most {LABEL_MAX} either way: "
                         "trec_eval's tables grow with the largest label)", name, lineno)
    return int(label)


def c_atof(text: str) -> float:
    m = _ATOF.match(text)
    return float(m.group(1)) if m else 0.0


def c_floats(values) -> list[float]:
    """Doubles stored in C floats, back as Python floats (inf beyond the float range)."""
    import numpy as np

    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float64).astype(np.float32).astype(np.float64).tolist()


def c_float(value: float) -> float:
    return c_floats([value])[0]


_C_LONG_RANGE = 2.0 ** 63


def c_long(x: float) -> int:
    """A double converted to a C long on x86-64 (cvttsd2si): truncated toward 0, and
    LONG_MIN for NaN or anything out of range (a length of 1e30 is LONG_MIN)."""
    if x != x or not -_C_LONG_RANGE <= x < _C_LONG_RANGE:
        return _LONG_MIN
    return int(x)


def c_div(a: float, b: float) -> float:
    """a / b with the IEEE result where C divides by zero."""
    if b:
        return a / b
    if math.isnan(a):
        return a             # x86 hands on the NaN operand, its sign included
    if a == 0:
        return -math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)

