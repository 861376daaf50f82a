"""exam-correlate: how far an automatic leaderboard or LLM labels can be trusted.

``leaderboard`` (rank correlation of leaderboards, with the TREC AutoJudge meta-evaluation's
coefficients), ``qrels`` (predicted vs truth qrels, as AutoJudge's qrel-evaluate),
``agreement`` (Cohen's kappa against human judgments), ``interval`` (a run's metric from
few human labels plus LLM labels: bootstrap, PPI, CRC) and ``compare`` (which runs differ:
paired tests, and PPI on the differences).
"""

from __future__ import annotations

import click

from ..errors import InputError, UsageError
from ..measures.grade_labels import read_human_qrels
from ..io.leaderboard import FORMATS as LEADERBOARD_FORMATS
from ..io.openers import display_name
from ..io.outputs import atomic_output
from ..measures.grade_labels import read_llm_qrels
from ..progress import progress_bar
from ..stats.leaderboards import correlate_leaderboards, fmt as _fmt
from ..verify.plots import compare_plot, leaderboard_scatter
from ..trec_eval.trec_files import run_names
from ._base import CONTEXT_SETTINGS, check_output_param, grader_options, make_main, output_option, refuse_given

PROG = "exam-correlate"

# stats/ (numpy, scipy) is imported in the subcommands that compute, so that --help and a
# usage error load neither


def _info(msg: str) -> None:
    click.echo(f"{PROG}: {msg}", err=True)


@click.group(context_settings=CONTEXT_SETTINGS)
def cli():
    """Meta-evaluation: leaderboard correlation, agreement with human judgments, and
    confidence intervals that combine a few human labels with many LLM labels.

    \b
    Examples (TREC DL 2019):
      exam-qrels -c -m ndcg_cut.10 llm.qrels runs/*.run > exam.tsv
      exam-correlate leaderboard official.tsv exam.tsv --plot scatter.png
      exam-correlate leaderboard truth.tot judge.tot -k 10
      exam-correlate qrels qrels.txt llm.qrels --truth-max 3 --truth-min 2 --pred-max 5 --pred-min 4
      exam-correlate agreement qrels.txt llm.qrels --human-min 2 --llm-min 4
      exam-correlate interval qrels.txt llm.qrels runs/p_bert.run --n-labelled 30 --seed 1
    """


# --------------------------------------------------------------------------- leaderboard

@cli.command("leaderboard", context_settings=CONTEXT_SETTINGS)
@click.argument("truth", metavar="TRUTH")
@click.argument("preds", metavar="PRED...", nargs=-1, required=True)
@click.option("--truth-column", "--truth-measure", "truth_columns", multiple=True, metavar="COL",
              help="Column/measure of TRUTH, repeatable (default: official_rank or the first measure of a TSV "
                   "leaderboard; every measure of a tot/ir_measures/trec_eval one).")
@click.option("--pred-column", "--pred-measure", "pred_columns", multiple=True, metavar="COL",
              help="Column/measure of PRED, repeatable (default: the first TSV column whose name has no 'rank'; "
                   "every measure of a tot/ir_measures/trec_eval leaderboard).")
@click.option("--truth-format", type=click.Choice(LEADERBOARD_FORMATS), default="auto", show_default=True,
              help="Shape of TRUTH (auto: sniffed, the choice printed on stderr).")
@click.option("--pred-format", type=click.Choice(LEADERBOARD_FORMATS), default="auto", show_default=True,
              help="Shape of every PRED.")
@click.option("-k", "--top-k", "top_k", type=int, multiple=True, default=(10,), show_default=True, metavar="K",
              help="kendall@K: Kendall's tau-b over the K systems TRUTH ranks best; repeatable.")
@click.option("--aggregate", type=click.Choice(["file", "mean"]), default="file", show_default=True,
              help="file: the leaderboards' own 'all' rows (the mean over topics where a file has none); "
                   "mean: recompute every run's mean over its per-topic values.")
@click.option("--shared-topics", is_flag=True,
              help="Recompute both sides' means over the topics present in both (per measure pair).")
@click.option("--per-topic", is_flag=True,
              help="Correlate the system rankings of every topic in both leaderboards, then their mean.")
@click.option("--table", is_flag=True, help="TSV table output even for one leaderboard pair.")
@click.option("--strict", is_flag=True, help="Systems present in only one leaderboard are an error (exit 2).")
@click.option("--plot", "plot", default=None, metavar="FILE.png", callback=check_output_param,
              help="Also draw TRUTH vs PRED as a labelled scatter plot (needs matplotlib; one pair only).")
@output_option
def leaderboard_cmd(truth, preds, truth_columns, pred_columns, truth_format, pred_format, top_k, aggregate,
                    shared_topics, per_topic, table, strict, plot, output):
    """Rank correlation of leaderboards: TRUTH (e.g. the official one) against each PRED.

    Leaderboards are TSV (header 'run' then one column per measure), or per-topic
    'tot' (run measure topic value), ir_measures (run topic measure value, or that
    tool's own per-run output) or trec_eval -q output (one file per run: give a
    directory); topic 'all' holds the aggregate. TSV columns whose name contains
    'rank' are ranks (lower is better) and are negated before correlating.

    With one PRED and one measure pair, prints one 'name<TAB>value' line each for
    spearman, kendall_tau_b (scipy's tau-b: ties corrected; AutoJudge's 'kendall'),
    kendall_tau_a, tau_ap (AP correlation, errors near the top weigh more), tau_ap_b
    (tau-AP with ties, symmetric: AutoJudge's 'tauap_b'), tau_gap (head-weighted,
    gap-sensitive), pearson, kendall@K, and n (systems used). Otherwise a TSV table,
    one row per PRED and measure pair (and topic, with --per-topic).

    \b
    Examples:
      exam-correlate leaderboard official.tsv exam-qrels.tsv
      exam-correlate leaderboard official.tsv cover.tsv --pred-column exam_cover --plot cover.png
      exam-correlate leaderboard truth.tot judge1.tot judge2.tot --truth-measure nDCG@10 -k 10 -k 20
      exam-correlate leaderboard official.tsv trec_eval_q_outputs/ --pred-measure ndcg_cut_10
      exam-correlate leaderboard truth.tot judge.tot --per-topic --shared-topics
    """
    res = correlate_leaderboards(truth, preds, truth_columns=truth_columns, pred_columns=pred_columns,
                                 truth_format=truth_format, pred_format=pred_format, top_k=top_k,
                                 aggregate=aggregate, shared_topics=shared_topics, per_topic=per_topic,
                                 table=table, strict=strict, plot=bool(plot), log=_info)
    if res.single is not None:
        with atomic_output(output) as out:
            for k in res.names:
                out.write(f"{k}\t{res.single[k] if k == 'n' else _fmt(res.single[k])}\n")
        if plot:
            leaderboard_scatter(plot, *res.pair, res.single, truth, preds[0])
        return
    with atomic_output(output) as out:
        out.write("\t".join(res.header) + "\n")
        for row in res.rows:
            out.write("\t".join(row) + "\n")


def _metric_options(default: str):
    """-m, -l, --min-grade: the metric flags interval and compare share."""
    def add(f):
        f = click.option("--min-grade", type=int, default=4, show_default=True, metavar="TAU",
                         help="exam-cover: a grade >= TAU answers the item (as exam-cover --min-grade).")(f)
        f = click.option("-l", "--rel-level", type=int, default=1, show_default=True, metavar="L",
                         help="Relevance level for p@K (as trec_eval -l).")(f)
        return click.option("-m", "--metric", default=default, show_default=True, metavar="M",
                            help="dcg@K, ndcg@K, p@K (labels >= --rel-level), or exam-cover@K (default K 20; HUMAN "
                                 "and LLM are then grades files).")(f)
    return add


def _label_options(f):
    """Which queries carry human labels, and how LLM labels map onto the human scale."""
    f = click.option("--mapping", type=click.Choice(["calibrated", "identity"]), default="calibrated",
                     show_default=True, help="calibrated: LLM labels -> P(human label | LLM label) counted on the "
                     "labelled queries; identity: LLM labels are on the human scale already.")(f)
    f = click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Seed of every random choice.")(f)
    f = click.option("--alpha", type=float, default=0.05, show_default=True, help="1 - alpha is the coverage.")(f)
    f = click.option("--n-labelled", type=int, default=None, metavar="N",
                     help="Use human judgments of N random judged queries (seeded by --seed).")(f)
    return click.option("--labelled", "labelled_file", default=None, metavar="FILE",
                        help="Queries whose human judgments may be used (one query id per line).")(f)


def _check_metric_flags(ctx: click.Context, metric: str) -> None:
    """-l is p@K's and --min-grade exam-cover's: given where they change nothing, usage errors."""
    import re

    name = metric.strip().lower()
    if not re.fullmatch(r"p[@_.]\d+", name):  # p@5, P_5, p.5
        refuse_given(ctx, ("rel_level",), f"is the relevance level of p@K: -m {metric} uses the graded labels")
    if not name.startswith("exam-cover"):
        refuse_given(ctx, ("min_grade",), f"applies to -m exam-cover@K, not to -m {metric}")


def _check_interval_methods(ctx: click.Context, chosen: list[str], per_query: bool, metric: str) -> None:
    """-q (per-query CRC only) and --crc-correction, given where they change nothing: usage errors."""
    _check_metric_flags(ctx, metric)
    if per_query and chosen != ["crc"]:
        refuse_given(ctx, ("methods",), "with -q: -q gives per-query CRC intervals only (give crc, or no --methods)")
    if not per_query and "crc" not in chosen:
        refuse_given(ctx, ("crc_correction",), "applies to the crc method, which --methods leaves out")


def _methods(methods: str, known) -> list[str]:
    chosen = list(dict.fromkeys(m.strip() for m in methods.split(",") if m.strip()))  # a repeat: one row
    bad = [m for m in chosen if m not in known]
    if bad or not chosen:
        raise UsageError(f"unknown method(s) {', '.join(bad) or '(none)'}; choose from {', '.join(known)}")
    return chosen


# --------------------------------------------------------------------------- agreement

@cli.command("agreement", context_settings=CONTEXT_SETTINGS)
@click.argument("human", metavar="HUMAN")
@click.argument("llm", metavar="LLM")
@click.option("--human-min", type=int, default=1, show_default=True, metavar="L",
              help="Human label >= L is relevant (TREC DL: 2).")
@click.option("--llm-min", type=int, default=1, show_default=True, metavar="G",
              help="LLM label >= G is relevant (EXAM++ self-ratings: 4 strict, 1 lenient).")
@click.option("--assessor-min", type=int, default=None, metavar="G",
              help="LLM is a second assessor's qrels, relevant at label >= G: the report names that side "
                   "'assessor' and leaves out the LLM self-rating tables (instead of --llm-min).")
@click.option("--per-topic", is_flag=True, help="Also print the kappa of every topic.")
@grader_options
@output_option
def agreement_cmd(human, llm, human_min, llm_min, assessor_min, per_topic, model, prompt, kind, output):
    """Agreement of LLM labels with human judgments, on the pairs the human judged.

    HUMAN is a qrels file or an ir_datasets ID (e.g. msmarco-passage/trec-dl-2019/judged);
    LLM is a qrels file or a grades file (label = maximum grade over the query's bank
    items). Prints Cohen's kappa of the two binary
    decisions (pooled and mean over topics), unweighted, linear and quadratic
    weighted kappa on the graded labels, counts of what did not join, the binary
    confusion matrix, the graded table, and the papers' LENIENT (LLM >= 1) and
    STRICT (LLM >= 4) tables.

    \b
    Examples:
      exam-correlate agreement qrels.txt llm.qrels --human-min 2
      exam-correlate agreement qrels.txt grades.jsonl.gz --human-min 2 --llm-min 4 --per-topic
    """
    from ..stats.agreement import agreement, render_agreement

    if assessor_min is not None:
        refuse_given(click.get_current_context(), ("llm_min",), "and --assessor-min: give the threshold once")
    other = "LLM" if assessor_min is None else "assessor"
    h = read_human_qrels(human)
    l_ = read_llm_qrels(llm, model, prompt, kind, _info)
    a = agreement(h, l_, human_min, llm_min if assessor_min is None else assessor_min)
    if a.n_pairs == 0:
        raise InputError(f"no judged pair of {display_name(human)} has a label here (different query or "
                         "document ids?)", display_name(llm))
    if a.human_only:
        _info(f"{a.human_only} judged pair(s) of {display_name(human)} have no {other} label (left out)")
    text = render_agreement(a, other)
    if per_topic:
        text += "\n# kappa per topic\n" + "".join(f"{q}\t{_fmt(v)}\n" for q, v in a.topic_kappa.items())
    with atomic_output(output) as out:
        out.write(text)


# --------------------------------------------------------------------------- qrels

SCALE_MAX = 100  # TREC scales are 0..3 to 0..5; 10^4 x 10^4 kappa columns exhaust any memory

@cli.command("qrels", context_settings=CONTEXT_SETTINGS)
@click.argument("truth", metavar="TRUTH")
@click.argument("pred", metavar="PRED")
@click.option("--truth-max", type=int, default=1, show_default=True, metavar="M",
              help="TRUTH's scale is 0..M: labels are clipped to it (TREC DL: 3).")
@click.option("--pred-max", type=int, default=1, show_default=True, metavar="M",
              help="PRED's scale is 0..M (EXAM++ self-ratings: 5).")
@click.option("--truth-min", type=int, default=1, show_default=True, metavar="L",
              help="TRUTH label >= L is relevant (precision, recall, F1, Jaccard, ARI).")
@click.option("--pred-min", type=int, default=1, show_default=True, metavar="G",
              help="PRED label >= G is relevant.")
@click.option("--topics", "topic_policy", type=click.Choice(["union", "shared"]), default="union", show_default=True,
              help="union: a topic only one side has counts, the other side empty (AutoJudge's default); "
                   "shared: only topics both sides have.")
@click.option("-n", "--summary", "summary_only", is_flag=True, help="Only the 'mean' and 'pooled' rows.")
@grader_options
@output_option
def qrels_cmd(truth, pred, truth_max, pred_max, truth_min, pred_min, topic_policy, summary_only,
              model, prompt, kind, output):
    """Predicted qrels against truth qrels, per topic: set overlap and agreement.

    TRUTH is a qrels file or an ir_datasets ID; PRED is a qrels file or a grades
    file (label = maximum grade over the query's bank items). Per topic, over the
    documents either side
    lists (a missing one has label 0 there): precision, recall, F1, tp/fp/fn and
    Jaccard of PRED's relevant set against TRUTH's, Cohen's kappa of the binary
    decisions at every pair of thresholds (kappa@AvB: TRUTH >= A, PRED >= B),
    linear-weighted kappa and Krippendorff's alpha (ordinal) on the clipped labels
    (same scale only), and the adjusted Rand index; as the TREC AutoJudge
    evaluator's qrel-evaluate computes them. Then a 'mean' row (mean over topics)
    and a 'pooled' row (all topic-document units at once). Output: TSV.

    \b
    Examples:
      exam-correlate qrels truth.qrels judge.qrels
      exam-correlate qrels qrels.txt llm.qrels --truth-max 3 --truth-min 2 --pred-max 5 --pred-min 4
      exam-correlate qrels qrels.txt exam.qrels --truth-max 3 --pred-max 3 -n
    """
    from ..stats.qrels_compare import Scale, compare_qrels, render

    for side, lo, hi in (("truth", truth_min, truth_max), ("pred", pred_min, pred_max)):
        if hi < 1:
            raise UsageError(f"--{side}-max must be at least 1")
        if hi > SCALE_MAX:  # one kappa@AvB column per pair of thresholds: M x M columns
            raise UsageError(f"--{side}-max must be at most {SCALE_MAX}")
        if not 1 <= lo <= hi:
            raise UsageError(f"--{side}-min must be between 1 and --{side}-max ({hi})")
    t = read_human_qrels(truth)  # truth qrels resolve as human judgments do
    p = read_llm_qrels(pred, model, prompt, kind, _info)
    only_t, only_p = sorted(set(t) - set(p)), sorted(set(p) - set(t))
    for names, where in ((only_t, truth), (only_p, pred)):
        if names:
            what = "counted with the other side empty" if topic_policy == "union" else "left out"
            _info(f"{len(names)} topic(s) only in {display_name(where)} ({what}): {', '.join(names)}")
    topics = sorted(set(t) | set(p)) if topic_policy == "union" else sorted(set(t) & set(p))
    if not topics:
        raise InputError(f"no topic in common with {display_name(truth)}", display_name(pred))
    scale = Scale(truth_max=truth_max, pred_max=pred_max, truth_min=truth_min, pred_min=pred_min)
    if truth_max != pred_max:
        _info(f"scales differ (0..{truth_max} vs 0..{pred_max}): kappa_w and kripp_alpha are nan "
              "(give the same --truth-max and --pred-max to compare graded labels)")
    rows = compare_qrels(t, p, topics, scale)
    if summary_only:
        rows = rows[-2:]
    with atomic_output(output) as out:
        out.write(render(rows, scale))


# --------------------------------------------------------------------------- interval

@cli.command("interval", context_settings=CONTEXT_SETTINGS)
@click.argument("human", metavar="HUMAN")
@click.argument("llm", metavar="LLM")
@click.argument("runs", metavar="RUN...", nargs=-1, required=True)
@_metric_options("dcg@10")
@_label_options
@click.option("--samples", type=int, default=10000, show_default=True, metavar="M",
              help="Bootstrap samples (empirical bootstrap, and CRC's calibration batches).")
@click.option("--methods", default="bootstrap,ppi,ppi_tuned,crc", show_default=True, metavar="LIST",
              help="Comma-separated subset of bootstrap, ppi, ppi_tuned, crc.")
@click.option("--crc-correction", type=click.Choice(["paper", "crc"]), default="paper", show_default=True,
              help="paper: the CI paper's Eq. 24 threshold (alpha - (1-alpha)/M)/2 per bound; crc: "
                   "alpha/2 - (1-alpha/2)/M per bound (conformal risk control's own bound, stricter).")
@click.option("-q", "per_query", is_flag=True, help="Per-query CRC intervals instead of dataset-level ones.")
@grader_options
@output_option
def interval_cmd(human, llm, runs, metric, rel_level, min_grade, labelled_file, n_labelled, alpha, seed, mapping,
                 samples, methods, crc_correction, per_query, model, prompt, kind, output):
    """Confidence intervals for each RUN's mean metric over the LLM-labelled queries.

    HUMAN: qrels or an ir_datasets ID (only the labelled queries' judgments are used);
    LLM: qrels or a grades file (with 'probs', each passage gets a label distribution).
    For exam-cover both are grades files (HUMAN: human or human-verified grades).
    Without --labelled / --n-labelled every query that HUMAN judges is labelled.
    Methods: empirical bootstrap (human labels only), PPI (plain, lambda = 1) and
    power-tuned PPI, CRC (degree shift of each passage's label distribution,
    calibrated on bootstrap batches of the labelled queries). Output: TSV 'run
    metric method lower estimate upper width llm_mean': estimate is each method's
    point estimate (CRC: the metric at the middle of its two calibrated shifts; the
    basic bootstrap's interval can miss its mean when few queries make it skewed);
    llm_mean is the unshifted mean of the LLM-predicted metric.
    Intervals are clipped to the metric's range (nDCG, P, exam-cover: [0, 1]; DCG@K:
    [0, top label x sum of the K rank discounts]). A method that fails is reported on
    stderr and the others are still printed (exit 3). With -q, per-query CRC intervals.

    \b
    Examples:
      exam-correlate interval qrels.txt llm.qrels runs/*.run --n-labelled 30 --seed 7
      exam-correlate interval qrels.txt grades.jsonl.gz run.txt -m ndcg@10 --labelled labelled.txt
      exam-correlate interval qrels.txt llm.qrels run.txt -q --n-labelled 30 > per-query.tsv
      exam-correlate interval human-grades.jsonl grades.jsonl.gz run.txt -m exam-cover@20
    """
    from ..stats.crc import CoverageError
    from ..stats.interval_table import interval_rows
    from ..stats.intervals import METHODS

    if not 0 < alpha < 1:
        raise UsageError("--alpha must be between 0 and 1")
    if samples < 100:
        raise UsageError("--samples must be at least 100")
    chosen = _methods(methods, METHODS)
    _check_interval_methods(click.get_current_context(), chosen, per_query, metric)
    # the shared bar, once the inputs are read: rich's own Progress around the reading left a
    # blank line on a stderr that is no terminal, before a refused input's line
    table = interval_rows(human, llm, runs, metric=metric, rel_level=rel_level, min_grade=min_grade,
                          labelled_file=labelled_file, n_labelled=n_labelled, alpha=alpha, samples=samples,
                          seed=seed, mapping=mapping, chosen=chosen, crc_correction=crc_correction,
                          per_query=per_query, model=model, prompt=prompt, kind=kind, log=_info,
                          progress=lambda n: progress_bar(n, "intervals", "runs"))
    if table.failed and not table.rows:  # one line, not one per run and method before it
        raise CoverageError(f"every method failed ({len(table.failed)} intervals); first: {table.first_error}")
    for note in table.failure_notes:
        _info(note)
    with atomic_output(output) as out:
        out.write(table.header + "\n")
        for row in table.rows:
            out.write(row + "\n")
    if table.failed:
        _info(f"partial results: {len(table.failed)} interval(s) could not be computed ({', '.join(table.failed)})")
        return 3
    return 0



# --------------------------------------------------------------------------- compare

@cli.command("compare", context_settings=CONTEXT_SETTINGS)
@click.argument("human", metavar="HUMAN")
@click.argument("inputs", metavar="[LLM] RUN...", nargs=-1, required=True)
@_metric_options("ndcg@10")
@click.option("--baseline", default=None, metavar="RUN", help="Compare each other run with RUN only.")
@click.option("--test", type=click.Choice(["t", "randomization"]), default="t", show_default=True,
              help="Without LLM labels: paired t-test or paired randomization (sign-flip) test.")
@click.option("--correction", type=click.Choice(["holm", "bonferroni", "none"]), default="holm", show_default=True,
              help="Adjust the p-values for the pairs compared.")
@_label_options
@click.option("--samples", type=int, default=100000, show_default=True, metavar="M",
              help="Randomization test: sign patterns drawn (all 2^n where they are at most M).")
@click.option("--methods", default="ppi,ppi_tuned", show_default=True, metavar="LIST",
              help="With LLM labels: comma-separated subset of ppi, ppi_tuned, t, randomization (t and "
                   "randomization: the labelled queries' human labels alone).")
@click.option("--plot", default=None, metavar="FILE.png|svg", callback=check_output_param,
              help="Also draw the runs by score with their intervals, marking those that do not differ from the "
                   "best (or from --baseline); .svg: SVG, .pdf: PDF, else PNG.")
@grader_options
@output_option
def compare_cmd(human, inputs, metric, rel_level, min_grade, baseline, test, correction, labelled_file, n_labelled,
                alpha, seed, mapping, samples, methods, plot, model, prompt, kind, output):
    """Which runs differ: paired tests of every pair of RUNs (or each against --baseline).

    HUMAN: qrels or an ir_datasets ID; per-query values over the queries it judges (a run
    missing one scores 0, as trec_eval -c). With --labelled or --n-labelled the next argument
    is LLM (qrels or grades), and PPI combines the labelled queries' human differences with
    the LLM-predicted ones. Output: TSV (see exam-correlate(1)); 'K of M pairs differ' on stderr.

    \b
    Examples:
      exam-correlate compare qrels.txt runs/*.run > differences.tsv
      exam-correlate compare qrels.txt runs/*.run --baseline bm25 --test randomization --plot runs.png
      exam-correlate compare qrels.txt llm.qrels runs/*.run --n-labelled 20 --seed 1
    """
    from ..stats.compare_table import HEADER, METHODS, compare_rows

    ctx = click.get_current_context()
    llm, runs = (inputs[0], inputs[1:]) if labelled_file or n_labelled is not None else (None, inputs)
    _check_metric_flags(ctx, metric)
    if llm is not None:
        refuse_given(ctx, ("test",), "applies without LLM labels; with them, name t or randomization in --methods")
        chosen = _methods(methods, METHODS)
    else:
        refuse_given(ctx, ("methods", "mapping", "model", "prompt", "kind"),
                     "applies to LLM labels, which only --labelled or --n-labelled bring in")
        chosen = [test]
    if "randomization" not in chosen:
        refuse_given(ctx, ("samples",), "applies to the randomization test, which is not run")
    if samples < 100:
        raise UsageError("--samples must be at least 100")
    table = compare_rows(human, llm, list(run_names(runs)), metric=metric, rel_level=rel_level,
                         min_grade=min_grade, labelled_file=labelled_file, n_labelled=n_labelled, alpha=alpha,
                         samples=samples, seed=seed, mapping=mapping, methods=chosen, correction=correction,
                         baseline=baseline, model=model, prompt=prompt, kind=kind, log=_info)
    with atomic_output(output) as out:
        out.write("\t".join(HEADER) + "\n" + "".join("\t".join(row) + "\n" for row in table.rows))
    if plot:
        compare_plot(plot, table.scores, f"{table.metric}, {table.scores.method} ({correction}), alpha {alpha:g}")
    for line in table.summaries:
        _info(line)

main = make_main(cli, PROG)

if __name__ == "__main__":
    main()
