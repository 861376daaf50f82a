"""The HTML report: EXAM leaderboards against the official one, per-query cover,
agreement with the human judgments, the spurious and uncovered lists and the bank, in
one self-contained file (inline CSS, figures as data URIs, no scripts, no network).

Numbers come from the project's measures (EXAM-Qrels with trec_eval-identical
evaluation, EXAM-Cover) and statistics (correlation, agreement); this module only
gathers and lays them out.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..errors import InputError, UsageError
from ..grading.grade_files import read_grades
from ..io.grades import Grade
from ..io.leaderboard import read_leaderboard, run_name
from ..measures.exam_cover import build_index, exam_cover, mean_stderr
from ..measures.exam_qrels import grades_to_qrels
from ..trec_eval.evaluate import evaluate
from ..trec_eval.registry import parse_measures
from ..trec_eval.trec_files import Qrels, read_run
from .htmlkit import esc, grade_class, num, page, table
from .plots import heatmap, scatter
from .spurious import SpuriousItem, spurious_items
from .table import check_bank_matches, item_label, load_bank, one_line, passage_texts, GradeTable
from ..measures.grade_labels import read_human_qrels
from .uncovered import UncoveredResult, uncovered_passages


@dataclass
class ReportOptions:
    min_grade: int = 4
    relevant_min: int = 1
    measure: str = "ndcg_cut.10"
    official_column: str | None = None
    depth: int = 20
    top_spurious: int = 5
    title: str = "exam_eval report"
    model: str | None = None
    prompt: str | None = None
    kind: str | None = None


@dataclass
class RunRow:
    run: str
    official: float | None
    official_rank: float | None
    qrels_mean: float
    qrels_se: float
    cover_mean: float
    cover_se: float
    ncover_mean: float | None  # None: no query of the run has a normalized value (exam-cover's "-")
    ncover_se: float | None
    queries: int


@dataclass
class ReportData:
    opts: ReportOptions
    inputs: dict[str, str]
    grader: tuple[str, str]
    n_grades: int
    n_unparsed: int
    measure_name: str
    official_source: str
    rows: list[RunRow]
    correlations: dict[str, dict]
    per_query_cover: dict[str, dict[str, float]]       # run -> qid -> cover
    cover_items: dict[str, tuple[int, int]]             # qid -> (items, answerable)
    agreement: object
    spurious: list[SpuriousItem]
    uncovered: UncoveredResult
    bank_counts: dict[str, list[SpuriousItem]]          # qid -> every item with its counts
    ungraded_bank_items: dict[str, list[str]]
    bank: dict
    texts: dict
    human: Qrels
    warnings: list[str] = field(default_factory=list)


def _single_value_name(requests) -> str:
    names = [n for r in requests for n in r.names]
    if len(names) != 1:
        raise UsageError(f"--measure must name one value (e.g. ndcg_cut.10, P.10, map), got {', '.join(names)}")
    return names[0]


def compute(grades_path: str, qrels_path: str, run_paths: Sequence[str], *, official_path: str | None = None,
            bank_path: str | None = None, passages: str | None = None, opts: ReportOptions | None = None,
            progress: Callable[[str], None] | None = None) -> ReportData:
    from ..stats.agreement import agreement  # numpy, scipy: not loaded for exam-verify --help
    from ..stats.correlation import correlate

    opts = opts or ReportOptions()
    step = progress or (lambda _msg: None)
    requests = parse_measures([opts.measure])
    value = _single_value_name(requests)
    if not run_paths:
        raise UsageError("give at least one run file")

    # validate every input before computing anything
    grades: list[Grade] = read_grades(grades_path, model=opts.model, prompt=opts.prompt, kind=opts.kind)
    table_ = GradeTable.from_grades(grades)
    if not table_.by_item:
        raise InputError("no grades of bank items (only direct relevance grades?)", grades_path)
    bank = load_bank(bank_path)
    check_bank_matches(table_, bank, bank_path)
    human = read_human_qrels(qrels_path)
    runs: dict[str, dict] = {}
    for path in run_paths:
        name = run_name(path)
        if name in runs:
            raise UsageError(f"two run files are both named {name!r}; leaderboards need distinct names")
        runs[name] = read_run(path)
    official = None
    official_rank: dict[str, float] = {}
    warnings: list[str] = []
    if official_path:
        lb = read_leaderboard(official_path)
        column = opts.official_column or value
        if column not in lb.columns:
            raise UsageError(f"{official_path} has no column {column!r} (columns: {', '.join(lb.columns)}); "
                             "choose one with --official-column")
        official = lb.column(column)
        if column.endswith("rank"):
            # a rank column: 1 is best, so flip it for "higher is better" correlations
            official = {r: -v for r, v in official.items()}
        if "official_rank" in lb.columns:
            official_rank = lb.column("official_rank")
        source = f"{os.path.basename(official_path)}, column {column}"
        missing = sorted(set(runs) - set(official))
        if missing:
            warnings.append(f"{len(missing)} runs have no official score and are left out of the correlations: "
                            + ", ".join(missing))
    else:
        source = f"{value} on the human qrels ({os.path.basename(qrels_path)}), relevance level {opts.relevant_min}"

    step("EXAM-Qrels")
    exam_qrels = grades_to_qrels(grades, "max")
    bank_items = None
    if bank:
        bank_items = {}
        for item in bank.values():
            bank_items.setdefault(item.query_id, []).append(item.item_id)
    index = build_index(grades, opts.min_grade, bank_items)

    rows: list[RunRow] = []
    per_query_cover: dict[str, dict[str, float]] = {}
    computed_official: dict[str, float] = {}
    for name, run in runs.items():
        step(name)
        ev = evaluate(exam_qrels, run, requests, level=opts.min_grade, run_tag=name)
        pq = [ev.per_query[q][value] for q in ev.per_query]
        cov = exam_cover(index, run, k=opts.depth)
        per_query_cover[name] = {q: c for q, (c, _) in cov.per_query.items()}
        if official is None:
            ev_h = evaluate(human, run, requests, level=opts.relevant_min, run_tag=name)
            computed_official[name] = float(ev_h.summary[value])
        off = (official or computed_official).get(name)
        if official is not None and off is not None and (opts.official_column or value).endswith("rank"):
            off = -off
        rows.append(RunRow(name, off, official_rank.get(name), float(ev.summary[value]), mean_stderr(pq)[1],
                           cov.mean, cov.stderr, cov.n_mean if cov.n_defined else None,
                           cov.n_stderr if cov.n_defined else None, cov.n_queries))
    truth = official if official is not None else computed_official
    qrels_lb = {r.run: r.qrels_mean for r in rows}
    cover_lb = {r.run: r.cover_mean for r in rows}
    ncover_lb = {r.run: r.ncover_mean for r in rows if r.ncover_mean is not None}
    correlations = {
        f"EXAM-Qrels ({value})": correlate(truth, qrels_lb),
        f"EXAM-Cover@{opts.depth}": correlate(truth, cover_lb),
        f"EXAM-Cover@{opts.depth} normalized": correlate(truth, ncover_lb),
    }
    rows.sort(key=lambda r: (r.official is None, -(r.official if r.official is not None else 0.0), r.run))

    step("agreement and oversight lists")
    agr = agreement(human, exam_qrels, human_min=opts.relevant_min, llm_min=opts.min_grade)
    spur = spurious_items(table_, human, min_grade=opts.min_grade, relevant_min=opts.relevant_min,
                          top=opts.top_spurious or None)
    unc = uncovered_passages(table_, human, min_grade=opts.min_grade, relevant_min=opts.relevant_min)
    counts: dict[str, list[SpuriousItem]] = {}
    for s in spurious_items(table_, human, min_grade=opts.min_grade, relevant_min=opts.relevant_min, min_count=0):
        counts.setdefault(s.query_id, []).append(s)
    ungraded_items: dict[str, list[str]] = {}
    for item in bank.values():
        if item.item_id not in table_.by_item.get(item.query_id, {}):
            ungraded_items.setdefault(item.query_id, []).append(item.item_id)
    texts = passage_texts([grades_path], passages, {(p.query_id, p.doc_id) for p in unc.passages})
    grader = grades[0].grader
    cover_items = {q: (len(index.items[q]), len(index.answerable.get(q, ()))) for q in index.items}
    inputs = {"grades": str(grades_path), "human qrels": str(qrels_path), "runs": f"{len(runs)} files",
              "official leaderboard": str(official_path or "(computed from the human qrels)"),
              "bank": str(bank_path or "(none: item ids shown)")}
    return ReportData(opts, inputs, grader, table_.total, table_.unparsed, value, source, rows, correlations,
                      per_query_cover, cover_items, agr, spur, unc, counts, ungraded_items, bank, texts, human,
                      warnings)


# ------------------------------------------------------------------ rendering

def _corr_table(data: ReportData) -> str:
    keys = ("spearman", "kendall_tau_b", "kendall_tau_a", "tau_ap", "pearson", "n")
    rows = []
    for name, c in data.correlations.items():
        rows.append([esc(name)] + [f'<span class="n">{num(c[k]) if k != "n" else c[k]}</span>'
                                   if not (k != "n" and isinstance(c[k], float) and math.isnan(c[k]))
                                   else "&ndash;" for k in keys])
    return table(["leaderboard vs official"] + list(keys), rows)


def _leaderboard_section(data: ReportData) -> str:
    o = data.opts
    plots = []
    pts_q = [(r.run, r.official, r.qrels_mean, r.qrels_se) for r in data.rows if r.official is not None]
    pts_c = [(r.run, r.official, r.cover_mean, r.cover_se) for r in data.rows if r.official is not None]
    label = "official: " + data.official_source
    if pts_q:
        plots.append(scatter(pts_q, label, f"EXAM-Qrels {data.measure_name}",
                             "EXAM-Qrels vs official (error bars: standard error over queries)"))
        plots.append(scatter(pts_c, label, f"EXAM-Cover@{o.depth}",
                             "EXAM-Cover vs official (error bars: EXAM-Cover standard error)"))
    figs = "".join(f'<div class="plot"><img alt="scatter plot" src="{uri}"></div>' for uri in plots)
    rows = []
    for i, r in enumerate(data.rows, 1):
        rows.append([str(i), esc(r.run), num(r.official),
                     "&ndash;" if r.official_rank is None else f"{r.official_rank:g}",
                     f"{num(r.qrels_mean)} &plusmn; {num(r.qrels_se)}",
                     f"{num(r.cover_mean)} &plusmn; {num(r.cover_se)}",
                     "&ndash;" if r.ncover_mean is None else f"{num(r.ncover_mean)} &plusmn; {num(r.ncover_se)}",
                     str(r.queries)])
    lb = table(["#", "run", "official", "official rank", f"EXAM-Qrels {data.measure_name}",
                f"EXAM-Cover@{o.depth}", "normalized cover", "queries"], rows)
    return (f'<h2 id="leaderboards">Leaderboards</h2>'
            f'<p class="small">Official scores: {esc(data.official_source)}. EXAM-Qrels: label = highest grade '
            f"of any item on the passage, evaluated trec_eval-style with relevance level {o.min_grade} "
            f"(gain measures use the grade itself). EXAM-Cover@{o.depth}: fraction of a query's items answered "
            f"with grade &ge; {o.min_grade} by the run's top {o.depth}, mean over the queries the run has "
            "&plusmn; standard error.</p>"
            + _corr_table(data) + f'<div class="plots">{figs}</div>' + lb)


def _cover_section(data: ReportData) -> str:
    runs = [r.run for r in data.rows]
    queries = sorted(data.cover_items)
    rows = []
    rel_count = {q: sum(1 for lab in data.human.get(q, {}).values() if lab >= data.opts.relevant_min)
                 for q in queries}
    unc_count: dict[str, int] = {}
    for p in data.uncovered.passages:
        unc_count[p.query_id] = unc_count.get(p.query_id, 0) + 1
    matrix = []
    for q in queries:
        vals = [data.per_query_cover[r][q] for r in runs if q in data.per_query_cover[r]]
        items, answerable = data.cover_items[q]
        rows.append([esc(q), str(items), str(answerable),
                     num(sum(vals) / len(vals)) if vals else "&ndash;",
                     num(min(vals)) if vals else "&ndash;", num(max(vals)) if vals else "&ndash;",
                     str(len(vals)), str(rel_count[q]), str(unc_count.get(q, 0))])
    for r in runs:
        matrix.append([data.per_query_cover[r].get(q, math.nan) for q in queries])
    fig = heatmap(runs, queries, matrix, f"EXAM-Cover@{data.opts.depth} per run and query", "cover") if runs else ""
    return ('<h2 id="cover">Per-query cover</h2>'
            '<p class="small">items: the query\'s bank items; answerable: items some graded passage answers; '
            "cover statistics over the runs that have the query; relevant: passages judged "
            f"&ge; {data.opts.relevant_min}; uncovered: of those, graded but answering no item.</p>"
            + table(["query", "items", "answerable", "mean cover", "min", "max", "runs", "relevant",
                     "uncovered"], rows)
            + (f'<details><summary>Cover of every run on every query</summary><div class="plot">'
               f'<img alt="cover heatmap" src="{fig}"></div></details>' if fig else ""))


def _binary_rows(t, hm: int) -> list[list[str]]:
    return [[f"LLM &ge; {t.llm_min}", str(t.tp), str(t.fp), str(t.tp + t.fp)],
            [f"LLM &lt; {t.llm_min}", str(t.fn), str(t.tn), str(t.fn + t.tn)]]


def _distinct(*tables):
    """The asked-for threshold is often the papers' strict one: show such a table once."""
    seen, out = set(), []
    for t in tables:
        if t.llm_min not in seen:
            seen.add(t.llm_min)
            out.append(t)
    return out


def _agreement_section(data: ReportData) -> str:
    a = data.agreement
    hm, lm = a.human_min, a.llm_min
    summary = table(None, [[k, v] for k, v in (
        ("pairs (human-judged and graded)", str(a.n_pairs)),
        ("judged, not graded", str(a.human_only)),
        ("graded, not judged", str(a.llm_only)),
        (f"Cohen's kappa (LLM &ge; {lm} vs human &ge; {hm})", num(a.kappa)),
        (f"mean per-topic kappa ({a.n_topics} topics, {a.n_topics_undefined} undefined)", num(a.mean_topic_kappa)),
        ("graded kappa: unweighted / linear / quadratic",
         f"{num(a.kappa_graded)} / {num(a.kappa_linear)} / {num(a.kappa_quadratic)}"),
    )], "kv")
    heads = ["", f"human &ge; {hm}", f"human &lt; {hm}", "total"]
    binary = "".join(
        f"<h3>{esc(t.name)}: LLM label &ge; {t.llm_min} (kappa {num(t.kappa)})</h3>"
        + table([h.replace("&ge;", "\u2265").replace("&lt;", "<") for h in heads], _binary_rows(t, hm))
        for t in _distinct(a.binary, a.lenient, a.strict))
    graded_rows = []
    for i, g in enumerate(a.llm_labels):
        row = a.graded[i]
        graded_rows.append([f'<span class="{grade_class(g, lm)}">{g}</span>', *(str(int(v)) for v in row),
                            str(int(row.sum())), num(a.graded_rows[i].kappa)])
    graded = table(["LLM grade \\ human label", *map(str, a.human_labels), "total",
                    f"kappa of LLM \u2265 row vs human \u2265 {hm}"], graded_rows)
    topics = table(["query", "kappa"], [[esc(q), num(None if math.isnan(k) else k)]
                                        for q, k in sorted(a.topic_kappa.items())])
    return ('<h2 id="agreement">Agreement with the human judgments</h2>'
            f'<p class="small">EXAM label (highest grade) against the human qrels; relevant means human label '
            f"&ge; {hm}. Lenient and strict are the EXAM++ thresholds (grade &ge; 1, &ge; 4).</p>"
            + summary + "<h3>Graded table</h3>" + graded + binary
            + f"<details><summary>Kappa per topic</summary>{topics}</details>")


def _spurious_section(data: ReportData) -> str:
    o = data.opts
    rows = [[esc(s.query_id), esc(item_label(s.item_id, data.bank)), str(s.nonrel_hits), str(s.nonrel_graded),
             str(s.rel_hits), str(s.rel_graded), num(s.precision), f'<span class="small">{esc(s.item_id)}</span>']
            for s in data.spurious]
    return ('<h2 id="spurious">Spurious bank items</h2>'
            f'<p class="small">Items graded &ge; {o.min_grade} on passages judged non-relevant '
            f"(label &lt; {o.relevant_min}), top {o.top_spurious or 'all'} per query: candidates to remove or "
            "reword. <code>exam-verify spurious</code> lists all.</p>"
            + (table(["query", "item", "non-relevant hits", "non-relevant graded", "relevant hits",
                      "relevant graded", "precision", "item id"], rows) if rows else "<p>None.</p>"))


def _uncovered_section(data: ReportData) -> str:
    o = data.opts
    by_q: dict[str, list] = {}
    for p in data.uncovered.passages:
        by_q.setdefault(p.query_id, []).append(p)
    parts = []
    for q, ps in by_q.items():
        rows = [[esc(p.doc_id), str(p.label), "unparsed" if p.max_grade is None else str(p.max_grade),
                 esc(item_label(p.best_item, data.bank)) if p.best_item else "&ndash;",
                 f'<span class="text">{esc(one_line(data.texts.get((q, p.doc_id), "")))}</span>'] for p in ps]
        parts.append(f"<details><summary>query {esc(q)}: {len(ps)} passages</summary>"
                     + table(["doc_id", "judged", "best grade", "for item", "passage"], rows) + "</details>")
    ungraded = sum(len(v) for v in data.uncovered.ungraded.values())
    note = (f" {ungraded} relevant passages were never graded and are not analysed." if ungraded else "")
    return ('<h2 id="uncovered">Uncovered relevant passages</h2>'
            f'<p class="small">{len(data.uncovered.passages)} passages judged relevant (label &ge; '
            f"{o.relevant_min}) that no item grades &ge; {o.min_grade}: the bank may miss what they say."
            f"{note}</p>" + ("".join(parts) or "<p>None.</p>"))


def _bank_section(data: ReportData) -> str:
    parts = []
    for q in sorted(set(data.bank_counts) | set(data.ungraded_bank_items)):
        rows = [[esc(item_label(s.item_id, data.bank)), str(s.rel_hits + s.nonrel_hits + s.unjudged_hits),
                 str(s.rel_hits), str(s.nonrel_hits), num(s.precision),
                 f'<span class="small">{esc(s.item_id)}</span>']
                for s in sorted(data.bank_counts.get(q, []), key=lambda s: s.item_id)]
        rows += [[esc(item_label(i, data.bank)), "not graded", "", "", "", f'<span class="small">{esc(i)}</span>']
                 for i in data.ungraded_bank_items.get(q, [])]
        parts.append(f"<details><summary>query {esc(q)}: {len(rows)} items</summary>"
                     + table(["item", f"passages \u2265 {data.opts.min_grade}", "relevant", "non-relevant",
                              "precision", "item id"], rows) + "</details>")
    return ('<h2 id="bank">The bank</h2><p class="small">Each item with the passages it covers '
            f"(grade &ge; {data.opts.min_grade}), split by the human judgment.</p>" + "".join(parts))



def _generated() -> datetime:
    """Now, or SOURCE_DATE_EPOCH where it is set (reproducible builds: a Makefile rebuild
    with unchanged inputs gives the same bytes)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch.isdigit():
        try:
            return datetime.fromtimestamp(int(epoch), timezone.utc)
        except (OverflowError, OSError, ValueError):
            pass
    return datetime.now(timezone.utc)

def render(data: ReportData) -> str:
    o = data.opts
    when = _generated().strftime("%Y-%m-%d %H:%M UTC")
    facts = [[esc(k), esc(v)] for k, v in data.inputs.items()]
    facts += [["grader", esc(f"{data.grader[0]} / {data.grader[1]}")],
              ["grades", f"{data.n_grades} ({data.n_unparsed} unparsed, never counted)"],
              ["thresholds", (f"grade &ge; {o.min_grade} answers an item; human label &ge; {o.relevant_min} "
                              "is relevant")],
              ["generated", when]]
    warn = "".join(f'<p class="small"><b>Note:</b> {esc(w)}</p>' for w in data.warnings)
    nav = ('<nav><a href="#leaderboards">Leaderboards</a><a href="#cover">Per-query cover</a>'
           '<a href="#agreement">Agreement</a><a href="#spurious">Spurious items</a>'
           '<a href="#uncovered">Uncovered passages</a><a href="#bank">Bank</a></nav>')
    body = (nav + table(None, facts, "kv") + warn + _leaderboard_section(data) + _cover_section(data)
            + _agreement_section(data) + _spurious_section(data) + _uncovered_section(data) + _bank_section(data))
    return page(o.title, body)
