"""The pool: which passages of which queries get graded.

Top ``depth`` passages of every run (trec_eval order: score descending, docno
descending), optionally every passage the qrels judged, optionally the segments of
generated responses. Order inside a query is first appearance, so the work list is
deterministic for the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..trec_eval.trec_files import ranked, read_qrels, read_run
from .segment import Segment


@dataclass
class Pool:
    docs: dict[str, dict[str, None]] = field(default_factory=dict)  # qid -> ordered doc ids
    texts: dict[str, str] = field(default_factory=dict)  # texts known without --passages (segments)
    sources: list[str] = field(default_factory=list)

    def add(self, qid: str, doc_id: str) -> None:
        self.docs.setdefault(qid, {})[doc_id] = None

    @property
    def size(self) -> int:
        return sum(len(d) for d in self.docs.values())

    def doc_ids(self) -> set[str]:
        return {d for docs in self.docs.values() for d in docs}

    def add_run(self, path: str, depth: int | None) -> None:
        run = read_run(path)
        for qid in sorted(run):
            docs = ranked(run[qid])
            for doc in docs if depth is None else docs[:depth]:
                self.add(qid, doc)
        self.sources.append(path)

    def add_qrels(self, path: str) -> None:
        qrels = read_qrels(path)
        for qid in sorted(qrels):
            for doc in sorted(qrels[qid]):
                self.add(qid, doc)
        self.sources.append(path)

    def add_segments(self, segments: list[Segment], depth: int | None) -> None:
        for s in segments:
            if depth is None or s.rank <= depth:
                self.add(s.query_id, s.doc_id)
                self.texts[s.doc_id] = s.text
