"""What exam-grade and :func:`exam_eval.api.grade` grade: the pool of passages (runs,
qrels, response segments, report sentences), their texts, the bank items and query texts,
all read and checked before a model loads, in one place (:func:`read_inputs`), so that
the command and the API refuse alike; and the run files of graded segments. Notes go to
``log``."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..errors import InputError, UsageError
from . import engine
from .cache import unit_key
from .pool import Pool
from .report_units import report_segments
from .segment import read_responses, segments_to_runs
from .types import GradeRequest
from ..io.bank_items import BankItem
from ..io.banks import BankReport, items_by_query, read_bank
from ..io.irds import irds_qrels, looks_like_irds_id
from ..io.outputs import atomic_output, check_output, file_name_problem, output_folder
from ..io.passages import read_passages
from ..io.reports import Report, check_topic_coverage as spec_coverage, embedded_documents, read_reports, read_requests
from ..trec_eval.trec_files import write_run

if TYPE_CHECKING:  # pragma: no cover
    from .prompts.base import Prompt

Log = Callable[[str], None]

#: how messages name the sources: exam-grade's flags (the API passes its keywords)
FLAGS = {"topics": "--topics", "passages": "--passages", "on_missing": "--on-missing skip",
         "cited_documents": "--cited-documents"}
API_NAMES = {"topics": "queries=", "passages": "passages=", "on_missing": "on_missing='skip'",
             "cited_documents": "cited_documents=True"}


def _quiet(msg: str) -> None:
    pass


@dataclass(frozen=True)
class Sources:
    """What to grade, as given: paths and ids (the command) or objects read already (the
    API: ``reports`` as Report objects, ``bank`` as topic id -> items, ``topics`` and
    ``passages`` as mappings)."""

    prompt: "Prompt"
    runs: Sequence[str] = ()
    depth: int = 20
    qrels: Sequence[str] = ()
    responses: str | None = None
    reports: Sequence[Any] = ()
    track_spec: str | None = None
    report_unit: str = "sentence"
    cited_documents: bool = False
    passages: str | Mapping[str, str] | None = None
    topics: str | Mapping[str, str] | None = None
    bank: str | Mapping[str, Sequence["BankItem"]] | None = None
    on_missing: str = "skip"
    keep_edited_ids: bool = False
    names: Mapping[str, str] = field(default_factory=lambda: FLAGS)

    @property
    def direct(self) -> bool:
        return self.prompt.target == "direct"


@dataclass
class GradingInputs:
    """The work, read and checked: passages to grade per query, their texts, the bank's
    items per query (None for direct prompts), query texts, the segments the responses and
    reports were cut into, and the pool's counts."""

    docs: dict[str, list[str]]
    texts: dict[str, str]
    items: dict[str, list["BankItem"]] | None
    queries: dict[str, str]
    segments: list = field(default_factory=list)
    report_segments: list = field(default_factory=list)
    pool: int = 0
    missing: int = 0


def _bank_items(src: Sources, log: Log) -> dict[str, list["BankItem"]] | None:
    if src.direct or src.bank is None:
        return None
    prompt = src.prompt
    if isinstance(src.bank, Mapping):
        all_items = [i for its in src.bank.values() for i in its]
        name = "<bank>"
    else:
        report = BankReport()
        all_items = read_bank(src.bank, report=report, keep_edited_ids=src.keep_edited_ids)
        for notice in report.notices(src.bank):
            log(notice)
        name = src.bank
    wanted_kind = [i for i in all_items if i.kind == prompt.target]
    if not wanted_kind:
        kinds = sorted({i.kind for i in all_items})
        raise InputError(f"no {prompt.target} items for prompt {prompt.id!r} (the bank holds {', '.join(kinds)}s)", name)
    return items_by_query(wanted_kind)


def read_inputs(src: Sources, log: Log = _quiet) -> GradingInputs:
    """Everything to grade, read and checked before a model loads."""
    prompt, names = src.prompt, src.names
    pool = Pool()
    for r in src.runs:
        pool.add_run(r, src.depth)
    for q in src.qrels:
        if looks_like_irds_id(q):
            for qid, docs in sorted(irds_qrels(q).items()):
                for doc in sorted(docs):
                    pool.add(qid, doc)
        else:
            pool.add_qrels(q)
    segments = []
    if src.responses:
        segments = read_responses(src.responses)
        pool.add_segments(segments, None)  # a response is graded whole; -k applies in exam-cover
    report_segs, the_reports = (report_segments_of(src.reports, src.track_spec, src.report_unit, src.cited_documents,
                                                   src.passages, log, names) if src.reports else ([], []))
    pool.add_segments(report_segs, None)

    items = _bank_items(src, log)
    bank_name = src.bank if isinstance(src.bank, (str, os.PathLike)) else "<bank>"
    topics_name = src.topics if isinstance(src.topics, (str, os.PathLike)) else "<queries>"
    queries: dict[str, str] = {}
    if src.topics:
        queries = dict(src.topics) if isinstance(src.topics, Mapping) else read_requests(src.topics)
        if the_reports and src.track_spec:
            check_topic_coverage(the_reports, queries, src.track_spec, src.topics, log)
    elif "query" in prompt.placeholders:
        raise UsageError(f"prompt {prompt.id!r} shows the query text: give {names['topics']}")

    # queries that can be graded at all, so only their passages are read
    if items is not None:
        covered = engine.check_bank_coverage(items, pool.docs, bank_name)
        unbanked = sorted(set(pool.docs) - set(items))
        if unbanked:
            log(f"{len(unbanked)} pooled queries have no bank items and are not graded (e.g. {', '.join(unbanked[:3])})")
        if len(covered) < len(items):
            log(f"{len(items) - len(covered)} bank queries have no pooled passages")
        docs = {q: list(pool.docs[q]) for q in pool.docs if q in items}
    else:
        docs = {q: list(d) for q, d in pool.docs.items()}
    if "query" in prompt.placeholders:
        lacking = sorted(q for q in docs if q not in queries)
        if lacking:
            raise InputError(f"no topic text for {len(lacking)} pooled queries (e.g. {', '.join(lacking[:3])})",
                             topics_name)

    wanted = {d for ds in docs.values() for d in ds} - set(pool.texts)
    texts = dict(pool.texts)
    if wanted:
        if not src.passages:
            raise UsageError(f"{len(wanted)} pooled passages need texts: give {names['passages']} "
                             "(file or ir_datasets ID)")
        if isinstance(src.passages, Mapping):
            texts.update({d: src.passages[d] for d in wanted if d in src.passages})
        else:
            texts.update(read_passages(src.passages, wanted))
    missing = sorted(d for d in {d for ds in docs.values() for d in ds} if not (texts.get(d) or "").strip())
    where = src.passages if isinstance(src.passages, (str, os.PathLike)) else (src.responses or "<passages>")
    if missing and src.on_missing == "error":
        raise InputError(f"{len(missing)} pooled passages have no text (e.g. {', '.join(missing[:3])}); "
                         f"use {names['on_missing']} to grade the rest", where)
    gone = set(missing)
    docs = {q: [d for d in ds if d not in gone] for q, ds in docs.items()}
    docs = {q: ds for q, ds in docs.items() if ds}
    if not docs:  # the one line, without the note of the skipped ones before it
        raise InputError(f"no pooled passage has text (none of {len(missing)}, e.g. {', '.join(missing[:3])})", where)
    if missing:
        log(f"{len(missing)} pooled passages have no text and are skipped (e.g. {', '.join(missing[:3])})")
    return GradingInputs(docs, texts, items, queries, segments, report_segs, sum(len(ds) for ds in docs.values()),
                         len(missing))


def report_segments_of(reports, track_spec, unit, cited_documents, passages, log: Log = _quiet,
                       names: Mapping[str, str] = FLAGS):
    """The segments of the reports (paths, or Report objects read already) to grade."""
    given = list(reports)
    objects = all(isinstance(r, Report) for r in given)
    reports = given if objects else read_reports([str(p) for p in given], track_spec=track_spec)
    smelly = [r for r in reports if r.warnings]
    if smelly:
        r = smelly[0]
        log(f"{len(smelly)} reports break rules that track spec {track_spec} only warns about "
            f"(e.g. {r.source}:{r.line}: {r.warnings[0]})")
    cited = None
    if cited_documents:
        cited, wanted = cited_texts(reports, passages)
        lacking = sorted(wanted - set(cited))
        if lacking and not passages:
            raise UsageError(f"{len(lacking)} cited documents need texts for {names['cited_documents']}: give {names['passages']}")
        if lacking:
            log(f"{len(lacking)} cited documents have no text and are left out of the context "
                f"(e.g. {', '.join(lacking[:3])})")
    segs = report_segments(reports, unit, cited)
    if not segs:
        raise InputError("no report has a sentence with text", "<reports>" if objects else ", ".join(map(str, given)))
    return segs, reports


def cited_texts(reports, passages) -> tuple[dict[str, str], set[str]]:
    """Texts of the documents the reports cite (the reports' own first, then ``passages``:
    a file, an ir_datasets ID or a mapping), and the ids of all cited documents."""
    wanted = {d for r in reports for d in r.cited_doc_ids()}
    cited = {d: t for d, t in embedded_documents(reports).items() if d in wanted}
    lacking = wanted - set(cited)
    if isinstance(passages, Mapping):
        cited.update({d: t for d, t in passages.items() if d in lacking})
    elif passages and lacking:
        cited.update(read_passages(str(passages), lacking))
    return cited, wanted


def check_topic_coverage(reports, queries, track_spec, topics, log: Log = _quiet) -> None:
    errors, warnings = spec_coverage(reports, queries, track_spec)
    if errors:
        raise InputError.of_problems(errors, topics, prefix=f"track spec {track_spec}: ")
    for w in warnings[:3]:
        log(f"track spec {track_spec} warns: {w}")
    if len(warnings) > 3:
        log(f"... and {len(warnings) - 3} more such warnings")


def segment_run_files(segments, path: str, option: str = "--responses") -> tuple[str | None, list[tuple[str, str, dict]]]:
    """What ``--responses-run-out PATH`` (``--reports-run-out``) will write: (the folder or
    None, [(file, run id, run)]): one file, or one RUN_ID.run per run in a folder (PATH
    ends with a separator or is a folder). A run id that cannot be a file name there is an
    InputError naming the line it came from. Nothing is written here."""
    runs = segments_to_runs(segments)
    if path.endswith(os.sep) or os.path.isdir(path):
        where = {}
        for s in segments:
            where.setdefault(s.run_id, s.where or (None, None))
        for run_id in runs:
            problem = file_name_problem(run_id, ".run")
            if problem:
                raise InputError(f"run id {run_id!r} {problem}: it cannot name a file in {option}-run-out {path} "
                                 "(one RUN_ID.run per run); give a file instead, for a single run", *where[run_id])
        files = [(os.path.join(path, f"{run_id}.run"), run_id, run) for run_id, run in runs.items()]
        if os.path.isdir(path):  # each file as any output is probed: before the model loads
            for file, _, _ in files:
                check_output(file)
        return path, files
    if len(runs) > 1:
        raise UsageError(f"{option} holds {len(runs)} runs; give {option}-run-out a directory (one file per run)")
    (run_id, run), = runs.items()
    return None, [(path, run_id, run)]


def write_segment_runs(planned: tuple[str | None, list[tuple[str, str, dict]]]) -> None:
    """Write what :func:`segment_run_files` planned, each file atomically, and all of them
    to their temp files before any is renamed into place: one that fails leaves none."""
    folder, files = planned
    with output_folder(folder) if folder else contextlib.nullcontext(), contextlib.ExitStack() as stack:
        for path, run_id, run in reversed(files):  # (the stack ends them last in first out: in order)
            write_run(run, stack.enter_context(atomic_output(path)), run_id)


def support_units(reports, *, track_spec, passages, topics, on_missing, prompt, grader, shard, log: Log = _quiet):
    """exam-nuggets support's work: one unit per (sentence, cited document) text pair of
    the reports, the statement being the sentence. Returns (units, pairs, documents
    without text)."""
    rs = read_reports(list(reports), track_spec=track_spec)
    texts = embedded_documents(rs)
    wanted = {c.doc_id for r in rs for s in r.sentences for c in s.citations} - set(texts)
    if wanted and passages:
        texts.update(read_passages(passages, wanted))
    missing = sorted(d for d in {c.doc_id for r in rs for s in r.sentences for c in s.citations}
                     if not (texts.get(d) or "").strip())
    if missing:
        if on_missing == "error" or not passages and len(missing) == len(wanted):
            hint = "" if passages else "; give --passages"
            raise InputError(f"{len(missing)} cited documents have no text (e.g. {', '.join(missing[:3])}){hint}",
                             passages or ", ".join(reports))
        log(f"{len(missing)} cited documents have no text and are skipped (e.g. {', '.join(missing[:3])})")
    queries: dict[str, str] = {}
    if topics and "query" not in prompt.placeholders:  # not read, so not checked: said, not ignored
        raise UsageError(f"--topics: prompt {prompt.id!r} does not show the query text ({{query}}), so it reads none")
    if "query" in prompt.placeholders:
        if not topics:
            raise UsageError(f"prompt {prompt.id!r} shows the query text: give --topics")

        queries = read_requests(topics)

    uses_query = "query" in prompt.placeholders
    identity = grader.cache_identity  # once: it may look at the model's files
    units: dict[str, engine.Unit] = {}
    npairs = 0
    for r in rs:
        query = queries.get(r.topic_id, "")
        for s in r.sentences:
            statement = BankItem(r.topic_id, s.doc_id, "statement", s.text)
            for doc in dict.fromkeys(c.doc_id for c in s.citations):
                passage = texts.get(doc)
                if not (passage or "").strip():
                    continue
                key = unit_key(identity, prompt.hash, query if uses_query else None, s.text, passage, None)
                if not engine.in_shard(key, shard):
                    continue
                unit = units.get(key)
                if unit is None:
                    unit = units[key] = engine.Unit(key, GradeRequest(prompt, query, s.text, passage, None))
                unit.pairs.append(engine.Pair(r.topic_id, doc, statement))
                npairs += 1
    if not npairs:
        raise InputError("no report sentence cites a document with text", ", ".join(reports))
    return units, npairs, missing
