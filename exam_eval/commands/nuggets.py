"""exam-nuggets: score RAG reports the way RAG tracks do, and write what the tracks read.

Subcommands: ``score`` (nugget scores All/Vital/Weighted and their strict variants,
EXAM-Cover of reports, citation support; per-topic leaderboards in tot / ir_measures /
trec_eval shapes), ``support`` (grade every (sentence, cited document) pair with the
citation-support prompt, through the grading engine and its cache), ``qrels``
(document qrels from citations and grades) and ``bank`` (nugget banks in our, the
nuggetizer's and AutoJudge's formats).

A seventh command beside DESIGN.md's six: report scoring has inputs (reports) and
outputs (track leaderboards, banks for other tools) that none of them has.
"""

from __future__ import annotations

import os

import click

from ..backends.factory import make_grader
from ..backends.dry_run import dry_run_lines
from ..errors import InputError, UsageError
from ._base import (CONTEXT_SETTINGS, claim_output, interrupted_says, make_main, output_option, refuse_given)
from ._batch import attach, batch_options, check_batch, finish, run_session
from ._chat import chat_options, chat_too_long, kept_hint, make_chat, open_cache, usage_note
from ._nugget_options import check_shape_options, check_file_or_dir, reports_option, threshold_options
from ..grading import engine
from ..grading.cache import cache_file
from ..grading.grade_files import read_grades
from ..grading.inputs import support_units
from ..grading.listwise import prompt_hash, run_assign
from ..grading.prompts import get_prompt
from ..grading.session import GradingSession
from ..io.assignments import is_assignment_file, read_assignment_grades
from ..io.banks import convert_bank, items_by_query, read_bank
from ..io.outputs import atomic_output, check_output, file_name_problem
from ..io.reports import read_reports, read_requests
from ..io.track_leaderboards import write_score_outputs
from ..measures import nugget_scores as ns
from ..measures.assignment_scores import write_listwise_assignments
from ..measures.exam_measures import TABLE as EXAM_MEASURES
from ..trec_eval.trec_files import write_qrels
from ._options import JudgeFlags, ModelFlags, RunFlags, backend_flags, run_flags

PROG = "exam-nuggets"


def _log(msg: str) -> None:
    click.echo(f"{PROG}: {msg}", err=True)


@click.group(context_settings=CONTEXT_SETTINGS)
def cli():
    """Nugget evaluation of RAG reports (TREC RAG, RAGTIME, DRAGUN, NeuCLIR, AutoJudge).

    \b
    Examples (exam-nuggets assign: the AutoNuggetizer's listwise assignment; or reports
    graded by exam-grade --reports):
      exam-nuggets assign --reports runs/ --bank nuggets.jsonl --topics q.jsonl --model m -o grades.jsonl
      exam-grade --reports runs/ --bank nuggets.jsonl --prompt nuggetizer-assign ... -o grades.jsonl
      exam-nuggets support --reports runs/ --passages corpus.jsonl ... -o support.jsonl
      exam-nuggets score --reports runs/ --bank nuggets.jsonl --support-grades support.jsonl \\
          grades.jsonl -o leaderboard.tot
      exam-nuggets qrels --reports runs/ --from both grades.jsonl --support-grades support.jsonl -o cited.qrels
      exam-nuggets bank --to nuggetizer nuggets.jsonl -o nuggets.nuggetizer.jsonl
    """


# --------------------------------------------------------------------------- shared

def _reports(paths, track_spec=None):
    return read_reports(list(paths), track_spec=track_spec)


# --------------------------------------------------------------------------- score

SCORE_EPILOG = """\b
Examples:
  # per-topic nugget scores and EXAM-Cover, "tot" leaderboard (run measure topic value)
  exam-nuggets score --reports runs/ --bank nuggets.jsonl grades.jsonl > scores.tot
  # with citation support, ir_measures shape, only the summary (all) rows
  exam-nuggets score --reports runs/ --bank nuggets.jsonl --support-grades support.jsonl \\
      --format ir_measures --summary-only grades.jsonl
  # self-rating grades with stricter levels, averaged over every bank topic
  exam-nuggets score -c --support-min 5 --partial-min 3 --reports runs/ --bank b.jsonl grades.jsonl
  # one trec_eval-shaped file per run
  exam-nuggets score --format trec_eval --reports runs/ --bank b.jsonl grades.jsonl -o out_dir/

Exit status: 0 success, 1 usage error, 2 bad input. See man exam-nuggets.
"""


@cli.command("score", context_settings=CONTEXT_SETTINGS, epilog=SCORE_EPILOG)
@click.argument("grades", metavar="GRADES")
@reports_option
@click.option("--bank", required=True, metavar="FILE",
              help="Question/nugget bank (ours, the workbench's, the nuggetizer's or AutoJudge's).")
@click.option("--support-grades", default=None, metavar="FILE",
              help="citation-support grades (exam-nuggets support): adds support_precision, support_recall.")
@click.option("--format", "shape", type=click.Choice(["tot", "ir_measures", "trec_eval", "table"]), default="tot",
              show_default=True, help="tot: run measure topic value; ir_measures: run topic measure value; "
                                      "trec_eval: measure topic value (one run per file); table: run x measure TSV.")
@click.option("-m", "--measure", "measures", multiple=True, metavar="NAME",
              help="Only these measures (repeatable; default: all that the inputs allow): "
                   + ", ".join(m.name for m in EXAM_MEASURES) + " (man exam-nuggets, DESCRIPTION).")
@click.option("--summary-only", is_flag=True, help="Only the 'all' rows (mean over topics).")
@click.option("-c", "complete", is_flag=True,
              help="Average over every bank topic that has reports, a run's missing topics scoring 0.")
@click.option("--default-importance", type=click.Choice(["vital", "okay"]), default="vital", show_default=True,
              help="Importance of bank items that have none.")
@threshold_options
@click.option("--digits", type=click.IntRange(1, 12), default=4, show_default=True,
              help="Decimals of tot / ir_measures / table values (trec_eval always 4).")
@click.option("--model", default=None, metavar="NAME", help="Use only GRADES from this model.")
@click.option("--prompt", default=None, metavar="NAME", help="Use only GRADES from this prompt.")
@click.option("--kind", type=click.Choice(["question", "nugget"]), default=None,
              help="Score bank items of this kind [the kind GRADES holds].")
@click.option("--assignments", default=None, metavar="FILE", callback=claim_output,
              help="Also write each report's nugget assignment in the nuggetizer's assign-output "
                   "format (qid, run_id, nuggets with importance and assignment).")
@click.option("-o", "--output", "output", default=None, metavar="FILE|DIR/", callback=check_file_or_dir,
              help="Write results to FILE (atomically) instead of stdout; with --format trec_eval and "
                   "several runs, a directory (one RUN.txt each, overwritten on a rerun).")
def score_cmd(grades, reports, track_spec, bank, support_grades, shape, measures, summary_only, complete,
              default_importance, partial_min, support_min, digits, model, prompt, kind, assignments, output):
    """Nugget scores, EXAM-Cover and citation support of RAG reports, per topic and run.

    GRADES are grades of the reports' sentences (or whole reports) against the bank,
    from exam-grade --reports with any nugget or question prompt or from exam-nuggets
    assign, or an assignment file (the nuggetizer's assign output, with run_id). Every (report, bank
    item) gets a support level: the best level any of its sentences reaches (support,
    partial support, no support; see --support-min / --partial-min). Measures:
    nugget_all, nugget_vital, nugget_weighted and their _strict variants (TREC 2024 RAG
    AutoNuggetizer scores; vital weight 1, okay 0.5), exam_cover and n_exam_cover
    (fraction of bank items the report supports), and with --support-grades
    support_precision and support_recall (TREC 2024 RAG support evaluation).
    """
    check_shape_options(click.get_current_context(), shape)
    all_reports = _reports(reports, track_spec)
    to_dir = bool(output) and (output.endswith(os.sep) or os.path.isdir(output))
    if to_dir and shape != "trec_eval":  # only that shape writes a folder (one RUN.txt per run)
        check_output(output)
    nruns = len({r.run_id for r in all_reports})
    if shape == "trec_eval" and nruns > 1 and not to_dir:
        raise UsageError(f"the trec_eval shape holds one run per file and there are {nruns} runs: "
                         "give -o a directory (one RUN.txt per run) or use --format tot")
    if shape == "trec_eval" and to_dir:
        for r in all_reports:  # "../x" wrote RUN.txt beside the folder
            problem = file_name_problem(r.run_id, ".txt")
            if problem:
                raise InputError(f"run id {r.run_id!r} {problem}: it cannot name a file in -o {output} "
                                 "(one RUN.txt per run)", r.source, r.line)

    if is_assignment_file(grades):  # the nuggetizer's assign output, ours or its own
        refuse_given(click.get_current_context(), ("model", "prompt", "kind"),
                     "selects among a grades file's graders: GRADES is an assignment file")
        graded = read_assignment_grades(grades, all_reports, items_by_query(read_bank(bank, kind="nugget")))
    else:
        graded = read_grades(grades, model=model, prompt=prompt, kind=kind)

    def support(note):
        if not support_grades:
            return None
        sgraded = read_grades(support_grades)
        if not any(g.kind == "statement" for g in sgraded):  # (the nugget grades given twice)
            raise InputError("holds no citation-support grades (exam-nuggets support writes them)", support_grades)
        ns.warn_unparsed(sgraded, support_grades, note)
        return ns.support_grade_index(sgraded, ns.thresholds_of(sgraded, None, None, "--support-grades"))

    res, items = ns.score_checked(all_reports, graded, bank, grades_name=grades, bank_name=bank, kind=kind,
                                  support_min=support_min, partial_min=partial_min, support=support, log=_log,
                                  measures=measures, default_importance=default_importance, complete=complete)
    write_score_outputs(res, items, output=output, to_dir=to_dir, shape=shape, summary_only=summary_only,
                        digits=digits, assignments=assignments, default_importance=default_importance)
    return 0


# --------------------------------------------------------------------------- qrels

QRELS_EPILOG = """\b
Examples:
  # a cited document is relevant as far as it supports a sentence that covers a nugget
  exam-nuggets qrels --reports runs/ --from both --support-grades support.jsonl grades.jsonl > cited.qrels
  # only citation support (no nugget grades needed)
  exam-nuggets qrels --reports runs/ --from support --support-grades support.jsonl > cited.qrels
  # then, as with any qrels
  exam-qrels -m ndcg_cut.10 cited.qrels runs/*.run
"""


@cli.command("qrels", context_settings=CONTEXT_SETTINGS, epilog=QRELS_EPILOG)
@click.argument("grades", metavar="[GRADES]", required=False)
@reports_option
@click.option("--from", "source", type=click.Choice(["support", "nuggets", "both"]), default=None,
              help="Label of a cited document: its citation support (support), the nugget level of the sentences "
                   "citing it (nuggets), or the smaller of the two (both) [both when GRADES and --support-grades "
                   "are given, else the one given].")
@click.option("--support-grades", default=None, metavar="FILE", help="citation-support grades (exam-nuggets support).")
@threshold_options
@click.option("--model", default=None, metavar="NAME", help="Use only GRADES from this model.")
@click.option("--prompt", default=None, metavar="NAME", help="Use only GRADES from this prompt.")
@output_option
def qrels_cmd(grades, reports, track_spec, source, support_grades, partial_min, support_min, model, prompt, output):
    """Document qrels (labels 0-2) from the reports' citations and grades.

    Every document a report sentence cites gets the best label over the sentences
    citing it (2 support, 1 partial support, 0 none); documents without the grades
    their label needs are left out (and counted). GRADES (sentence grades against a
    bank) are needed for --from nuggets and both, --support-grades for support and
    both. The output is TREC qrels for exam-qrels, trec_eval and pytrec_eval.
    """
    if source is None:
        source = "both" if grades and support_grades else "nuggets" if grades else "support"
    if source in ("nuggets", "both") and not grades:
        raise UsageError(f"--from {source} needs GRADES (sentence grades against a bank)")
    if source in ("support", "both") and not support_grades:
        raise UsageError(f"--from {source} needs --support-grades")
    if source == "support":  # GRADES and what reads them would change nothing
        if grades:
            raise UsageError("--from support reads --support-grades only: GRADES would not be read")
        refuse_given(click.get_current_context(), ("support_min", "partial_min", "model", "prompt"),
                     "applies to GRADES, which --from support does not read")
    if source == "nuggets" and support_grades:
        raise UsageError("--from nuggets reads GRADES only: --support-grades would not be read")
    nug = sup = None
    notes: list[str] = []  # said once nothing is refused (a refusal is one line)
    if grades and source != "support":
        graded = read_grades(grades, model=model, prompt=prompt)
        ns.warn_unparsed(graded, grades, notes.append)
        nug = ns.sentence_levels(graded, ns.thresholds_of(graded, support_min, partial_min, "GRADES"))
    if support_grades and source != "nuggets":
        sgraded = read_grades(support_grades)
        if not any(g.kind == "statement" for g in sgraded):  # (the nugget grades given twice)
            raise InputError("holds no citation-support grades (exam-nuggets support writes them)", support_grades)
        ns.warn_unparsed(sgraded, support_grades, notes.append)
        sup = ns.support_grade_index(sgraded, ns.thresholds_of(sgraded, None, None, "--support-grades"))
    stats = ns.QrelsStats()
    qrels = ns.citation_qrels(_reports(reports, track_spec), source, support=sup, nuggets=nug, stats=stats)
    if not qrels:
        raise InputError("no cited document has the grades its label needs", support_grades or grades)
    for note in notes:
        _log(note)
    if stats.unlabelled:
        _log(f"{stats.unlabelled} of {stats.cited} cited documents lack the grades for a label and are left out")
    with atomic_output(output) as out:
        write_qrels(qrels, out)
    return 0


# --------------------------------------------------------------------------- bank

BANK_EPILOG = """\b
Examples:
  exam-nuggets bank --to nuggetizer --topics topics.tsv nuggets.jsonl -o nuggets.nuggetizer.jsonl
  exam-nuggets bank --to autojudge nuggets.jsonl -o nugget-banks.jsonl      # AutoJudge NuggetBank v3
  exam-nuggets bank --to ours nuggetizer-output.jsonl -o bank.jsonl        # import
"""


@cli.command("bank", context_settings=CONTEXT_SETTINGS, epilog=BANK_EPILOG)
@click.argument("bank", metavar="BANK")
@click.option("--to", "target", type=click.Choice(["ours", "nuggetizer", "autojudge"]), required=True,
              help="Output format: ours (exam_eval JSONL), nuggetizer (castorini/nuggetizer), "
                   "autojudge (AutoJudge NuggetBank v3, one bank per topic).")
@click.option("--topics", default=None, metavar="FILE|ID", help="Query texts for the nuggetizer's 'query' and "
                                                                 "AutoJudge's 'title_query'.")
@click.option("--kind", type=click.Choice(["question", "nugget"]), default=None, help="Only items of this kind.")
@click.option("--default-importance", type=click.Choice(["vital", "okay"]), default="vital", show_default=True,
              help="nuggetizer: importance written for items that have none (the format requires one).")
@output_option
def bank_cmd(bank, target, topics, kind, default_importance, output):
    """Convert a bank between our format, the nuggetizer's and AutoJudge's.

    BANK may be in any format exam_eval reads (ours, the workbench's, multiple-choice,
    the nuggetizer's, AutoJudge NuggetBank); importance (vital / okay) and ids are kept.
    """
    ctx = click.get_current_context()
    if target == "ours":
        refuse_given(ctx, ("topics",), "applies to --to nuggetizer|autojudge")
    if target != "nuggetizer":
        refuse_given(ctx, ("default_importance",), "applies to --to nuggetizer")
    convert_bank(bank, target, output, topics=topics, kind=kind, default_importance=default_importance,
                 log=_log)
    return 0


# --------------------------------------------------------------------------- support

SUPPORT_EPILOG = """\b
Examples:
  # every (sentence, cited document) pair of the reports, graded by a vLLM server
  exam-nuggets support --reports runs/ --passages corpus.jsonl --backend endpoint \\
      --base-url http://gpu1:8000/v1 --model meta-llama/Llama-3.1-8B-Instruct -o support.jsonl
  # offline, with the embedding grader (cosine of sentence and document)
  exam-nuggets support --reports runs/ --passages corpus.jsonl --backend embedding -o support.jsonl

Killed or interrupted? Run the same command again: it resumes where it stopped.
"""

@cli.command("support", context_settings=CONTEXT_SETTINGS, epilog=SUPPORT_EPILOG)
@reports_option
@click.option("--passages", default=None, metavar="FILE|ID",
              help="Texts of the cited documents (JSONL {doc_id, text}, TSV, or an ir_datasets ID); "
                   "documents a report embeds need none.")
@click.option("--topics", default=None, metavar="FILE|ID", help="Query texts, for custom prompts that show {query}.")
@click.option("--prompt", "prompt_name", default="citation-support", show_default=True, metavar="NAME|FILE",
              help="Support prompt: the statement is {item}, the cited document {context}.")
@click.option("--on-missing", type=click.Choice(["skip", "error"]), default="skip", show_default=True,
              help="Cited documents without text: skip (and report) or fail.")
@backend_flags
@run_flags
def support_cmd(reports, track_spec, passages, topics, prompt_name, on_missing, judge: JudgeFlags, run: RunFlags):
    """Grade whether each cited document supports the sentence citing it.

    Every (sentence, cited document) pair of the reports is one grade line: query_id
    the topic, doc_id the cited document, item_id the sentence id, kind "statement".
    The grades go through the same engine, cache and resume logic as exam-grade (the
    back-end options are exam-grade's), and feed exam-nuggets score --support-grades and
    exam-nuggets qrels.
    """
    shard_t = engine.parse_shard(run.shard)
    prompt = get_prompt(prompt_name)
    if prompt.target == "direct":
        raise UsageError(f"prompt {prompt.id!r} grades passages against the query, not a statement against a citation")
    grader = make_grader(judge.backend, judge.settings(), run.backend_options, prompt)

    units, npairs, missing = support_units(reports, track_spec=track_spec, passages=passages, topics=topics,
                                           on_missing=on_missing, prompt=prompt, grader=grader, shard=shard_t,
                                           log=_log)

    with GradingSession(grader, prompt, output=run.output, cache_path=cache_file(run.cache_path, run.no_cache),
                        dry_run=run.dry_run, retry_unparsed=run.retry_unparsed, log=_log) as session:
        plan = session.plan(units, npairs)
        plan.stats.pool = len({p.doc_id for u in units.values() for p in u.pairs})
        plan.stats.missing = len(missing)
        if run.dry_run:
            click.echo("\n".join(dry_run_lines(plan, grader, session.cache, run.shard)))
            return 0
        return run_session(session, log=_log, batch_size=judge.batch_size, progress="citation support")


# --------------------------------------------------------------------------- assign

ASSIGN_EPILOG = """\b
Examples:
  # the AutoNuggetizer's assignment of every report, 10 nuggets per call, by a vLLM server
  exam-nuggets assign --reports runs/ --bank nuggets.jsonl --topics queries.jsonl \\
      --model meta-llama/Llama-3.3-70B-Instruct --base-url http://gpu1:8000/v1 -o assign.jsonl
  exam-nuggets score --reports runs/ --bank nuggets.jsonl assign.jsonl
  # the 2-grade template, and the nuggetizer's assign-output file beside the grades
  exam-nuggets assign --grades 2 --assignments assign.nuggetizer.jsonl ... -o assign2.jsonl

Interrupted? Run the same command again: answers already given come from the cache.
"""


@cli.command("assign", context_settings=CONTEXT_SETTINGS, epilog=ASSIGN_EPILOG)
@reports_option
@click.option("--bank", required=True, metavar="FILE", help="Nugget bank (any format exam_eval reads).")
@click.option("--topics", required=True, metavar="FILE|ID", help="Query texts (the prompt shows the query).")
@click.option("--grades", "n_grades", type=click.Choice(["3", "2"]), default="3", show_default=True,
              help="The nuggetizer's 3-grade (support / partial_support / not_support) or 2-grade template.")
@click.option("--window", type=click.IntRange(1), default=10, show_default=True, help="Nuggets per call.")
@click.option("--kind", type=click.Choice(["question", "nugget"]), default="nugget", show_default=True,
              help="Bank items to assign.")
@click.option("--assignments", default=None, metavar="FILE", callback=claim_output,
              help="Also write the nuggetizer's assign-output file (one line per report, with run_id).")
@chat_options
@batch_options
@output_option
def assign_cmd(reports, track_spec, bank, topics, n_grades, window, kind, assignments, llm: ModelFlags, retries,
               cache_path, no_cache, batch_out, batch_in, output):
    """Assign the bank's nuggets to each whole report, as the AutoNuggetizer does.

    One call per report and window of --window nuggets, with the nuggetizer's prompt,
    parsing and re-asks; every (report, nugget) becomes a grade line (doc_id the report
    id; grade support 2, partial_support 1, not_support 0) that exam-nuggets score
    reads. An answer is final only when it gives a label for each nugget; one that never
    does is written with parse_ok false (and not cached: a rerun asks again); a call that
    fails is not written, in the grades nor in --assignments (exit 3; run again to retry
    it).
    """
    # its flags: checked before any input is read
    chat = make_chat(llm, check_batch(llm.backend, batch_out, batch_in, llm.client_options().get("base_url")))
    replay = attach(chat, "exam-nuggets assign", batch_out, batch_in,
                    identity=f"{chat.cache_identity}:{prompt_hash(int(n_grades))}")
    rs = _reports(reports, track_spec)
    items = items_by_query(read_bank(bank, kind=kind))
    queries = read_requests(topics)
    with interrupted_says(PROG, kept_hint(no_cache)):
        result = run_assign(rs, items, queries, chat, cache=open_cache(cache_path, no_cache), grades=int(n_grades),
                            window=window, retries=retries, output=output, log=_log, bank_name=bank,
                            topics_name=topics,
                            failure_line=lambda: chat_too_long(chat, f"a smaller --window (nuggets per call; now "
                                                                     f"{window})", llm.max_tokens, no_cache))
    for note in (getattr(chat, "memory_note", None), usage_note(chat)):
        if note:
            _log(note)
    if assignments and (result.grades or not (result.failed or result.stats.not_sent)):  # as -o
        n = write_listwise_assignments(result.reports, result.grades, items, assignments)
        _log(f"{n} of {len(result.reports)} reports written to {assignments}"
             + (" (only what was answered)" if n < len(result.reports) else ""))
    return 3 if finish(replay, batch_out, _log) or result.failed else 0


main = make_main(cli, PROG)

if __name__ == "__main__":
    main()
