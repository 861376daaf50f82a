"""What the labelling page shows each assessor: the pair at their cursor, and their progress.

The order of the pairs is the design's (query by query, pool order inside a query). An
assessor's cursor starts at the first pair they have not labelled, so a restart, or a
reload of the page, resumes there; labelling moves it to the next unlabelled pair after
it (wrapping round to pairs skipped before); skip moves it one on; undo takes back the
newest label and shows that pair again. Several assessors label at once, each from their
own log, and a thread lock keeps one assessor's two tabs from interleaving.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .label_design import Design
from .label_guidelines import default_guidelines
from .label_store import Labels, assessors, labels_path, read_labels


class StalePair(Exception):
    """The page labelled a pair other than the one its assessor is at (another tab moved on)."""


@dataclass
class Texts:
    queries: dict[str, str]
    passages: dict[str, str]
    llm: dict[str, dict[str, int]] | None = None   # shown only with --show-llm
    nuggets: dict | None = None   # nugget mode: (qid, pair key) -> run_id, report sentences, nugget
    #: qid -> {"description", "narrative"}: what the topics say beyond the query, where they do
    topics: dict[str, dict[str, str]] = field(default_factory=dict)


class Assessor:
    def __init__(self, name: str, folder: str, pairs: list[tuple[str, str]], log=lambda msg: None, *,
                 top: int | None = None):
        self.name = name
        self.pairs = pairs
        self.index = {p: i for i, p in enumerate(pairs)}
        self.labels: Labels = read_labels(labels_path(folder, name), log, pairs=pairs, top=top)
        self.cursor = self._next_unlabelled(0)

    def _next_unlabelled(self, start: int) -> int | None:
        n = len(self.pairs)
        for k in range(n):
            i = (start + k) % n
            if not self.labels.done(self.pairs[i]):
                return i
        return None

    def _check(self, at: int) -> None:
        if at != self.cursor:
            raise StalePair()

    def label(self, at: int, label: int, note: str) -> None:
        self._check(at)
        qid, docno = self.pairs[at]
        self.labels.append({"event": "label", "qid": qid, "docno": docno, "label": label, "note": note})
        self.cursor = self._next_unlabelled(at + 1)

    def cannot_judge(self, at: int, note: str) -> None:
        self._check(at)
        qid, docno = self.pairs[at]
        self.labels.append({"event": "cannot_judge", "qid": qid, "docno": docno, "note": note})
        self.cursor = self._next_unlabelled(at + 1)

    def goto(self, at: int) -> None:
        """Back to any pair (one labelled before, to revise it): nothing is written until
        it is labelled again, which appends the new label to the log."""
        self.cursor = at

    def skip(self, at: int) -> None:
        self._check(at)
        nxt = self._next_unlabelled(at + 1)
        self.cursor = at if nxt is None else nxt

    def undo(self) -> bool:
        if not self.labels.stack:
            return False
        qid, docno = self.labels.stack[-1]
        self.labels.append({"event": "undo", "qid": qid, "docno": docno})
        self.cursor = self.index.get((qid, docno), self.cursor)
        return True


class LabelSession:
    """The server's state: the design, the texts, one :class:`Assessor` per name seen."""

    def __init__(self, design: Design, folder: str, texts: Texts, *, show_llm: bool, log=lambda msg: None):
        self.design = design
        self.folder = folder
        self.texts = texts
        self.show_llm = show_llm
        self.log = log
        self.pairs = design.pair_list()
        self.guidelines = [list(g) for g in (design.guidelines or default_guidelines(design.top_label, design.mode))]
        self._assessors: dict[str, Assessor] = {}
        self._lock = threading.Lock()
        for name in assessors(folder):   # a broken log is refused before the page is served
            self.assessor(name)

    def assessor(self, name: str) -> Assessor:
        with self._lock:
            if name not in self._assessors:
                self._assessors[name] = Assessor(name, self.folder, self.pairs, self.log, top=self.design.top_label)
            return self._assessors[name]

    def act(self, name: str, action: str, body: dict) -> dict:
        a = self.assessor(name)
        with self._lock:
            stale = False
            try:
                if action == "label":
                    a.label(int(body["at"]), int(body["label"]), str(body.get("note") or "")[:2000])
                elif action == "cannot_judge":
                    a.cannot_judge(int(body["at"]), str(body.get("note") or "")[:2000])
                elif action == "goto":
                    a.goto(int(body["at"]))
                elif action == "skip":
                    a.skip(int(body["at"]))
                elif action == "undo":
                    a.undo()
            except StalePair:
                stale = True
            state = self._state(a)
        state["stale"] = stale
        return state

    @staticmethod
    def _given(a: Assessor, pair) -> int | str | None:
        """The pair's label, "cannot judge", or None where not done."""
        if pair in a.labels.given:
            return a.labels.given[pair][0]
        return "cannot judge" if pair in a.labels.cannot else None

    def state(self, name: str) -> dict:
        a = self.assessor(name)
        with self._lock:
            return self._state(a)

    def _state(self, a: Assessor) -> dict:
        per_query: dict[str, list[int]] = {}
        for qid, docno in self.pairs:
            cell = per_query.setdefault(qid, [0, 0])
            cell[1] += 1
            cell[0] += a.labels.done((qid, docno))
        done = len(a.labels.given) + len(a.labels.cannot)
        out = {"assessor": a.name, "mode": self.design.mode, "scale": self.design.top_label, "done": done,
               "total": len(self.pairs), "cannot_judge": len(a.labels.cannot), "guidelines": self.guidelines,
               "per_query": [{"qid": q, "done": d, "total": t} for q, (d, t) in per_query.items()],
               "can_undo": bool(a.labels.stack), "pair": None, "history": []}
        if a.cursor is not None:
            qid, docno = self.pairs[a.cursor]
            pair = {"at": a.cursor, "qid": qid, "query": self.texts.queries.get(qid, ""), "docno": docno,
                    **self.texts.topics.get(qid, {}), "given": self._given(a, (qid, docno))}
            # this assessor's labels of the query, to go back to any of them (design order)
            out["history"] = [{"at": i, "docno": d, "given": self._given(a, (q, d))}
                              for i, (q, d) in enumerate(self.pairs) if q == qid and a.labels.done((q, d))]
            if self.texts.nuggets is not None:
                pair.update(self.texts.nuggets[(qid, docno)])
            else:
                pair["passage"] = self.texts.passages.get(docno, "")
            if self.show_llm and self.texts.llm is not None:
                pair["llm"] = self.texts.llm.get(qid, {}).get(docno)
            out["pair"] = pair
        return out
