"""RAG reports (TREC RAG 24-26, RAGTIME, DRAGUN, NeuCLIR, TREC AutoJudge): the data model.

A report is one JSONL line per (run, topic): ``metadata`` (``run_id``, ``topic_id``,
``team_id``), ``responses`` (sentences with ``citations``) and ``references``. Tracks
spell citations three ways, and all three become :class:`Citation` here:

- document ids (NeuCLIR): ``"citations": ["doc1", "doc2"]``
- indices into ``references`` (RAG 24): ``"citations": [0, 2]``
- document id -> confidence (RAGTIME): ``"citations": {"doc1": 0.9}``

Ids follow the generated-response segments of :mod:`exam_eval.grading.segment`, so a
grade stays attached to a sentence exactly as long as its text is unchanged:

- sentence: ``run_id/topic_id/N-md5(text)[:10]`` (N = 1-based position in the report)
- whole report: ``run_id/topic_id/report-md5(full text)[:10]``

This module is the contract between report reading (loading, validation, grading) and
report scoring (nugget scores, EXAM-Cover of reports, document qrels from citations).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..errors import InputError, UsageError
from .jsonl import iter_jsonl
from .openers import display_name, iter_lines
from .topics import read_topics
from .track_specs import SPECS, check_report
from .trec_rules import trec_ranked


@dataclass(frozen=True)
class Citation:
    doc_id: str
    confidence: float | None = None  # RAGTIME's doc id -> confidence maps; None elsewhere


@dataclass(frozen=True)
class ReportSentence:
    doc_id: str  # stable id, see module docstring; the "passage id" grades are keyed by
    index: int  # 1-based position in the report
    text: str
    citations: tuple[Citation, ...] = ()


@dataclass(frozen=True)
class Report:
    run_id: str
    topic_id: str
    team_id: str | None
    sentences: tuple[ReportSentence, ...]
    references: tuple[str, ...] = ()
    source: str | None = None  # file the report came from, for messages
    line: int | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)  # other metadata, kept
    citation_format: str | None = None  # how the file spelled citations: neuclir, ragtime or rag24
    documents: dict = field(default_factory=dict, compare=False, hash=False)  # texts the report embeds
    warnings: tuple[str, ...] = field(default=(), compare=False)  # the track spec's smells it shows

    @property
    def text(self) -> str:
        """The whole report: its sentences joined by single spaces."""
        return " ".join(s.text for s in self.sentences)

    @property
    def doc_id(self) -> str:
        return report_id(self.run_id, self.topic_id, self.text)

    def cited_doc_ids(self) -> list[str]:
        """Every document the report cites, first citation first, each once."""
        seen: dict[str, None] = {}
        for s in self.sentences:
            for c in s.citations:
                seen.setdefault(c.doc_id, None)
        return list(seen)


def segment_id(run_id: str, query_id: str, n: int, text: str) -> str:
    """The id of the n-th passage cut from a generated text: run/query/n-md5(text)[:10]
    (exam_eval.grading.segment); report sentences use the same ids."""
    digest = hashlib.md5(text.encode("utf-8")).hexdigest()[:10]
    return f"{run_id}/{query_id}/{n}-{digest}"


def sentence_id(run_id: str, topic_id: str, index: int, text: str) -> str:
    return segment_id(run_id, topic_id, index, text)


def report_id(run_id: str, topic_id: str, text: str) -> str:
    digest = hashlib.md5(text.encode("utf-8")).hexdigest()[:10]
    return f"{run_id}/{topic_id}/report-{digest}"


# ---- reading ----------------------------------------------------------------------------
#
# What is accepted mirrors autojudge-base 1.0.0's pydantic models (Report, ReportMetaData,
# the three sentence models) field by field, including the lax conversions pydantic makes
# (an index given as 2.0 or "2", a confidence given as "0.7"); the citation shape of a
# report is chosen the way pydantic chooses a member of the union
# ``List[Neuclir] | List[Ragtime] | List[Rag24]``: the first that every sentence matches
# exactly, else the first that every sentence matches after conversion. Departures, all
# refusals: an empty run_id/topic_id, and one containing whitespace (they would break
# TREC files and our sentence ids); a boolean citation (pydantic reads [true] as index
# 1); a confidence that is not finite.

_SHAPES = ("neuclir", "ragtime", "rag24")
_TASKS = ("multilingual", "english", "rag")
# pydantic's lax int from text: ASCII digits only ("١" and "１" are refused there), and a
# zero fraction may follow ("1.0" is 1)
_INT_TEXT = re.compile(r"\s*([+-]?\d+)(?:\.0*)?\s*\Z", re.ASCII)


class _Bad(Exception):
    """A field that does not validate: the message names the field."""


def _lax_int(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    m = _INT_TEXT.match(v) if isinstance(v, str) else None
    if m:
        return int(m.group(1))
    raise ValueError(v)


def _lax_float(v):
    if isinstance(v, (bool, int, float)):
        return float(v)
    if isinstance(v, str) and v.isascii():  # Python's float() reads "１" too; pydantic does not
        return float(v)
    raise ValueError(v)


def _shape_citations(c, shape: str, strict: bool):
    """The citations of one sentence in ``shape``, or raise ValueError.

    Departing from pydantic's lax mode, a boolean is never an index or a confidence
    (``[true]`` is not reference 1) and a confidence must be finite."""
    if c is None:
        return None
    if shape == "neuclir":
        if isinstance(c, list) and all(isinstance(x, str) for x in c):
            return list(c)
    elif shape == "ragtime":
        if isinstance(c, dict):
            if strict:
                if all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in c.values()):
                    return {k: float(x) for k, x in c.items()}
            else:
                return {k: _confidence(x) for k, x in c.items()}
    elif isinstance(c, list):  # rag24
        if strict:
            if all(isinstance(x, int) and not isinstance(x, bool) for x in c):
                return list(c)
        else:
            return [_index(x) for x in c]
    raise ValueError(c)


def _index(v) -> int:
    if isinstance(v, bool):
        raise ValueError(v)
    return _lax_int(v)


def _confidence(v) -> float:
    if isinstance(v, bool):
        raise ValueError(v)
    v = _lax_float(v)
    if not math.isfinite(v):
        raise ValueError(v)
    return v


def _why_no_shape(c) -> str | None:
    """A specific reason why the citations ``c`` fit no shape, where there is one."""
    values = list(c.values()) if isinstance(c, dict) else c if isinstance(c, list) else []
    if any(isinstance(x, bool) for x in values):
        return "holds true/false, which is neither a document id, an index into 'references' nor a confidence"
    if isinstance(c, dict):
        for doc, x in c.items():
            try:
                bad = not math.isfinite(_lax_float(x))
            except ValueError:
                continue
            if bad:
                return f"gives document {_show(doc)} the confidence {_show(x)}: NaN and infinities are not allowed"
    return None


def _choose_shape(cits: list) -> tuple[str, list]:
    for strict in (True, False):
        for shape in _SHAPES:
            try:
                return shape, [_shape_citations(c, shape, strict) for c in cits]
            except ValueError:
                continue
    for i, c in enumerate(cits):  # name the first sentence that fits no shape on its own
        if not any(_fits(c, shape) for shape in _SHAPES):
            why = _why_no_shape(c)
            if why:
                raise _Bad(f"[{i}].citations {why}")
            raise _Bad(f"[{i}].citations must be a list of document ids, a list of indices into "
                       f"'references' or a map document id -> confidence, got {_show(c)}")
    raise _Bad(".citations mixes shapes (document ids, indices, id -> confidence maps) in one report")


def _fits(c, shape: str) -> bool:
    try:
        _shape_citations(c, shape, False)
        return True
    except ValueError:
        return False


def _show(v) -> str:
    try:
        s = json.dumps(v, ensure_ascii=False)
    except (RecursionError, TypeError, ValueError):  # from Python callers: any object
        s = repr(type(v).__name__)
    return s if len(s) <= 60 else s[:57] + "..."


def _need(obj: dict, key: str, kinds: tuple, what: str, *, prefix: str = ""):
    """obj[key] if absent, or of one of ``kinds`` (None in kinds: null allowed)."""
    if key not in obj:
        return None
    v = obj[key]
    if v is None and None in kinds:
        return None
    types = tuple(k for k in kinds if k is not None)
    if v is None or isinstance(v, bool) or not isinstance(v, types):
        raise _Bad(f"{prefix}{key} must be {what}, got {_show(v)}")
    return v


def _metadata(md) -> dict:
    if not isinstance(md, dict):
        raise _Bad(f"'metadata' must be an object, got {_show(md)}")
    p = "metadata."
    for key in ("team_id", "run_id"):
        if key not in md:
            raise _Bad(f"missing metadata.{key}")
        _need(md, key, (str,), "a string", prefix=p)
    _need(md, "topic_id", (str,), "a string", prefix=p)  # absent is fine, null is not
    narr = md.get("narrative_id")
    if narr is not None:
        if isinstance(narr, float) and narr.is_integer():
            narr = int(narr)
        if not isinstance(narr, (str, int)) or isinstance(narr, bool):
            raise _Bad(f"metadata.narrative_id must be a string or an integer, got {_show(narr)}")
        narr = str(narr)
    for key in ("request_id", "description", "type", "narrative", "run_desc"):
        _need(md, key, (str, None), "a string", prefix=p)
    for key in ("creator", "extra"):
        _need(md, key, (dict,), "an object", prefix=p)
    _need(md, "evaldata", (dict, None), "an object", prefix=p)
    cids = md.get("collection_ids")
    if cids is not None and not (isinstance(cids, list) and all(isinstance(c, str) for c in cids)):
        raise _Bad(f"metadata.collection_ids must be a list of strings, got {_show(cids)}")
    if md.get("task") is not None and md["task"] not in _TASKS:
        raise _Bad(f"metadata.task must be one of {', '.join(_TASKS)}, got {_show(md['task'])}")
    for key in ("use_starter_kit", "limit"):
        if md.get(key) is not None:
            try:
                _lax_int(md[key])
            except ValueError:
                raise _Bad(f"metadata.{key} must be an integer, got {_show(md[key])}") from None
    topic = md.get("topic_id")
    if topic is not None and narr is not None and topic != narr:
        raise _Bad(f"metadata.topic_id {topic!r} and metadata.narrative_id {narr!r} disagree")
    topic = topic if topic is not None else narr
    if topic is None:
        raise _Bad("missing metadata.topic_id (or narrative_id)")
    for key, value in (("run_id", md["run_id"]), ("topic_id", topic)):
        if not value.strip():
            raise _Bad(f"metadata.{key} is empty")
        if any(ch.isspace() for ch in value):
            raise _Bad(f"metadata.{key} {value!r} contains whitespace (not allowed in TREC files)")
        if not value.isprintable():
            raise _Bad(f"metadata.{key} {value!r} contains control characters")
    out = dict(md)
    out.update(topic_id=topic, narrative_id=topic, request_id=topic)  # as autojudge-base syncs them
    return out


def _sentences(obj: dict) -> tuple[str, list]:
    key = "responses" if obj.get("responses") is not None else "answer"
    sents = obj.get(key)
    if sents is None:
        raise _Bad("missing 'responses' (or 'answer')")
    if not isinstance(sents, list):
        raise _Bad(f"'{key}' must be a list of sentences, got {_show(sents)}")
    for i, s in enumerate(sents):
        where = f"{key}[{i}]"
        if not isinstance(s, dict):
            raise _Bad(f"{where} must be an object with 'text' and 'citations', got {_show(s)}")
        if "text" not in s:
            raise _Bad(f"{where} has no 'text'")
        _need(s, "text", (str,), "a string", prefix=where + ".")
        for k in ("metadata", "evaldata"):
            _need(s, k, (dict, None), "an object", prefix=where + ".")
    return key, sents


def _documents(obj: dict) -> dict[str, str]:
    docs = obj.get("documents")
    if docs is None:
        return {}
    if not isinstance(docs, dict):
        raise _Bad(f"'documents' must be an object (document id -> document), got {_show(docs)}")
    out = {}
    for key, d in docs.items():
        if not isinstance(d, dict) or not isinstance(d.get("id"), str) or not isinstance(d.get("text"), str):
            raise _Bad(f"documents[{key!r}] must be an object with string 'id' and 'text'")
        if d["id"] != key:  # which of the two ids would a citation mean?
            raise _Bad(f"documents[{key!r}] holds the document {d['id']!r}")
        for k in ("title", "url"):
            _need(d, k, (str, None), "a string", prefix=f"documents[{key!r}].")
        out[key] = f"{d['title']} {d['text']}" if d.get("title") is not None else d["text"]  # Document.get_text()
    return out


def embedded_documents(reports) -> dict[str, str]:
    """The texts the reports embed, by document id. One id with two texts in two reports
    is refused, naming both: one report's sentences were graded against the other's text."""
    out: dict[str, str] = {}
    where: dict[str, str] = {}
    for r in reports:
        for doc_id, text in r.documents.items():
            if doc_id not in out:
                out[doc_id], where[doc_id] = text, f"{r.source}:{r.line}"
            elif out[doc_id] != text:
                raise InputError(f"document {doc_id} has another text here than in the report at {where[doc_id]}",
                                 r.source, r.line)
    return out


def _check_ranking(obj: dict) -> None:
    ranking = obj.get("ranking")
    if ranking is None:
        return

    def ranked_doc(r) -> bool:
        if not (isinstance(r, dict) and isinstance(r.get("doc_id"), str)):
            return False
        try:
            _lax_int(r.get("rank"))
            return True
        except ValueError:
            return False

    def retrieved(r) -> bool:
        return (isinstance(r, dict) and isinstance(r.get("query_id"), str) and isinstance(r.get("test_collection"), str)
                and isinstance(r.get("ranked_docs", []), list) and all(ranked_doc(x) for x in r.get("ranked_docs", [])))

    if not isinstance(ranking, list) or not (all(map(retrieved, ranking)) or all(map(ranked_doc, ranking))):
        raise _Bad("'ranking' must be a list of {doc_id, rank} or of {query_id, test_collection, ranked_docs}")


# why a finding is an error: blank sentences are refused as autojudge-base refuses them
_HINTS = {"blank_sentence": " (a track spec that lists blank_sentence among its smells, such as rag25-autojudge, "
                            "ragtime25 or dragun25, accepts it; the sentence is then not graded)"}


def parse_report(obj, *, spec=None, source: str | None = None, line: int | None = None,
                 request_limit: int | None = None) -> Report:
    """One decoded report line -> :class:`Report`; InputError(reason, source, line) when
    it does not validate (structurally, or against ``spec``, a :class:`TrackSpec`)."""
    try:
        if not isinstance(obj, dict):
            raise _Bad("expected a JSON object (one report per line: metadata, responses or answer, references), "
                       f"got {_show(obj)}")
        if "metadata" not in obj:
            raise _Bad("missing 'metadata'")
        md = _metadata(obj["metadata"])
        key, sents = _sentences(obj)
        refs = obj.get("references")
        if refs is not None and not (isinstance(refs, list) and all(isinstance(r, str) for r in refs)):
            raise _Bad(f"'references' must be a list of document ids (strings), got {_show(refs)}")
        _need(obj, "evaldata", (dict, None), "an object")
        docs = _documents(obj)
        _check_ranking(obj)
        try:
            shape, cits = _choose_shape([s.get("citations") for s in sents])
        except _Bad as exc:
            raise _Bad(f"{key}{exc}") from None
    except _Bad as exc:
        raise InputError(str(exc), source, line) from None

    raw_sents = [{"text": s["text"], "citations": c} for s, c in zip(sents, cits)]
    errors: list[str] = []
    warnings: list[str] = []

    def add(category: str, message: str) -> None:
        smells = spec.smells if spec is not None else ()
        if category in smells:
            warnings.append(message)
        else:
            errors.append(message + _HINTS.get(category, ""))

    check_report({"metadata": md, "references": refs}, shape, raw_sents, spec, add, request_limit)
    if errors:
        raise InputError.of_problems(errors, source, line)

    run_id, topic_id = md["run_id"], md["topic_id"]
    sentences = []
    for n, s in enumerate(raw_sents, 1):
        c = s["citations"] or ([] if shape != "ragtime" else {})
        if shape == "ragtime":
            # highest confidence first (stable), as autojudge-base orders them
            cites = tuple(Citation(d, conf) for d, conf in sorted(c.items(), key=lambda kv: kv[1], reverse=True))
        elif shape == "rag24":
            cites = tuple(Citation(refs[i]) for i in c)
        else:
            cites = tuple(Citation(d) for d in c)
        for cite in cites:  # a cited document becomes a qrels line (exam-nuggets qrels)
            if cite.doc_id.split() != [cite.doc_id] or not cite.doc_id.isprintable():
                raise InputError(f"{key}[{n - 1}] cites the document id {cite.doc_id!r}, which is empty or holds "
                                 "white space or control characters (not allowed in TREC files)", source, line)
        sentences.append(ReportSentence(sentence_id(run_id, topic_id, n, s["text"]), n, s["text"], cites))
    extra = {k: v for k, v in obj["metadata"].items() if k not in ("run_id", "topic_id", "team_id", "narrative_id")}
    return Report(run_id, topic_id, md["team_id"], tuple(sentences), tuple(refs or ()), source, line, extra,
                  citation_format=shape, documents=docs, warnings=tuple(warnings))


def report_files(path: str) -> list[str]:
    if os.path.isdir(path):
        found = []
        for d, dirs, files in os.walk(path):
            # hidden files are no reports: macOS's ._r.jsonl, an editor's .r.jsonl copy
            dirs[:] = [x for x in dirs if not x.startswith(".")]
            found += [os.path.join(d, f) for f in files
                      if f.endswith((".jsonl", ".jsonl.gz")) and not f.startswith(".")]
        found.sort()
        if not found:
            raise InputError("no *.jsonl or *.jsonl.gz report files in this directory", path)
        return found
    if str(path) != "-" and not os.path.exists(path):
        raise InputError("no such file or directory", path)
    return [path]


def resolve_track_spec(name: str | None):
    """The :class:`TrackSpec` named ``name`` (None: structural checks only)."""
    if name is None:
        return None
    if name not in SPECS:
        raise UsageError(f"unknown track spec {name!r} (known: {', '.join(sorted(SPECS))})")  # an option's value
    return SPECS[name]


def read_reports(paths: Sequence[str], *, track_spec: str | None = None,
                 request_limits: Mapping[str, int] | None = None) -> list[Report]:
    """Every report in ``paths`` (files, or directories searched for *.jsonl and
    *.jsonl.gz), validated structurally and, with ``track_spec``, against that track's
    spec (rag25, rag26, ragtime25, ragtime26, dragun25, ...; autojudge-base 1.0.0 has no rag24
    spec: "rag24" is its name of the index citation shape). ``request_limits`` (topic id ->
    character budget) enables RAGTIME's per-request length check.

    Findings the spec treats as smells are kept in :attr:`Report.warnings`; anything
    else, and a second report for the same (run, topic), raises InputError naming the
    file and line.
    """
    spec = resolve_track_spec(track_spec)
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[Report] = []
    seen: dict[tuple[str, str], str] = {}
    for p in paths:
        for f in report_files(str(p)):
            name = display_name(f)
            for lineno, obj in iter_jsonl(f):
                limit = None
                if request_limits and isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
                    limit = request_limits.get(str(obj["metadata"].get("topic_id", obj["metadata"].get("narrative_id"))))
                r = parse_report(obj, spec=spec, source=name, line=lineno, request_limit=limit)
                key = (r.run_id, r.topic_id)
                if key in seen:
                    raise InputError(f"second report of run {r.run_id!r} for topic {r.topic_id!r} "
                                     f"(first at {seen[key]})", name, lineno)
                seen[key] = f"{name}:{lineno}"
                out.append(r)
    if not out:
        raise InputError("no reports", ", ".join(map(str, paths)))
    return out


_REQUEST_IDS = ("request_id", "qid", "query_id", "topic_id", "narrative_id", "id")
_REQUEST_TEXTS = ("title", "query", "text", "narrative", "problem_statement")


def read_requests(path: str) -> dict[str, str]:
    """Topic id -> query text from a request file: JSONL requests as autojudge-base reads
    them (``request_id`` + ``title``), the ir_datasets/TIRA local shape of the
    spot-check data (``qid`` + ``query``), ``{query_id, text}``, ``{id|topic_id|narrative_id,
    title|narrative}``, or anything exam_eval's topic reader takes (TSV, TREC topics, an
    ir_datasets ID)."""
    spec = str(path)
    first = ""
    if spec != "-" and os.path.isfile(spec):
        for _, line in iter_lines(spec):
            if line.strip():
                first = line.lstrip()[:1]
                break
    if first != "{":
        return {qid: t.text for qid, t in read_topics(spec).items()}
    name = display_name(spec)
    out: dict[str, str] = {}
    where: dict[str, int] = {}
    for lineno, obj in iter_jsonl(spec):
        if not isinstance(obj, dict):
            raise InputError("expected a JSON object (one request per line)", name, lineno)
        id_key = next((k for k in _REQUEST_IDS if obj.get(k) is not None), None)
        text_key = next((k for k in _REQUEST_TEXTS if obj.get(k) is not None), None)
        if id_key is None:
            raise InputError(f"no request id (one of {', '.join(_REQUEST_IDS)})", name, lineno)
        if text_key is None:
            raise InputError(f"no request text (one of {', '.join(_REQUEST_TEXTS)})", name, lineno)
        qid, text = obj[id_key], obj[text_key]
        if not isinstance(qid, (str, int)) or isinstance(qid, bool) or not str(qid).strip():
            raise InputError(f"{id_key} must be a non-empty string or integer, got {_show(qid)}", name, lineno)
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{text_key} must be a non-empty string", name, lineno)
        qid = str(qid).strip()
        if qid in out:
            raise InputError(f"duplicate request id {qid} (first on line {where[qid]})", name, lineno)
        out[qid] = " ".join(text.split())
        where[qid] = lineno
    if not out:
        raise InputError("no requests", name)
    return out


def reports_from_run(run_id: str, run: Mapping[str, Mapping[str, float]], texts: Mapping[str, str], *,
                     depth: int = 5, team_id: str = "exam_eval", shape: str = "rag24") -> list[dict]:
    """Reports (JSON objects, one per topic) built from a ranked run: its top ``depth``
    passages in trec_eval order, one sentence each, citing that passage. Passages
    without text are passed over. ``shape`` spells the citations: rag24 (indices into
    ``references``), neuclir (ids) or ragtime (id -> the run's score).

    The way the issue checks report scoring on collections without RAG submissions
    (DL19: every submitted run becomes a report set)."""
    out = []
    for qid in sorted(run):
        docs = [d for d in trec_ranked(run[qid]) if (texts.get(d) or "").strip()][:depth]
        if not docs:
            continue
        if shape == "rag24":
            sents = [{"text": " ".join(texts[d].split()), "citations": [i]} for i, d in enumerate(docs)]
        elif shape == "neuclir":
            sents = [{"text": " ".join(texts[d].split()), "citations": [d]} for d in docs]
        elif shape == "ragtime":
            sents = [{"text": " ".join(texts[d].split()), "citations": {d: float(run[qid][d])}} for d in docs]
        else:
            raise ValueError(f"unknown citation shape {shape!r}")
        out.append({"metadata": {"team_id": team_id, "run_id": run_id, "topic_id": qid},
                    "responses": sents, "references": docs})
    return out


def check_topic_coverage(reports: Sequence[Report], requests: Mapping[str, str], spec) -> tuple[list[str], list[str]]:
    """The cross-report checks autojudge-base makes of a submission against its request
    file, per run: topics without a report (``missing_topics``), reports on topics the
    requests lack (``new_topics``) and, where the spec requires it, a ``narrative`` that is
    not a copy of the request text (compared with whitespace collapsed, as read_requests
    keeps request texts). Returns (errors, warnings): a finding is a warning when the
    spec lists its category among its smells."""
    spec = resolve_track_spec(spec) if isinstance(spec, str) else spec
    smells = spec.smells if spec is not None else ()
    errors: list[str] = []
    warnings: list[str] = []

    def add(category: str, message: str) -> None:
        (warnings if category in smells else errors).append(message)

    by_run: dict[str, list[Report]] = {}
    for r in reports:
        by_run.setdefault(r.run_id, []).append(r)
    for run, reps in sorted(by_run.items()):
        topics = {r.topic_id for r in reps}
        missing = sorted(set(requests) - topics)
        new = sorted(topics - set(requests))
        if missing:
            add("missing_topics", f"run {run}: {len(missing)} requested topics have no report "
                                  f"(e.g. {', '.join(missing[:3])})")
        if new:
            add("new_topics", f"run {run}: {len(new)} reports are on topics the requests lack "
                              f"(e.g. {', '.join(new[:3])})")
        if spec is not None and spec.require_exact_narrative:
            bad = sorted(r.topic_id for r in reps if r.topic_id in requests
                         and " ".join(str(r.extra.get("narrative") or "").split()) != requests[r.topic_id])
            if bad:
                add("narrative", f"run {run}: {len(bad)} reports' metadata.narrative is not the request text "
                                 f"(e.g. topic {bad[0]})")
    return errors, warnings
