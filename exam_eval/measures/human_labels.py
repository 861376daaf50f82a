"""Human labels over LLM labels: where a person labelled a pair, their label is the pair's.

The sample an assessor labels (exam-verify label) is a small part of the pool the LLM
labelled; the qrels a track publishes can take both, the human label winning on its
pair. The count of what was replaced is said, so a reader of the qrels knows how much
of them is human.
"""

from __future__ import annotations

from dataclasses import dataclass

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
