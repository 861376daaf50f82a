"""exam-genq: generate exam question / nugget banks from topics, or import other banks.

Exit codes: 0 success, 1 usage error, 2 bad input, 3 partial: some queries got no items
(their answers could not be parsed after the retries, or the calls failed); the bank
holds every other query and a summary on stderr names the failed ones.
"""

from __future__ import annotations

import os
import sys

import click

from ..backends.factory import check_client, make_client
from ..errors import InputError, UsageError
from ..genq.generate import build_units, dry_run_text, generate_bank
from ..genq.merge import existing_units, raw_bytes, write_merged
from ..genq.nuggetize import (CREATOR_HASH, SCORER_HASH, documents_from_qrels, documents_from_reports,
                              documents_from_runs, nuggetize_topics)
from ..genq.prompts import STYLES, families, get_prompt
from ..grading.asking import RETRY_TEMPERATURE
from ..grading.cache import cache_file
from ..grading.types import NO_ANSWER
from ..io.bank_items import make_item_id
from ..io.banks import BankReport, read_bank, write_bank
from ..io.openers import display_name
from ..io.passages import read_passages
from ..io.reports import embedded_documents, read_reports, read_requests
from ..io.topics import read_topics
from ..trec_eval.trec_files import read_qrels, read_run
from ._base import CONTEXT_SETTINGS, IN_PLACE, interrupted_says, make_main, output_option, refuse_given
from ._batch import attach, batch_options, check_batch, finish
from ._chat import cache_options, chat_options, chat_too_long, kept_hint, make_chat, open_cache, usage_note
from ._options import ModelFlags, model_flags

EXIT_PARTIAL = 3
PROG = "exam-genq"


def _log(msg: str) -> None:
    click.echo(f"{PROG}: {msg}", err=True)


def _check_output(output: str | None, force: bool) -> None:
    if output not in (None, "-") and os.path.exists(output) and not force:
        raise UsageError(f"{output} exists; pass --force to overwrite it "
                         "(--merge-with FILE -o FILE --force adds to a bank in place)")


class _DefaultToGenerate(click.Group):
    """``exam-genq TOPICS`` generates; ``exam-genq import FILE`` imports."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in (*CONTEXT_SETTINGS["help_option_names"],
                                                                      "--version"):
            args = ["generate", *args]
        elif not args:
            args = ["generate"]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultToGenerate, context_settings=CONTEXT_SETTINGS)
def cli():
    """Generate exam question or nugget banks with an LLM, or import existing banks.

    \b
    exam-genq [OPTIONS] TOPICS          generate (the default command; see: exam-genq generate -h)
    exam-genq import [OPTIONS] FILE     convert a workbench or multiple-choice bank
    exam-genq nuggetize [OPTIONS] TOPICS  nuggets from documents, with importance (AutoNuggetizer)

    \b
    Examples:
      export OPENAI_API_KEY=...   # the key is read from the environment only
      exam-genq --model gpt-4o-mini --base-url https://api.openai.com/v1 topics.tsv -o bank.jsonl
      exam-genq --kind nugget --style car --model m --base-url http://localhost:8000/v1 car-topics.jsonl
      exam-genq --dry-run topics.tsv                    # prompts, calls, tokens; no model
      exam-genq --model m topics.tsv --merge-with bank.jsonl -o bank.jsonl --force
      exam-genq import dl19-genq.jsonl.gz -o bank.jsonl   # a bank of the reference workbench

    Exit status: 0 ok, 1 usage error, 2 bad input, 3 some queries failed (partial bank).
    """


@cli.command("generate", context_settings=CONTEXT_SETTINGS)
@click.argument("topics", metavar="TOPICS")
@click.option("--kind", type=click.Choice(["question", "nugget"]), default="question", show_default=True,
              help="Generate exam questions or nuggets (key facts).")
@click.option("--style", default="dl", show_default=True, metavar="dl|car",
              help="dl: one prompt per query (query text); car: one per subtopic facet (title plus "
                   "facet, facet ids kept; JSONL topics with \"subtopics\").")
@click.option("--prompt", "family", default="workbench", show_default=True, metavar="FAMILY",
              help="Prompt family: 'workbench' (RUBRIC workbench Table 1, JSON answer) or 'exam' "
                   "(EXAM paper Table 1, Python list; questions only).")
@click.option("--n", "n", type=click.IntRange(1), default=10, show_default=True,
              help="Number of items the dl prompts ask for (the published prompts say 10).")
@click.option("--max-items", type=click.IntRange(1), default=None,
              help="Keep at most this many items per query/facet (default: all the model gave).")
@model_flags("complete")
@click.option("--merge-with", "merge_with", default=None, metavar="BANK",
              help="Copy BANK's lines byte for byte and add items only for queries/facets it lacks.")
@cache_options
@batch_options
@output_option
@click.option("--force", is_flag=True, help="Overwrite an existing -o file.")
@click.option("--dry-run", is_flag=True, help="Print the prompts, the number of calls and input tokens; call nothing.")
def generate(topics, kind, style, family, n, max_items, llm: ModelFlags, retries, merge_with, cache_path, no_cache,
             batch_out, batch_in, output, force, dry_run):
    """Generate a question or nugget bank for TOPICS (file or ir_datasets ID).

    TOPICS: qid<TAB>text TSV, JSONL {"query_id","text","subtopics"?}, a TREC topic file,
    or an ir_datasets ID. The bank (JSONL, one item per line, ids
    query_id[/facet_id]/md5(text)) goes to stdout or -o.

    \b
    Examples:
      exam-genq generate --model gpt-4o-mini --base-url https://api.openai.com/v1 topics.tsv -o bank.jsonl
      exam-genq generate --backend scripted --script answers.jsonl topics.tsv
      exam-genq generate --dry-run --style car --kind nugget car-topics.jsonl
    """
    # everything a user can get wrong is checked before any model is contacted or loaded
    if style not in STYLES:
        raise UsageError(f"--style: unknown style {style!r} (choose from: {', '.join(STYLES)})")
    if family not in families():
        raise UsageError(f"unknown prompt family {family!r} (choose from: {', '.join(families())})")
    options = llm.client_options()
    gen_class = check_client(llm.backend, "complete", options)
    prompt = get_prompt(family, style, kind)
    check_options = getattr(gen_class, "check_options", None)
    if check_options is not None:
        check_options(options.get("backend_options"))  # before a dry run too
    _check_output(output, force)
    options["base_url"] = check_batch(llm.backend, batch_out, batch_in, options.get("base_url"), dry_run)
    topic_map = read_topics(topics)
    skip: set = set()
    base = None
    base_queries = 0
    if merge_with is not None:
        skip, base_queries = existing_units(merge_with, kind)
        base = raw_bytes(merge_with)
    all_units = build_units(topic_map, style, prompt, n, topics_name=display_name(topics))
    units = [u for u in all_units if u.key not in skip]
    n_covered = len(all_units) - len(units)  # TOPICS' units the merged bank has already: not asked

    if dry_run:
        click.echo(dry_run_text(units, n_covered, prompt), nl=False)
        return 0

    if not units:
        _log("nothing to generate: every query/facet is already in the merged bank")
        write_merged(base, [], output)
        return 0
    gen = make_client(llm.backend, "complete", **options)
    replay = attach(gen, "exam-genq generate", batch_out, batch_in, identity=f"{gen.cache_identity}:{prompt.identity}",
                    reask_temperature=max(llm.temperature, RETRY_TEMPERATURE))
    what = "facets" if style == "car" else "queries"
    _log(f"generating {kind}s for {len(units)} {what} with {llm.backend}:{gen.model_id} "
         f"(prompt {prompt.name})")
    with interrupted_says(PROG, kept_hint(no_cache)), open_cache(cache_path, no_cache) as cache:
        outcome = generate_bank(gen, units, kind=kind, field_name=prompt.field, retries=retries, max_items=max_items,
                                cache=cache, identity=gen.cache_identity)
    if (outcome.items or base) and not outcome.pending:  # batch rounds: the last one writes the bank
        write_merged(base, outcome.items, output)
    elif not outcome.pending:  # an empty bank is one no reader takes: none is written (and none replaced)
        _log("no items: nothing is written" + (f" to {output}" if output not in (None, "-") else ""))
    _log(f"{len(outcome.items)} {kind}s for {outcome.units_done} of {len(units)} {what} "
         f"({outcome.calls} {'answers read' if batch_in else 'calls'}, {outcome.from_cache} from cache)"
         + (f"; {merge_with} kept whole ({base_queries} queries), {n_covered} {what} of TOPICS already in it"
            if merge_with else "")
         + (f"; {outcome.pending} {what} wait for their answers (in the batch file): the bank is written by "
            "the round that has them all" if outcome.pending else ""))
    _notes(gen)
    unanswered = finish(replay, batch_out, _log)
    if outcome.failures:
        _say_failures(outcome.failures, what, output, gen, llm.max_tokens, no_cache)
        return EXIT_PARTIAL
    return EXIT_PARTIAL if unanswered else 0


def _notes(model) -> None:
    """What the model says at the end of a run: its device memory, the tokens it used."""
    for note in (getattr(model, "memory_note", None), usage_note(model)):
        if note:
            _log(note)


def _say_failures(failures, what: str, output: str | None, gen, max_tokens: int, no_cache: bool) -> None:
    too_long = chat_too_long(gen, None, max_tokens, no_cache)
    if too_long:  # one cause for all: one line
        _log(f"{len(failures)} {what} failed and have no items: {too_long}")
        return

    # a request the results files do not answer was not called, so it did not fail
    called = [f for f in failures if f.reason != NO_ANSWER]
    _say_grouped(f"{len(failures)} {what} " + ("failed and " if called else "") + "have no items", what, [
        (f.unit.label, f.reason, "" if f.reason == NO_ANSWER else
         f" (after {f.attempts} {'call' if f.attempts == 1 else 'calls'})") for f in failures])
    if output not in (None, "-") and os.path.exists(output):
        _log(f"to ask again for these only: exam-genq ... --merge-with {output} -o {output} --force")


@cli.command("import", context_settings=CONTEXT_SETTINGS)
@click.argument("bank_file", metavar="FILE")
@click.option("--kind", type=click.Choice(["question", "nugget"]), default=None,
              help="Keep only items of this kind.")
@output_option
@click.option("--force", is_flag=True, help="Overwrite an existing -o file.")
def import_(bank_file, kind, output, force):
    """Convert a bank to exam_eval's format, keeping every item id.

    FILE: the reference workbench's banks (one line per query or facet, current "items"
    and old "questions" format), multiple-choice banks with answer keys (one question per
    line: qid, question, choices, correctKey, correct; the correct choice's text becomes
    the item's answer), or our own format. gzip is detected.

    \b
    Exact repeats of an item are dropped; lines without question text are skipped; both
    are counted on stderr. Ids are copied, never recomputed: the old workbench format and
    the multiple-choice files hashed unstripped text, and existing grades refer to them.
    Only an item without an id gets one, and an item whose text no longer matches its
    hashed id (edited by hand) gets its new text's id; both are reported on stderr.

    \b
    Examples:
      exam-genq import dl19-genq.jsonl.gz -o dl19-questions.jsonl   # the workbench's DL19 questions
      exam-genq import --kind question car-mc.jsonl.gz | head
    """
    _check_output(output, force)
    skipped: list = []
    repeats: list = []
    report = BankReport()
    items = read_bank(bank_file, kind=kind, skipped=skipped, repeats=repeats, report=report)
    for notice in report.notices(bank_file):
        _log(notice)
    write_bank(items, output)
    n_q = sum(1 for i in items if i.kind == "question")
    rederived = sum(1 for i in items if make_item_id(i.query_id, i.text, i.facet_id) == i.item_id)
    _log(f"{len(items)} items ({n_q} questions, {len(items) - n_q} nuggets, "
         f"{sum(1 for i in items if i.answers)} with answers); {len(repeats)} exact repeats dropped; "
         f"{len(skipped)} lines without question text skipped; "
         f"{rederived} ids equal query_id[/facet_id]/md5(text.strip()), the rest kept as given")
    return 0


NUGGETIZE_EPILOG = """\b
Examples:
  # nuggets from the judged-relevant documents, as the TREC 2024 RAG track made them
  exam-genq nuggetize queries.jsonl --qrels rag24.qrels --passages corpus.jsonl \\
      --model meta-llama/Llama-3.3-70B-Instruct --base-url http://gpu1:8000/v1 -o nuggets.jsonl
  # from the pool of runs (top 20 of each), or from the documents reports cite
  exam-genq nuggetize queries.jsonl --run a.run --run b.run --passages corpus.jsonl --model m -o nuggets.jsonl
  exam-genq nuggetize queries.jsonl --reports runs/ --passages corpus.jsonl --model m -o nuggets.jsonl
  # then: exam-nuggets assign --bank nuggets.jsonl ...; exam-nuggets bank --to nuggetizer nuggets.jsonl

Exit status: 0 ok, 1 usage error, 2 bad input, 3 some topics failed (the bank holds the others).
"""


@cli.command("nuggetize", context_settings=CONTEXT_SETTINGS, epilog=NUGGETIZE_EPILOG)
@click.argument("topics", metavar="TOPICS")
@click.option("--qrels", default=None, metavar="FILE", help="Documents: the judged ones with label >= --min-label.")
@click.option("--min-label", type=click.IntRange(min=0), default=1, show_default=True,
              help="With --qrels: lowest label used.")
@click.option("--run", "runs", multiple=True, metavar="FILE", help="Documents: the pool of these runs (repeatable).")
@click.option("--depth", type=click.IntRange(1), default=20, show_default=True, help="With --run: pool depth.")
@click.option("--reports", multiple=True, metavar="FILE|DIR",
              help="Documents: those the RAG reports cite or list as references (repeatable).")
@click.option("--passages", default=None, metavar="FILE|ID",
              help="Document texts (JSONL, TSV or an ir_datasets ID); reports' embedded documents need none.")
@click.option("--window", type=click.IntRange(1), default=10, show_default=True,
              help="Documents per creation call and nuggets per importance call.")
@click.option("--max-nuggets", type=click.IntRange(1), default=30, show_default=True, help="Nuggets per topic.")
@chat_options
@batch_options
@output_option
@click.option("--force", is_flag=True, help="Overwrite an existing -o file.")
def nuggetize(topics, qrels, min_label, runs, depth, reports, passages, window, max_nuggets, llm: ModelFlags, retries,
              cache_path, no_cache, batch_out, batch_in, output, force):
    """Create a nugget bank from documents, with vital/okay importance (AutoNuggetizer).

    The nuggetizer's creator reads each topic's documents in windows and updates a
    nugget list (at most --max-nuggets); its scorer labels them vital or okay; vital
    nuggets come first. The bank (our JSONL: ids query_id/md5(text), importance, the
    query text) can be edited by hand and exported with exam-nuggets bank.
    """
    if sum(bool(x) for x in (qrels, runs, reports)) != 1:
        raise UsageError("give the documents with exactly one of --qrels, --run, --reports")
    ctx = click.get_current_context()
    if not qrels:
        refuse_given(ctx, ("min_label",), "applies to --qrels")
    if not runs:
        refuse_given(ctx, ("depth",), "applies to --run")
    _check_output(output, force)
    # its flags: checked before any input is read
    chat = make_chat(llm, check_batch(llm.backend, batch_out, batch_in, llm.client_options().get("base_url")))
    replay = attach(chat, "exam-genq nuggetize", batch_out, batch_in,
                    identity=f"{chat.cache_identity}:{CREATOR_HASH}:{SCORER_HASH}")
    queries = read_requests(topics)
    texts: dict[str, str] = {}
    if qrels:
        doc_ids = documents_from_qrels(read_qrels(qrels), min_label)
    elif runs:
        doc_ids = documents_from_runs([read_run(r) for r in runs], depth)
    else:
        rs = read_reports(list(reports))
        doc_ids = documents_from_reports(rs)
        texts.update(embedded_documents(rs))
    wanted = {d for ds in doc_ids.values() for d in ds} - set(texts)
    if wanted:
        if not passages:
            raise UsageError("the documents need texts: give --passages")

        texts.update(read_passages(passages, wanted))
    with interrupted_says(PROG, kept_hint(no_cache)):
        result = nuggetize_topics(queries, doc_ids, texts, chat, cache_path=cache_file(cache_path, no_cache),
                                  retries=retries, window=window, max_nuggets=max_nuggets, log=_log)
    bank = result.bank()
    _notes(chat)
    if result.pending:
        _log(f"{len(result.pending)} topics wait for answers (their next requests are in the batch file): the bank "
             "is written by the round that has them all")
    unanswered = finish(replay, batch_out, _log)
    if not bank and not result.failed and not result.pending:
        if not result.topics:
            raise InputError("no topic has documents with text", qrels or passages or ", ".join(runs or reports))
        # documents were read, but the model's answers gave no nugget: say so, write nothing
        _log(f"the model's answers gave no nuggets for any of {len(result.topics)} topics "
             f"({sum(t.unparsed_windows for t in result.topics)} windows did not parse); nothing written")
        return EXIT_PARTIAL
    if bank and not result.pending:  # none: an existing bank stays as it was, none is created empty
        write_bank(bank, output)
    unlabelled = sum(1 for i in bank if i.importance is None)
    _log(f"{len(bank)} nuggets for {len({i.query_id for i in bank})} topics; creation: "
         f"{result.create_stats.summary()}; importance: {result.score_stats.summary()}"
         + (f"; {unlabelled} nuggets have no importance (the label did not parse)" if unlabelled else ""))
    if result.failed:
        _say_failed_topics(result.failed, bank, chat, window, llm.max_tokens, no_cache)
        return EXIT_PARTIAL
    return EXIT_PARTIAL if unanswered else 0


def _say_failed_topics(failed, bank, chat, window: int, max_tokens: int, no_cache: bool) -> None:
    too_long = chat_too_long(chat, f"a smaller --window (documents per call; now {window})", max_tokens, no_cache)
    head = f"{len(failed)} topics failed and have no nuggets" + ("" if bank else " (nothing written)")
    if too_long:  # one cause for all: one line
        _log(f"{head}: {too_long}")
    else:
        _say_grouped(head, "topics", [(t.query_id, t.failed, "") for t in failed])


#: the ids a grouped failure line names before "and N more"
NAMED_IDS = 10


def _say_grouped(head: str, what: str, failed: list[tuple[str, str, str]]) -> None:
    """Failures grouped by their reason: one line where one cause failed them all (a server
    that is down, a refusal), else a line per reason, naming its ids (a line for each unit
    where its reason is its own, with ``note``)."""
    by: dict[str, list[tuple[str, str]]] = {}
    for label, reason, note in failed:
        by.setdefault(reason, []).append((label, note))

    def ids(units):
        shown = ", ".join(label for label, _ in units[:NAMED_IDS])
        return shown + (f" and {len(units) - NAMED_IDS} more" if len(units) > NAMED_IDS else "")

    if len(by) == 1 and len(failed) > 1:
        ((reason, units),) = by.items()
        _log(f"{head}: {reason} ({what}: {ids(units)})")
        return
    _log(f"{head}:")
    for reason, units in sorted(by.items(), key=lambda kv: -len(kv[1])):
        _log(f"  {units[0][0]}: {reason}{units[0][1]}" if len(units) == 1 else
             f"  {len(units)} {what} ({ids(units)}): {reason}")


# --merge-with BANK -o BANK --force: the bank is read whole, then the new one is written
setattr(generate, IN_PLACE, {("--merge-with", "--output")})
main = make_main(cli, PROG)

if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
