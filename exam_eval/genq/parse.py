"""Reading a list of questions or nuggets out of whatever a model answered.

Accepted, tried in this order on each candidate (the contents of every code fence, the
whole answer, the span from the first ``{`` to the last ``}``, the span from the first
``[`` to the last ``]``):

1. JSON: an object with the requested key (``{"questions": [...]}``), an object with
   exactly one list-of-strings value under a key that names the items (``question_set``)
   or a list (``items``, ``results``), or a bare list.
2. A Python literal (``['a', "b"]``, optionally behind ``name = ``), read with
   :func:`ast.literal_eval`, which evaluates literals only and never runs code.

If none of those gives a list, numbered or bulleted lines (``1. ...``, ``2) ...``,
``- ...``, ``* ...``, ``• ...``, ``Q3: ...``) are taken. Plain prose yields nothing: text
that is not visibly an element of a list is never turned into a question.

Every item is cleaned (surrounding whitespace, quotes, a trailing comma, list numbering)
and repeated items (same text up to case and spacing) are dropped, keeping the first.
"""

from __future__ import annotations

import ast
import json
import re

from ..io.jsonl import LONE_SURROGATE

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n?(.*?)```", re.DOTALL)
_ASSIGN = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_]*\s*=\s*")
_LIST_LINE = re.compile(
    r"^\s*(?:(?:q(?:uestion)?|n(?:ugget)?)?\s*\d{1,3}\s*[.):\]-]|[-*\u2022\u2023\u25e6\u2043\u2219])\s+(.*\S)\s*$",
    re.IGNORECASE)
_NUMBERING = re.compile(r"^(?:(?:q(?:uestion)?|n(?:ugget)?)\s*\d{1,3}|\d{1,3})\s*[.):\]]\s+", re.IGNORECASE)
_QUOTES = "\"'`\u201c\u201d\u2018\u2019"


def clean_item(text: str) -> str:
    s = text.strip()
    for _ in range(2):  # `"1. What ...?",` needs both passes
        s = s.rstrip(",").strip()
        if len(s) >= 2 and s[0] in _QUOTES and s[-1] in _QUOTES:
            s = s[1:-1].strip()
        s = _NUMBERING.sub("", s).strip()
    return " ".join(s.split()) if "\n" in s else s


def dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = " ".join(item.casefold().split())
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _strings(value) -> list[str] | None:
    """A list of strings from a parsed value (dict elements with one text field allowed)."""
    if not isinstance(value, (list, tuple)):
        return None
    out = []
    for v in value:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            texts = [x for k, x in v.items() if isinstance(x, str)
                     and k.lower() in ("question", "nugget", "text", "question_text", "nugget_text")]
            if len(texts) == 1:
                out.append(texts[0])
    return out if out else None


def _from_value(value, field: str | None) -> list[str] | None:
    if isinstance(value, dict):
        if field and field in value:
            return _strings(value[field])
        lowered = {str(k).lower(): v for k, v in value.items()}
        if field and field.lower() in lowered:
            return _strings(lowered[field.lower()])
        lists = [(k, v) for k, v in value.items() if _strings(v)]
        if len(lists) != 1 or not _names_items(lists[0][0], field):
            return None
        return _strings(lists[0][1])
    return _strings(value)


#: keys that hold "the list", whatever its items are
_CONTAINERS = frozenset({"items", "list", "results", "result", "output", "data"})


def _names_items(key, field: str | None) -> bool:
    """Whether an object's only list is the one asked for: its key names the items
    ("question_set" for questions) or is a container's name. {"error": ..., "codes":
    ["E42"]} is no list of questions, nor {"questions": [...]} a list of nuggets."""
    k = str(key).lower()
    return field is None or k in _CONTAINERS or field.lower().rstrip("s") in k


def _load(candidate: str):
    candidate = candidate.strip()
    if not candidate:
        return None
    try:
        return json.loads(candidate)
    except (ValueError, RecursionError):  # a model's answer may nest without end
        pass
    literal = _ASSIGN.sub("", candidate, count=1)
    try:
        return ast.literal_eval(literal)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _candidates(text: str) -> list[str]:
    out = [m.group(2) for m in _FENCE.finditer(text)]
    out.append(text)
    for open_, close in (("{", "}"), ("[", "]")):
        i, j = text.find(open_), text.rfind(close)
        if 0 <= i < j:
            out.append(text[i:j + 1])
    return out


def _from_lines(text: str) -> list[str] | None:
    items = []
    for line in text.splitlines():
        m = _LIST_LINE.match(line)
        if m:
            items.append(m.group(1))
    return items or None


def parse_items(text: str | None, field: str | None = None) -> list[str] | None:
    """The cleaned, de-duplicated items, or None when the answer holds no list."""
    if text is None or not text.strip():
        return None
    found: list[str] | None = None
    an_object = False
    for candidate in _candidates(text):
        if an_object and candidate.lstrip().startswith("["):
            break  # the list inside an object that is no list of items is no list of items
        value = _load(candidate)
        found = _from_value(value, field)
        if found:
            break
        an_object = an_object or isinstance(value, dict)
    if not found:
        found = _from_lines(text)
    if not found:
        return None
    # an item with a lone surrogate could not be hashed into its id: it is not read
    items = dedupe([c for c in (clean_item(s) for s in found) if c and not LONE_SURROGATE.search(c)])
    return items or None
