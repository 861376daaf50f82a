"""Leaderboards: TSV with a header ``run`` then one column per measure, one row per run.

This is what exam-qrels and exam-cover print for several runs, and the format of
``shared/data/*/official.tsv``. Empty cells are missing values (None).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import IO, Mapping, Sequence

from ..errors import InputError
from .openers import display_name, iter_lines


@dataclass
class Leaderboard:
    columns: list[str]
    rows: dict[str, dict[str, float | None]]

    def column(self, name: str) -> dict[str, float]:
        return {run: vals[name] for run, vals in self.rows.items() if vals.get(name) is not None}


def read_leaderboard(path: str | os.PathLike) -> Leaderboard:
    name = display_name(path)
    header: list[str] | None = None
    rows: dict[str, dict[str, float | None]] = {}
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        cells = line.split("\t")
        if header is None:
            header = [c.strip() for c in cells]
            if len(header) < 2:
                raise InputError("leaderboard header needs 'run' and at least one column (tab-separated)", name, lineno)
            if len(set(header)) != len(header):
                raise InputError("duplicate column names in header", name, lineno)
            continue
        if len(cells) != len(header):
            raise InputError(f"expected {len(header)} tab-separated cells, found {len(cells)}", name, lineno)
        run = cells[0].strip()
        if not run:
            raise InputError("empty run name", name, lineno)
        if run in rows:
            raise InputError(f"duplicate run {run}", name, lineno)
        vals: dict[str, float | None] = {}
        for col, cell in zip(header[1:], cells[1:]):
            cell = cell.strip()
            if cell == "":
                vals[col] = None
                continue
            try:
                v = float(cell)
            except ValueError:
                raise InputError(f"column {col}: {cell!r} is not a number", name, lineno) from None
            if not math.isfinite(v):
                raise InputError(f"column {col}: {cell!r} is not finite", name, lineno)
            vals[col] = v
        rows[run] = vals
    if header is None:
        raise InputError("leaderboard is empty", name)
    if not rows:
        raise InputError("leaderboard has a header but no runs", name)
    return Leaderboard(header[1:], rows)


def format_value(v) -> str:
    if v is None:
        return ""
    if isinstance(v, int):
        return str(v)
    return f"{v:.4f}"


def write_leaderboard(rows: Mapping[str, Mapping[str, object]], columns: Sequence[str], out: IO[str]) -> None:
    out.write("\t".join(["run", *columns]) + "\n")
    for run, vals in rows.items():
        out.write("\t".join([run, *(format_value(vals.get(c)) for c in columns)]) + "\n")
