"""exam-qrels: EXAM-Qrels from grades, and trec_eval-identical scoring with any labels."""

from __future__ import annotations

import os

import click

from ..io.openers import display_name, stdin_as_file
from ..measures.human_labels import merge_human, scale_notice
from ..trec_eval.allocator import keep_freed_memory
from ..errors import ExamEvalError, UsageError
from ..measures.bank_filter import read_current_bank
from ..io.label_sources import refuse_unused_grade_options, sniff_labels
from ..measures.grade_labels import load_labels, read_human_qrels
from ..io.leaderboard import write_leaderboard
from ..io.outputs import atomic_output
from ..trec_eval.trec_files import read_run_any, read_run_tagged, run_names, write_qrels
from ..measures.exam_qrels import LABEL_MODES
from ..trec_eval.registry import parse_measures
from ..trec_eval.judgment_formats import REL_FORMATS, check_measures, evaluate_judgments, read_judgments
from ..trec_eval.evaluate import Evaluation, TrecEvalRefusal, evaluate, require_overlap, write_trec_eval
from ..trec_eval.zscores import read_zscores
from ..trec_eval.parallel import fork_map
from ._base import CONTEXT_SETTINGS, grader_options, make_main, output_option, refuse_given, stderr_log

PROG = "exam-qrels"

EPILOG = """\b
Examples:
  exam-qrels grades.jsonl.gz > exam.qrels                 # EXAM-Qrels (label = max grade)
  exam-qrels --label binary --min-grade 4 grades.jsonl.gz # 1 if any question graded >= 4
  exam-qrels -c -m ndcg_cut.10 qrels.txt run.txt          # drop-in for trec_eval 9.0.8
  exam-qrels -q -m all_trec qrels.txt run.txt             # per query, every measure
  exam-qrels -c -m P.20 -l 3 grades.jsonl.gz runs/*.run   # leaderboard TSV, one row per run
  exam-qrels msmarco-passage/trec-dl-2019/judged > dl19.qrels   # an ir_datasets ID

Exit status: 0 success, 1 usage error, 2 bad input (the message names file and line).
See man exam-qrels.
"""


#: options that only say how RUNs are scored
SCORING_OPTIONS = ("measures", "per_query", "complete", "level", "no_summary", "judged_only",
                   "zscores_file", "max_docs")


def labels_source(ctx: click.Context, labels: str, runs) -> str:
    """LABELS as a path to read. With no RUN only the qrels are written: a scoring option
    given then (a forgotten RUN, an empty $(RUNS) in a Makefile) would be ignored with
    exit 0. Standard input is copied to a file: its format is sniffed, then it is read."""
    if not runs:
        refuse_scoring_options(ctx)
    if labels != "-":
        return labels

    return ctx.with_resource(stdin_as_file())


def refuse_scoring_options(ctx: click.Context) -> None:
    refuse_given(ctx, SCORING_OPTIONS, "says how to score a RUN: give a RUN to score (with no RUN, exam-qrels "
                 "writes LABELS as qrels)", short=True)


GRADE_OPTIONS = ("--label", "--min-grade", "--bank", "--model", "--prompt", "--kind")
JUDGMENTS = {"qrels": "a qrels file", "irds": "an ir_datasets ID", "qrels_jg": "read with -R qrels_jg",
             "prefs": "read with -R prefs", "qrels_prefs": "read with -R qrels_prefs"}


def check_grade_options(labels: str, rel_format: str, given: dict[str, object]) -> None:
    """The grade options (None where not given) apply to grades only; --min-grade only
    to the labels that count grades (a maximum grade has no threshold)."""
    what = sniff_labels(labels) if rel_format == "qrels" else rel_format
    if what != "grades":
        refuse_unused_grade_options(labels, JUDGMENTS[what], given)
    elif given["--min-grade"] is not None and given["--label"] is None:
        raise click.UsageError("--min-grade is the threshold of --label count|binary; --label max (the default) "
                               "takes the maximum grade as it is")


@click.command(context_settings=CONTEXT_SETTINGS, epilog=EPILOG)
@click.argument("labels", metavar="LABELS")
@click.argument("runs", nargs=-1, metavar="[RUN ...]")
@click.option("-m", "--measure", "measures", multiple=True, metavar="MEASURE[.PARAMS]",
              help="trec_eval 9.0.8 measure, repeatable: map, P.5,10, ndcg_cut.10, recall.100, Rprec, "
                   "recip_rank, success.1, bpref, set_F.0.5, utility.1,-1,0,0, relstring, ..., or a "
                   "nickname: official (default), set, all_trec. See man exam-qrels.")
@click.option("-q", "per_query", is_flag=True,
              help="Also print the value for each query (one run only); gm_*, runid, num_q: 'all' line only.")
@click.option("-c", "complete", is_flag=True,
              help="Average over every query of the qrels; queries the run lacks score 0 "
                   "(num_rel: every judgment >= 1 in the qrels, as trec_eval 9.0.8).")
@click.option("-l", "level", type=int, default=1, show_default=True, metavar="N",
              help="Relevance level: label >= N is relevant for binary measures (nDCG uses raw labels).")
@click.option("-n", "no_summary", is_flag=True, help="No summary ('all') lines.")
@click.option("-J", "judged_only", is_flag=True,
              help="Drop unjudged documents (no qrels line with label >= 0) from the run before scoring.")
@click.option("-R", "rel_format", type=click.Choice(REL_FORMATS), default="qrels", show_default=True,
              help="Judgments format of LABELS (trec_eval -R): qrels_jg (qid jg docno label), prefs, "
                   "qrels_prefs; each feeds its own measures (-m qrels_jg, -m all_prefs).")
@click.option("-Z", "zscores_file", default=None, metavar="FILE",
              help="Print z-scores against FILE's 'qid measure mean stddev' lines (trec_eval -Z).")
@click.option("-M", "max_docs", type=int, default=None, metavar="N", help="Evaluate only the top N documents per query.")
@click.option("--label", "label_mode", type=click.Choice(LABEL_MODES), default="max", show_default=True,
              help="From grades: max grade, count of items with grade >= --min-grade, or binary.")
@click.option("--min-grade", type=click.IntRange(min=0), default=None, metavar="T",
              help="Grade threshold for --label count|binary (default 4).")
@click.option("--bank", default=None, metavar="FILE",
              help="From grades: use only grades of this bank's items as they read now (drops grades "
                   "of deleted items and of edited items' old text).")
@click.option("--human", default=None, metavar="QRELS",
              help="Human labels (qrels, e.g. exam-verify label-qrels' NAME.qrels): each replaces the label of "
                   "LABELS on its pair; the count, and any label off LABELS' scale, is said on stderr.")
@grader_options
@output_option
def cli(labels, runs, measures, per_query, complete, level, no_summary, judged_only, rel_format, zscores_file,
        max_docs,
        label_mode, min_grade, bank, human, model, prompt, kind, output):
    """Write EXAM-Qrels from LABELS, or score RUNs with them exactly as trec_eval would.

    LABELS is a qrels file, an ir_datasets ID, or a grades file (exam-grade output or the
    reference workbench's graded runs-with-text file). With no RUN, the labels are written
    as qrels. With one RUN, the output is byte for byte what trec_eval 9.0.8 prints
    (`trec_eval [options] QRELS RUN`), and what it refuses is refused. With several RUNs, a leaderboard TSV: `run` then one column per measure.
    """
    log = stderr_log(PROG)
    labels = labels_source(click.get_current_context(), labels, runs)
    check_grade_options(labels, rel_format, dict(zip(GRADE_OPTIONS, (None if label_mode == "max" else label_mode,
                                                                     min_grade, bank, model, prompt, kind))))
    if label_mode != "max" and min_grade is None:
        min_grade = 4
    # the notices of -m and of the labels: said once nothing is refused (a refusal is one line)
    notes: list[str] = []
    requests = parse_measures(list(measures), warn=notes.append)
    if per_query and len(runs) > 1:
        raise click.UsageError("-q prints per-query values for one run; give a single RUN")
    qrels = _read_labels(labels, rel_format, runs, dict(label=label_mode, min_grade=min_grade, model=model,
                                                        prompt=prompt, kind=kind), bank, notes, human)
    options = dict(level=level, judged_only=judged_only, max_docs=max_docs, complete=complete)
    if zscores_file is not None:
        options["zscores"] = read_zscores(zscores_file)
    if not runs:
        for note in notes:
            log(note)
        with atomic_output(output) as out:
            write_qrels(qrels, out)
        return 0
    keep_freed_memory()   # numpy's temporaries, thousands of them: reused, not faulted in anew
    named: list[tuple[str, str]] = []
    clash = None
    try:
        for item in run_names(runs):
            named.append(item)
    except UsageError as exc:   # said after the runs before the clash are read, as ever
        clash = exc

    def score(item: tuple[str, str]) -> Evaluation | ExamEvalError:
        if rel_format != "qrels":  # preference and jg judgments: the plain reader's run
            run, tag = read_run_tagged(item[1])
        else:
            run, tag = read_run_any(item[1])
        try:
            if rel_format == "qrels":
                qids = run if isinstance(run, dict) else run.qids
                check_measures(requests, rel_format, sorted(set(qids) & set(qrels)), labels, qrels)
                ev = evaluate(qrels, run, requests, run_tag=tag, qrels_name=labels, **options)
            else:
                ev = evaluate_judgments(rel_format, qrels, run, requests, run_tag=tag, qrels_name=labels, **options)
            require_overlap(ev, item[1], labels)
            return ev
        except (TrecEvalRefusal, UsageError) as exc:
            if not isinstance(run, dict):
                run.check_all()   # its duplicates come first: every run is read before a refusal
            return exc
    # one run per worker at a time (one run: its queries are spread over the workers)
    if "-" in runs:   # stdin can be read once, so by this process
        scored = [score(item) for item in named]
    else:
        scored = fork_map(score, named, [_size(path) for _, path in named])
    if clash is not None:
        raise clash
    refused = next((ev for ev in scored if isinstance(ev, ExamEvalError)), None)
    if refused is not None:
        raise refused
    for note in notes:
        log(note)
    evaluations = list(zip((name for name, _ in named), scored))
    with atomic_output(output) as out:
        if len(evaluations) == 1:
            write_trec_eval(evaluations[0][1], out, per_query=per_query, summary=not no_summary)
        else:
            columns = [n for n in evaluations[0][1].value_names() if n != "runid"]
            rows = {name: {c: ev.summary[c] for c in columns} for name, ev in evaluations}
            write_leaderboard(rows, columns, out)
    return 0


def _read_labels(labels: str, rel_format: str, runs, grade_options: dict, bank: str | None, notes: list,
                 human: str | None = None):
    """LABELS as -R reads them (with --human's labels over them); the notices of grades,
    bank and human labels go to ``notes``."""
    if rel_format != "qrels":
        if not runs:
            raise click.UsageError(f"-R {rel_format}: give a RUN to score (only qrels are written out)")
        if human is not None:
            raise click.UsageError(f"--human replaces labels of qrels or grades, not of -R {rel_format} judgments")
        return read_judgments(rel_format, labels)
    bank_items = None if bank is None else read_current_bank(bank, notes.append)
    qrels = load_labels(labels, **grade_options, bank_items=bank_items, log=notes.append)
    if human is None:
        return qrels

    if human == "-":   # a copy: read again to name the line of a label off the scale
        human = click.get_current_context().with_resource(stdin_as_file())
    human_qrels = read_human_qrels(human)
    notice = scale_notice(qrels, human_qrels, display_name(labels), human)
    qrels, merged = merge_human(qrels, human_qrels)
    notes.append(merged.note(display_name(human)))
    if notice is not None:
        notes.append(notice)
    return qrels


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 1


main = make_main(cli, PROG)

if __name__ == "__main__":
    main()
