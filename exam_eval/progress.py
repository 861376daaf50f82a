"""A rich progress bar on stderr, shared by every long-running command.

Logs and progress never touch stdout (results may be piped there). The bar shows done /
total, items per second and the ETA; on a non-terminal stderr (a SLURM log, a pipe)
rich draws nothing live, so the log is not flooded with redraws.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

_console: Console | None = None


def console() -> Console:
    global _console
    if _console is None:
        _console = Console(stderr=True)
    return _console


class _Bar:
    def __init__(self, progress: Progress | None, task):
        self._progress = progress
        self._task = task

    def advance(self, n: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)

    def update(self, **fields) -> None:
        if self._progress is not None:
            self._progress.update(self._task, **fields)


@contextlib.contextmanager
def progress_bar(total: int | None, description: str, unit: str = "items") -> Iterator[_Bar]:
    """``with progress_bar(n, "grading", "pairs") as bar: ... bar.advance(k)``.

    Disabled by ``EXAM_EVAL_PROGRESS=0`` (tests, batch logs).
    """
    if os.environ.get("EXAM_EVAL_PROGRESS", "1") == "0":
        yield _Bar(None, None)
        return
    columns = [
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
        TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
    ]
    progress = Progress(*columns, console=console(), transient=False)
    task = progress.add_task(description, total=total, rate="")
    with progress:
        yield _RateBar(progress, task, unit)


class _RateBar(_Bar):
    def __init__(self, progress: Progress, task, unit: str):
        super().__init__(progress, task)
        self._unit = unit

    def advance(self, n: int = 1) -> None:
        assert self._progress is not None
        self._progress.advance(self._task, n)
        speed = self._progress.tasks[self._task].finished_speed or self._progress.tasks[self._task].speed
        if speed:
            self._progress.update(self._task, rate=f"{speed:.1f} {self._unit}/s")
