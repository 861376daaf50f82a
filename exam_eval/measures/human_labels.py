"""Human labels over LLM labels: where a person labelled a pair, their label is the pair's.

The sample an assessor labels (exam-verify label) is a small part of the pool the LLM
labelled; the qrels a track publishes can take both, the human label winning on its
pair. The count of what was replaced is said, so a reader of the qrels knows how much
of them is human.

A human label off the scale of the labels it joins (a 9 among labels 0-3: a typo in a
hand-edited qrels, or an assessor's other scale) is said too, but merged as given: it is
the person's word, and only they know which label they meant. The scale is the range
LABELS' labels take, 0 at the bottom: what the published qrels mean by their labels.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..io.openers import display_name, iter_lines

Qrels = dict[str, dict[str, int]]


@dataclass
class Merged:
    replaced: int = 0     # pairs the LLM labelled that a human labelled too
    changed: int = 0      # of those, the ones whose label differs
    added: int = 0        # pairs only a human labelled

    def note(self, human_name: str) -> str:
        return (f"{human_name}: {self.replaced + self.added} human labels; {self.replaced} replaced the LLM's label "
                f"on their pair ({self.changed} of them a different label), {self.added} on pairs the LLM did not "
                "label")


def merge_human(llm: Qrels, human: Qrels) -> tuple[Qrels, Merged]:
    out = {qid: dict(docs) for qid, docs in llm.items()}
    m = Merged()
    for qid, docs in human.items():
        target = out.setdefault(qid, {})
        for docno, label in docs.items():
            if docno in target:
                m.replaced += 1
                m.changed += target[docno] != label
            else:
                m.added += 1
            target[docno] = label
    return out, m


def scale_of(qrels: Qrels) -> tuple[int, int] | None:
    """The labels' range, from 0 (or below, where a label is negative: trec_eval's judged
    but not relevant) to the highest."""
    values = [v for docs in qrels.values() for v in docs.values()]
    return (min(0, min(values)), max(values)) if values else None


def scale_notice(llm: Qrels, human: Qrels, labels_name: str, human_spec: str) -> str | None:
    """One line naming the first human label off ``llm``'s scale (its file and line) and
    how many are off it; None where every one is on it."""
    scale = scale_of(llm)
    if scale is None:
        return None
    low, high = scale
    off = {(q, d) for q, docs in human.items() for d, v in docs.items() if not low <= v <= high}
    if not off:
        return None
    name = display_name(human_spec)
    where = _first_line(human_spec, off)
    if where is None:   # an ir_datasets ID has no lines: the pair stands in for one
        qid, docno = min(off)
        where_text, label = f"{name}: query {qid} document {docno}:", human[qid][docno]
    else:
        lineno, (qid, docno) = where
        where_text, label = f"{name}:{lineno}:", human[qid][docno]
    many = "1 human label is" if len(off) == 1 else f"{len(off)} human labels are"
    return (f"{where_text} label {label} is off the {low}-{high} scale of {labels_name}'s labels; {many} off it "
            "(merged as given)")


def _first_line(spec: str, off: set[tuple[str, str]]) -> tuple[int, tuple[str, str]] | None:
    """The first line of the qrels file ``spec`` that holds a pair of ``off`` (read again
    only when there is one; the file was checked whole already, each pair is on one line)."""
    if not os.path.exists(spec):
        return None
    for lineno, line in iter_lines(spec):
        fields = line.split()
        if len(fields) == 4 and (fields[0], fields[2]) in off:
            return lineno, (fields[0], fields[2])
    return None
