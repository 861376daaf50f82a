"""Where an interval's two sides come from: human labels on a few queries and LLM labels
on all of them, for a rank metric (dcg/ndcg/p, from qrels or label distributions) or for
EXAM-Cover@k (from grades). exam-correlate interval builds one per metric, and so does
exam-correlate compare, whose human-only tests read no LLM side (``llm=None``)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import InputError, UsageError
from ..grading.grade_files import read_grades
from ..io.label_sources import looks_like_grades
from ..measures.grade_labels import read_human_qrels
from ..io.openers import display_name
from ..measures.exam_cover import build_index, exam_cover
from .cover_predicted import AnswerProbs, PredictedCover, calibrate_answers
from .intervals import human_values
from .label_dists import GradeError, calibrated, located, read_llm_dists
from .metrics import parse_metric, value_range
from .predicted import PredictedMetric

Log = Callable[[str], None]


class RankMetricSource:
    """Human qrels and LLM label distributions for dcg/ndcg/p."""

    def __init__(self, human, llm, metric, rel_level, model, prompt, kind, log: Log):
        self.metric = parse_metric(metric, rel_level)
        self.name = self.metric.name
        self.human = read_human_qrels(human)
        self.log = log
        self.human_queries = set(self.human)
        self.llm_queries: set[str] = set()
        if llm is not None:
            self.dists, self.has_probs = read_llm_dists(llm, model, prompt, kind, log)
            self.llm_queries = set(self.dists.dists)

    def prepare(self, labelled, mapping):
        if mapping == "calibrated":
            self.dists = calibrated(self.dists, self.human, labelled)
        elif not self.has_probs:
            warn_one_hot(self.log)

    def value_range(self) -> tuple[float, float]:
        top = max((max(docs.values()) for docs in self.human.values() if docs), default=0)
        return value_range(self.metric, top)

    def human_values(self, run, queries) -> np.ndarray:
        """Per-query values with human labels (a query the run lacks: 0, as trec_eval -c)."""
        return human_values(self.metric, run, self.human, queries)

    def build(self, run, queries, labelled):
        return PredictedMetric(self.metric, run, self.dists, queries), self.human_values(run, labelled)


class CoverSource:
    """Human grades and LLM grades for EXAM-Cover@k."""

    def __init__(self, human, llm, k, min_grade, model, prompt, kind, log: Log):
        self.log = log
        for path, side in ((human, "HUMAN"), (llm, "LLM")):
            if path is not None and not looks_like_grades(path):
                raise UsageError(f"exam-cover needs grades on both sides; {side} {display_name(path)} "
                                 "looks like a qrels file")
        self.k, self.min_grade = k, min_grade
        self.name = f"exam-cover@{k}"
        self.human_grades = read_grades(human)
        self.index = build_index(self.human_grades, self.min_grade)
        self.human_queries = {g.query_id for g in self.human_grades if g.item_id is not None}
        self.llm_queries: set[str] = set()
        if llm is None:
            return
        self.llm_grades = read_grades(llm, model=model, prompt=prompt, kind=kind)
        self.llm_path = llm
        self.llm_source = display_name(llm)
        self.has_probs = any(g.probs for g in self.llm_grades)
        self.llm_queries = {g.query_id for g in self.llm_grades if g.item_id is not None}
        if not self.llm_queries:
            raise InputError("no grades of bank items (only direct relevance grades?)", self.llm_source)

    def prepare(self, labelled, mapping):
        table = None
        try:
            if mapping == "calibrated":
                table = calibrate_answers(self.llm_grades, self.human_grades, labelled, self.min_grade,
                                          self.llm_source)
            elif not self.has_probs:
                warn_one_hot(self.log)
            self.answers = AnswerProbs.from_grades(self.llm_grades, self.min_grade, self.llm_source, table)
        except GradeError as exc:
            raise located(exc, self.llm_path) from None

    def value_range(self) -> tuple[float, float]:
        return 0.0, 1.0

    def human_values(self, run, queries) -> np.ndarray:
        human = exam_cover(self.index, run, self.k, complete=True).per_query
        return np.array([human[q][0] if q in human else 0.0 for q in queries])

    def build(self, run, queries, labelled):
        return PredictedCover(self.answers, run, queries, self.k), self.human_values(run, labelled)


def warn_one_hot(log: Log) -> None:
    log("warning: hard LLM labels with --mapping identity: every label distribution is one-hot, so "
        "CRC's degree shift cannot move them and its interval collapses; use --mapping calibrated")
