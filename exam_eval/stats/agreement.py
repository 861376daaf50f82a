"""Agreement of LLM relevance labels with human judgments (EXAM++ Table 4, RUBRIC Table 5,
UMBRELA Table 2).

The join runs over the pairs the human judged; judged pairs without an LLM label and
LLM-labelled pairs the human never judged are counted, not guessed. Negative human
labels (trec_eval's "judged, treat as unjudged") count as 0 on the graded scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..trec_eval.trec_files import Qrels
from .kappa import binary_kappa, confusion, kappa_from_matrix

LENIENT_MIN = 1  # EXAM++: any self-rating >= 1 counts as relevant
STRICT_MIN = 4   # EXAM++: only ratings 4-5 count as relevant


@dataclass
class BinaryTable:
    """LLM label >= llm_min against human label >= human_min: counts and kappa."""
    name: str
    llm_min: int
    human_min: int
    tp: int   # both relevant
    fp: int   # LLM relevant, human not
    fn: int   # human relevant, LLM not
    tn: int
    kappa: float

    @property
    def total(self) -> int:
        return self.tp + self.fp + self.fn + self.tn


@dataclass
class Agreement:
    human_min: int
    llm_min: int
    n_pairs: int                       # joined (human-judged and LLM-labelled) pairs
    human_only: int                    # human-judged pairs without an LLM label
    llm_only: int                      # LLM-labelled pairs the human did not judge
    kappa: float                       # binary, pooled over all joined pairs
    topic_kappa: dict[str, float]      # binary per topic (NaN where undefined)
    mean_topic_kappa: float            # mean over topics where kappa is defined
    n_topics: int
    n_topics_undefined: int
    binary: BinaryTable                # the thresholds asked for
    lenient: BinaryTable               # LLM >= 1
    strict: BinaryTable                # LLM >= 4
    human_labels: list[int]            # graded categories, human side
    llm_labels: list[int]              # graded categories, LLM side
    graded: np.ndarray                 # counts[llm_label_index, human_label_index]
    kappa_graded: float                # unweighted kappa on the union of graded labels
    kappa_linear: float
    kappa_quadratic: float
    graded_rows: list[BinaryTable] = field(default_factory=list)  # per LLM grade g: LLM >= g


def _table(name: str, h: np.ndarray, l: np.ndarray, human_min: int, llm_min: int) -> BinaryTable:
    hb = h >= human_min
    lb = l >= llm_min
    return BinaryTable(name, llm_min, human_min,
                       tp=int(np.sum(lb & hb)), fp=int(np.sum(lb & ~hb)),
                       fn=int(np.sum(~lb & hb)), tn=int(np.sum(~lb & ~hb)),
                       kappa=binary_kappa(lb, hb))


def agreement(human: Qrels, llm: Qrels, human_min: int, llm_min: int) -> Agreement:
    qids, hs, ls = [], [], []
    human_only = 0
    for qid, docs in human.items():
        labelled = llm.get(qid, {})
        for doc, label in docs.items():
            if doc in labelled:
                qids.append(qid)
                hs.append(max(label, 0))
                ls.append(max(labelled[doc], 0))
            else:
                human_only += 1
    llm_only = sum(1 for qid, docs in llm.items() for doc in docs if doc not in human.get(qid, {}))
    h = np.array(hs, dtype=np.int64)
    l = np.array(ls, dtype=np.int64)
    q = np.array(qids, dtype=object)

    topic_kappa: dict[str, float] = {}
    for qid in sorted(set(qids)):
        sel = q == qid
        lb, hb = l[sel] >= llm_min, h[sel] >= human_min
        # one side that never varies on the topic leaves its kappa undefined (it would be 0,
        # whatever the other side says), and out of the mean; see exam-correlate(1)
        varies = lb.any() and not lb.all() and hb.any() and not hb.all()
        topic_kappa[qid] = binary_kappa(lb, hb) if varies else math.nan
    defined = [v for v in topic_kappa.values() if not math.isnan(v)]

    human_labels = sorted(set(hs))
    llm_labels = sorted(set(ls))
    union = sorted(set(hs) | set(ls))
    square = confusion(ls, hs, union)  # rows LLM, columns human
    graded = square[np.ix_([union.index(v) for v in llm_labels], [union.index(v) for v in human_labels])]

    binary = _table(f"LLM>={llm_min}", h, l, human_min, llm_min)
    return Agreement(
        human_min=human_min, llm_min=llm_min, n_pairs=len(hs), human_only=human_only, llm_only=llm_only,
        kappa=binary.kappa, topic_kappa=topic_kappa,
        mean_topic_kappa=float(np.mean(defined)) if defined else math.nan,
        n_topics=len(topic_kappa), n_topics_undefined=len(topic_kappa) - len(defined),
        binary=binary,
        lenient=_table("LENIENT", h, l, human_min, LENIENT_MIN),
        strict=_table("STRICT", h, l, human_min, STRICT_MIN),
        human_labels=human_labels, llm_labels=llm_labels, graded=graded,
        kappa_graded=kappa_from_matrix(square),
        kappa_linear=kappa_from_matrix(square, "linear", union),
        kappa_quadratic=kappa_from_matrix(square, "quadratic", union),
        graded_rows=[_table(f"LLM>={g}", h, l, human_min, g) for g in llm_labels],
    )


def _f(v: float) -> str:
    return "nan" if math.isnan(v) else f"{v:.4f}"


def render_agreement(a: Agreement, other: str = "LLM") -> str:
    """Plain-text report: summary lines (name<TAB>value), then the papers' tables. ``other``
    names the second side: "LLM", or "assessor" when it is a second human's qrels, whose
    report then says nothing of LLMs and leaves out LENIENT and STRICT (thresholds of LLM
    self-ratings, meaningless on an assessor's scale)."""
    hm, lo, up = a.human_min, other.lower(), other
    lines = [
        f"human_min\t{a.human_min}",
        f"{lo}_min\t{a.llm_min}",
        f"pairs\t{a.n_pairs}",
        f"human_judged_without_{lo}_label\t{a.human_only}",
        f"{lo}_labelled_not_judged\t{a.llm_only}",
        f"kappa\t{_f(a.kappa)}",
        f"kappa_mean_per_topic\t{_f(a.mean_topic_kappa)}",
        f"topics\t{a.n_topics}",
        f"topics_kappa_undefined\t{a.n_topics_undefined}",
        f"kappa_graded\t{_f(a.kappa_graded)}",
        f"kappa_graded_linear\t{_f(a.kappa_linear)}",
        f"kappa_graded_quadratic\t{_f(a.kappa_quadratic)}",
        "",
        f"# confusion (rows: {up} >= {lo}_min, columns: human >= human_min)",
        f"\thuman>={hm}\thuman<{hm}\ttotal",
        f"{up}>={a.llm_min}\t{a.binary.tp}\t{a.binary.fp}\t{a.binary.tp + a.binary.fp}",
        f"{up}<{a.llm_min}\t{a.binary.fn}\t{a.binary.tn}\t{a.binary.fn + a.binary.tn}",
        "",
        f"# graded table (rows: {up} label, columns: human label; kappa of {up} >= row label vs human >= human_min)",
        "\t".join([f"{up}\\human", *map(str, a.human_labels), "total", f"human>={hm}", f"human<{hm}", "kappa"]),
    ]
    for i, g in enumerate(a.llm_labels):
        row = a.graded[i]
        rel = int(sum(row[j] for j, v in enumerate(a.human_labels) if v >= hm))
        lines.append("\t".join([str(g), *map(str, row), str(int(row.sum())), str(rel),
                                str(int(row.sum()) - rel), _f(a.graded_rows[i].kappa)]))
    for t in (a.lenient, a.strict) if other == "LLM" else ():
        lines += [
            "",
            f"# {t.name}: LLM label >= {t.llm_min} against human label >= {hm}",
            f"\thuman>={hm}\thuman<{hm}\ttotal\tkappa",
            f"LLM>={t.llm_min}\t{t.tp}\t{t.fp}\t{t.tp + t.fp}\t{_f(t.kappa)}",
            f"LLM<{t.llm_min}\t{t.fn}\t{t.tn}\t{t.fn + t.tn}\t{_f(t.kappa)}",
        ]
    return "\n".join(lines) + "\n"
