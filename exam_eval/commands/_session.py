"""What the grading commands (exam-grade, exam-nuggets support) share around a grading
session: the back end from their flags, the --dry-run report, the interrupt and failure
messages, the exit codes. The session itself is
:class:`exam_eval.grading.session.GradingSession`; exam-grade's --batch-out and
--batch-in rounds of it are in ``_batch``."""

from __future__ import annotations

import sys
from typing import Callable, Iterable

import click

from ._base import EXIT_INTERRUPTED, exit_on_next_signal, stop_on_signals
from ..backends import registry
from ..backends.context_limit import too_long_line
from ..backends.hf_common import pretrained_source
from ..grading.cache import default_cache_path
from ..grading.engine import estimate_seconds
from ..grading.session import Interrupted

EXIT_CALLS_FAILED = 3


def cache_file(cache_path: str | None, no_cache: bool) -> str | None:
    """--cache / --no-cache: the cache to use, or None."""
    if no_cache:
        return None

    return cache_path or default_cache_path()


def dry_run_report(plan, grader, cache, shard) -> None:
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
    tokens, how = estimate_prompt_tokens(grader, plan.units_todo)
    lines.append((f"prompt tokens to send ({how})", tokens))
    for label, value in lines:
        click.echo(f"{label}\t{value}")
    if est is None:
        click.echo(f"estimated time\tunknown (no finished run of {grader.cache_identity} in the cache yet)")
    else:
        click.echo(f"estimated time\t{hms(est)} (at {rate:.2f} calls/s measured on the last run)")


def _tokenizer_of(grader):
    """The grading model's tokenizer where one is at hand without a download: a local
    back end's checkpoint, or an endpoint's model id that names a checkpoint on this
    machine (a path, or one in the Hugging Face cache); None otherwise."""
    ref = getattr(grader, "_ref", None) or getattr(grader, "model_id", None)
    if not ref or registry.has(getattr(grader, "name", ""), "no-tokenizer"):
        return None
    try:
        from transformers import AutoTokenizer

        source, gguf = pretrained_source(str(ref))
        return AutoTokenizer.from_pretrained(source, local_files_only=True, **gguf)
    except Exception:  # noqa: BLE001 - no tokenizer here: the estimate says so
        return None


def estimate_prompt_tokens(grader, units) -> tuple[int, str]:
    """The prompt tokens the units to grade would send (as rendered, without a chat
    template's own tokens), and how they were counted."""
    # the whole passage, uncut: a dry run loads no model, so the window is not known yet
    texts = [unit.request.prompt.render(**unit.request.texts(unit.request.context)) for unit in units]
    if not texts:
        return 0, "none to send"
    tok = _tokenizer_of(grader)
    if tok is None:
        return sum(max(1, len(t) // 4) for t in texts), "estimated at 4 characters a token: no tokenizer here"
    total = 0
    for start in range(0, len(texts), 1024):
        total += sum(len(ids) for ids in tok(texts[start:start + 1024], add_special_tokens=False)["input_ids"])
    return total, "counted with the model's tokenizer"


def hms(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def run_session(session, *, log: Callable[[str], None], batch_size: int | None, progress: str,
                notes: Iterable[str] = (), on_ready: Callable[[], None] | None = None,
                failures: Callable[[], list[str]] | None = None,
                retry: str = "run the same command again to retry them", replayed: bool = False) -> int:
    """Run a planned session as a command does: SIGTERM stops like Ctrl-C (exit 130 with
    the resume hint; a second signal ends the process at once, see ``stop_on_signals``),
    then the summary, ``notes`` and failed model calls (exit 3): named by ``failures``
    where given (else the back end's most frequent error), ``retry`` said of them.
    ``replayed``: the answers came from batch results files, where nothing is called: a pair
    without a grade has no answer there, it did not fail."""
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
    log(stats.summary("without an answer" if replayed else "failed"))
    for note in (*notes, *stats.judge_notes(), stats.device_memory, session.grader.run_note(),
                 getattr(session.grader, "usage_line", lambda: None)()):
        if note:
            log(note)
    too_long = stats.failed and _too_long(session.grader, output)
    if too_long:
        log(f"{stats.failed} model calls failed and were not recorded: {too_long}")
        return EXIT_CALLS_FAILED
    if stats.failed:
        if failures is not None:
            for line in failures():
                log(line)
        else:
            detail = getattr(session.grader, "failure_summary", lambda: None)()
            if detail:
                log(detail)
        log(f"{stats.failed} " + ("pairs have no answer in the results files (none, or an error)" if replayed
                                  else "model calls failed") + f" and were not recorded; {retry}")
        return EXIT_CALLS_FAILED
    return 0


def _too_long(grader, output: str | None) -> str | None:
    """The one line of a run the server stopped at a prompt longer than the model's context."""
    window = getattr(grader, "context_window", None)
    # a changed flag is a grader with other settings, which exam-grade never mixes into one -o
    kept = ("the grades written to -o are kept (a rerun with the same flags resumes there; one with a changed flag "
            "writes to a new -o)" if output and output != "-"
            else "the grades printed are all there is (-o FILE makes a run resumable)")
    cut = (f"a smaller --max-input-tokens (the passage is cut to fit; now {window})" if window
           else "--max-input-tokens N (the passage is cut to fit N tokens, prompt included)")
    return too_long_line(grader, cut, "--max-tokens", getattr(grader, "max_new_tokens", 0), kept)
