"""JSON Lines reading with located errors."""

from __future__ import annotations

import json
import os
from typing import Any, Iterator

from ..errors import InputError
from .openers import display_name, iter_lines


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """Yield (line number, decoded value) for every non-blank line."""
    name = display_name(path)
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON ({exc.msg} at column {exc.colno})", name, lineno) from None


def require_fields(obj: Any, fields: tuple[str, ...], name: str, lineno: int) -> None:
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object, got {type(obj).__name__}", name, lineno)
    missing = [f for f in fields if f not in obj]
    if missing:
        raise InputError("missing field" + ("s " if len(missing) > 1 else " ") + ", ".join(repr(m) for m in missing), name, lineno)


def dumps(obj: Any) -> str:
    """One compact, key-order-preserving line (stable bytes for diffs and hashing)."""
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))
