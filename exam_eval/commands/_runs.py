"""Reading several run files for a leaderboard: names must be unique."""

from __future__ import annotations

from ..errors import UsageError
from ..io.trec import Run, read_run_tagged, run_name


def read_runs(paths: tuple[str, ...]) -> list[tuple[str, Run, str]]:
    """[(leaderboard name, run, tag)], all read (and so validated) before any output."""
    out = []
    seen: dict[str, str] = {}
    for path in paths:
        name = run_name(path) if path != "-" else "stdin"
        if name in seen:
            raise UsageError(f"two runs would share the leaderboard name {name!r}: {seen[name]} and {path}")
        seen[name] = path
        run, tag = read_run_tagged(path)
        out.append((name, run, tag))
    return out
