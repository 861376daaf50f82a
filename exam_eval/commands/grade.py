"""exam-grade: grade every pooled passage against every bank item (or directly).

Everything is validated before a model loads or a byte is written; then the engine
grades what neither the output nor the cache already holds (see
:mod:`exam_eval.grading.engine`).
"""

from __future__ import annotations

import os

import click

from ..backends import registry
from ..backends.dry_run import dry_run_lines
from ..backends.factory import attach_verifier, make_grader
from ..errors import UsageError
from ..grading import engine
from ..grading.cache import cache_file
from ..grading.inputs import Sources, read_inputs, segment_run_files, write_segment_runs
from ..grading.listwise import WINDOW
from ..grading.prompts import REGISTRY, get_prompt
from ..grading.report_units import default_unit
from ..grading.session import GradingSession
from ._base import CONTEXT_SETTINGS, claim_output, make_main, refuse_given, refuse_inputs_as_outputs
from ._batch import batch_options, check_batch, grade_or_batch
from ._options import JudgeFlags, RunFlags, backend_flags, run_flags

EPILOG = """\b
Examples:
  # self-rate the DL19 pool (top 20 of every run) with FLAN-T5-large
  exam-grade --bank questions.jsonl.gz --prompt question-selfrating \\
      --passages passages.jsonl.gz runs/*.run -o grades.jsonl.gz
  # FLAN-T5 runs on CTranslate2 (int8 on CPU, close calls regraded in float32) where
  # ctranslate2 is installed; float32 gives torch's grades, --engine torch runs torch
  exam-grade --compute-type float32 --bank questions.jsonl.gz --prompt question-selfrating ...
  # the same through a vLLM server, 32 requests in flight
  exam-grade --backend endpoint --base-url http://gpu1:8000/v1 --model meta-llama/Llama-3.1-8B-Instruct \\
      --concurrency 32 --bank questions.jsonl --prompt question-selfrating \\
      --passages passages.jsonl runs/*.run -o grades.jsonl
  # 1 of 8 shards of the same work (merge later with: cat grades.*.jsonl > grades.jsonl)
  exam-grade --shard 3/8 ... -o grades.3.jsonl
  # what would be graded, from cache, and how long it would take
  exam-grade --dry-run --bank questions.jsonl --prompt question-selfrating --passages p.jsonl runs/*.run
  # generated answers: segment them, write their run file, grade the segments
  exam-grade --responses answers.jsonl --responses-run-out answers.run --bank b.jsonl --prompt question-selfrating
  # RAG reports (TREC RAG / RAGTIME / DRAGUN JSONL), sentence by sentence, checked against the rag25 spec
  exam-grade --reports runs/ --track-spec rag25 --topics queries.jsonl --bank nuggets.jsonl \\
      --prompt nugget-selfrating --reports-run-out sentences/ -o grades.jsonl

Killed or interrupted? Run the same command again: it resumes where it stopped.
"""


def _log(msg: str) -> None:
    click.echo(f"exam-grade: {msg}", err=True)


@click.command(context_settings=CONTEXT_SETTINGS, epilog=EPILOG)
@click.argument("runs_args", metavar="[RUN]...", nargs=-1)
@click.option("--run", "runs_opt", multiple=True, metavar="FILE", help="TREC run to pool (repeatable; runs may also be given as arguments).")
@click.option("--depth", "-k", default=20, show_default=True, type=click.IntRange(min=1), help="Pool the top K passages of every run (trec_eval order).")
@click.option("--qrels", "qrels", multiple=True, metavar="FILE|ID", help="Also pool every passage these qrels judged (file or ir_datasets ID).")
@click.option("--responses", metavar="FILE", help="Generated answers (JSONL query_id, run_id, text): segmented into passages and pooled.")
@click.option("--responses-run-out", metavar="PATH", callback=claim_output, help="Write the run ranking the response segments (a directory: one RUN_ID.run per run).")
@click.option("--reports", multiple=True, metavar="FILE|DIR", help="RAG reports (TREC RAG-family JSONL, or a directory of *.jsonl[.gz]; repeatable): their sentences are pooled.")
@click.option("--track-spec", metavar="NAME", help="Validate --reports against this track spec (rag25, rag26, ragtime25, ragtime26, dragun25, kiddie, rag25-autojudge).")
@click.option("--report-unit", type=click.Choice(["sentence", "report"]), default=None, help="Grade each report sentence, or each whole report [report for nuggetizer-assign, as the AutoNuggetizer judges; else sentence].")
@click.option("--cited-documents", is_flag=True, help="Show the prompt each sentence followed by the texts of the documents it cites (from --passages or the reports).")
@click.option("--reports-run-out", metavar="PATH", callback=claim_output, help="Write the run ranking the graded report sentences (a directory: one RUN_ID.run per run).")
@click.option("--passages", metavar="FILE|ID", help="Passage texts: JSONL {doc_id|docno, text}, TSV, or an ir_datasets ID.")
@click.option("--topics", metavar="FILE|ID", help="Query texts: TSV, TREC topics, JSONL, a RAG request file or an ir_datasets ID (needed by prompts that show the query; with --reports and --track-spec, the requests the runs must cover).")
@click.option("--on-missing", type=click.Choice(["skip", "error"]), default="skip", show_default=True, help="Pooled passages without text: skip (and report) or fail.")
@click.option("--bank", metavar="FILE", help="Question/nugget bank (our JSONL or the workbench's files). Not used by direct prompts.")
@click.option("--keep-edited-ids", is_flag=True,
              help="An item whose text no longer matches its item_id keeps that id (default: it gets the id of its new text).")
@click.option("--prompt", "prompt_name", required=True, metavar="NAME|FILE", help="Prompt id (see exam-grade --list-prompts) or a custom prompt file.")
@click.option("--generate-ratings", is_flag=True,
              help="Rating prompts: generate the answer and read the rating from the text (the workbench's way) "
                   "instead of scoring the labels' next-token probabilities.")
@click.option("--rating-rule", type=click.Choice(["strict", "exam-pp", "workbench"]), default="strict",
              show_default=True,
              help="Reading generated self-ratings: strict (no rating stated: unparsed), exam-pp (no number: 1, "
                   "EXAM++ 4.2.2), workbench (the reference workbench's reader; reproduces its published grades).")
@backend_flags
@click.option("--verify", type=click.Choice(["lexical", "llm"]), default="lexical", show_default=True,
              help="Extraction prompts with answer keys: word matching (EXAM) or the answer-verification prompt (EXAM++).")
@click.option("--verifier-model", default=None, metavar="NAME|DIR",
              help="--verify llm: the model that verifies answers (default: the grading model; required for hf-qa).")
@click.option("--verifier-backend", default="hf-seq2seq", show_default=True, metavar="NAME",
              help="Back end of --verifier-model (hf-seq2seq, hf-causal, endpoint).")
@run_flags
@batch_options(grading=True)
@click.option("--list-prompts", is_flag=True, is_eager=True, expose_value=False, callback=lambda c, p, v: _list_prompts(c, v),
              help="List the prompt ids and exit.")
def cli(runs_args, runs_opt, depth, qrels, responses, responses_run_out, reports, track_spec, report_unit,
        cited_documents, reports_run_out, passages, topics, on_missing, bank, keep_edited_ids, prompt_name,
        generate_ratings, rating_rule, judge: JudgeFlags, verify, verifier_model, verifier_backend, run: RunFlags,
        batch_out, batch_in):
    """Grade pooled passages with an LLM against a question/nugget bank (or directly).

    The pool is the top --depth passages of every RUN, the passages of --qrels, the
    segments of --responses and the sentences (or whole reports) of --reports. Every (passage, bank item) pair is graded once with
    --prompt by --backend; identical texts are graded once, a persistent cache
    remembers every grade, and the output is appended batch by batch, so an
    interrupted run resumes where it stopped. Grades are JSONL for exam-qrels and
    exam-cover.
    """
    runs = list(runs_opt) + list(runs_args)
    shard_t = engine.parse_shard(run.shard)
    if not runs and not qrels and not responses and not reports:
        raise UsageError("nothing to pool: give run files, --qrels, --responses or --reports")
    if responses_run_out and not responses:
        raise UsageError("--responses-run-out needs --responses")
    for flag, given in (("--track-spec", track_spec), ("--reports-run-out", reports_run_out),
                        ("--cited-documents", cited_documents), ("--report-unit", report_unit)):
        if given and not reports:
            raise UsageError(f"{flag} needs --reports")
    prompt = get_prompt(prompt_name).variant(generate=generate_ratings, rule=rating_rule)
    direct = prompt.target == "direct"
    if not direct and not bank:
        raise UsageError(f"prompt {prompt.id!r} grades {prompt.target}s: give --bank")
    if verify == "llm" and prompt.parser != "extraction":
        raise UsageError(f"--verify llm verifies extracted answers; prompt {prompt.id!r} extracts none "
                         "(use an extraction prompt such as question-extraction)")
    options = judge.settings()
    options["base_url"] = check_batch(judge.backend, batch_out, batch_in, options["base_url"], run.dry_run,
                                      grading=True, verify=verify)
    grader = make_grader(judge.backend, options, run.backend_options, prompt)
    if verify == "llm":
        attach_verifier(grader, judge.backend, verifier_model, verifier_backend, options)
    else:
        refuse_given(click.get_current_context(), ("verifier_model", "verifier_backend"), "needs --verify llm")
    if not runs:
        refuse_given(click.get_current_context(), ("depth",), "is the pool depth of RUNs: give a RUN")

    # ---- inputs (all validated before anything loads or is written) --------------------
    notes: list[str] = []  # the inputs' notices, said once nothing is refused (a refusal is one line)
    sources = Sources(prompt, runs=runs, depth=depth, qrels=qrels, responses=responses, reports=reports,
                      track_spec=track_spec, report_unit=report_unit or default_unit(prompt.id),
                      cited_documents=cited_documents, passages=passages, topics=topics,
                      bank=None if direct else bank, on_missing=on_missing, keep_edited_ids=keep_edited_ids)
    work = read_inputs(sources, log=notes.append)
    if direct and (bank or keep_edited_ids):
        unused = " and ".join(f for f, v in (("--bank", bank), ("--keep-edited-ids", keep_edited_ids)) if v)
        notes.append(f"prompt {prompt.id!r} grades passages directly; {unused} {'are' if ' and ' in unused else 'is'} not used")
    run_files = {option: segment_run_files(segments, path, option)
                 for segments, path, option in ((work.segments, responses_run_out, "--responses"),
                                                (work.report_segments, reports_run_out, "--reports")) if path}
    check_run_files(run_files)

    units, npairs = engine.build_units(docs=work.docs, texts=work.texts, items=work.items, queries=work.queries,
                                       prompt=prompt, identity=grader.cache_identity,
                                       shard=shard_t)
    with GradingSession(grader, prompt, output=run.output, cache_path=cache_file(run.cache_path, run.no_cache),
                        dry_run=run.dry_run, retry_unparsed=run.retry_unparsed, log=_log) as session:
        plan = session.plan(units, npairs)
        for note in notes:
            _log(note)
        plan.stats.pool = work.pool
        plan.stats.missing = work.missing
        if run.dry_run:
            click.echo("\n".join(dry_run_lines(plan, grader, session.cache, run.shard)))
            return 0
        listwise_note(prompt, plan, grader, _log)
        missing = plan.stats.missing
        return grade_or_batch(session, batch_out, batch_in, command="exam-grade", log=_log, batch_size=judge.batch_size,
                              progress="grading",
                              notes=[f"{missing} pooled passages had no text and were skipped"] if missing else [],
                              on_ready=lambda: [write_segment_runs(planned) for planned in run_files.values()])


def listwise_note(prompt, plan, grader, log) -> None:
    """nuggetizer-assign here is one call per (report, nugget): the user who wants the
    AutoNuggetizer's own calls (a window of nuggets per call) should hear of its path."""
    if prompt.id != "nuggetizer-assign" or not plan.units_todo or registry.has(getattr(grader, "name", ""), "canned"):
        return
    per_report: dict[tuple, int] = {}
    for unit in plan.units_todo:
        for pair in unit.pairs:
            per_report[(pair.query_id, pair.doc_id)] = per_report.get((pair.query_id, pair.doc_id), 0) + 1
    windows = sum(-(-n // WINDOW) for n in per_report.values())
    log(f"prompt nuggetizer-assign asks one model call per (report, nugget) pair: {len(plan.units_todo)} calls "
        f"here; the AutoNuggetizer asks up to {WINDOW} nuggets of a report per call, as `exam-nuggets assign` "
        f"does (about {windows} calls for these pairs)")


def check_run_files(run_files: dict) -> None:
    """The run files that --responses-run-out/--reports-run-out DIR name after the run ids
    are known only now: one named twice, or naming another output or an input of this
    command, is a usage error before anything is written, as for the other outputs."""
    ctx = click.get_current_context()
    claimed = ctx.meta.get("exam_eval.outputs") or {}
    planned: dict[str, str] = {}
    for option, (folder, files) in run_files.items():
        if folder is None:
            continue  # a single file: claimed and checked at parsing like every output
        for path, run_id, _ in files:
            key = os.path.realpath(path)
            where = f"{option}-run-out {folder} (run {run_id!r})"
            other = planned.get(key) or claimed.get(key)
            if other:
                raise UsageError(f"{where} and {other} name the same file: {path}")
            planned[key] = where
    refuse_inputs_as_outputs(ctx, planned)


def _list_prompts(ctx, value):
    if not value or ctx.resilient_parsing:
        return

    for pid in sorted(REGISTRY):
        p = REGISTRY[pid]
        click.echo(f"{pid}\t{p.target}\t{p.mode}\t{p.scale[0]}-{p.scale[1]}\t{p.source}")
    ctx.exit(0)


main = make_main(cli, "exam-grade")

if __name__ == "__main__":
    main()
