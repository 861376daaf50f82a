"""What the grading commands (exam-grade, exam-nuggets support) share around a grading
session: the back end from their flags, the --dry-run report, the interrupt and failure
messages, the exit codes. The session itself is
:class:`exam_eval.grading.session.GradingSession`."""

from __future__ import annotations

import sys
from typing import Callable, Iterable

import click

from ..backends.factory import make_grader, split_backend_options  # noqa: F401  (their old home)
from ._base import EXIT_INTERRUPTED

EXIT_CALLS_FAILED = 3


def cache_file(cache_path: str | None, no_cache: bool) -> str | None:
    """--cache / --no-cache: the cache to use, or None."""
    if no_cache:
        return None
    from ..grading.cache import default_cache_path

    return cache_path or default_cache_path()


def dry_run_report(plan, grader, cache, shard) -> None:
    from ..grading.engine import estimate_seconds

    s = plan.stats
    todo_pairs = sum(len(u.pairs) for u in plan.units_todo)
    rate = cache.throughput(grader.cache_identity)
    est = estimate_seconds(s.units_to_grade, rate)
    lines = [
        ("pool (passages with text)", s.pool),
        ("passages without text", s.missing),
        ("pairs" + (f" in shard {shard}" if shard else ""), s.pairs),
        ("already in output", s.in_output),
        ("from cache", s.from_cache),
        ("to grade (pairs)", todo_pairs),
        ("model calls after deduplication", s.units_to_grade),
    ]
    for label, value in lines:
        click.echo(f"{label}\t{value}")
    if est is None:
        click.echo(f"estimated time\tunknown (no finished run of {grader.cache_identity} in the cache yet)")
    else:
        click.echo(f"estimated time\t{hms(est)} (at {rate:.2f} calls/s measured on the last run)")


def hms(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def run_session(session, *, log: Callable[[str], None], batch_size: int | None, progress: str,
                notes: Iterable[str] = (), on_ready: Callable[[], None] | None = None) -> int:
    """Run a planned session as a command does: SIGTERM stops like Ctrl-C (exit 130 with
    the resume hint; a second signal ends the process at once, see ``stop_on_signals``),
    then the summary, ``notes`` and failed model calls (exit 3)."""
    from ..grading.session import Interrupted
    from ._base import exit_on_next_signal, stop_on_signals

    output = session.output
    stop_on_signals()
    try:
        stats = session.run(batch_size=batch_size, progress=progress, on_ready=on_ready)
    except Interrupted as exc:
        exit_on_next_signal()  # already so, unless the interrupt came from inside the work
        hint = "run the same command again to resume" if output and output != "-" else \
            "use -o FILE to make grading resumable"
        log(f"interrupted; {exc.written} grades written; {hint}")
        sys.exit(EXIT_INTERRUPTED)
    log(stats.summary())
    for note in (*notes, stats.device_memory, session.grader.run_note()):
        if note:
            log(note)
    if stats.failed:
        detail = getattr(session.grader, "failure_summary", lambda: None)()
        if detail:
            log(detail)
        log(f"{stats.failed} model calls failed and were not recorded; run the same command again to retry them")
        return EXIT_CALLS_FAILED
    return 0
