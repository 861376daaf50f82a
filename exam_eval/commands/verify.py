"""exam-verify: human oversight of the grading (phase 3 of the workbench paper).

The method keeps humans in control through the bank: these listings show where the
grader or the bank goes wrong, so a human edits the bank (or the prompt), not labels.
"""

from __future__ import annotations

import contextlib
import os
import sys

import click

from ..errors import InputError, UsageError
from ..io.openers import display_name
from ..io.outputs import atomic_output
from ..verify.grid import build_grid, grid_page, write_grid_tsv
from ..verify.label_design import ORDERS, SCALES, read_design
from ..verify.label_sample import (DEFAULT_DEPTH, SampleSpec, check_inputs_here, export_labels, folder_name,
                                   open_sample, sample_texts)
from ..verify.label_session import LabelSession
from ..verify.label_store import OneWriter, assessors, check_assessor
from ..verify.item_grades import verify_grading, write_grading_text, write_grading_tsv
from ..verify.report import ReportOptions, compute, render
from ..verify.spurious import spurious_items, write_spurious_text, write_spurious_tsv
from ..verify.table import DEFAULT_MIN_GRADE, DEFAULT_RELEVANT_MIN, extraction_answers, load_grade_table, passage_texts
from ..measures.grade_labels import read_human_qrels
from ..verify.uncovered import uncovered_passages, write_uncovered_text, write_uncovered_tsv
from ._base import (CONTEXT_SETTINGS, claim_output, exit_on_next_signal, grader_options, make_main, output_option,
                    refuse_given)
from ._options import grouped

PROG = "exam-verify"


def _min_grade_option(f):
    return click.option("--min-grade", "min_grade", type=int, default=DEFAULT_MIN_GRADE, show_default=True,
                        metavar="TAU", help="A grade >= TAU counts as the item answered/mentioned.")(f)


def _relevant_min_option(f):
    return click.option("--relevant-min", "relevant_min", type=int, default=DEFAULT_RELEVANT_MIN,
                        show_default=True, metavar="L",
                        help="Human label >= L is relevant, 0 <= label < L non-relevant "
                             "(TREC DL: use 2).")(f)


def _qrels_option(f):
    return click.option("--qrels", default=None, metavar="FILE",
                        help="Human qrels (file or ir_datasets ID), to show each passage's judgment.")(f)


def _bank_option(f):
    return click.option("--bank", default=None, metavar="FILE",
                        help="Bank file, to show item texts (else item ids are shown).")(f)


def _passages_option(f):
    return click.option("--passages", default=None, metavar="FILE|ID",
                        help="Passage texts (JSONL, TSV or ir_datasets ID) when the grades file "
                             "does not embed them (the workbench's files do).")(f)


def _extraction_options(f):
    f = click.option("--extraction-grades", default=None, metavar="FILE",
                     help="File holding the extraction grades [default: GRADES].")(f)
    f = click.option("--extraction-prompt", default=None, metavar="NAME",
                     help="Also show the answers of this extraction prompt (e.g. question-extraction) "
                          "beside the grades.")(f)
    return f


def _query_option(f):
    return click.option("-q", "--query", "queries", multiple=True, metavar="QID",
                        help="Only this query (repeatable).")(f)


def _check_threshold(min_grade: int, relevant_min: int | None = None) -> None:
    if min_grade < 0:
        raise UsageError("--min-grade must be >= 0")
    if relevant_min is not None and relevant_min < 1:
        raise UsageError("--relevant-min must be >= 1 (labels below it count as non-relevant)")


@click.group(context_settings=CONTEXT_SETTINGS)
def cli():
    """Human oversight of LLM grading: check the grader, find spurious bank items and
    relevant passages the bank misses, browse the grades, build an HTML report, and collect
    human labels on a drawn sample (label, label-qrels) for the confidence intervals.

    \b
    Examples (TREC DL 2019, reference grades; relevant = NIST label >= 2):
      exam-verify grading graded.jsonl.gz --bank bank.jsonl.gz --top 5
      exam-verify spurious graded.jsonl.gz qrels.txt --relevant-min 2 --top 3
      exam-verify uncovered graded.jsonl.gz qrels.txt --relevant-min 2 -o uncovered.tsv
      exam-verify grid graded.jsonl.gz --qrels qrels.txt --format html -o grid.html
      exam-verify report graded.jsonl.gz --qrels qrels.txt --official official.tsv runs/*.run -o report.html
      exam-verify label sample/ runs/*.run -n 30 -k 10 --topics topics.tsv --passages passages.jsonl.gz

    Exit status: 0 success, 1 usage error, 2 bad input (the message names file and
    line). See man exam-verify.
    """


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("grades")
@_qrels_option
@_bank_option
@_passages_option
@_query_option
@click.option("--top", type=int, default=None, metavar="N", help="Only the N best-graded passages per item.")
@click.option("--format", "fmt", type=click.Choice(["text", "tsv"]), default="text", show_default=True)
@_extraction_options
@grader_options
@output_option
def grading(grades, qrels, bank, passages, queries, top, fmt, extraction_prompt, extraction_grades, model, prompt,
            kind, output):
    """For each bank item, its graded passages sorted by grade, with the grader's answer
    (and the passage's human judgment with --qrels): do high grades mean real answers?

    \b
    TSV columns: query_id item_id grade judgment doc_id answer extracted_answer item_text
    passage_text ("unparsed" grade: the grader's output could not be read; "-" judgment:
    unjudged; extracted_answer: from --extraction-prompt, else empty).

    \b
    Example:
      exam-verify grading graded.jsonl.gz --qrels qrels.txt --bank bank.jsonl.gz -q 19335 --top 5
      exam-verify grading grades.jsonl --prompt question-selfrating --extraction-prompt question-extraction
    """
    if top is not None and top < 1:
        raise UsageError("--top must be >= 1")
    table, bank_items = load_grade_table(grades, model, prompt, kind, bank, queries)
    extracted = extraction_answers(grades, extraction_prompt, extraction_grades)
    qrels_d = read_human_qrels(qrels) if qrels else None
    rows = verify_grading(table, qrels_d, queries=queries, top=top, extracted=extracted)
    wanted = {(r.query_id, p.doc_id) for r in rows for p in r.passages}
    texts = passage_texts([grades], passages, wanted)
    with atomic_output(output) as out:
        if fmt == "tsv":
            write_grading_tsv(rows, out, bank_items, texts)
        else:
            write_grading_text(rows, out, bank_items, texts)


def judgments_of(table, qrels: str, grades: str):
    """The human judgments, which must share a query with the grades: a wrong qrels file
    gave an empty table and exit 0."""
    qrels_d = read_human_qrels(qrels)
    if not set(qrels_d) & set(table.by_doc):
        shown = ", ".join(sorted(table.by_doc)[:3])
        raise InputError(f"no query in common with the grades of {grades} (whose queries are {shown} ...)", qrels)
    return qrels_d


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("grades")
@click.argument("qrels")
@_min_grade_option
@_relevant_min_option
@click.option("--top", type=int, default=10, show_default=True, metavar="N",
              help="At most N items per query (0: all).")
@click.option("--min-count", type=int, default=1, show_default=True, metavar="C",
              help="Only items covered by at least C judged non-relevant passages.")
@_bank_option
@_query_option
@click.option("--format", "fmt", type=click.Choice(["tsv", "text"]), default="tsv", show_default=True)
@grader_options
@output_option
def spurious(grades, qrels, min_grade, relevant_min, top, min_count, bank, queries, fmt, model, prompt, kind,
             output):
    """Bank items that reach grade >= TAU on many passages judged non-relevant
    (0 <= label < L): candidates to remove or reword, since they make false-positive
    relevance labels. Per query, most non-relevant hits first.

    \b
    TSV columns: query_id item_id nonrel_hits nonrel_graded rel_hits rel_graded
    unjudged_hits precision item_text, where *_hits count passages graded >= TAU,
    *_graded all (parsed) graded passages of that kind, and precision =
    rel_hits / (rel_hits + nonrel_hits).

    \b
    Example (TREC DL: relevant = label >= 2):
      exam-verify spurious graded.jsonl.gz qrels.txt --relevant-min 2 --bank bank.jsonl.gz --top 3
    """
    _check_threshold(min_grade, relevant_min)
    if top < 0 or min_count < 0:
        raise UsageError("--top and --min-count must be >= 0")
    table, bank_items = load_grade_table(grades, model, prompt, kind, bank, queries)
    qrels_d = judgments_of(table, qrels, grades)
    rows = spurious_items(table, qrels_d, min_grade=min_grade, relevant_min=relevant_min,
                          top=top or None, min_count=min_count, queries=queries)
    with atomic_output(output) as out:
        (write_spurious_text if fmt == "text" else write_spurious_tsv)(rows, out, bank_items)


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("grades")
@click.argument("qrels")
@_min_grade_option
@_relevant_min_option
@_bank_option
@_passages_option
@_query_option
@click.option("--format", "fmt", type=click.Choice(["tsv", "text"]), default="tsv", show_default=True)
@grader_options
@output_option
def uncovered(grades, qrels, min_grade, relevant_min, bank, passages, queries, fmt, model, prompt, kind, output):
    """Passages judged relevant (label >= L) that no bank item grades >= TAU, with their
    text: evidence that the bank misses something the assessors found relevant.

    Relevant passages that were never graded are not listed (nothing is known about
    them); their number is reported on stderr.

    \b
    TSV columns: query_id doc_id judgment max_grade items_graded best_item passage_text
    (max_grade "-": every grade of the passage failed to parse).

    \b
    Example:
      exam-verify uncovered graded.jsonl.gz qrels.txt --relevant-min 2 --format text
    """
    _check_threshold(min_grade, relevant_min)
    table, bank_items = load_grade_table(grades, model, prompt, kind, bank, queries)
    qrels_d = judgments_of(table, qrels, grades)
    res = uncovered_passages(table, qrels_d, min_grade=min_grade, relevant_min=relevant_min, queries=queries)
    texts = passage_texts([grades], passages, {(p.query_id, p.doc_id) for p in res.passages})
    n_ungraded = sum(len(d) for d in res.ungraded.values())
    if n_ungraded:
        click.echo(f"{PROG}: {n_ungraded} relevant passages in {len(res.ungraded)} queries have no grades "
                   "and are not analysed", err=True)
    with atomic_output(output) as out:
        (write_uncovered_text if fmt == "text" else write_uncovered_tsv)(res, out, bank_items, texts)


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("grades")
@_qrels_option
@_min_grade_option
@_bank_option
@_passages_option
@_query_option
@click.option("--answers", is_flag=True,
              help="Also show the answers (of --extraction-prompt if given, else the grader's raw "
                   "output); TSV: an extra column per item.")
@click.option("--format", "fmt", type=click.Choice(["tsv", "html"]), default="tsv", show_default=True)
@_extraction_options
@grader_options
@output_option
def grid(grades, qrels, min_grade, bank, passages, queries, answers, fmt, extraction_prompt, extraction_grades, model,
         prompt, kind, output):
    """Passages x bank items with their grades, per query.

    TSV: one block per query, its header line `query_id doc_id judgment ITEM_ID...`,
    blocks separated by an empty line; an empty cell means not graded. HTML: one
    self-contained page, cells coloured by grade (>= TAU green), answers on hover,
    item texts in the legend.

    \b
    Example:
      exam-verify grid graded.jsonl.gz --qrels qrels.txt --bank bank.jsonl.gz --format html -o grid.html
    """
    _check_threshold(min_grade)
    if fmt == "tsv":  # colours and passage texts are the page's
        refuse_given(click.get_current_context(), ("min_grade", "passages"), "applies to --format html")
    table, bank_items = load_grade_table(grades, model, prompt, kind, bank, queries)
    extracted = extraction_answers(grades, extraction_prompt, extraction_grades)
    qrels_d = read_human_qrels(qrels) if qrels else None
    grids = build_grid(table, qrels_d, queries=queries)
    with atomic_output(output) as out:
        if fmt == "tsv":
            write_grid_tsv(grids, out, answers=answers, extracted=extracted)
        else:
            texts = passage_texts([grades], passages, {(g.query_id, r[0]) for g in grids for r in g.rows})
            out.write(grid_page(grids, bank=bank_items, texts=texts, min_grade=min_grade, answers=answers,
                                extracted=extracted))


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("grades")
@click.argument("runs", nargs=-1, required=True)
@click.option("--qrels", required=True, metavar="FILE", help="Human qrels, file or ir_datasets ID (agreement, spurious, uncovered).")
@click.option("--official", default=None, metavar="FILE",
              help="Official leaderboard TSV (header 'run' then columns). Without it, the measure is "
                   "computed on --qrels.")
@click.option("-m", "--measure", default="ndcg_cut.10", show_default=True, metavar="MEASURE",
              help="trec_eval measure for the EXAM-Qrels leaderboard (one value: ndcg_cut.10, P.10, map...).")
@click.option("--official-column", default=None, metavar="COL",
              help="Column of --official to compare with [default: the measure's name, e.g. ndcg_cut_10]; "
                   "a column named *rank counts 1 as best.")
@click.option("-k", "--depth", type=int, default=20, show_default=True, help="EXAM-Cover@k depth.")
@_min_grade_option
@_relevant_min_option
@click.option("--top", "top_spurious", type=int, default=5, show_default=True, metavar="N",
              help="Spurious items shown per query (0: all).")
@_bank_option
@_passages_option
@click.option("--title", default="exam_eval report", show_default=True)
@grader_options
@output_option
def report(grades, runs, qrels, official, measure, official_column, depth, min_grade, relevant_min, top_spurious,
           bank, passages, title, model, prompt, kind, output):
    """One self-contained HTML page (no network, no scripts): EXAM-Qrels and EXAM-Cover
    leaderboards against the official one (correlations, scatter plots with standard-error
    bars), per-query cover, agreement with the human qrels, spurious items, uncovered
    relevant passages, and the bank with each item's hits.

    \b
    Example (TREC DL 2019 reference grades):
      exam-verify report graded-flan-t5-large.jsonl.gz runs/*.run --qrels qrels.txt \\
          --official official.tsv --relevant-min 2 \\
          --bank banks/questions-genq-oldformat.jsonl.gz -o report.html
    """
    from rich.console import Console

    _check_threshold(min_grade, relevant_min)
    if depth < 1 or top_spurious < 0:
        raise UsageError("--depth must be >= 1 and --top >= 0")
    opts = ReportOptions(min_grade=min_grade, relevant_min=relevant_min, measure=measure,
                         official_column=official_column, depth=depth, top_spurious=top_spurious, title=title,
                         model=model, prompt=prompt, kind=kind)
    console = Console(stderr=True)
    with console.status("reading inputs") as status:
        data = compute(grades, qrels, runs, official_path=official, bank_path=bank, passages=passages, opts=opts,
                       progress=lambda msg: status.update(f"computing: {msg}"))
        status.update("drawing")
        html = render(data)
    for w in data.warnings:
        click.echo(f"{PROG}: note: {w}", err=True)
    with atomic_output(output) as out:
        out.write(html)


#: the sample's inputs (SampleSpec), as exam-verify label takes them
SAMPLE_OPTIONS = [
    click.argument("runs", metavar="[RUN...]", nargs=-1),
    click.option("-n", "--queries", "n_queries", type=click.IntRange(min=1), default=None, metavar="N",
                 help="Queries to draw (first time), or to extend the sample to (the next ones of the same draw)."),
    click.option("-k", "--depth", type=click.IntRange(min=1), default=None, metavar="K",
                 help=f"Pool the top K of every run, as exam-grade -k (the metric's depth).  [default: {DEFAULT_DEPTH}]"),
    click.option("--seed", type=click.IntRange(min=0), default=None, metavar="S", help="Seed of the draw.  [default: 0]"),
    click.option("--topics", default=None, metavar="FILE|ID", help="Query texts (TSV, JSONL, TREC topics, ir_datasets ID)."),
    click.option("--passages", default=None, metavar="FILE|ID", help="Passage texts (JSONL, TSV, ir_datasets ID)."),
    click.option("--reports", multiple=True, metavar="FILE|DIR",
                 help="Nugget mode: RAG reports (repeatable) whose support of each --bank nugget is labelled "
                      "(keys 0 not_support, 1 partial_support, 2 support), in place of RUNs and passages."),
    click.option("--bank", default=None, metavar="FILE", help="Nugget mode: the nugget bank."),
    click.option("--llm", default=None, metavar="FILE",
                 help="The LLM labels the intervals will use (qrels or grades): recorded in the design, "
                      "shown on the page only with --show-llm."),
    click.option("--scale", type=click.Choice(list(SCALES)), default=None,
                 help="The label scale, keys 0 to its top.  [default: 0-3, as TREC DL]"),
    click.option("--on-missing", type=click.Choice(["skip", "error"]), default="skip", show_default=True,
                 help="Pooled passages without text: left out of the sample (and counted), or refused."),
    click.option("--order", type=click.Choice(list(ORDERS)), default=None,
                 help="A query's pairs shuffled (seeded by --seed and the query, recorded in the design), or in pool "
                      "order, the runs' best-ranked passages first.  [default: shuffled]"),
    click.option("--guidelines", default=None, metavar="FILE",
                 help="What each label means, shown on the page: 'LABEL<TAB>NAME<TAB>MEANING' lines, every label of "
                      "the scale once (recorded in the design).  [default: the track's: TREC DL's 0-3, ...]"),
]
sample_flags = grouped(SAMPLE_OPTIONS, SampleSpec, "spec")


@click.command("label", context_settings=CONTEXT_SETTINGS)
@click.argument("folder", metavar="FOLDER", type=click.Path(file_okay=False), callback=claim_output)
@sample_flags
@click.option("--show-llm", is_flag=True, help="Show the LLM's label beside each pair (default: blind labelling).")
@click.option("--assessor", default=None, metavar="NAME", help="Print the URL of NAME's page (else the page asks).")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port on 127.0.0.1 (0: a free one).")
@click.option("--no-serve", is_flag=True, help="Write (or extend) the design and stop; serve no page.")
@click.option("--new-token", is_flag=True,
              help="A new token in the URL (FOLDER/.token): the old URL stops working (else a restart keeps it).")
def label_cmd(folder, spec: SampleSpec, show_llm, assessor, port, no_serve, new_token):
    """Label a random sample of queries' pooled passages by hand, on a page on 127.0.0.1.

    The first call draws N queries uniformly at random (seeded) from those every RUN has,
    pools each one's top K passages of every RUN as exam-grade does, and writes the design
    (FOLDER/design.json: queries in draw order, seed, depth, the runs' and LLM labels'
    SHA-256); later calls take FOLDER alone and resume; -n with more queries extends the
    sample by the next queries of the same draw. The server prints the page's URL (a
    random token in it, kept in FOLDER/.token with the port in FOLDER/.server.port: a
    restart prints the same URL, --new-token another) and serves until Ctrl-C. Keys 0
    to the scale's top label, u undoes, s skips, n writes a note. Each label is appended
    to FOLDER/labels/NAME.jsonl and fsync'd before the page shows the next pair: a kill
    loses no label given, and a restart resumes at the first unlabelled pair (a page left
    open goes on by itself). One server per FOLDER. On stop (and with
    exam-verify label-qrels) each assessor's labels are written as FOLDER/qrels/NAME.qrels
    and the labelled queries as NAME.labelled.txt, for exam-correlate interval --labelled.

    Nugget mode (--reports and --bank in place of RUNs and --passages): the queries are the
    topics every run reports on and the bank has nuggets for, a query's pairs every
    (report, nugget); the page shows the report's sentences and the nugget, and the labels
    go out as NAME.assignments.jsonl (the nuggetizer's assignment format) for
    exam-nuggets score.

    \b
    Examples:
      exam-verify label sample/ runs/*.run -n 30 -k 10 --topics topics.tsv --passages passages.jsonl.gz \\
          --llm llm.qrels
      exam-verify label sample/                     # resume: the URL again
      exam-verify label sample/ -n 40 --no-serve     # ten more queries of the same draw
    """
    folder = folder_name(folder)
    if assessor is not None:
        check_assessor(assessor)
    spec.check()
    # a folder a server writes is not changed under it (-n would extend its design): its
    # lock is taken before anything is read or written; a new folder has no server yet
    held = OneWriter(folder) if os.path.isdir(folder) else contextlib.nullcontext()
    with held as lock:
        design = open_sample(folder, spec, _say)
        if no_serve:
            return 0
        with contextlib.nullcontext(lock) if lock is not None else OneWriter(folder) as lock:
            session = LabelSession(design, folder, sample_texts(design, show_llm, _say), show_llm=show_llm, log=_say)
            return _serve(session, lock, port, assessor, new_token)


def _say(msg: str) -> None:
    click.echo(f"{PROG}: {msg}", err=True)


def _serve(session, lock, port: int, assessor: str | None, new_token: bool = False) -> int:
    from ..verify.label_server import keep_port, kept_token, start_server  # http.server: only when serving

    server = start_server(session, port, log=_say)
    lock.say_holder(f"pid {os.getpid()}, port {server.port}")
    # the last start's token and port: a page left open, and a bookmark, work again
    server.token = kept_token(session.folder, new=new_token, log=_say)
    keep_port(session.folder, server.port)
    click.echo(server.url(assessor))
    sys.stdout.flush()
    _say(f"labelling {len(session.pairs)} pairs of {len(session.design.queries)} queries at the URL above; "
         "Ctrl-C stops the server (every label given is on disk already)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        exit_on_next_signal()
    finally:
        server.server_close()
    export_labels(session.design, session.folder, None, _say)
    return 0


@click.command("label-qrels", context_settings=CONTEXT_SETTINGS)
@click.argument("folder", metavar="FOLDER", type=click.Path(exists=True, file_okay=False), callback=claim_output)
@click.option("--assessor", default=None, metavar="NAME", help="Only this assessor's labels.")
def label_qrels_cmd(folder, assessor):
    """Write each assessor's labels of FOLDER as qrels (FOLDER/qrels/NAME.qrels) and the labelled
    queries (NAME.labelled.txt: the draw's first queries with every pair labelled), for
    exam-correlate interval HUMAN LLM RUN... --labelled, exam-correlate agreement and
    exam-qrels --human.

    \b
    Examples:
      exam-verify label-qrels sample/
      exam-correlate interval sample/qrels/ann.qrels llm.qrels runs/*.run --labelled sample/qrels/ann.labelled.txt
    """
    folder = folder_name(folder)
    design = read_design(folder)
    if design is None:
        raise InputError("no design.json: not a label folder of exam-verify label", display_name(folder))
    check_inputs_here(design, folder, _say)
    if assessor is not None and check_assessor(assessor) not in assessors(folder):
        raise UsageError(f"--assessor {assessor}: no labels of that name in {display_name(folder)}")
    export_labels(design, folder, assessor, _say)
    return 0


cli.add_command(label_cmd)
cli.add_command(label_qrels_cmd)

main = make_main(cli, PROG)

if __name__ == "__main__":
    main()
