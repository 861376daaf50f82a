"""Reading several run files for a leaderboard: names must be unique."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ..errors import UsageError
from ..io.leaderboard import run_name
from ..trec_eval.trec_files import Run, read_run_table, read_run_tagged

if TYPE_CHECKING:
    from ..trec_eval.bulk import RunTable


def read_run_any(path: str) -> tuple[Run | RunTable, str]:
    """(run, tag): a RunTable where the bulk reader took the file (see trec_eval.trec_files.read_run_table)."""
    got = read_run_table(path)
    return got if isinstance(got, tuple) else (got, got.tag)


def run_names(paths: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    seen: dict[str, str] = {}
    for path in paths:
        name = run_name(path) if path != "-" else "stdin"
        if not name.isprintable() or "\t" in name:
            # a tab or newline would add a column or a row to the leaderboard's TSV
            raise UsageError(f"the run file {path!r} would give the leaderboard name {name!r}, which holds a tab, "
                             "newline or control character: rename the file")
        if name in seen:
            raise UsageError(f"two runs would share the leaderboard name {name!r}: {seen[name]} and {path}")
        seen[name] = path
        yield name, path


def read_runs(paths: tuple[str, ...]) -> list[tuple[str, Run, str]]:
    """[(leaderboard name, run, tag)], all read (and so validated) before any output."""
    return [(name, *read_run_tagged(path)) for name, path in run_names(paths)]
