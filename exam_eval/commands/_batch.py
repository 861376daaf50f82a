"""--batch-out / --batch-in of the chat commands (exam-nuggets assign, exam-genq generate
and nuggetize): their chat model's client answers from batch results files and takes down
what it has no answer for (exam_eval.backends.batch_files).

Their work comes in rounds: an answer that does not parse is asked again at temperature
0.2 (the nuggetizer's re-ask), and exam-genq nuggetize's next window of documents needs
the nuggets of the last. So a round is the same command with every results file so far
(``--batch-in``, repeatable) and ``--batch-out`` for what can be asked now; the work is
done when a round writes no request. Without ``--batch-out`` a request without an answer
fails as a call does (exit 3), and an answer that did not parse stays unparsed."""

from __future__ import annotations

from typing import Callable

import click

from ..backends import registry
from ..backends.batch_files import Replay, check_batch_out, grader_tag, read_results, request_line, write_requests
from ..backends.http_client import NO_SERVER
from ..errors import UsageError
from ..grading.asking import RETRY_TEMPERATURE
from ._base import claim_output


def batch_options(f):
    f = click.option("--batch-in", multiple=True, metavar="FILE",
                     help="endpoint: answers from a batch service's results file(s) (repeatable: every round's), "
                          "in place of a server.")(f)
    return click.option("--batch-out", metavar="FILE", callback=claim_output,
                        help="endpoint: write the requests still to ask to FILE (JSONL for the OpenAI Batch API or "
                             "vLLM's run_batch; split past 50,000 requests or 200 MB) instead of sending them.")(f)


def batch_backends_only(flag: str) -> str:
    """The refusal of a batch flag given a back end that writes no batch requests."""
    batch = registry.listed(registry.names(None, "batch-files"), "or")
    return f"{flag} takes the requests of the {batch} back end: give --backend {batch} and --model " \
        "(the name the batch service serves)"


def check_batch(backend: str, batch_out: str | None, batch_in: tuple, base_url: str | None,
                dry_run: bool = False) -> str | None:
    """The base URL to give the chat model: none is needed with a batch flag."""
    if not batch_out and not batch_in:
        return base_url
    flag = "--batch-out" if batch_out else "--batch-in"
    if dry_run:
        raise UsageError(f"--dry-run and {flag}: the dry run prints what would be asked; give one")
    if not registry.has(backend, "batch-files"):
        raise UsageError(batch_backends_only(flag))

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
