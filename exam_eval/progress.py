"""A rich progress bar on stderr, shared by every long-running command.

Logs and progress never touch stdout (results may be piped there). The bar shows done /
total, items per second and the ETA; on a non-terminal stderr (a SLURM log, a pipe)
rich draws nothing live, so the log is not flooded with redraws: the bar's final state is
printed once, as one line, when the work ends (EXAM_EVAL_PROGRESS=0: not even that). There is no bar for
nothing to do (everything came from the cache), and the libraries' own tqdm bars
(transformers' "Loading weights", huggingface_hub, sentence-transformers) are switched
off: this bar is the only one.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

# rich is imported on first use: every entry point imports this module, and the quick
# commands (exam-qrels as trec_eval) must not pay for a bar they never draw
_console: Console | None = None


def console() -> Console:
    global _console
    if _console is None:
        from rich.console import Console

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


def silence_library_progress() -> None:
    """Switch off the tqdm bars of transformers, huggingface_hub and sentence-transformers.

    All three obey huggingface_hub's switch, read from the environment when they are
    imported (commands import them lazily, after this runs). A user who sets
    HF_HUB_DISABLE_PROGRESS_BARS=0 (to watch a first download) keeps the bars.
    """
    if "HF_HUB_DISABLE_PROGRESS_BARS" in os.environ:
        return
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if "huggingface_hub" in sys.modules:  # already imported (the Python API): tell it directly
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


@contextlib.contextmanager
def progress_bar(total: int | None, description: str, unit: str = "items") -> Iterator[_Bar]:
    """``with progress_bar(n, "grading", "pairs") as bar: ... bar.advance(k)``.

    Disabled by ``EXAM_EVAL_PROGRESS=0`` (or false, no, off: tests, batch logs); absent when
    ``total`` is 0.
    """
    if os.environ.get("EXAM_EVAL_PROGRESS", "1").strip().lower() in ("0", "false", "no", "off") or total == 0:
        # total 0: all served from the cache or the output; an empty 0/0 bar says nothing
        yield _Bar(None, None)
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

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
