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
from dataclasses import dataclass

from .label_design import Design
from .label_store import Labels, assessors, labels_path, read_labels


class StalePair(Exception):
    """The page labelled a pair other than the one its assessor is at (another tab moved on)."""


@dataclass
class Texts:
    queries: dict[str, str]
    passages: dict[str, str]
    llm: dict[str, dict[str, int]] | None = None   # shown only with --show-llm
    nuggets: dict | None = None   # nugget mode: (qid, pair key) -> run_id, report sentences, nugget


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
            if self.pairs[i] not in self.labels.given:
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
                elif action == "skip":
                    a.skip(int(body["at"]))
                elif action == "undo":
                    a.undo()
            except StalePair:
                stale = True
            state = self._state(a)
        state["stale"] = stale
        return state

    def state(self, name: str) -> dict:
        a = self.assessor(name)
        with self._lock:
            return self._state(a)

    def _state(self, a: Assessor) -> dict:
        per_query: dict[str, list[int]] = {}
        for qid, docno in self.pairs:
            cell = per_query.setdefault(qid, [0, 0])
            cell[1] += 1
            cell[0] += (qid, docno) in a.labels.given
        done = len(a.labels.given)
        out = {"assessor": a.name, "mode": self.design.mode, "scale": self.design.top_label, "done": done, "total": len(self.pairs),
               "per_query": [{"qid": q, "done": d, "total": t} for q, (d, t) in per_query.items()],
               "can_undo": bool(a.labels.stack), "pair": None}
        if a.cursor is not None:
            qid, docno = self.pairs[a.cursor]
            pair = {"at": a.cursor, "qid": qid, "query": self.texts.queries.get(qid, ""), "docno": docno}
            if self.texts.nuggets is not None:
                pair.update(self.texts.nuggets[(qid, docno)])
            else:
                pair["passage"] = self.texts.passages.get(docno, "")
            if self.show_llm and self.texts.llm is not None:
                pair["llm"] = self.texts.llm.get(qid, {}).get(docno)
            out["pair"] = pair
        return out
