"""LLM label distributions per (query, passage), on an ordered scale of label values.

CRC (CI paper, section 6) needs a probability per label for every passage. Sources:

- a grades file with ``probs`` (scoring mode): per bank item a distribution over the
  prompt's grades; the passage label is the maximum grade over the query's items
  (EXAM-Qrels' default), whose distribution, treating items as independent, has
  CDF(r) = prod_i CDF_i(r);
- hard labels (an LLM qrels file, or grades without ``probs``): one-hot.

``calibrated`` maps either onto the human scale with P(human label | LLM label)
estimated on the labelled queries; for one-hot labels this is what makes CRC's degree
shift meaningful, and it also bridges scales (0-5 self-ratings vs 0-3 DL judgments).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ..errors import InputError
from ..grading.grade_files import iter_grades, published_prompt, read_grades
from ..io.grades import Grade
from ..io.label_sources import looks_like_grades, refuse_unused_grade_options
from ..io.openers import display_name
from ..trec_eval.trec_files import Qrels, read_qrels


@dataclass
class LabelDists:
    values: np.ndarray                          # label values, ascending
    dists: dict[str, dict[str, np.ndarray]]     # qid -> doc -> P(value), sums to 1
    missing: np.ndarray                         # distribution used for an unlabelled passage

    def get(self, qid: str, doc: str) -> np.ndarray:
        return self.dists.get(qid, {}).get(doc, self.missing)

    def expected(self, qid: str, doc: str) -> float:
        return float(self.get(qid, doc) @ self.values)


def _one_hot(index: int, size: int) -> np.ndarray:
    v = np.zeros(size)
    v[index] = 1.0
    return v


def from_qrels(qrels: Qrels) -> LabelDists:
    """Hard labels; negative labels count as 0 (trec_eval: not relevant); unlabelled = lowest."""
    values = sorted({max(l, 0) for docs in qrels.values() for l in docs.values()} | {0})
    index = {v: i for i, v in enumerate(values)}
    dists = {q: {d: _one_hot(index[max(l, 0)], len(values)) for d, l in docs.items()}
             for q, docs in qrels.items()}
    return LabelDists(np.array(values, dtype=float), dists, _one_hot(0, len(values)))


def _label_grades(prompt: str) -> dict[str, int]:
    """Which grade each of a published prompt's labels stands for ("No"/"Yes" -> 0/1,
    "[2]" -> 2, "support" -> 2); empty for a custom prompt, whose labels must be numbers."""
    p = published_prompt(prompt)
    return p.label_grades() if p is not None and p.labels else {}


class GradeError(InputError):
    """A grade whose ``probs`` cannot be read as a distribution over grades; ``grade`` is
    the grade, so that a caller holding the file can name its line (:func:`located`)."""

    def __init__(self, reason: str, source: str, grade: Grade):
        super().__init__(reason, source)
        self.grade = grade


def located(exc: GradeError, path) -> InputError:
    """``exc`` at the line its grade was read from: the last line of its key in ``path``,
    the one that counts. The file is read again, on this error path only."""
    if str(path) == "-":  # standard input is gone by now
        return exc
    line = None
    for lineno, g in iter_grades(path):
        if g.key == exc.grade.key:
            line = lineno
    return InputError(exc.reason, display_name(path), line)


def item_dist(g: Grade, source: str) -> dict[int, float] | None:
    if g.probs:
        out: dict[int, float] = {}
        grades = _label_grades(g.prompt)
        for k, p in g.probs.items():
            try:
                label = grades[k] if k in grades else int(k)
            except ValueError:
                raise GradeError(f"grade of {g.query_id}/{g.doc_id}: probs label {k!r} is not a grade "
                                 f"(prompt {g.prompt} is not one whose labels are known)", source, g) from None
            if p < 0:
                raise GradeError(f"grade of {g.query_id}/{g.doc_id}: negative probability {p}", source, g)
            out[label] = out.get(label, 0.0) + float(p)
        total = sum(out.values())
        if total <= 0:
            raise GradeError(f"grade of {g.query_id}/{g.doc_id}: probs sum to 0", source, g)
        return {k: v / total for k, v in out.items()}
    if g.grade is None:
        return None  # unparsed output is not a grade
    return {g.grade: 1.0}


def from_grades(grades: Iterable[Grade], source: str = "grades") -> tuple[LabelDists, int]:
    """Passage label = max over items; returns the distributions and the number of
    unparsed grades that were left out."""
    per_pair: dict[tuple[str, str], list[dict[int, float]]] = {}
    unparsed = 0
    for g in grades:
        d = item_dist(g, source)
        if d is None:
            unparsed += 1
            continue
        per_pair.setdefault((g.query_id, g.doc_id), []).append(d)
    if not per_pair:
        raise InputError("no parsed grades to build labels from", source)
    values = sorted({max(l, 0) for items in per_pair.values() for d in items for l in d} | {0})
    index = {v: i for i, v in enumerate(values)}
    dists: dict[str, dict[str, np.ndarray]] = {}
    for (qid, doc), items in per_pair.items():
        cdf = np.ones(len(values))
        for d in items:
            p = np.zeros(len(values))
            for l, pr in d.items():
                p[index[max(l, 0)]] += pr
            cdf *= np.cumsum(p)
        cdf[-1] = 1.0
        dists.setdefault(qid, {})[doc] = np.diff(np.concatenate([[0.0], cdf])).clip(min=0.0)
    return LabelDists(np.array(values, dtype=float), dists, _one_hot(0, len(values))), unparsed


def calibrated(llm: LabelDists, human: Qrels, labelled: Iterable[str], smoothing: float = 1.0) -> LabelDists:
    """Map LLM distributions onto the human scale: P(h | d) = sum_l P_llm(l | d) P(h | l).

    P(h | l) is counted on the human-judged passages of the labelled queries (soft
    counts when the LLM gives a distribution) plus ``smoothing`` per cell, so a
    label seen rarely still maps to a spread-out, not a one-hot, distribution.
    """
    hvalues = sorted({max(l, 0) for q in labelled for l in human.get(q, {}).values()} | {0})
    hindex = {v: i for i, v in enumerate(hvalues)}
    counts = np.full((len(llm.values), len(hvalues)), float(smoothing))
    for q in labelled:
        for doc, label in human.get(q, {}).items():
            counts[:, hindex[max(label, 0)]] += llm.get(q, doc)
    mapping = counts / counts.sum(axis=1, keepdims=True)
    dists = {q: {d: p @ mapping for d, p in docs.items()} for q, docs in llm.dists.items()}
    return LabelDists(np.array(hvalues, dtype=float), dists, llm.missing @ mapping)


def read_llm_dists(path: str, model, prompt, kind, log):
    """Label distributions of an LLM side (qrels or grades) and whether grades had probs."""
    if not looks_like_grades(path):
        refuse_unused_grade_options(path, "a qrels file", {"--model": model, "--prompt": prompt, "--kind": kind})
        return from_qrels(read_qrels(path)), False
    grades = read_grades(path, model=model, prompt=prompt, kind=kind)
    has_probs = any(g.probs for g in grades)
    try:
        dists, unparsed = from_grades(grades, display_name(path))
    except GradeError as exc:
        raise located(exc, path) from None
    if unparsed:
        log(f"{display_name(path)}: {unparsed} unparsed grade(s) ignored")
    return dists, has_probs
