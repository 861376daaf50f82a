"""exam_eval from Python: the commands' engines as functions.

Small on purpose: everything here is what ``exam-grade``, ``exam-qrels``, ``exam-cover``
and ``exam-nuggets score`` do, on objects instead of files, so that a TREC AutoJudge
judge (``judge``, ``create_nuggets``, ``create_qrels``; examples/autojudge/) or a
notebook is a few lines::

    from exam_eval import api

    reports = api.read_reports(["runs/"])                 # or autojudge-base Report objects
    bank = api.read_bank("nuggets.jsonl")
    grades = api.grade(reports, bank=bank, prompt="nugget-selfrating", backend="embedding")
    per_topic, summary = api.nugget_scores(reports, grades, bank)
    summary["my_run"]["nugget_vital"]                     # mean over the run's topics
    qrels = api.qrels(grades)                             # EXAM-Qrels: topic -> sentence -> grade
    cited = api.citation_qrels(reports, grades)           # topic -> cited document -> 0/1/2

Grading goes through the same engine as the command: identical texts are graded once,
the grade cache (``cache=``; off unless given) remembers every grade, and with
``output=`` the grades are appended batch by batch, so an interrupted call resumes
where it stopped when called again. Bad input raises :class:`exam_eval.errors.InputError`
(``.path``, ``.line``, ``.reason``), a wrong call :class:`exam_eval.errors.UsageError`.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Iterable, Mapping, Sequence

from .backends.factory import make_grader
from .errors import InputError, UsageError
from .grading import engine
from .grading.grade_files import read_grades as _read_grades
from .grading.inputs import API_NAMES, Sources, read_inputs
from .grading.prompts import get_prompt
from .grading.report_units import default_unit
from .grading.session import GradingSession
from .io.bank_items import BankItem
from .io.banks import items_by_query, read_bank as _read_bank
from .io.grades import Grade
from .io.reports import Report, parse_report, read_requests, resolve_track_spec
from .io.reports import read_reports as _read_reports
from .measures import nugget_scores as ns
from .measures.exam_cover import build_index, exam_cover
from .measures.exam_measures import SCORE_MEASURES, cover_values
from .measures.exam_qrels import grades_to_qrels
from .progress import silence_library_progress
from .trec_eval.trec_files import read_run as _read_run

__all__ = ["read_reports", "read_requests", "read_bank", "read_grades", "read_run", "as_reports", "as_queries",
           "grade", "qrels", "cover", "nugget_scores", "citation_qrels", "NUGGET_MEASURES"]

#: what nugget_scores computes (measures.exam_measures: the table of the EXAM measures)
NUGGET_MEASURES = SCORE_MEASURES


def read_reports(paths: str | Sequence[str], *, track_spec: str | None = None) -> list[Report]:
    """RAG reports from files or directories (see :func:`exam_eval.io.reports.read_reports`)."""
    if not isinstance(paths, (str, os.PathLike, Iterable)) or isinstance(paths, Mapping):
        raise UsageError(f"read_reports takes a path or paths, not {type(paths).__name__}")
    return _read_reports([paths] if isinstance(paths, (str, os.PathLike)) else list(paths), track_spec=track_spec)


def read_bank(path: str, *, kind: str | None = None) -> dict[str, list[BankItem]]:
    """topic id -> bank items (questions or nuggets), any bank format exam-grade reads."""
    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(f"read_bank takes a path, not {type(path).__name__}")

    return items_by_query(_read_bank(path, kind=kind))


def read_grades(path: str, *, model: str | None = None, prompt: str | None = None,
                kind: str | None = None) -> list[Grade]:
    """The grades of a file exam-grade (or exam-nuggets support, or grade(output=)) wrote,
    read as the commands read it: a pair's last line wins; a file of several graders is
    refused unless ``model``/``prompt`` choose one."""
    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(f"read_grades takes a path, not {type(path).__name__}")

    return _read_grades(str(path), model=model, prompt=prompt, kind=kind)


def read_run(path: str) -> dict[str, dict[str, float]]:
    """A TREC run file (the --responses-run-out / --reports-run-out files too) as
    topic -> doc -> score, the shape :func:`cover` takes, read as exam-cover reads it."""
    if not isinstance(path, (str, os.PathLike)):
        raise UsageError(f"read_run takes a path, not {type(path).__name__}")

    return _read_run(str(path))


def as_reports(reports: Iterable[Any], *, track_spec: str | None = None) -> list[Report]:
    """Our :class:`Report` objects from ours, from report dicts (one JSONL line each), or
    from autojudge-base ``Report`` objects (pydantic models), validated the same way."""
    if isinstance(reports, (str, bytes, os.PathLike)):  # iterated, a path is its characters
        raise UsageError("reports= takes report objects or dicts; read files with api.read_reports(path)")
    if isinstance(reports, Mapping) or not isinstance(reports, Iterable):
        raise UsageError(f"reports= takes a list of reports, not {type(reports).__name__}")
    spec = resolve_track_spec(track_spec)
    out: list[Report] = []
    for n, r in enumerate(reports, 1):
        if isinstance(r, Report):
            out.append(r)
            continue
        obj = r.model_dump(mode="json", exclude_none=True) if hasattr(r, "model_dump") else r
        src = getattr(r, "path", None)
        out.append(parse_report(obj, spec=spec, source=str(src) if src else "<reports>", line=n))
    return out


def as_queries(topics: Any) -> dict[str, str]:
    """topic id -> query text from a mapping, a request/topics file, or autojudge-base
    ``Request`` objects (``request_id``, ``title``)."""
    if topics is None:
        return {}
    if isinstance(topics, Mapping):
        return {str(k): str(v) for k, v in topics.items()}
    if isinstance(topics, (str, os.PathLike)):
        return read_requests(str(topics))
    requests = list(topics) if isinstance(topics, Iterable) else None
    if requests is None or not all(hasattr(t, "request_id") and hasattr(t, "title") for t in requests):
        raise UsageError("queries= takes topic id -> text, a request file, or autojudge-base Requests")
    return {str(t.request_id): t.title for t in requests}


def _grades(grades) -> list[Grade]:
    """``grades`` as a list of Grade objects (what api.grade returns), or a UsageError."""
    if isinstance(grades, (str, bytes, os.PathLike, Mapping)) or not isinstance(grades, Iterable):
        raise UsageError(f"grades= takes Grade objects (api.grade returns them), not {type(grades).__name__}")
    grades = list(grades)
    bad = next((g for g in grades if not isinstance(g, Grade)), None)
    if bad is not None:
        raise UsageError(f"grades= takes Grade objects (api.grade returns them), not {type(bad).__name__}")
    return grades


def _check_thresholds(*values) -> None:
    for v in values:
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise UsageError(f"support_min and partial_min take whole numbers, not {v!r}")


def _one_grader(grades: Sequence[Grade]) -> None:
    """The commands' rule: the grades of one model and prompt (the labels of two graders
    would be mixed into one maximum)."""
    graders = sorted({g.grader for g in grades})
    if len(graders) > 1:
        shown = "; ".join(f"model {m!r} prompt {p!r}" for m, p in graders[:3])
        raise UsageError(f"grades of {len(graders)} graders ({shown}{' ...' if len(graders) > 3 else ''}): "
                         "give those of one")


def _as_bank(bank) -> dict[str, list[BankItem]]:
    if isinstance(bank, (str, os.PathLike)):
        return read_bank(str(bank))
    wrong = UsageError("bank= takes a bank file, topic id -> BankItems, or BankItems (api.read_bank reads a file)")
    if isinstance(bank, Mapping):
        if not all(isinstance(its, Iterable) and not isinstance(its, (str, bytes)) for its in bank.values()):
            raise wrong
        out = {str(q): list(its) for q, its in bank.items()}
        if not all(isinstance(i, BankItem) for its in out.values() for i in its):
            raise wrong
        return out
    if not isinstance(bank, Iterable):
        raise wrong
    items = list(bank)
    if not all(isinstance(i, BankItem) for i in items):
        raise wrong
    return items_by_query(items)


class _Collect:
    """The engine's sink when the grades stay in memory."""

    def __init__(self):
        self.grades: list[Grade] = []
        self.lines = 0

    def write_batch(self, grades) -> int:
        grades = list(grades)
        self.grades.extend(grades)
        self.lines += len(grades)
        return len(grades)

    def close(self) -> None:
        pass


def grade(reports: Iterable[Any], *, bank=None, prompt: str, backend: str = "embedding", unit: str | None = None,
          queries=None, passages: Mapping[str, str] | str | None = None, cited_documents: bool = False,
          cache: str | None = None, output: str | None = None, progress: bool = False,
          log: Callable[[str], None] | None = None, **backend_options) -> list[Grade]:
    """Grade every report sentence (``unit="sentence"``) or whole report (``"report"``;
    None: the prompt's own unit, ``report_units.default_unit``)
    against ``bank`` (a path, topic -> items, or items) with ``prompt`` on ``backend``
    (``backend_options`` as exam-grade's flags: model=, device=, batch_size=, ...).
    Direct prompts take no bank. ``queries`` (mapping, request file or autojudge
    Requests) are needed by prompts that show the query; ``passages`` (mapping or file)
    give cited documents' texts for ``cited_documents``. The inputs are read and checked
    by exam-grade's own reader (:func:`exam_eval.grading.inputs.read_inputs`), with its
    refusals; what it says goes to ``log`` (default: a :class:`UserWarning`). Returns the
    grades, including those an earlier, interrupted call already wrote to ``output``; an
    ``output`` holding grades of the same model and prompt from another engine or compute
    type (int8 against float32) is refused with an InputError, as is a model that cannot
    be loaded."""
    if not progress:  # no bars of ours, and none of the libraries' ("Loading weights")
        silence_library_progress()
    if not isinstance(prompt, str):
        raise UsageError(f"prompt= takes a prompt id (see exam-grade --list-prompts), not {prompt!r}")
    for name, value in (("output", output), ("cache", cache)):
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise UsageError(f"{name}= takes a path, not {type(value).__name__}")
    if log is not None and not callable(log):
        raise UsageError(f"log= takes a function of one message, not {type(log).__name__}")
    the_prompt = get_prompt(prompt)
    unit = unit or default_unit(the_prompt.id)
    if unit not in ("sentence", "report"):
        raise UsageError(f"unit= is 'sentence' or 'report', not {unit!r}")
    direct = the_prompt.target == "direct"
    if not direct and bank is None:
        raise UsageError(f"prompt {the_prompt.id!r} grades {the_prompt.target}s: give bank=")
    reps = as_reports(reports)
    if not reps:
        raise InputError("no reports", "<reports>")
    if passages is not None and not isinstance(passages, (str, os.PathLike, Mapping)):
        raise UsageError(f"passages= takes doc id -> text or a passages file, not {type(passages).__name__}")
    notes: list[str] = []  # said once nothing is refused, as the command says them
    work = read_inputs(Sources(the_prompt, reports=reps, report_unit=unit, cited_documents=cited_documents,
                               passages=str(passages) if isinstance(passages, os.PathLike) else passages,
                               topics=as_queries(queries) if queries is not None else None,
                               bank=None if direct else _as_bank(bank), names=API_NAMES), notes.append)
    grader = make_grader(backend, dict(backend_options), (), the_prompt)
    for note in notes:
        (log or _warn)(note)
    units, npairs = engine.build_units(docs=work.docs, texts=work.texts, items=work.items, queries=work.queries,
                                       prompt=the_prompt, identity=grader.cache_identity)
    with GradingSession(grader, the_prompt, output=output, cache_path=cache or None) as session:
        session.plan(units, npairs)
        sink = None if output else _Collect()
        stats = session.run(sink=sink, progress="grading" if progress else None)
    if stats.failed:
        raise InputError(f"{stats.failed} model calls failed; call again to retry them", grader.model_id or backend)
    if output:  # this call's pairs only: the file may hold grades of other items and reports
        items = work.items
        wanted = {(q, d, i) for q, ds in work.docs.items() for d in ds
                  for i in ([None] if items is None else [it.item_id for it in items[q]])}
        return [g for g in _read_grades(output, model=grader.model_id, prompt=the_prompt.id)
                if (g.query_id, g.doc_id, g.item_id) in wanted]
    return sink.grades


def qrels(grades: Iterable[Grade], *, label: str = "max", min_grade: int | None = None) -> dict[str, dict[str, int]]:
    """EXAM-Qrels (as exam-qrels): topic -> graded unit -> label (best grade by default;
    ``label`` count or binary: of the grades >= ``min_grade``, 4 unless given)."""
    grades = _grades(grades)
    _one_grader(grades)
    if label == "max" and min_grade is not None:
        raise UsageError("min_grade is the threshold of label='count'|'binary'; label='max' takes the maximum grade")
    if min_grade is not None and (isinstance(min_grade, bool) or not isinstance(min_grade, int) or min_grade < 0):
        raise UsageError(f"min_grade must be a whole number of 0 or more, not {min_grade!r}")
    if label != "max" and min_grade is None:
        min_grade = 4  # exam-qrels' default
    out = grades_to_qrels(grades, label=label, min_grade=min_grade)
    if not out:
        raise InputError("no passage has a parsed grade", "<grades>")
    return out


def cover(grades: Sequence[Grade], runs: Mapping[str, Mapping[str, Mapping[str, float]]], *, min_grade: int = 4,
          k: int = 20, complete: bool = False) -> dict[str, dict[str, float]]:
    """EXAM-Cover (as exam-cover) of ranked runs (run -> topic -> doc -> score):
    run -> {"exam_cover", "n_exam_cover"} means over topics (n_exam_cover None where no
    topic has an item any passage answers: undefined, not 0)."""
    import math

    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UsageError(f"k must be a whole number of 1 or more, not {k!r}")
    if isinstance(min_grade, bool) or not isinstance(min_grade, int):
        raise UsageError(f"min_grade must be a whole number, not {min_grade!r}")
    if not isinstance(runs, Mapping) or not all(isinstance(r, Mapping) and all(isinstance(t, Mapping) for t in r.values())
                                                for r in runs.values()):
        raise UsageError("runs= takes run -> topic -> doc -> score mappings")
    for name, run in runs.items():
        for topic, scored in run.items():
            bad = next((d for d, s in scored.items() if not isinstance(s, (int, float)) or not math.isfinite(s)), None)
            if bad is not None:  # exam-cover refuses such a run line
                raise InputError(f"run {name!r} topic {topic!r}: the score of {bad!r} is {scored[bad]!r}, not a finite "
                                 "number", "<runs>")
    grades = _grades(grades)
    _one_grader(grades)
    index = build_index(grades, min_grade)
    out = {}
    for name, run in runs.items():
        out[name] = cover_values(exam_cover(index, run, k=k, complete=complete))
    return out


def _warn(msg: str) -> None:
    import sys

    # the warning names the caller's line, the first frame outside exam_eval
    package = os.path.dirname(os.path.abspath(__file__))
    level, frame = 2, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        level, frame = level + 1, frame.f_back
    warnings.warn(msg, stacklevel=level)


def nugget_scores(reports: Iterable[Any], grades: Sequence[Grade], bank, *, support_min: int | None = None,
                  partial_min: int | None = None, default_importance: str = "vital",
                  complete: bool = False, kind: str | None = None, log: Callable[[str], None] | None = None,
                  ) -> tuple[dict[tuple[str, str], dict[str, float]], dict[str, dict[str, float]]]:
    """Nugget scores and EXAM-Cover of reports, as ``exam-nuggets score`` computes them,
    through the same call (:func:`exam_eval.measures.nugget_scores.score_checked`): per
    (run, topic) and per run (mean over the run's topics; with ``complete`` over every
    topic any report is on, missing topics 0), with the same refusals (grades of two kinds
    of bank item: choose one with ``kind=``) and only the grades current for the bank as it
    is now. ``bank``: a bank file, topic id -> BankItems, or BankItems. Measures:
    :data:`NUGGET_MEASURES`. What the command says on stderr (unparsed, stale or missing
    grades, reports off the bank's topics) goes to ``log``, by default as a
    :class:`UserWarning`."""
    _check_thresholds(support_min, partial_min)
    if log is not None and not callable(log):
        raise UsageError(f"log= takes a function of one message, not {type(log).__name__}")
    log = log or _warn
    if default_importance not in ("vital", "okay"):
        raise UsageError(f"default_importance is 'vital' or 'okay', not {default_importance!r}")
    grades = _grades(grades)
    _one_grader(grades)
    reps = as_reports(reports)
    if not reps:
        raise InputError("no reports", "<reports>")
    if isinstance(bank, (str, os.PathLike)):
        source, name = str(bank), str(bank)
    else:
        source, name = [i for its in _as_bank(bank).values() for i in its], "<bank>"
    res, _ = ns.score_checked(reps, list(grades), source, grades_name="grades", bank_name=name, kind=kind,
                              kind_flag="kind=", support_min=support_min, partial_min=partial_min, log=log,
                              measures=NUGGET_MEASURES, default_importance=default_importance, complete=complete)
    return res.per, res.means


def citation_qrels(reports: Iterable[Any], grades: Sequence[Grade], *, support_min: int | None = None,
                   partial_min: int | None = None) -> dict[str, dict[str, int]]:
    """Document qrels from citations (as ``exam-nuggets qrels --from nuggets``): a cited
    document's label (0-2) is the best nugget support level of the sentences citing it."""
    _check_thresholds(support_min, partial_min)
    grades = _grades(grades)
    _one_grader(grades)
    levels = ns.sentence_levels(grades, ns.thresholds_of(grades, support_min, partial_min))
    out = ns.citation_qrels(as_reports(reports), "nuggets", nuggets=levels)
    if not out:  # as exam-nuggets qrels (whole-report grades label no citing sentence)
        raise InputError("no cited document has the grades its label needs", "<grades>")
    return out
