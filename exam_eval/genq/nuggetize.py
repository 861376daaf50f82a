"""Nugget creation from documents and importance scoring: the AutoNuggetizer's creator and
scorer (castorini/nuggetizer ``models/nuggetizer.py`` ``create``, the package installed
with the test extras; Pradeep et al. 2024, arXiv 2411.09607), prompts word for word.

**Creation.** A topic's documents are read in windows of 10; each call shows the query,
the window's documents (``[1] text`` ...) and the nugget list so far, and the answer
(a Python list) replaces the list, cut to 30 nuggets. An answer that never parses after
the re-asks leaves the list as it was, as in the nuggetizer.

**Importance.** The final list is labelled vital / okay in windows of 10; then vital
nuggets come first (each group in list order) and at most 30 are kept. A label other
than vital/okay (or a window that never parses: the nuggetizer's "failed") leaves the
nugget without importance, counted and reported, never guessed.

The result is an exam_eval bank: ids ``query_id/md5(text)`` (stable across reruns and
hand edits), ``importance``, and the query text in ``query_text`` so the bank exports to
the nuggetizer's and AutoJudge's formats without the topics file.

Topics run side by side: step k sends window k of every topic at once (a topic's
windows depend on each other, topics do not). Every parsed answer is cached with the
list it started from, so a rerun, or a run with more documents, pays only for what changed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..grading.asking import Ask, Asker, parse_python_list
from ..grading.cache import GradeCache, NullCache, unit_key
from ..io.bank_items import IMPORTANCE, make_item_id, BankItem
from ..progress import progress_bar
from ..trec_eval.trec_files import ranked

WINDOW = 10
MAX_NUGGETS = 30

CREATOR_SYSTEM = ("You are NuggetizeLLM, an intelligent assistant that can update a list of atomic nuggets to "
                  "best provide all the information required for the query.")

CREATOR_USER = """Update the list of atomic nuggets of information (1-12 words), if needed, so they best provide the information required for the query. Leverage only the initial list of nuggets (if exists) and the provided context (this is an iterative process).  Return only the final list of all nuggets in a Pythonic list format (even if no updates). Make sure there is no redundant information. Ensure the updated nugget list has at most {max_nuggets} nuggets (can be less), keeping only the most vital ones. Order them in decreasing order of importance. Prefer nuggets that provide more interesting information.

Search Query: {query}
Context:
{context}
Search Query: {query}
Initial Nugget List: {nuggets}
Initial Nugget List Length: {n}

Only update the list of atomic nuggets (if needed, else return as is). Do not explain. Always answer in short nuggets (not questions). List in the form ["a", "b", ...] and a and b are strings with no mention of ".
Updated Nugget List:"""  # noqa: E501 - the published text, one line per paragraph

SCORER_SYSTEM = ("You are NuggetizeScoreLLM, an intelligent assistant that can label a list of atomic nuggets "
                 "based on their importance for a given search query.")

SCORER_USER = """Based on the query, label each of the {n} nuggets either a vital or okay based on the following criteria. Vital nuggets represent concepts that must be present in a \u201cgood\u201d answer; on the other hand, okay nuggets contribute worthwhile information about the target but are not essential. Return the list of labels in a Pythonic list format (type: List[str]). The list should be in the same order as the input nuggets. Make sure to provide a label for each nugget.

Search Query: {query}
Nugget List: {nuggets}

Only return the list of labels (List[str]). Do not explain.
Labels:"""  # noqa: E501 - the published text, one line per paragraph


def _hash(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()[:16]


CREATOR_HASH = _hash(CREATOR_SYSTEM, CREATOR_USER)
SCORER_HASH = _hash(SCORER_SYSTEM, SCORER_USER)


def creator_messages(query: str, documents: Sequence[str], nuggets: Sequence[str],
                     max_nuggets: int = MAX_NUGGETS) -> list[dict]:
    context = "\n".join(f"[{i + 1}] {doc}" for i, doc in enumerate(documents))
    return [{"role": "system", "content": CREATOR_SYSTEM},
            {"role": "user", "content": CREATOR_USER.format(max_nuggets=max_nuggets, query=query, context=context,
                                                            nuggets=list(nuggets), n=len(nuggets))}]


def scorer_messages(query: str, nuggets: Sequence[str]) -> list[dict]:
    return [{"role": "system", "content": SCORER_SYSTEM},
            {"role": "user", "content": SCORER_USER.format(n=len(nuggets), query=query, nuggets=list(nuggets))}]


@dataclass
class TopicNuggets:
    query_id: str
    query: str
    documents: list[str]
    nuggets: list[str] = field(default_factory=list)
    importance: list[str | None] = field(default_factory=list)
    failed: str | None = None  # why a call failed for good (the topic gets no bank items)
    unparsed_windows: int = 0  # creation or scoring windows whose answers never parsed
    #: a (re-)ask went to a batch file (--batch-out): the topic goes on in a later round
    #: and gets no bank items in this one
    pending: bool = False


@dataclass
class NuggetizeResult:
    topics: list[TopicNuggets]
    create_stats: object
    score_stats: object

    @property
    def failed(self) -> list[TopicNuggets]:
        return [t for t in self.topics if t.failed]

    @property
    def pending(self) -> list[TopicNuggets]:
        return [t for t in self.topics if t.pending and not t.failed]

    def bank(self) -> list[BankItem]:
        out = []
        for t in self.topics:
            if t.failed or t.pending:
                continue
            seen = set()
            for text, imp in zip(t.nuggets, t.importance):
                if not text.strip():  # a model's '' in its list: no nugget, and no bank reader takes it
                    continue
                item_id = make_item_id(t.query_id, text)
                if item_id in seen:  # the same nugget twice: one bank item
                    continue
                seen.add(item_id)
                out.append(BankItem(t.query_id, item_id, "nugget", text, importance=imp,
                                    extra={"query_text": t.query}))
        return out


def create(topics: Sequence[TopicNuggets], asker: Asker, *, window: int = WINDOW,
           max_nuggets: int = MAX_NUGGETS) -> None:
    """Fill each topic's ``nuggets`` window by window (all topics' window k at once)."""
    asker.parse, asker.prompt_hash = parse_python_list, CREATOR_HASH
    identity = asker.chat.cache_identity
    steps = max((-(-len(t.documents) // window) for t in topics), default=0)
    for step in range(steps):
        live = [t for t in topics if not t.failed and not t.pending and step * window < len(t.documents)]
        asks = {}
        for t in live:
            docs = t.documents[step * window:(step + 1) * window]
            key = unit_key(identity, CREATOR_HASH, t.query, json.dumps(t.nuggets, ensure_ascii=False),
                           json.dumps([max_nuggets, docs], ensure_ascii=False), None)
            asks[t.query_id] = Ask(key, creator_messages(t.query, docs, t.nuggets, max_nuggets))
        answers = asker.ask(list(asks.values()))
        for t in live:
            a = answers[asks[t.query_id].key]
            if a.error is not None:
                t.failed = a.error
            elif a.pending:  # the next window needs this one's nuggets: a later round goes on
                t.pending = True
            elif a.parsed:
                t.nuggets = list(a.value)[:max_nuggets]
            else:
                t.unparsed_windows += 1


def score(topics: Sequence[TopicNuggets], asker: Asker, *, window: int = WINDOW,
          max_nuggets: int = MAX_NUGGETS) -> None:
    """Label each topic's nuggets vital / okay, then put vital ones first and keep
    ``max_nuggets``."""
    asker.parse, asker.prompt_hash = parse_python_list, SCORER_HASH
    identity = asker.chat.cache_identity
    asks: dict[tuple[str, int], Ask] = {}
    for t in topics:
        if t.failed or t.pending:
            continue
        for start in range(0, len(t.nuggets), window):
            chunk = t.nuggets[start:start + window]
            key = unit_key(identity, SCORER_HASH, t.query, json.dumps(chunk, ensure_ascii=False), "", None)
            asks[(t.query_id, start)] = Ask(key, scorer_messages(t.query, chunk))
    answers = asker.ask(list(asks.values()))
    for t in topics:
        if t.failed or t.pending:
            continue
        labels: list[str | None] = []
        for start in range(0, len(t.nuggets), window):
            n = len(t.nuggets[start:start + window])
            a = answers[asks[(t.query_id, start)].key]
            if a.error is not None:
                t.failed = a.error
                break
            if a.pending:
                t.pending = True
                break
            if not a.parsed:
                t.unparsed_windows += 1
            got = [v.lower() for v in (a.value or [])]
            labels.extend((got[k] if k < len(got) and got[k] in IMPORTANCE else None) for k in range(n))
        if t.failed or t.pending:
            continue
        order = sorted(range(len(t.nuggets)), key=lambda k: (0 if labels[k] == "vital" else 1, k))[:max_nuggets]
        t.nuggets = [t.nuggets[k] for k in order]
        t.importance = [labels[k] for k in order]


def nuggetize(topics: Sequence[TopicNuggets], make_asker, *, window: int = WINDOW,
              max_nuggets: int = MAX_NUGGETS) -> NuggetizeResult:
    """Creation, then importance; ``make_asker()`` gives a fresh :class:`Asker` per step
    (so each has its own counts)."""
    creating, scoring = make_asker(), make_asker()
    create(topics, creating, window=window, max_nuggets=max_nuggets)
    score(topics, scoring, window=window, max_nuggets=max_nuggets)
    return NuggetizeResult(list(topics), creating.stats, scoring.stats)


# -- the documents a topic's nuggets come from --------------------------------------------

def documents_from_qrels(qrels: Mapping[str, Mapping[str, int]], min_label: int = 1) -> dict[str, list[str]]:
    """Judged documents with a label >= ``min_label``, in the qrels file's order."""
    return {q: [d for d, lab in docs.items() if lab >= min_label] for q, docs in qrels.items()}


def documents_from_runs(runs: Sequence[Mapping[str, Mapping[str, float]]], depth: int) -> dict[str, list[str]]:
    """The pool: every run's top ``depth`` (trec_eval order), by best rank, then doc id."""
    best: dict[str, dict[str, int]] = {}
    for run in runs:
        for q, docs in run.items():
            for rank, d in enumerate(ranked(docs)[:depth]):
                prev = best.setdefault(q, {}).get(d)
                best[q][d] = rank if prev is None else min(prev, rank)
    return {q: sorted(ds, key=lambda d: (ds[d], d)) for q, ds in best.items()}


def documents_from_reports(reports) -> dict[str, list[str]]:
    """The documents the reports cite (then those they list as references), first
    mention first."""
    out: dict[str, dict[str, None]] = {}
    for r in reports:
        seen = out.setdefault(r.topic_id, {})
        for d in [*r.cited_doc_ids(), *r.references]:
            seen.setdefault(d, None)
    return {q: list(ds) for q, ds in out.items()}


def nuggetize_topics(queries: Mapping[str, str], doc_ids: Mapping[str, Sequence[str]], texts: Mapping[str, str],
                     chat, *, cache_path: str | None = None, retries: int = 5, window: int = WINDOW,
                     max_nuggets: int = MAX_NUGGETS, log=None) -> NuggetizeResult:
    """What ``exam-genq nuggetize`` does once its inputs are read: the topics with
    documents that have text, creation and importance behind progress bars."""
    log = log or (lambda msg: None)
    topics = []
    missing = 0
    for qid, query in queries.items():
        docs = [texts[d] for d in doc_ids.get(qid, ()) if (texts.get(d) or "").strip()]
        missing += sum(1 for d in doc_ids.get(qid, ()) if not (texts.get(d) or "").strip())
        if docs:
            topics.append(TopicNuggets(qid, query, docs))
    if missing:
        log(f"{missing} documents have no text and are left out")
    skipped = len(queries) - len(topics)
    if skipped:
        log(f"{skipped} topics have no documents with text and get no nuggets")
    caches: list = []

    def make_asker():
        cache = NullCache() if cache_path is None else GradeCache(cache_path)
        caches.append(cache)
        return Asker(chat, parse_python_list, retries=retries, cache=cache)

    try:
        creating, scoring = make_asker(), make_asker()
        steps = sum(-(-len(t.documents) // window) for t in topics)
        with progress_bar(steps, "creating nuggets", "windows") as bar:
            creating.on_chunk = bar.advance
            create(topics, creating, window=window, max_nuggets=max_nuggets)
        with progress_bar(sum(-(-len(t.nuggets) // window) for t in topics if not (t.failed or t.pending)),
                          "scoring importance", "windows") as bar:
            scoring.on_chunk = bar.advance
            score(topics, scoring, window=window, max_nuggets=max_nuggets)
    finally:
        for c in caches:
            c.close()
        chat.close()
    return NuggetizeResult(topics, creating.stats, scoring.stats)
