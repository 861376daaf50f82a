"""Nugget scores of RAG reports (TREC 2024 RAG track, AutoNuggetizer), EXAM-Cover of
reports, and citation-support scores.

**Assignment.** Every (report, bank item) gets a support level: 2 support, 1 partial
support, 0 no support. It is the best level any of the report's graded texts reaches
for the item: its sentences (grades keyed by sentence id) and the whole report (grades
keyed by the report id), whichever were graded. A grade becomes a level by two
thresholds on the grader's scale (:class:`Thresholds`):

- three-level prompts (scale 0-2: ``nuggetizer-assign``, ``citation-support``): the
  grade is the level (support 2, partial 1);
- self-rating prompts (0-5: ``nugget-selfrating``, ``question-selfrating``): support at
  grade >= 4, partial at >= 2. Grade 4 is the papers' "answered" threshold (EXAM-Cover's
  default; "4: Sufficient coverage, minor omissions"); 2 and 3 ("Briefly mentioned,
  significant omissions" / "Mentioned, some inaccuracies or lacks detail") mention the
  nugget without covering it, which is what partial support means; 1 ("Minimally
  mentioned, largely inaccurate") does not support it;
- any other scale: the thresholds must be given (``--support-min``, ``--partial-min``).

Unparsed grades never count; an item none of the report's texts has a parsed grade for
is "no support" and counted as ungraded, so an incomplete grading does not go unnoticed.

**Scores** (Pradeep et al. 2024, section "Scoring", as the nuggetizer's
``calculate_nugget_scores`` computes them): with s_i = 1 for support, 0.5 for partial
support (0 in the strict variants), 0 otherwise,

- All (``nugget_all``) = mean of s_i over the topic's nuggets,
- Vital (``nugget_vital``) = mean of s_i over the vital nuggets (0 when there are none),
- Weighted (``nugget_weighted``) = sum w_i s_i / sum w_i, w = 1 for vital, 0.5 for okay,

and ``*_strict`` for each. Nuggets without an importance count as ``default_importance``
(vital unless told otherwise: a bank without labels then scores Vital = Weighted = All).

**EXAM-Cover of a report**: the fraction of the topic's items the report answers (level
support), and the normalized variant over the items any graded report text answers;
computed by :mod:`exam_eval.measures.exam_cover` with the report as a "run" whose passages are
its sentences and itself.

**Citation support** (Thakur et al. 2025): each (sentence, cited document) pair has a
support grade (``citation-support`` grades: query_id = topic, doc_id = the cited
document, item_id = the sentence id) scored 1 / 0.5 / 0. ``support_precision`` is the
mean over the report's (sentence, citation) pairs ("weighted precision": how well the
citations support what cites them); ``support_recall`` the mean over the report's
sentences of the best score of the sentence's citations, uncited sentences 0 ("weighted
recall": how much of the report its citations support). A report without citations
scores 0 on both. Ungraded pairs score 0 and are counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from ..errors import InputError, UsageError
from ..grading.listwise import PROMPT_IDS, SCALE
from ..grading.prompts import REGISTRY
from ..io.bank_items import BankItem
from ..io.banks import items_by_query, require_bank_topics
from ..io.grades import Grade
from ..io.reports import Report
from .bank_filter import BankFilterStats, bank_with_current_grades, current_grades
from .exam_cover import build_index, exam_cover, mean_stderr
from .exam_measures import COVER_MEASURES, NUGGET_MEASURES, SUPPORT_MEASURES, TOPIC_DEFINED

NOT_SUPPORT, PARTIAL, SUPPORT = 0, 1, 2
CREDIT = {SUPPORT: 1.0, PARTIAL: 0.5, NOT_SUPPORT: 0.0}
STRICT_CREDIT = {SUPPORT: 1.0, PARTIAL: 0.0, NOT_SUPPORT: 0.0}
WEIGHT = {"vital": 1.0, "okay": 0.5}



@dataclass(frozen=True)
class Thresholds:
    support: int  # grade >= support: support
    partial: int  # grade >= partial (and < support): partial support

    def level(self, grade: int) -> int:
        if grade >= self.support:
            return SUPPORT
        return PARTIAL if grade >= self.partial else NOT_SUPPORT


def thresholds_for(scale: tuple[int, int] | None, support_min: int | None = None,
                   partial_min: int | None = None, grader: str = "") -> Thresholds:
    """The documented defaults for the grader's scale, or the user's thresholds."""
    default = {(0, 2): (2, 1), (0, 5): (4, 2)}.get(tuple(scale) if scale else None)
    if default is None and (support_min is None or partial_min is None):
        where = f"grades of {grader}" if grader else "these grades"
        what = f"on the scale {scale[0]}-{scale[1]}" if scale else "on an unknown scale"
        raise UsageError(f"{where} are {what}, which has no default support levels: "
                         "give --support-min and --partial-min")
    support = default[0] if support_min is None else support_min
    partial = default[1] if partial_min is None else partial_min
    if partial > support:
        raise UsageError(f"--partial-min {partial} is above --support-min {support}")
    low, high = scale if scale else (0, None)
    for flag, value in (("--support-min", support_min), ("--partial-min", partial_min)):
        # at the scale's bottom every grade would count, above its top none: every score 1 or 0
        if value is not None and (value <= low or (high is not None and value > high)):
            where = f"grades of {grader}" if grader else "these grades"
            span = f"{low + 1} to {high}" if high is not None else f"above {low}"
            raise UsageError(f"{flag} {value}: {where} are on the scale {low}-{high if high is not None else '?'}; "
                             f"give a level from {span}")
    return Thresholds(support, partial)


def scale_of(prompt_id: str) -> tuple[int, int] | None:
    """The scale of a registered prompt (also the reference workbench's prompt classes)."""
    if prompt_id in PROMPT_IDS.values():
        return SCALE
    if prompt_id in REGISTRY:
        return tuple(REGISTRY[prompt_id].scale)
    if prompt_id in ("QuestionSelfRatedUnanswerablePromptWithChoices", "NuggetSelfRatedPrompt"):
        return (0, 5)
    return None


# -- assignment ---------------------------------------------------------------------------

@dataclass
class Assignment:
    """Support levels of one report: item id -> level, and which items had no grade."""

    run_id: str
    topic_id: str
    levels: dict[str, int]
    ungraded: set[str] = field(default_factory=set)


def report_doc_ids(report: Report) -> list[str]:
    return [s.doc_id for s in report.sentences] + [report.doc_id]


def assign(reports: Sequence[Report], grades: Iterable[Grade], items: Mapping[str, Sequence[BankItem]],
           thresholds: Thresholds) -> list[Assignment]:
    """One Assignment per report whose topic has bank items (reports in input order)."""
    best: dict[tuple[str, str], dict[str, int]] = {}
    for g in grades:
        if g.item_id is None or not g.parse_ok or g.grade is None:
            continue
        per_doc = best.setdefault((g.query_id, g.doc_id), {})
        lv = thresholds.level(g.grade)
        if lv > per_doc.get(g.item_id, -1):
            per_doc[g.item_id] = lv
    out = []
    for r in reports:
        topic_items = items.get(r.topic_id)
        if not topic_items:
            continue
        docs = [best.get((r.topic_id, d), {}) for d in report_doc_ids(r)]
        levels: dict[str, int] = {}
        ungraded: set[str] = set()
        for item in topic_items:
            seen = [d[item.item_id] for d in docs if item.item_id in d]
            if not seen:
                ungraded.add(item.item_id)
            levels[item.item_id] = max(seen, default=NOT_SUPPORT)
        out.append(Assignment(r.run_id, r.topic_id, levels, ungraded))
    return out


# -- scores -------------------------------------------------------------------------------

def _mean(credits: list[float]) -> float:
    return sum(credits) / len(credits) if credits else 0.0


def nugget_scores(levels: Sequence[tuple[str, int]]) -> dict[str, float]:
    """The six scores from (importance, level) per nugget of one topic."""
    out = {}
    for suffix, credit in (("", CREDIT), ("_strict", STRICT_CREDIT)):
        every = [credit[lv] for _, lv in levels]
        vital = [credit[lv] for imp, lv in levels if imp == "vital"]
        weights = [WEIGHT[imp] for imp, _ in levels]
        weighted = sum(w * credit[lv] for w, (_, lv) in zip(weights, levels))
        out["nugget_all" + suffix] = _mean(every)
        out["nugget_vital" + suffix] = _mean(vital)
        out["nugget_weighted" + suffix] = weighted / sum(weights) if weights else 0.0
    return out


def importance_of(item: BankItem, default_importance: str) -> str:
    return item.importance or default_importance


def report_nugget_scores(assignment: Assignment, items: Sequence[BankItem],
                         default_importance: str = "vital") -> dict[str, float]:
    return nugget_scores([(importance_of(i, default_importance), assignment.levels[i.item_id]) for i in items])


def report_covers(reports: Sequence[Report], grades: Sequence[Grade], items: Mapping[str, Sequence[BankItem]],
                  thresholds: Thresholds) -> dict[tuple[str, str], tuple[float, float | None]]:
    """(run, topic) -> (exam_cover, n_exam_cover or None) with answered = level support."""
    index = build_index(grades, thresholds.support, {q: [i.item_id for i in v] for q, v in items.items()})
    out = {}
    for r in reports:
        if r.topic_id not in index.items:
            continue
        docs = report_doc_ids(r)
        # the report as a run: its texts in order; cover looks at all of them
        run = {r.topic_id: {d: float(len(docs) - k) for k, d in enumerate(docs)}}
        res = exam_cover(index, run, k=len(docs))
        out[(r.run_id, r.topic_id)] = res.per_query[r.topic_id]
    return out


@dataclass
class SupportResult:
    precision: float
    recall: float
    pairs: int
    ungraded_pairs: int


def citation_support(report: Report, grades: Mapping[tuple[str, str, str], int]) -> SupportResult:
    """``grades``: (topic, cited doc, sentence id) -> support grade 0-2 (parsed only)."""
    pair_credits: list[float] = []
    sentence_credits: list[float] = []
    ungraded = 0
    for s in report.sentences:
        best = 0.0
        for c in dict.fromkeys(c.doc_id for c in s.citations):
            g = grades.get((report.topic_id, c, s.doc_id))
            if g is None:
                ungraded += 1
                credit = 0.0
            else:
                credit = CREDIT[min(max(g, NOT_SUPPORT), SUPPORT)]
            pair_credits.append(credit)
            best = max(best, credit)
        sentence_credits.append(best)
    return SupportResult(_mean(pair_credits), _mean(sentence_credits), len(pair_credits), ungraded)


def support_grade_index(grades: Iterable[Grade], thresholds: Thresholds) -> dict[tuple[str, str, str], int]:
    out: dict[tuple[str, str, str], int] = {}
    for g in grades:
        if g.item_id is None or not g.parse_ok or g.grade is None:
            continue
        key = (g.query_id, g.doc_id, g.item_id)
        out[key] = max(out.get(key, NOT_SUPPORT), thresholds.level(g.grade))
    return out


# -- per topic -> per run ---------------------------------------------------------------

def average_runs(per_topic: Mapping[tuple[str, str], Mapping[str, float]], measures: Sequence[str],
                 all_topics: Sequence[str] | None = None,
                 runs_given: Iterable[str] = ()) -> dict[str, dict[str, tuple[float, float, int]]]:
    """run -> measure -> (mean, stderr, topics). ``all_topics``: average over these,
    topics a run lacks scoring 0 (like trec_eval -c); else over the run's own topics.
    A measure a topic has no value for (n_exam_cover where nothing is answerable) is
    left out of that measure's mean. ``runs_given``: runs averaged even where none of
    their topics was scored (all 0 with ``all_topics``, else no mean)."""
    runs: dict[str, dict[str, dict[str, float]]] = {run: {} for run in runs_given}
    defined: set[tuple[str, str]] = set()  # (topic, measure) with a value for some run
    for (run, topic), vals in per_topic.items():
        runs.setdefault(run, {})[topic] = vals
        defined.update((topic, m) for m, v in vals.items() if v is not None)
    out: dict[str, dict[str, tuple[float, float, int]]] = {}
    for run, topics in runs.items():
        order = list(all_topics) if all_topics is not None else sorted(topics)
        out[run] = {}
        for m in measures:
            values = []
            for t in order:
                if t in topics:
                    v = topics[t].get(m)
                else:
                    # a topic the run lacks scores 0 where the measure has a value at all:
                    # n_exam_cover is undefined on a topic for every run alike (nothing
                    # there is answerable), and must not turn into a 0 for the run absent
                    v = 0.0 if m not in TOPIC_DEFINED or (t, m) in defined else None
                if v is not None:
                    values.append(v)
            mean, se = mean_stderr(values)
            out[run][m] = (mean, se, len(values))
    return out


# -- document qrels from citations --------------------------------------------------------

QRELS_FROM = ("support", "nuggets", "both")


def sentence_levels(grades: Iterable[Grade], thresholds: Thresholds) -> dict[tuple[str, str], int]:
    """(topic, text id) -> the best nugget level the text reaches for any item."""
    out: dict[tuple[str, str], int] = {}
    for g in grades:
        if g.item_id is None or not g.parse_ok or g.grade is None:
            continue
        key = (g.query_id, g.doc_id)
        out[key] = max(out.get(key, NOT_SUPPORT), thresholds.level(g.grade))
    return out


@dataclass
class QrelsStats:
    cited: int = 0  # distinct (topic, cited document)
    unlabelled: int = 0  # cited documents without the grades the label needs


def citation_qrels(reports: Sequence[Report], mode: str, *,
                   support: Mapping[tuple[str, str, str], int] | None = None,
                   nuggets: Mapping[tuple[str, str], int] | None = None,
                   stats: QrelsStats | None = None) -> dict[str, dict[str, int]]:
    """Document qrels (labels 0-2) for every cited document with the grades it needs.

    The label of (topic, document) is the best, over the sentences citing it, of

    - ``support``: the citation-support level of (sentence, document): the document
      says what the sentence says;
    - ``nuggets``: the nugget level of the sentence: the sentence citing the document
      covers a nugget;
    - ``both``: the smaller of the two: the document supports a sentence that covers a
      nugget (the strictest reading, and the one that mirrors nugget-based relevance).
    """
    if mode not in QRELS_FROM:
        raise UsageError(f"unknown qrels source {mode!r}; choose one of {', '.join(QRELS_FROM)}")
    if mode in ("support", "both") and support is None:
        raise UsageError(f"qrels from {mode} need citation-support grades")
    if mode in ("nuggets", "both") and nuggets is None:
        raise UsageError(f"qrels from {mode} need nugget grades of the report sentences")
    labels: dict[tuple[str, str], int | None] = {}
    for r in reports:
        for s in r.sentences:
            for doc in dict.fromkeys(c.doc_id for c in s.citations):
                key = (r.topic_id, doc)
                sup = None if support is None else support.get((r.topic_id, doc, s.doc_id))
                nug = None if nuggets is None else nuggets.get((r.topic_id, s.doc_id))
                if mode == "support":
                    value = sup
                elif mode == "nuggets":
                    value = nug
                else:
                    value = None if sup is None or nug is None else min(sup, nug)
                prev = labels.get(key)
                labels[key] = prev if value is None else value if prev is None else max(prev, value)
    qrels: dict[str, dict[str, int]] = {}
    for (topic, doc), value in labels.items():
        if value is not None:
            qrels.setdefault(topic, {})[doc] = value
    if stats is not None:
        stats.cited = len(labels)
        stats.unlabelled = sum(v is None for v in labels.values())
    return qrels


# -- one set of reports, as exam-nuggets score and api.nugget_scores score it -------------

def thresholds_of(grades: Sequence[Grade], support_min: int | None, partial_min: int | None,
                  label: str = "") -> Thresholds:
    """The support levels of one prompt's grades (``label`` names them in messages):
    grades of several prompts are refused, since their scales need not agree."""
    graders = {g.prompt for g in grades}
    if len(graders) != 1:
        where = f"{label}: " if label else ""
        raise UsageError(f"{where}grades of {len(graders)} prompts; score one prompt's grades at a time")
    (prompt,) = graders
    grader = f"{label} prompt {prompt!r}" if label else f"prompt {prompt!r}"
    return thresholds_for(scale_of(prompt), support_min, partial_min, grader=grader)


def warn_unparsed(grades: Iterable[Grade], path: str, log) -> None:
    unparsed = sum(1 for g in grades if not g.parse_ok)
    if unparsed:
        log(f"{path}: {unparsed} unparsed grades (they count as no support)")


@dataclass
class ReportScores:
    per: dict[tuple[str, str], dict[str, float | None]]  # (run, topic) -> measure -> value
    means: dict[str, dict[str, float]]  # run -> measure -> mean over topics
    assigned: list[Assignment]
    measures: list[str]


def score_reports(reports: Sequence[Report], grades: Sequence[Grade], items: Mapping[str, Sequence[BankItem]],
                  thresholds: Thresholds, *, measures: Sequence[str] = (), default_importance: str = "vital",
                  complete: bool = False, support_index: Mapping[tuple[str, str, str], int] | None = None,
                  kind: str = "bank", log=lambda msg: None) -> ReportScores:
    """Nugget scores, EXAM-Cover and (with ``support_index``) citation support of every
    report on a topic with ``items``; what is left out or ungraded is said through ``log``.
    ``measures``: those to average (default: all that the inputs allow)."""
    scored = [r for r in reports if items.get(r.topic_id)]
    if len(scored) < len(reports):
        missing = sorted({r.topic_id for r in reports if not items.get(r.topic_id)})
        log(f"{len(reports) - len(scored)} reports are on topics without {kind} items and are not scored "
            f"(topics {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''})")

    available = list(NUGGET_MEASURES + COVER_MEASURES) + (list(SUPPORT_MEASURES) if support_index is not None else [])
    chosen = list(dict.fromkeys(measures)) or available  # a measure named twice is one column
    unknown = [m for m in chosen if m not in available]
    if unknown:
        raise UsageError(f"unknown measure {unknown[0]!r} for these inputs; choose from {', '.join(available)}")

    per: dict[tuple[str, str], dict[str, float | None]] = {}
    ungraded = 0
    assigned = assign(scored, grades, items, thresholds)
    for a in assigned:
        per[(a.run_id, a.topic_id)] = report_nugget_scores(a, items[a.topic_id], default_importance)
        ungraded += len(a.ungraded)
    if ungraded:
        log(f"{ungraded} (report, item) pairs have no parsed grade (for the report, or any of its sentences: "
            "ungraded or unparsed) and are scored as no support")
    unlabelled = sum(1 for its in items.values() for i in its if i.importance is None)
    if unlabelled and any(m.startswith(("nugget_vital", "nugget_weighted")) for m in chosen):
        log(f"{unlabelled} bank items have no importance and count as {default_importance}")
    for key, (cover, norm) in report_covers(scored, grades, items, thresholds).items():
        per[key]["exam_cover"] = cover
        per[key]["n_exam_cover"] = norm
    if support_index is not None:
        pairs = bad = 0
        for r in scored:
            res = citation_support(r, support_index)
            per[(r.run_id, r.topic_id)].update(support_precision=res.precision, support_recall=res.recall)
            pairs += res.pairs
            bad += res.ungraded_pairs
        if bad:
            log(f"{bad} of {pairs} (sentence, citation) pairs have no support grade (scored 0)")

    topics = sorted({t for (_, t) in per}) if complete else None
    summary = average_runs(per, chosen, topics, runs_given=sorted({r.run_id for r in reports}))
    # a measure no topic of the run has a value for has no mean: no 'all' row, not 0
    means = {run: {m: v[0] for m, v in ms.items() if v[2]} for run, ms in summary.items()}
    return ReportScores(per, means, assigned, chosen)


def score_checked(reports: Sequence[Report], graded: list[Grade], bank, *, grades_name: str, bank_name: str,
                  kind: str | None = None, kind_flag: str = "--kind", support_min: int | None = None,
                  partial_min: int | None = None, support=None, log,
                  **score) -> tuple[ReportScores, dict[str, list[BankItem]]]:
    """What ``exam-nuggets score`` and :func:`exam_eval.api.nugget_scores` both do with
    grades, so both refuse and score alike: grades of one kind of bank item (several:
    choose one with ``kind_flag``), one prompt's thresholds, only the grades current for
    the bank as it is now (``bank``: a bank file, or its items; see
    :mod:`exam_eval.measures.bank_filter`), the reports' topics in the bank. ``support``:
    a function of the notes' ``log`` that gives the citation-support index (None: none).
    Notices go to ``log`` once nothing is refused; ``score``: :func:`score_reports`'s
    keywords. Returns the scores and the bank's items by topic, as scored."""
    import os

    kinds = sorted({g.kind for g in graded if g.kind})
    if kind is None:
        if len(kinds) != 1:
            raise UsageError(f"{grades_name} holds grades of {' and '.join(kinds) or 'no bank items'}; "
                             f"choose one with {kind_flag}")
        kind = kinds[0]
    th = thresholds_of(graded, support_min, partial_min, "GRADES")
    as_given = graded  # which topics were graded at all, before the bank's filter
    notes: list[str] = []  # said once nothing is refused (a refusal is one line)
    warn_unparsed(graded, grades_name, notes.append)
    if isinstance(bank, (str, os.PathLike)):
        bank_items, graded = bank_with_current_grades(bank, graded, grades_name, notes.append, kind=kind)
    else:
        dropped = BankFilterStats()
        bank_items = [i for i in bank if i.kind == kind]
        graded = current_grades(graded, bank_items, dropped)
        notes += dropped.notices(grades_name)
    items = items_by_query(bank_items)
    index = None if support is None else support(notes.append)
    require_bank_topics(reports, items, bank_name)
    reports = covered_reports(reports, as_given, items, grades_name, notes.append)
    for note in notes:
        log(note)
    return score_reports(reports, graded, items, th, support_index=index, kind=kind, log=log, **score), items


def covered_reports(reports: Sequence[Report], grades: Sequence[Grade], items: Mapping[str, Sequence[BankItem]],
                    grades_name: str, note) -> list[Report]:
    """The reports on topics the grades cover. A topic on which no report has a single
    grade line (parsed or not) was not graded at all: a partial labelling (an assignment
    file of some topics, a grading run over part of a track). Scored, its reports would
    get 0 for every item, and a run's mean would fall by a topic nobody judged; it is left
    out instead and named. Grades of none of the topics are refused: nothing is scored."""
    graded = {(g.query_id, g.doc_id) for g in grades if g.item_id is not None}
    topics = sorted({r.topic_id for r in reports if items.get(r.topic_id)})
    covered = {r.topic_id for r in reports if any((r.topic_id, d) in graded for d in report_doc_ids(r))}
    left = [t for t in topics if t not in covered]
    if not left:
        return list(reports)
    named = ", ".join(left[:20]) + (f" and {len(left) - 20} more" if len(left) > 20 else "")
    if len(left) == len(topics):
        raise InputError(f"no grade on any of the {len(topics)} topics of the reports ({named}): "
                         "grades of other topics?", grades_name)
    note(f"{grades_name}: no grade on {len(left)} of the {len(topics)} topics of the reports: "
         f"{named} left out (not scored 0)")
    return [r for r in reports if r.topic_id not in left]
