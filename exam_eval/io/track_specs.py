"""Track specs for RAG reports: which metadata, citation shapes, references and lengths a
track accepts, and the per-report checks that hold a report to them.

The specs and their rules mirror ``autojudge-base`` 1.0.0 (trec-auto-judge/auto-judge-base,
MIT; ``track_specs.yml`` and ``report_spec_verification.py``), the field's reference
validator: the same spec names, the same finding categories, and the same split into
errors and "smells" (findings a spec demotes to warnings). We keep our own copy because
autojudge-base does not import offline (see README, "Evaluating RAG reports");
tests/io/test_reports_autojudge_compat.py compares the two wherever autojudge-base imports.

Without a spec only the structural checks run (non-empty answer and sentences, citation
indices inside ``references``), exactly as autojudge-base does with ``spec=None``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Callable

DEFAULT_SMELLS = ("empty_answer", "blank_sentence", "duplicate_topics", "references_duplicate")


@dataclass(frozen=True)
class TrackSpec:
    track: str
    task: str
    sentence_type: tuple[str, ...]  # accepted citation shapes: rag24 (indices), ragtime (id -> score), neuclir (ids)
    sentences_key: str  # "answer" (RAG) or "responses" (RAGTIME, DRAGUN)
    topic_id_field: str
    mandatory_metadata: tuple[str, ...]
    recommended_metadata: tuple[str, ...] = ()
    require_exact_narrative: bool = False  # metadata.narrative must copy the request text (checked with requests)
    run_id_max_len: int | None = None
    docid_pattern: str | None = None
    collection_ids: tuple[str, ...] | None = None
    references_kind: str = "cited_only"  # cited_only | retrieval_list | none | ignore
    references_optional: bool = False
    references_max: int | None = None
    max_citations_per_sentence: int | None = None
    length_unit: str = "words"  # words | chars
    length_limit: int | None = None
    length_limit_request_field: str | None = None  # RAGTIME: the per-request character budget
    smells: tuple[str, ...] = DEFAULT_SMELLS


_MSMARCO_SEG = r"msmarco_v2\.1_doc_\d\d_\d+#\d+_\d+"
_NEUCLIR_SEG = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}_\d+"

SPECS: dict[str, TrackSpec] = {s.track: s for s in (
    TrackSpec("rag26", "generation", ("rag24", "neuclir"), "answer", "narrative_id",
              ("team_id", "narrative_id", "narrative", "run_id", "run_desc"), require_exact_narrative=True,
              run_id_max_len=20,
              docid_pattern=r"shard_\d+_\d+", collection_ids=("climbmix-400b",), references_kind="retrieval_list",
              max_citations_per_sentence=3, length_limit=1024,
              smells=("empty_answer", "references_duplicate", "references_uncited", "citation_count", "missing_topics")),
    TrackSpec("rag25", "generation", ("rag24", "neuclir"), "answer", "narrative_id",
              ("team_id", "run_id", "type", "narrative_id", "narrative"), require_exact_narrative=True,
              docid_pattern=_MSMARCO_SEG,
              collection_ids=("msmarco_v2.1_doc_segmented",), references_kind="retrieval_list", references_max=100,
              length_limit=400, smells=("empty_answer", "references_duplicate", "references_uncited", "length")),
    TrackSpec("rag25-autojudge", "generation", ("ragtime", "rag24", "neuclir"), "answer", "narrative_id",
              ("team_id", "run_id", "narrative_id"), docid_pattern=_MSMARCO_SEG,
              collection_ids=("msmarco_v2.1_doc_segmented",), references_kind="ignore", length_limit=400,
              smells=("empty_answer", "blank_sentence", "duplicate_topics", "references_duplicate",
                      "references_uncited", "length")),
    TrackSpec("ragtime25", "repgen", ("ragtime", "neuclir"), "responses", "topic_id", ("team_id", "topic_id", "run_id"),
              recommended_metadata=("task",), run_id_max_len=25, docid_pattern=_NEUCLIR_SEG,
              collection_ids=("ragtime/1/all", "ragtime/1/eng"), references_kind="cited_only",
              max_citations_per_sentence=3, length_unit="chars", length_limit_request_field="limit",
              smells=("empty_answer", "blank_sentence", "duplicate_topics", "references_duplicate", "references_missing",
                      "references_undeclared", "metadata_recommended", "citation_count", "length")),
    TrackSpec("ragtime26", "repgen", ("ragtime", "neuclir"), "responses", "topic_id", ("team_id", "topic_id", "run_id"),
              recommended_metadata=("run_desc",), run_id_max_len=20, docid_pattern=_NEUCLIR_SEG,
              collection_ids=("ragtime/2/all", "ragtime/2/eng"), references_kind="ignore", references_optional=True,
              max_citations_per_sentence=3, length_unit="chars", length_limit_request_field="limit",
              smells=("empty_answer", "blank_sentence", "duplicate_topics", "citation_count", "metadata_recommended",
                      "length")),
    TrackSpec("dragun25", "repgen", ("neuclir",), "responses", "topic_id",
              ("team_id", "run_id", "topic_id", "type", "use_starter_kit"), docid_pattern=_MSMARCO_SEG,
              collection_ids=("msmarco_v2.1_doc_segmented",), references_kind="ignore", max_citations_per_sentence=3,
              length_limit=250,
              smells=("empty_answer", "missing_topics", "blank_sentence", "duplicate_topics", "references_duplicate",
                      "references_present", "new_topics", "citation_count")),
    TrackSpec("kiddie", "repgen", ("neuclir",), "responses", "topic_id", ("team_id", "run_id", "topic_id"),
              references_kind="ignore"),
)}


def length_count(texts, unit: str) -> int:
    """The official RAGTIME validator's count: join with single spaces, then count
    whitespace-split words or NFKC characters."""
    joined = " ".join(texts)
    return len(joined.split()) if unit == "words" else len(unicodedata.normalize("NFKC", joined))


Add = Callable[[str, str], None]


def check_report(raw: dict, fmt: str | None, sentences: list[dict], spec: TrackSpec | None, add: Add,
                 request_limit: int | None = None) -> None:
    """Run the checks of ``spec`` (or the structural ones) on one validated report.

    ``raw`` is the report's metadata after id normalization (see reports.py),
    ``sentences`` the chosen sentence list with ``citations`` as given (indices for
    rag24), ``fmt`` its citation shape. Every finding goes to ``add(category, message)``.
    """
    key = spec.sentences_key if spec else "responses"
    refs = raw["references"] or []
    if not sentences:
        add("empty_answer", f"no sentences in '{key}'")
        return
    if all(not s["text"].strip() for s in sentences):
        add("empty_answer", f"every sentence in '{key}' is blank")
        # a spec may take an empty answer as a smell: the report is still read, so its
        # citations must still point at references
        _check_indices(sentences, fmt, refs, key, add)
        return
    if spec is None:
        for i, s in enumerate(sentences):
            if not s["text"].strip():
                add("blank_sentence", f"{key}[{i}].text is blank")
            _check_indices([s], fmt, refs, key, add, first=i)
        return
    t = spec.track
    md = raw["metadata"]
    for name in spec.mandatory_metadata:
        v = md.get(name)
        if v is None or (isinstance(v, str) and not v.strip()):
            add("metadata", f"track spec {t}: metadata.{name} is required but missing or empty")
    for name in spec.recommended_metadata:
        v = md.get(name)
        if v is None or (isinstance(v, str) and not v.strip()):
            add("metadata_recommended", f"track spec {t}: metadata.{name} is recommended but missing or empty")
    if spec.run_id_max_len is not None and len(md["run_id"]) > spec.run_id_max_len:
        add("run_id_length", f"track spec {t}: run_id has {len(md['run_id'])} characters "
                             f"(at most {spec.run_id_max_len})")
    pat = re.compile(spec.docid_pattern) if spec.docid_pattern else None
    coll = f" of collection {spec.collection_ids[0]}" if spec.collection_ids else ""
    cited: set[str] = set()
    for i, s in enumerate(sentences):
        if fmt not in spec.sentence_type:
            add("citation_format", f"track spec {t}: {key}[{i}] cites in the {fmt} shape; "
                                   f"{t} accepts {', '.join(spec.sentence_type)}")
            continue
        if not s["text"].strip():
            add("blank_sentence", f"track spec {t}: {key}[{i}].text is blank")
        cits = s["citations"] or []
        if spec.max_citations_per_sentence is not None and len(cits) > spec.max_citations_per_sentence:
            add("citation_count", f"track spec {t}: {key}[{i}] has {len(cits)} citations "
                                  f"(at most {spec.max_citations_per_sentence})")
        if fmt == "rag24":
            _check_indices([s], fmt, refs, key, add, first=i)
            ids = [refs[c] for c in cits if 0 <= c < len(refs)]
        else:
            ids = list(cits)
        cited.update(ids)
        if pat is not None:
            for d in ids:
                if not pat.match(d):
                    add("docid_pattern", f"track spec {t}: cited document id {d!r} is not a document id{coll} "
                                         f"(pattern {spec.docid_pattern})")
    _check_references(raw["references"], cited, spec, pat, coll, add)
    texts = [s["text"] for s in sentences]
    limit = spec.length_limit if spec.length_limit is not None else request_limit
    if limit is not None:
        n = length_count(texts, spec.length_unit)
        if n > limit:
            add("length", f"track spec {t}: the report has {n} {spec.length_unit} (limit {limit})")


def _check_indices(sentences: list[dict], fmt: str | None, refs: list, key: str, add: Add, first: int = 0) -> None:
    """rag24 citations are indices into 'references': each must point at one."""
    if fmt != "rag24":
        return
    for i, s in enumerate(sentences, first):
        for c in s["citations"] or []:
            if not 0 <= c < len(refs):
                add("reference_index", f"{key}[{i}] cites reference index {c}, but 'references' has {len(refs)} entries")


def _check_references(refs, cited: set[str], spec: TrackSpec, pat, coll: str, add: Add) -> None:
    t = spec.track
    if spec.references_kind == "ignore":
        return
    if spec.references_kind == "none":
        if refs:
            add("references_present", f"track spec {t}: the track has no 'references', but the report gives them")
        return
    if spec.references_optional and not refs:
        return
    if refs is None:
        add("references_missing", f"track spec {t}: 'references' is required but missing")
        return
    if len(set(refs)) != len(refs):
        add("references_duplicate", f"track spec {t}: 'references' lists a document twice")
    if pat is not None:
        for d in refs:
            if not pat.match(d):
                add("docid_pattern", f"track spec {t}: reference {d!r} is not a document id{coll} "
                                     f"(pattern {spec.docid_pattern})")
    uncited = sorted(set(refs) - cited)
    if spec.references_kind == "cited_only":
        undeclared = sorted(cited - set(refs))
        if undeclared:
            add("references_undeclared", f"track spec {t}: {len(undeclared)} cited documents are not in "
                                         f"'references' (e.g. {undeclared[0]!r})")
        if uncited:
            add("references_uncited", f"track spec {t}: {len(uncited)} documents in 'references' are never "
                                      f"cited (e.g. {uncited[0]!r})")
    elif spec.references_kind == "retrieval_list":
        if not cited <= set(refs):
            add("references_undeclared", f"track spec {t}: some cited documents are not in 'references'")
        if spec.references_max is not None and len(refs) > spec.references_max:
            add("references_max", f"track spec {t}: 'references' has {len(refs)} entries "
                                  f"(at most {spec.references_max})")
        if uncited:
            add("references_uncited", f"track spec {t}: {len(uncited)} documents in 'references' are never "
                                      f"cited (e.g. {uncited[0]!r})")
