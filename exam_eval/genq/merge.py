"""Adding generated items to a human-edited bank without touching a byte of it.

The existing bank's lines are copied as they are (decompressed when gzipped), never
parsed and re-serialised: a human's edits, key order, spacing and unicode escapes survive,
and ``diff`` shows only the appended lines. New items are appended only for queries (or
query facets) the bank has no item of the generated kind for.
"""

from __future__ import annotations

import gzip
import os

from ..errors import InputError
from ..io.banks import read_bank
from ..io.bank_items import BankItem
from ..io.jsonl import dumps
from ..io.openers import display_name
from ..io.outputs import atomic_output


def raw_bytes(path: str | os.PathLike) -> bytes:
    name = display_name(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", name) from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise InputError(f"corrupt gzip file: {exc}", name) from None
    return data


def existing_units(path: str | os.PathLike, kind: str) -> tuple[set[tuple[str, str | None]], int]:
    """(query_id, facet_id) pairs that already have items of ``kind`` (validates the bank),
    and (query_id, None) for every query that has any: a query-level unit (the dl style)
    is covered by items under its facets too. Then how many queries the bank holds, of
    any kind and whether TOPICS names them or not: every line is copied, so all are kept."""
    items = read_bank(path, allow_empty=True)
    units = {(i.query_id, i.facet_id) for i in items if i.kind == kind}
    return units | {(q, None) for q, _ in units}, len({i.query_id for i in items})


def write_merged(base: bytes | None, items: list[BankItem], out: str | None) -> None:
    """``base`` verbatim (a final newline added if it lacked one), then one line per item."""
    with atomic_output(out, binary=True) as fh:
        if base:
            fh.write(base)
            if not base.endswith(b"\n"):
                fh.write(b"\n")
        for item in items:
            fh.write((dumps(item.to_json()) + "\n").encode("utf-8"))
