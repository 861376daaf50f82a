"""How the commands that talk to a model run their work: a grading session run as a
command runs it (:func:`run_session`: signals, summary, failures, exit codes), and
--batch-out / --batch-in of every command that talks to an endpoint model: the one
declaration of the flags (:func:`batch_options`), the one check (:func:`check_batch`),
and the rounds of both kinds (the library is exam_eval.backends.batch_files).

exam-grade (:func:`grade_or_batch`) asks one call per pair: ``--batch-out`` writes the
requests of the pairs still to grade and grades nothing, ``--batch-in`` grades from their
results files; the two are one round each.

The chat commands (exam-nuggets assign, exam-genq generate and nuggetize,
:func:`attach` and :func:`finish`): their chat model's client answers from batch results
files and takes down what it has no answer for. Their work comes in rounds: an answer
that does not parse is asked again at temperature 0.2 (the nuggetizer's re-ask), and
exam-genq nuggetize's next window of documents needs the nuggets of the last. So a round
is the same command with every results file so far (``--batch-in``, repeatable) and
``--batch-out`` for what can be asked now; the work is done when a round writes no
request. Without ``--batch-out`` a request without an answer fails as a call does (exit
3), and an answer that did not parse stays unparsed."""

from __future__ import annotations

import sys
from typing import Callable, Iterable

import click

from ..backends import registry
from ..backends.batch_files import (Replay, check_batch_out, custom_id, grader_tag, read_results, record_bodies,
                                    request_digest, request_line, write_requests)
from ..backends.context_limit import too_long_line
from ..backends.http_client import NO_SERVER
from ..errors import UsageError
from ..grading.asking import RETRY_TEMPERATURE
from ..grading.session import Interrupted
from ._base import EXIT_INTERRUPTED, claim_output, exit_on_next_signal, stop_on_signals

EXIT_CALLS_FAILED = 3

#: the flags' help (--batch-out, --batch-in): of the chat commands, and of exam-grade
CHAT_HELP = ("endpoint: write the requests still to ask to FILE (JSONL for the OpenAI Batch API or vLLM's run_batch; "
             "split past 50,000 requests or 200 MB) instead of sending them.",
             "endpoint: answers from a batch service's results file(s) (repeatable: every round's), in place of a "
             "server.")
GRADE_HELP = ("endpoint: write the requests of the pairs still to grade to FILE (JSONL for the OpenAI Batch API or "
              "vLLM's run_batch; split as FILE-2.jsonl ... past 50,000 requests or 200 MB) and grade nothing.",
              "endpoint: grade from a batch service's results file(s) instead of a server (repeatable); requests "
              "without an answer fail as calls do (exit 3).")


def batch_options(f=None, *, grading: bool = False):
    """--batch-out FILE and --batch-in FILE (repeatable), as ``@batch_options`` (a chat
    command) or ``@batch_options(grading=True)`` (exam-grade: its help)."""
    if f is None:
        return lambda g: batch_options(g, grading=grading)
    out_help, in_help = GRADE_HELP if grading else CHAT_HELP
    f = click.option("--batch-in", multiple=True, metavar="FILE", help=in_help)(f)
    return click.option("--batch-out", metavar="FILE", callback=claim_output, help=out_help)(f)


def batch_backends_only(flag: str) -> str:
    """The refusal of a batch flag given a back end that writes no batch requests."""
    batch = registry.listed(registry.names(None, "batch-files"), "or")
    return f"{flag} takes the requests of the {batch} back end: give --backend {batch} and --model " \
        "(the name the batch service serves)"


def check_batch(backend: str, batch_out: str | None, batch_in: tuple, base_url: str | None,
                dry_run: bool = False, *, grading: bool = False, verify: str | None = None) -> str | None:
    """The one check of --batch-out and --batch-in, for every command: the base URL to give
    the model (none is needed with a batch flag). ``grading``: exam-grade's round
    (:func:`grade_or_batch`), which takes one of the two flags, names the back end before
    --dry-run and refuses as click does (with its --help hint); ``verify``: exam-grade's
    --verify, whose llm asks a second call after each answer."""
    if not batch_out and not batch_in:
        return base_url
    flag = "--batch-out" if batch_out else "--batch-in"
    refuse = click.UsageError if grading else UsageError
    if grading and batch_out and batch_in:
        raise refuse("--batch-out writes the requests and --batch-in reads their answers: give one")
    if dry_run and not grading:
        raise refuse(f"--dry-run and {flag}: the dry run prints what would be asked; give one")
    if not registry.has(backend, "batch-files"):
        raise refuse(batch_backends_only(flag))
    if dry_run:
        raise refuse(f"--dry-run and {flag}: the dry run counts what --batch-out would ask; give one")
    if verify == "llm":
        raise refuse(f"{flag}: --verify llm asks a second call after each answer; grade its extraction "
                     "with --verify lexical, or through a server")

    return base_url or NO_SERVER


def attach(model, command: str, batch_out: str | None, batch_in: tuple, *, identity: str,
           reask_temperature: float | None = None):
    """Put a results-file client in place of ``model``'s (an endpoint chat model or
    generator); None without batch flags. Results of another grader are refused here,
    before anything is written. ``reask_temperature``: where the command's re-asks go
    (default the nuggetizer's 0.2)."""
    if not batch_out and not batch_in:
        return None

    tag = grader_tag(command, identity)
    if batch_out:
        check_batch_out(batch_out, tag, command)
    answers = read_results(batch_in, tag, "command") if batch_in else {}
    reask = RETRY_TEMPERATURE if reask_temperature is None else reask_temperature
    replay = Replay(model.client.model, answers, record=bool(batch_out), reask_temperature=reask,
                    name=command.replace(" ", "-"))
    replay.tag = tag
    model.client = replay
    return replay


def finish(replay, batch_out: str | None, log: Callable[[str], None]) -> bool:
    """After the work: write the requests taken down (--batch-out) and say what the
    results did not answer. True where calls are left unanswered (exit 3)."""
    if replay is None:
        return False
    for line in replay.report():
        log(line)
    if replay.reasked_errors:
        first = replay.reasked_errors[0]
        log(f"{len(replay.reasked_errors)} requests were answered with an error and are asked again in the batch file "
            f"(first: {first.where}: {first.error})")
    if replay.not_reasked:
        log(f"{replay.not_reasked} answers did not parse and were not asked again: give the same results files with "
            "--batch-out FILE to ask them again at temperature 0.2, as the nuggetizer does")
    unused = len(set(replay.answers) - replay.used)
    if unused:
        log(f"{unused} answers in the results files were not asked for by this run (answered already, or of other "
            "inputs): not used")
    if batch_out:
        written = write_requests(batch_out, [request_line(cid, route, body) for cid, route, body in replay.asked],
                                 tag=replay.tag)
        log(f"{len(replay.asked):,} requests written to {written.summary()}" + (
            ": send them to the OpenAI Batch API or vLLM's run_batch, then run the same command with every results "
            "file so far as --batch-in (and --batch-out for the next round)" if replay.asked else
            ": nothing is left to ask"))
    return bool(replay.errors or replay.missing)


# ---- exam-grade's rounds: one request per pair still to grade ----------------------------

def batch_tag(command: str, grader, prompt) -> str:
    return grader_tag(command, grader.cache_identity, prompt.id, prompt.hash)


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
