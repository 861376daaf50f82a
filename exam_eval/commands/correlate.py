"""exam-correlate: how far an automatic leaderboard or LLM labels can be trusted.

Four subcommands: ``leaderboard`` (rank correlation of leaderboards, in TSV, tot,
ir_measures or trec_eval shape, with the TREC AutoJudge meta-evaluation's
coefficients), ``qrels`` (predicted vs truth qrels: set overlap, kappa, Krippendorff's
alpha, as AutoJudge's qrel-evaluate), ``agreement`` (Cohen's kappa of LLM labels
against human judgments) and ``interval``
(confidence intervals for a run's metric from a few human-labelled queries plus LLM
labels on all queries: empirical bootstrap, PPI, CRC).
"""

from __future__ import annotations

import math
import os
import random

import click

from ..errors import InputError, UsageError
from ..io.openers import atomic_output, display_name, iter_lines
from ..io.leaderboard import FORMATS as LEADERBOARD_FORMATS
from ..io.trec import Qrels, read_qrels, read_run, run_name
from ._base import CONTEXT_SETTINGS, grader_options, make_main, output_option

PROG = "exam-correlate"


def _info(msg: str) -> None:
    click.echo(f"{PROG}: {msg}", err=True)


def _fmt(v: float) -> str:
    return "nan" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"


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

def _is_rank(column: str) -> bool:
    return "rank" in column.lower()


def _pick_column(board, path: str, wanted: str | None, prefer_rank: bool) -> str:
    if wanted is not None:
        if wanted not in board.columns:
            raise UsageError(f"{display_name(path)} has no column {wanted!r}; columns: {', '.join(board.columns)}")
        return wanted
    numeric = [c for c in board.columns if board.column(c)]
    if prefer_rank and "official_rank" in numeric:
        return "official_rank"
    for c in numeric:
        if not _is_rank(c):
            return c
    if numeric:
        return numeric[0]
    raise InputError("no column with values", display_name(path))


def _pick_columns(board, path: str, wanted: tuple[str, ...], prefer_rank: bool) -> list[str]:
    """The measures asked for; by default every measure of a per-topic leaderboard, one
    column (see _pick_column) of a TSV one."""
    if wanted:
        return [_pick_column(board, path, w, prefer_rank) for w in dict.fromkeys(wanted)]
    if board.format != "tsv":
        return list(board.columns)
    return [_pick_column(board, path, None, prefer_rank)]


def _read_board(path: str, fmt: str, aggregate: str):
    from ..io.leaderboard import read_leaderboard

    board = read_leaderboard(path, fmt)
    if board.format != "tsv" and (fmt == "auto" or board.computed):
        note = f" (no 'all' rows for {', '.join(board.computed)}: mean over topics)" if board.computed else ""
        _info(f"{display_name(path)}: {board.format} leaderboard, {len(board.rows)} run(s){note}")
    if aggregate == "mean":
        if board.format == "tsv":
            raise UsageError(f"--aggregate mean needs per-topic values; {display_name(path)} is a TSV leaderboard")
        board = board.recomputed(source=display_name(path))
    return board


def _signed(board, col: str, values: dict[str, float]) -> dict[str, float]:
    # only TSV columns follow the 'rank' naming rule; long-shape measures are taken as they are
    if board.format == "tsv" and _is_rank(col):
        return {k: -v for k, v in values.items()}
    return values


def _check_systems(tvals, pvals, tb, pb, tcol, pcol, truth, pred, strict) -> None:
    for board, col, path in ((tb, tcol, truth), (pb, pcol, pred)):
        empty = [r for r in board.rows if board.rows[r].get(col) is None]
        if empty:
            _info(f"{display_name(path)}: no {col} value, left out: {', '.join(sorted(empty))}")
    # a system listed in both files but without a value in one column was reported above
    only_t = sorted(set(tvals) - set(pb.rows))
    only_p = sorted(set(pvals) - set(tb.rows))
    for names, where, other in ((only_t, truth, pred), (only_p, pred, truth)):
        if names:
            msg = f"{len(names)} system(s) of {display_name(where)} not in {display_name(other)}: {', '.join(names)}"
            if strict:
                raise InputError(msg, display_name(where))
            _info(msg + " (left out)")


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
@click.option("--plot", "plot", default=None, metavar="FILE.png",
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
    from ..stats.correlation import correlate, keys

    if any(k < 3 for k in top_k):
        raise UsageError("--top-k must be at least 3 (a correlation over fewer systems says nothing)")
    top_k = tuple(dict.fromkeys(top_k))
    tb = _read_board(truth, truth_format, aggregate)
    tcols = _pick_columns(tb, truth, truth_columns, prefer_rank=True)
    pboards = [(p, _read_board(p, pred_format, aggregate)) for p in preds]
    pairs = [(p, pb, tcol, pcol) for p, pb in pboards for tcol in tcols
             for pcol in _pick_columns(pb, p, pred_columns, prefer_rank=False)]
    if (per_topic or shared_topics) and tb.format == "tsv":
        raise UsageError(f"--per-topic/--shared-topics need per-topic values; {display_name(truth)} is a TSV leaderboard")
    for p, pb in pboards:
        if (per_topic or shared_topics) and pb.format == "tsv":
            raise UsageError(f"--per-topic/--shared-topics need per-topic values; {display_name(p)} is a TSV leaderboard")
    single = len(pairs) == 1 and not per_topic and not table
    if plot and not single:
        raise UsageError("--plot draws one leaderboard pair: give one PRED and one measure on each side")
    names = keys(top_k)

    rows: list[list[str]] = []
    for pred, pb, tcol, pcol in pairs:
        t_board, p_board = tb, pb
        if shared_topics:
            common = tb.topic_ids(tcol) & pb.topic_ids(pcol)
            if not common:
                raise InputError(f"no topic of {tcol} in {display_name(truth)} has {pcol} values", display_name(pred))
            _info(f"{tcol} vs {pcol}: means over the {len(common)} topic(s) in both")
            t_board = tb.recomputed(common, display_name(truth))
            p_board = pb.recomputed(common, display_name(pred))
        tvals, pvals = t_board.column(tcol), p_board.column(pcol)
        if len(pairs) <= 4:  # with every measure of big leaderboards, one line per pair is noise
            for side, board, path, col in (("truth", tb, truth, tcol), ("pred", pb, pred, pcol)):
                rank = " (rank: lower is better)" if board.format == "tsv" and _is_rank(col) else ""
                _info(f"{side}: {display_name(path)} column {col}{rank}")
        _check_systems(tvals, pvals, t_board, p_board, tcol, pcol, truth, pred, strict)
        t, pv = _signed(tb, tcol, tvals), _signed(pb, pcol, pvals)
        result = correlate(t, pv, top_k)
        if result["n"] < 3:
            raise InputError(f"only {result['n']} system(s) in common with {display_name(truth)}; "
                             "need at least 3 for a correlation", display_name(pred))
        if single:
            with atomic_output(output) as out:
                for k in names:
                    out.write(f"{k}\t{result[k] if k == 'n' else _fmt(result[k])}\n")
            if plot:
                _scatter(plot, tvals, pvals, tcol, pcol, result, truth, pred)
            return
        lead = [display_name(pred), tcol, pcol]
        if not per_topic:
            rows.append(lead + [str(result[k]) if k == "n" else _fmt(result[k]) for k in names])
            continue
        rows.extend(_per_topic_rows(lead, tb.per_topic(tcol), pb.per_topic(pcol), top_k, names))
    if len(pairs) > 4:
        _info(f"{len(pairs)} measure pair(s) of {display_name(truth)} and {len(preds)} leaderboard(s)")
    if not rows:
        raise InputError("no measure pair has a topic with 3 systems in common", display_name(preds[0]))
    header = ["pred", "truth_measure", "pred_measure"] + (["topic"] if per_topic else []) + list(names)
    with atomic_output(output) as out:
        out.write("\t".join(header) + "\n")
        for row in rows:
            out.write("\t".join(row) + "\n")


def _per_topic_rows(lead, truth_topics, pred_topics, top_k, names) -> list[list[str]]:
    """One row per topic in both, then 'mean' (of each coefficient where defined)."""
    from ..stats.correlation import correlate

    rows, results, skipped = [], [], []
    for topic in sorted(set(truth_topics) & set(pred_topics)):
        r = correlate(truth_topics[topic], pred_topics[topic], top_k)
        if r["n"] < 3:
            skipped.append(topic)
            continue
        results.append(r)
        rows.append(lead + [topic] + [str(r[k]) if k == "n" else _fmt(r[k]) for k in names])
    if skipped and results:
        _info(f"{lead[1]} vs {lead[2]}: {len(skipped)} topic(s) with fewer than 3 systems in common left out: "
              + ", ".join(skipped))
    if not results:
        _info(f"{lead[0]}: {lead[1]} vs {lead[2]}: no topic has 3 systems in common (pair left out)")
        return []
    mean = []
    for k in names:
        if k == "n":
            mean.append(str(len(results)))
            continue
        vals = [r[k] for r in results if not math.isnan(r[k])]
        mean.append(_fmt(sum(vals) / len(vals)) if vals else "nan")
    rows.append(lead + ["mean"] + mean)
    return rows


def _scatter(path, tvals, pvals, tcol, pcol, result, truth, pred) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted(set(tvals) & set(pvals))
    fig, ax = plt.subplots(figsize=(8, 6))
    xs, ys = [tvals[n] for n in names], [pvals[n] for n in names]
    ax.scatter(xs, ys, s=18)
    for n, x, y in zip(names, xs, ys):
        ax.annotate(n, (x, y), fontsize=6, xytext=(3, 2), textcoords="offset points")
    if _is_rank(tcol):
        ax.invert_xaxis()
    if _is_rank(pcol):
        ax.invert_yaxis()
    ax.set_xlabel(f"{os.path.basename(display_name(truth))}: {tcol}")
    ax.set_ylabel(f"{os.path.basename(display_name(pred))}: {pcol}")
    ax.set_title(f"Spearman {_fmt(result['spearman'])}, Kendall tau-b {_fmt(result['kendall_tau_b'])}, "
                 f"tau-AP {_fmt(result['tau_ap'])} (n={result['n']})", fontsize=10)
    fig.tight_layout()
    with atomic_output(path, binary=True) as out:
        fig.savefig(out, format="png", dpi=150)
    plt.close(fig)


# --------------------------------------------------------------------------- LLM labels

def _looks_like_grades(path: str) -> bool:
    """Grades files are JSON lines; qrels are whitespace-separated columns."""
    for _, line in iter_lines(path):
        if line.strip():
            return line.lstrip()[:1] in "{["
    return False


def _read_llm_qrels(path: str, model, prompt, kind) -> Qrels:
    if not _looks_like_grades(path):
        return read_qrels(path)
    from ..io.grades import read_grades
    from ..measures.exam_qrels import LabelStats, grades_to_qrels

    stats = LabelStats()
    qrels = grades_to_qrels(read_grades(path, model=model, prompt=prompt, kind=kind), label="max", stats=stats)
    if stats.unlabelled or stats.unparsed_grades:
        _info(f"{display_name(path)}: {stats.unparsed_grades} unparsed grade(s) ignored; "
              f"{stats.unlabelled} passage(s) without any parsed grade left unlabelled")
    if not qrels:
        raise InputError("no passage has a parsed grade", display_name(path))
    return qrels


def _read_llm_dists(path: str, model, prompt, kind):
    from ..stats import labels

    if not _looks_like_grades(path):
        return labels.from_qrels(read_qrels(path)), False
    from ..io.grades import read_grades

    grades = read_grades(path, model=model, prompt=prompt, kind=kind)
    has_probs = any(g.probs for g in grades)
    dists, unparsed = labels.from_grades(grades, display_name(path))
    if unparsed:
        _info(f"{display_name(path)}: {unparsed} unparsed grade(s) ignored")
    return dists, has_probs


def _read_human_qrels(spec: str) -> Qrels:
    """Human judgments: a qrels file or an ir_datasets ID, resolved as exam-qrels does
    (an existing path first, then an ID)."""
    if spec == "-":
        return read_qrels(spec)
    from ..io.irds import irds_qrels
    from ..io.labels import sniff_labels

    what = sniff_labels(spec)
    if what == "irds":
        return irds_qrels(spec)
    if what == "grades":
        raise InputError("human judgments must be a qrels file or an ir_datasets ID, not grades", display_name(spec))
    return read_qrels(spec)


# --------------------------------------------------------------------------- agreement

@cli.command("agreement", context_settings=CONTEXT_SETTINGS)
@click.argument("human", metavar="HUMAN")
@click.argument("llm", metavar="LLM")
@click.option("--human-min", type=int, default=1, show_default=True, metavar="L",
              help="Human label >= L is relevant (TREC DL: 2).")
@click.option("--llm-min", type=int, default=1, show_default=True, metavar="G",
              help="LLM label >= G is relevant (EXAM++ self-ratings: 4 strict, 1 lenient).")
@click.option("--per-topic", is_flag=True, help="Also print the kappa of every topic.")
@grader_options
@output_option
def agreement_cmd(human, llm, human_min, llm_min, per_topic, model, prompt, kind, output):
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

    h = _read_human_qrels(human)
    l_ = _read_llm_qrels(llm, model, prompt, kind)
    a = agreement(h, l_, human_min, llm_min)
    if a.n_pairs == 0:
        raise InputError(f"no judged pair of {display_name(human)} has a label here (different query or "
                         "document ids?)", display_name(llm))
    if a.human_only:
        _info(f"{a.human_only} judged pair(s) of {display_name(human)} have no LLM label (left out)")
    text = render_agreement(a)
    if per_topic:
        text += "\n# kappa per topic\n" + "".join(f"{q}\t{_fmt(v)}\n" for q, v in a.topic_kappa.items())
    with atomic_output(output) as out:
        out.write(text)


# --------------------------------------------------------------------------- qrels

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
        if not 1 <= lo <= hi:
            raise UsageError(f"--{side}-min must be between 1 and --{side}-max ({hi})")
    t = _read_human_qrels(truth)  # truth qrels resolve as human judgments do
    p = _read_llm_qrels(pred, model, prompt, kind)
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

def _read_labelled(path: str, allowed: set[str]) -> list[str]:
    name = display_name(path)
    out: list[str] = []
    seen: set[str] = set()
    for lineno, line in iter_lines(path):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        qid = fields[0]
        if qid not in allowed:
            raise InputError(f"query {qid} has no human judgments or no LLM labels", name, lineno)
        if qid not in seen:
            seen.add(qid)
            out.append(qid)
    if not out:
        raise InputError("no query ids", name)
    return out


class _RankMetricSource:
    """Human qrels and LLM label distributions for dcg/ndcg/p."""

    def __init__(self, human, llm, metric, rel_level, model, prompt, kind):
        from ..stats.metrics import parse_metric

        self.metric = parse_metric(metric, rel_level)
        self.name = self.metric.name
        self.human = _read_human_qrels(human)
        self.dists, self.has_probs = _read_llm_dists(llm, model, prompt, kind)
        self.llm_queries = set(self.dists.dists)
        self.human_queries = set(self.human)

    def prepare(self, labelled, mapping):
        from ..stats import labels as labelmod

        if mapping == "calibrated":
            self.dists = labelmod.calibrated(self.dists, self.human, labelled)
        elif not self.has_probs:
            _warn_one_hot()

    def value_range(self) -> tuple[float, float]:
        from ..stats.metrics import value_range

        top = max((max(docs.values()) for docs in self.human.values() if docs), default=0)
        return value_range(self.metric, top)

    def build(self, run, queries, labelled):
        from ..stats.intervals import human_values
        from ..stats.predicted import PredictedMetric

        return (PredictedMetric(self.metric, run, self.dists, queries),
                human_values(self.metric, run, self.human, labelled))


class _CoverSource:
    """Human grades and LLM grades for EXAM-Cover@k."""

    def __init__(self, human, llm, k, min_grade, model, prompt, kind):
        from ..io.grades import read_grades

        for path, side in ((human, "HUMAN"), (llm, "LLM")):
            if not _looks_like_grades(path):
                raise UsageError(f"exam-cover needs grades on both sides; {side} {display_name(path)} "
                                 "looks like a qrels file")
        self.k, self.min_grade = k, min_grade
        self.name = f"exam-cover@{k}"
        self.human_grades = read_grades(human)
        self.llm_grades = read_grades(llm, model=model, prompt=prompt, kind=kind)
        self.llm_source = display_name(llm)
        self.has_probs = any(g.probs for g in self.llm_grades)
        self.llm_queries = {g.query_id for g in self.llm_grades if g.item_id is not None}
        self.human_queries = {g.query_id for g in self.human_grades if g.item_id is not None}
        if not self.llm_queries:
            raise InputError("no grades of bank items (only direct relevance grades?)", self.llm_source)

    def prepare(self, labelled, mapping):
        from ..measures.cover import build_index
        from ..stats.cover_predicted import AnswerProbs, calibrate_answers

        table = None
        if mapping == "calibrated":
            table = calibrate_answers(self.llm_grades, self.human_grades, labelled, self.min_grade,
                                      self.llm_source)
        elif not self.has_probs:
            _warn_one_hot()
        self.answers = AnswerProbs.from_grades(self.llm_grades, self.min_grade, self.llm_source, table)
        self.index = build_index(self.human_grades, self.min_grade)

    def value_range(self) -> tuple[float, float]:
        return 0.0, 1.0

    def build(self, run, queries, labelled):
        import numpy as np

        from ..measures.cover import exam_cover
        from ..stats.cover_predicted import PredictedCover

        human = exam_cover(self.index, run, self.k, complete=True).per_query
        return (PredictedCover(self.answers, run, queries, self.k),
                np.array([human[q][0] for q in labelled]))


def _warn_one_hot() -> None:
    _info("warning: hard LLM labels with --mapping identity: every label distribution is one-hot, so "
          "CRC's degree shift cannot move them and its interval collapses; use --mapping calibrated")


def _cover_k(metric: str) -> int | None:
    m = metric.strip().lower().replace("_", "-")
    if m == "exam-cover":
        return 20
    if m.startswith("exam-cover@") and m[len("exam-cover@"):].isdigit() and int(m[len("exam-cover@"):]) > 0:
        return int(m[len("exam-cover@"):])
    return None


@cli.command("interval", context_settings=CONTEXT_SETTINGS)
@click.argument("human", metavar="HUMAN")
@click.argument("llm", metavar="LLM")
@click.argument("runs", metavar="RUN...", nargs=-1, required=True)
@click.option("-m", "--metric", default="dcg@10", show_default=True, metavar="M",
              help="dcg@K, ndcg@K, p@K (labels >= --rel-level), or exam-cover@K (default K 20; HUMAN and "
                   "LLM are then grades files).")
@click.option("-l", "--rel-level", type=int, default=1, show_default=True, metavar="L",
              help="Relevance level for p@K (as trec_eval -l).")
@click.option("--min-grade", type=int, default=4, show_default=True, metavar="TAU",
              help="exam-cover: a grade >= TAU answers the item (as exam-cover --min-grade).")
@click.option("--labelled", "labelled_file", default=None, metavar="FILE",
              help="Queries whose human judgments may be used (one query id per line).")
@click.option("--n-labelled", type=int, default=None, metavar="N",
              help="Use human judgments of N random judged queries (seeded by --seed).")
@click.option("--alpha", type=float, default=0.05, show_default=True, help="1 - alpha is the coverage.")
@click.option("--samples", type=int, default=10000, show_default=True, metavar="M",
              help="Bootstrap samples (empirical bootstrap, and CRC's calibration batches).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every random choice.")
@click.option("--mapping", type=click.Choice(["calibrated", "identity"]), default="calibrated", show_default=True,
              help="calibrated: LLM labels -> P(human label | LLM label) counted on the labelled "
                   "queries; identity: LLM labels are on the human scale already.")
@click.option("--methods", default="bootstrap,ppi,ppi_tuned,crc", show_default=True, metavar="LIST",
              help="Comma-separated subset of bootstrap, ppi, ppi_tuned, crc.")
@click.option("--crc-correction", type=click.Choice(["paper", "crc"]), default="paper", show_default=True,
              help="paper: the CI paper's Eq. 24 threshold (alpha - (1-alpha)/M)/2 per bound; crc: "
                   "alpha/2 - (1-alpha/2)/M per bound (conformal risk control's own bound, stricter).")
@click.option("-q", "per_query", is_flag=True, help="Per-query CRC intervals instead of dataset-level ones.")
@grader_options
@output_option
def interval_cmd(human, llm, runs, metric, rel_level, min_grade, labelled_file, n_labelled, alpha, samples, seed,
                 mapping, methods, crc_correction, per_query, model, prompt, kind, output):
    """Confidence intervals for each RUN's mean metric over the LLM-labelled queries.

    HUMAN: qrels or an ir_datasets ID (only the labelled queries' judgments are used);
    LLM: qrels or a grades file (with 'probs', each passage gets a label distribution).
    For exam-cover both are grades files (HUMAN: human or human-verified grades).
    Without --labelled / --n-labelled every query that HUMAN judges is labelled.
    Methods: empirical bootstrap (human labels only), PPI (plain, lambda = 1) and
    power-tuned PPI, CRC (degree shift of each passage's label distribution,
    calibrated on bootstrap batches of the labelled queries). Output: TSV 'run
    metric method lower estimate upper width llm_mean': estimate is each method's
    point estimate and lies inside its interval (CRC: the metric at the middle of its
    two calibrated shifts); llm_mean is the unshifted mean of the LLM-predicted metric.
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
    from rich.console import Console
    from rich.progress import Progress

    from ..stats.crc import CoverageError, min_labelled_per_query
    from ..stats.intervals import METHODS, compute_intervals, compute_per_query

    if not 0 < alpha < 1:
        raise UsageError("--alpha must be between 0 and 1")
    if samples < 100:
        raise UsageError("--samples must be at least 100")
    chosen = [m.strip() for m in methods.split(",") if m.strip()]
    bad = [m for m in chosen if m not in METHODS]
    if bad or not chosen:
        raise UsageError(f"unknown method(s) {', '.join(bad) or '(none)'}; choose from {', '.join(METHODS)}")
    if labelled_file and n_labelled is not None:
        raise UsageError("give --labelled or --n-labelled, not both")
    k = _cover_k(metric)
    if k is None:
        source = _RankMetricSource(human, llm, metric, rel_level, model, prompt, kind)
    else:
        source = _CoverSource(human, llm, k, min_grade, model, prompt, kind)

    run_data = [(run_name(p), read_run(p)) for p in runs]
    names = [n for n, _ in run_data]
    if len(set(names)) != len(names):
        raise UsageError("two runs have the same name: " + ", ".join(sorted({n for n in names if names.count(n) > 1})))

    queries = sorted(source.llm_queries)
    judged = sorted(set(queries) & source.human_queries)
    if not judged:
        raise InputError(f"no query of {display_name(human)} has LLM labels", display_name(llm))
    if labelled_file:
        labelled = _read_labelled(labelled_file, set(judged))
    elif n_labelled is not None:
        if not 2 <= n_labelled <= len(judged):
            raise UsageError(f"--n-labelled must be between 2 and {len(judged)} (queries judged and LLM-labelled)")
        labelled = sorted(random.Random(seed).sample(judged, n_labelled))
    else:
        labelled = judged
    for name, run in run_data:
        if not set(run) & set(queries):
            raise InputError(f"run {name} has none of the {len(queries)} LLM-labelled queries", name)

    need = min_labelled_per_query(alpha, crc_correction)
    if per_query and len(labelled) < need:
        raise CoverageError(f"per-query CRC at 1-alpha = {1 - alpha:g} needs at least {need} labelled "
                            f"queries (--crc-correction {crc_correction}), got {len(labelled)}")
    if len(labelled) == len(queries) and any(m.startswith("ppi") for m in chosen):
        chosen = [m for m in chosen if not m.startswith("ppi")]
        _info("every query is labelled, so PPI has no unlabelled queries to use: PPI left out")
        if not chosen:
            raise UsageError("nothing left to compute: PPI needs unlabelled queries (use --labelled/--n-labelled)")

    source.prepare(labelled, mapping)
    _info(f"{len(queries)} queries with LLM labels, {len(labelled)} labelled with human judgments; "
          f"metric {source.name}, 1-alpha = {1 - alpha:g}, mapping {mapping}")
    position = {q: i for i, q in enumerate(queries)}
    import numpy as np
    idx = np.array([position[q] for q in labelled], dtype=np.int64)

    bounds = source.value_range()
    rows: list[str] = []
    failed: list[str] = []
    first_error = None
    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("intervals", total=len(run_data))
        for name, run in run_data:
            predicted, truth = source.build(run, queries, labelled)
            if predicted.unlabelled:
                _info(f"{name}: {predicted.unlabelled} top-ranked passage(s) without LLM label "
                      "(counted as the lowest LLM label / answering nothing)")
            if per_query:
                pq = compute_per_query(predicted, queries, labelled, truth, alpha, crc_correction)
                _info(f"{name}: per-query CRC lambda_low={pq.lam_low:.4f} lambda_high={pq.lam_high:.4f}")
                lower, upper = np.clip(pq.lower, *bounds), np.clip(pq.upper, *bounds)
                for i, q in enumerate(pq.queries):
                    hv = pq.human.get(q)
                    rows.append("\t".join([name, q, "1" if hv is not None else "0", "" if hv is None else _fmt(hv),
                                           _fmt(lower[i]), _fmt(pq.predicted[i]), _fmt(upper[i]),
                                           _fmt(upper[i] - lower[i])]))
            else:
                failures: list = []
                for r in compute_intervals(predicted, idx, truth, alpha, samples, seed, chosen, crc_correction,
                                           bounds, failures):
                    if r.detail:
                        _info(f"{name}: {r.method} {r.detail}")
                    rows.append("\t".join([name, source.name, r.method, _fmt(r.lower), _fmt(r.estimate),
                                           _fmt(r.upper), _fmt(r.width), _fmt(r.llm_mean)]))
                for f in failures:
                    _info(f"{name}: {f.method} failed: {f.reason}")
                    failed.append(f"{name}/{f.method}")
                    first_error = first_error or f.reason
            progress.advance(task)
    if failed and not rows:
        raise CoverageError(f"every method failed; first: {first_error}")
    header = ("run\tquery\tlabelled\thuman\tlower\tpredicted\tupper\twidth" if per_query
              else "run\tmetric\tmethod\tlower\testimate\tupper\twidth\tllm_mean")
    with atomic_output(output) as out:
        out.write(header + "\n")
        for row in rows:
            out.write(row + "\n")
    if failed:
        _info(f"partial results: {len(failed)} interval(s) could not be computed ({', '.join(failed)})")
        return 3
    return 0


main = make_main(cli, PROG)
