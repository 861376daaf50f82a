"""exam-verify label and label-qrels: human labels on a drawn sample, through a local page."""

from __future__ import annotations

import contextlib
import os
import sys

import click

from ..errors import InputError, UsageError
from ..io.openers import display_name
from ..io.passages import read_passages
from ..io.topics import read_topics
from ..measures.grade_labels import load_labels
from ..verify.label_design import (DESIGN_FILE, ORDERS, SCALES, Design, check_follows, extend, in_folder, new_design,
                                   passage_population, read_design, write_design)
from ..verify.label_guidelines import default_guidelines, read_guidelines
from ..verify.label_export import write_export as write_passage_export
from ..verify.label_nuggets import (new_nugget_design, nugget_population_of, nugget_texts, report_files,
                                    write_nugget_export)
from ..verify.label_session import LabelSession, Texts
from ..verify.label_store import OneWriter, assessors, check_assessor, labels_path, read_labels
from ._base import CONTEXT_SETTINGS, claim_output, exit_on_next_signal

PROG = "exam-verify"
DEFAULT_DEPTH = 10   # exam-correlate interval's default metric is dcg@10: the pairs it reads


def _say(msg: str) -> None:
    click.echo(f"{PROG}: {msg}", err=True)


@click.command("label", context_settings=CONTEXT_SETTINGS)
@click.argument("folder", metavar="FOLDER", type=click.Path(file_okay=False), callback=claim_output)
@click.argument("runs", metavar="[RUN...]", nargs=-1)
@click.option("-n", "--queries", "n_queries", type=click.IntRange(min=1), default=None, metavar="N",
              help="Queries to draw (first time), or to extend the sample to (the next ones of the same draw).")
@click.option("-k", "--depth", type=click.IntRange(min=1), default=None, metavar="K",
              help=f"Pool the top K of every run, as exam-grade -k (the metric's depth).  [default: {DEFAULT_DEPTH}]")
@click.option("--seed", type=click.IntRange(min=0), default=None, metavar="S", help="Seed of the draw.  [default: 0]")
@click.option("--topics", default=None, metavar="FILE|ID", help="Query texts (TSV, JSONL, TREC topics, ir_datasets ID).")
@click.option("--passages", default=None, metavar="FILE|ID", help="Passage texts (JSONL, TSV, ir_datasets ID).")
@click.option("--reports", multiple=True, metavar="FILE|DIR",
              help="Nugget mode: RAG reports (repeatable) whose support of each --bank nugget is labelled "
                   "(keys 0 not_support, 1 partial_support, 2 support), in place of RUNs and passages.")
@click.option("--bank", default=None, metavar="FILE", help="Nugget mode: the nugget bank.")
@click.option("--llm", default=None, metavar="FILE",
              help="The LLM labels the intervals will use (qrels or grades): recorded in the design, "
                   "shown on the page only with --show-llm.")
@click.option("--scale", type=click.Choice(list(SCALES)), default=None,
              help="The label scale, keys 0 to its top.  [default: 0-3, as TREC DL]")
@click.option("--on-missing", type=click.Choice(["skip", "error"]), default="skip", show_default=True,
              help="Pooled passages without text: left out of the sample (and counted), or refused.")
@click.option("--order", type=click.Choice(list(ORDERS)), default=None,
              help="A query's pairs shuffled (seeded by --seed and the query, recorded in the design), or in pool "
                   "order, the runs' best-ranked passages first.  [default: shuffled]")
@click.option("--guidelines", default=None, metavar="FILE",
              help="What each label means, shown on the page: 'LABEL<TAB>NAME<TAB>MEANING' lines, every label of "
                   "the scale once (recorded in the design).  [default: the track's: TREC DL's 0-3, ...]")
@click.option("--show-llm", is_flag=True, help="Show the LLM's label beside each pair (default: blind labelling).")
@click.option("--assessor", default=None, metavar="NAME", help="Print the URL of NAME's page (else the page asks).")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port on 127.0.0.1 (0: a free one).")
@click.option("--no-serve", is_flag=True, help="Write (or extend) the design and stop; serve no page.")
@click.option("--new-token", is_flag=True,
              help="A new token in the URL (FOLDER/.token): the old URL stops working (else a restart keeps it).")
def label_cmd(folder, runs, n_queries, depth, seed, topics, passages, reports, bank, llm, scale, on_missing, order,
              guidelines, show_llm,
              assessor, port, no_serve, new_token):
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
    folder = _folder(folder)
    if assessor is not None:
        check_assessor(assessor)
    if reports or bank:
        _check_nugget_flags(runs, reports, bank, passages, llm, scale, depth)
    # a folder a server writes is not changed under it (-n would extend its design): its
    # lock is taken before anything is read or written; a new folder has no server yet
    held = OneWriter(folder) if os.path.isdir(folder) else contextlib.nullcontext()
    with held as lock:
        design = _design(folder, list(runs), n_queries, depth, seed, topics, passages, llm, scale, on_missing,
                         list(reports), bank, order=order, guidelines=guidelines)
        if no_serve:
            return 0
        with contextlib.nullcontext(lock) if lock is not None else OneWriter(folder) as lock:
            texts = _texts(design, show_llm)
            session = LabelSession(design, folder, texts, show_llm=show_llm, log=_say)
            return _serve(session, lock, port, assessor, new_token)


def _folder(folder: str) -> str:
    """FOLDER as every file in it is named: sample// or ./sample/ is sample, so that the
    labels, lock and token paths joined to it read as a user writes them."""
    return in_folder(folder, "")


def _check_nugget_flags(runs, reports, bank, passages, llm, scale, depth) -> None:
    if not (reports and bank):
        raise UsageError("nugget mode needs both --reports and --bank")
    given = [name for name, v in (("RUN", runs), ("--passages", passages), ("--llm", llm), ("-k", depth)) if v]
    if scale not in (None, "0-2"):
        given.append(f"--scale {scale}")
    if given:
        raise UsageError(f"{', '.join(given)}: not in nugget mode (--reports, --bank: each report's support of each "
                         "nugget, on the scale 0-2)")


def _new_design(folder, runs, n, depth, seed, topics, passages, llm, scale, on_missing, reports, bank,
                order: str) -> Design:
    if reports:
        if n is None:
            raise UsageError("a new sample needs -n (FOLDER has no design.json)")
        return new_nugget_design(reports, bank, n, seed or 0, topics=topics and _spec(topics), order=order)
    if not runs or n is None or topics is None or passages is None:
        raise UsageError("a new sample needs RUN..., -n, --topics and --passages (FOLDER has no design.json)")
    design = new_design(runs, n, depth or DEFAULT_DEPTH, seed or 0, scale=scale or "0-3", llm=llm, order=order,
                        passages=_spec(passages), topics=_spec(topics))
    _check_texts(design, design.pair_list(), on_missing)
    return design


def _design(folder, runs, n, depth, seed, topics, passages, llm, scale, on_missing, reports, bank, *,
            order: str | None = None, guidelines: str | None = None) -> Design:
    design = read_design(folder)
    if design is None:
        design = _new_design(folder, runs, n, depth, seed, topics, passages, llm, scale, on_missing, reports, bank,
                             order or "shuffled")
        if guidelines is not None:
            design.guidelines = [list(g) for g in read_guidelines(guidelines, design.top_label)]
        if design.mode == "nugget" and design.topics is not None:
            read_topics(design.topics)   # every input read and checked before the folder is written
        os.makedirs(folder, exist_ok=True)
        write_design(design, folder)
        _say(f"drew {len(design.queries)} of the {design.shared_queries} queries the runs share (seed "
             f"{design.seed}): {len(design.pair_list())} pairs to label; the design is {in_folder(folder, DESIGN_FILE)}")
        return design
    if (design.mode == "nugget") != bool(reports or bank) and (runs or reports or bank):
        raise UsageError(f"this folder's sample is in {design.mode} mode; a sample of the other mode needs a new "
                         "FOLDER")
    _check_same(design, folder, runs if design.mode == "passage" else reports, depth, seed, topics, passages, llm,
                scale, bank)
    check_follows(design, folder, _population(design))   # the runs unchanged, the queries and pairs theirs
    if order is not None and order != design.order:
        raise UsageError(f"--order {order} differs from the design in {in_folder(folder, DESIGN_FILE)} "
                         f"({design.order}); a sample of other inputs needs a new FOLDER")
    if guidelines is not None and [list(g) for g in read_guidelines(guidelines, design.top_label)] != \
            (design.guidelines or [list(g) for g in default_guidelines(design.top_label, design.mode)]):
        raise UsageError(f"--guidelines {guidelines} differs from the wording the design's labels were given with "
                         f"({in_folder(folder, DESIGN_FILE)}); a sample of other guidelines needs a new FOLDER")
    if n is not None and n != len(design.queries):
        added = extend(design, n, *_population(design)(design))
        if design.mode == "passage":
            _check_texts(design, [(q, d) for q in added for d in design.pairs[q]], on_missing)
        write_design(design, folder)
        _say(f"added {len(added)} queries of the same draw ({', '.join(added)}): {len(design.queries)} queries, "
             f"{len(design.pair_list())} pairs")
    return design


def _population(design: Design):
    """What a sample of DESIGN's mode is drawn from: (queries, their pairs) of a design."""
    if design.mode == "nugget":
        return nugget_population_of
    return passage_population


def _spec(spec: str) -> str:
    return os.path.abspath(spec) if os.path.exists(spec) else spec   # an ir_datasets ID stays as it is


def _check_same(design: Design, folder, runs, depth, seed, topics, passages, llm, scale, bank) -> None:
    """What a later call gives again must be what the design says: another value would be
    another sample, where a label of this one means nothing."""
    if design.mode == "nugget" and runs:
        runs = report_files(runs)
    given = {"RUN": [os.path.abspath(r) for r in runs] or None, "-k": depth, "--seed": seed, "--scale": scale,
             "--topics": topics and _spec(topics), "--passages": passages and _spec(passages),
             "--llm": llm and os.path.abspath(llm), "--bank": bank and os.path.abspath(bank)}
    have = {"RUN": [r["path"] for r in design.runs], "-k": design.depth, "--seed": design.seed,
            "--scale": design.scale, "--topics": design.topics, "--passages": design.passages,
            "--llm": design.llm and design.llm["path"], "--bank": design.bank and design.bank["path"]}
    for flag, value in given.items():
        if value is not None and value != have[flag]:
            raise UsageError(f"{flag} differs from the design in {in_folder(folder, DESIGN_FILE)} ({have[flag]}); "
                             "a sample of other inputs needs a new FOLDER")


def _check_texts(design: Design, pairs, on_missing: str) -> None:
    topics = read_topics(design.topics)
    no_topic = sorted({q for q, _ in pairs} - set(topics))
    if no_topic:
        raise InputError(f"no text for the drawn queries {', '.join(no_topic[:5])}", display_name(design.topics))
    have = read_passages(design.passages, {d for _, d in pairs})
    missing = [(q, d) for q, d in pairs if d not in have]
    if missing and on_missing == "error":
        raise InputError(f"{len(missing)} pooled passages have no text (first: {missing[0][1]} of query "
                         f"{missing[0][0]}); --on-missing skip leaves them out", display_name(design.passages))
    for q, d in missing:
        design.pairs[q].remove(d)
        design.missing.setdefault(q, []).append(d)
    if missing:
        _say(f"{len(missing)} pooled passages have no text in {display_name(design.passages)}: left out of the "
             "sample (design.json lists them)")


def _texts(design: Design, show_llm: bool):
    topics = {} if design.topics is None else read_topics(design.topics)
    if design.mode == "nugget":
        if show_llm:
            raise UsageError("--show-llm: nugget mode has no LLM labels to show")
        shown = nugget_texts(design, {q: t.text for q, t in topics.items()})
        return Texts(shown["queries"], {}, None, shown["pairs"], topics=_topic_details(topics))
    passages = read_passages(design.passages, {d for _, d in design.pair_list()})
    llm = None
    if show_llm:
        if design.llm is None:
            raise UsageError("--show-llm: the design names no LLM labels (give --llm when drawing the sample)")

        llm = load_labels(design.llm["path"], log=_say)
    return Texts({q: t.text for q, t in topics.items()}, passages, llm, topics=_topic_details(topics))


def _topic_details(topics) -> dict[str, dict[str, str]]:
    """What a TREC topic says beyond its title, for the assessor (where the topics have it)."""
    return {q: {k: v for k, v in (("description", t.description), ("narrative", t.narrative)) if v}
            for q, t in topics.items()}


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
    _export(session.design, session.folder, None)
    return 0


def _export(design: Design, folder: str, only: str | None) -> None:
    names = [only] if only else assessors(folder)
    out_dir = in_folder(folder, "qrels")   # the command's own folder: it replaces only what it wrote
    write_export = write_nugget_export if design.mode == "nugget" else write_passage_export
    for name in names:
        labels = read_labels(labels_path(folder, name), _say, pairs=design.pair_list(), top=design.top_label)
        ex = write_export(design, name, labels, out_dir)
        _say(ex.summary())
    if names:
        what = "NAME.assignments.jsonl" if design.mode == "nugget" else "NAME.qrels"
        _say(f"labels and labelled queries in {display_name(out_dir)}/ ({what}, NAME.labelled.txt)")


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
    folder = _folder(folder)
    design = read_design(folder)
    if design is None:
        raise InputError("no design.json: not a label folder of exam-verify label", display_name(folder))
    named = [e["path"] for e in design.runs + [e for e in (design.llm, design.bank) if e]]
    gone = [p for p in named if not os.path.exists(p)]
    if gone:   # a label folder carried to another machine: its labels still export
        _say(f"{gone[0]}{f' and {len(gone) - 1} more files' if len(gone) > 1 else ''} named in the design "
             "are not here: its queries and pairs are not checked against them")
    else:
        check_follows(design, folder, _population(design))
    if assessor is not None and check_assessor(assessor) not in assessors(folder):
        raise UsageError(f"--assessor {assessor}: no labels of that name in {display_name(folder)}")
    _export(design, folder, assessor)
    return 0
