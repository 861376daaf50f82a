"""What the grading commands (exam-grade, exam-nuggets support) share around a grading
session: the back end from their flags, the --dry-run report, the interrupt and failure
messages, the exit codes. The session itself is
:class:`exam_eval.grading.session.GradingSession`."""

from __future__ import annotations

import sys
from typing import Callable, Iterable

import click

from ._base import EXIT_INTERRUPTED, exit_on_next_signal, stop_on_signals
from ._batch import batch_backends_only
from ..backends import registry
from ..backends.batch_files import (Replay, check_batch_out, custom_id, grader_tag, read_results, record_bodies,
                                    request_digest, request_line, write_requests)
from ..backends.context_limit import too_long_line
from ..backends.hf_common import pretrained_source
from ..backends.http_client import NO_SERVER
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


# ---- batch files (--batch-out, --batch-in): backends.batch_files -------------------------

def batch_tag(command: str, grader, prompt) -> str:
    return grader_tag(command, grader.cache_identity, prompt.id, prompt.hash)


def check_batch_flags(backend: str, batch_out: str | None, batch_in: tuple, dry_run: bool, verify: str | None,
                      options: dict) -> None:
    """--batch-out and --batch-in: requests of the endpoint back end, one call per pair;
    no server is needed for either (``options``' base_url is filled in where missing)."""
    if not batch_out and not batch_in:
        return
    flag = "--batch-out" if batch_out else "--batch-in"
    if batch_out and batch_in:
        raise click.UsageError("--batch-out writes the requests and --batch-in reads their answers: give one")
    if not registry.has(backend, "batch-files"):
        raise click.UsageError(batch_backends_only(flag))
    if dry_run:
        raise click.UsageError(f"--dry-run and {flag}: the dry run counts what --batch-out would ask; give one")
    if verify == "llm":
        raise click.UsageError(f"{flag}: --verify llm asks a second call after each answer; grade its extraction "
                               "with --verify lexical, or through a server")

    options["base_url"] = options.get("base_url") or NO_SERVER


def _unit_name(unit) -> str:
    pair = unit.pairs[0]
    return f"{pair.query_id}:{pair.doc_id}:{'-' if pair.item is None else pair.item.item_id}"


def _asked(session, command: str) -> list[tuple[str, str, dict]]:
    """(custom_id, route, body) of every unit still to grade, as the back end would send it."""
    grader, units = session.grader, session.work.units_todo
    tag = batch_tag(command, grader, session.prompt)
    out = []
    for unit, asked in zip(units, record_bodies(grader, [u.request for u in units], lambda r: grader.grade([r]))):
        if len(asked) != 1:  # one call per pair is what a batch file can hold
            raise RuntimeError(f"back end {grader.name} asked {len(asked)} requests for one pair")
        route, body = asked[0]
        out.append((custom_id(tag, request_digest(route, body), _unit_name(unit)), route, body))
    return out


def write_batch(session, path: str, *, command: str, log: Callable[[str], None]) -> int:
    """--batch-out: one request line per unit still to grade (resume rules, cache and
    --shard as for grading), split at the Batch API's limits."""
    tag = batch_tag(command, session.grader, session.prompt)
    check_batch_out(path, tag, command)
    asked = _asked(session, command)
    pairs = sum(len(u.pairs) for u in session.work.units_todo)
    written = write_requests(path, [request_line(cid, route, body) for cid, route, body in asked], tag=tag)
    files = written.summary()
    stats = session.work.stats
    # the cache's grades are not asked; the --batch-in run writes them with the answers
    log(f"{len(asked):,} requests for {pairs:,} pairs written to {files or path}; not asked: {stats.in_output:,} "
        f"pairs already in the output, {stats.from_cache:,} in the cache")
    if asked:
        log("send them to the OpenAI Batch API or vLLM's run_batch, then run the same command with --batch-in "
            "RESULTS (man exam-grade, \"Batch files: the OpenAI Batch API and vLLM's run_batch\")")
    return 0


def read_batch(session, paths: tuple[str, ...], *, command: str, log: Callable[[str], None]):
    """--batch-in: the back end's client answers from the results files (checked whole
    before anything is written); returns the client, for its report of what failed."""
    asked = _asked(session, command)
    names = {cid.split(":")[3]: cid for cid, _, _ in asked}
    answers = read_results(paths, batch_tag(command, session.grader, session.prompt), "command")
    known = {d: a for d, a in answers.items() if d in names}
    if len(answers) > len(known):
        log(f"{len(answers) - len(known):,} answers in the results files are for requests this run does not ask "
            "(pairs already graded, or of another --shard or pool): not used")
    replay = Replay(session.grader.model_id, known, names)
    session.grader.client = replay
    return replay


def grade_or_batch(session, batch_out: str | None, batch_in: tuple, *, command: str, log: Callable[[str], None],
                   **run) -> int:
    """Grade the planned session (:func:`run_session` with ``run``), or write its requests
    (--batch-out), or grade it from results files (--batch-in)."""
    if batch_out:
        return write_batch(session, batch_out, command=command, log=log)
    if batch_in:
        replay = read_batch(session, batch_in, command=command, log=log)
        run.update(failures=replay.report, retry="a new --batch-out asks for them", replayed=True)
    return run_session(session, log=log, **run)
