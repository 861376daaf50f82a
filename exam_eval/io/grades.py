"""Grades: what an LLM (or other grader) said about one passage and one bank item.

Our format is JSONL (gzip optional), one line per graded
(query_id, doc_id, item_id, model, prompt)::

    {"query_id": "19335", "doc_id": "1017759", "item_id": "19335/96a7...", "kind": "question",
     "grade": 4, "probs": {"0": 0.01, ..., "5": 0.02} | null, "answer": "4",
     "parse_ok": true, "model": "google/flan-t5-large", "prompt": "question-selfrating",
     "prompt_hash": "3f2a...", "item_hash": "96a7..."}

- ``grade`` is an integer on the prompt's scale, or null when the output could not be
  parsed (then, and only then, ``parse_ok`` is false; such lines never count as a grade).
- ``item_id`` and ``kind`` are null for direct relevance prompts (no bank item): the
  grade is then the passage's label itself.
- ``item_hash`` is md5(item text.strip()), the text the grade was given for: after a
  human edits a question under its old id, grades of the old text are told apart (resume
  regrades them; ``--bank`` drops them). Null for direct prompts, and absent from lines
  written before it existed and from the workbench's files.
- ``input_hash`` (md5 of what the model was shown besides the item and the template:
  the passage or context, the query where the prompt shows it, the answer keys) and
  ``grader_hash`` (of the grader's settings: back end, model files, engine, dtype,
  decoding, token limits, verifier) let a resume regrade a pair whose passage, query or
  keys changed, and refuse grades of other settings; absent from older lines.
- The file is append-only: shards merge by concatenation and the last line for a key
  wins, so a resumed or re-run grading simply appends.

Readers also accept the reference workbench's graded "runs-with-text" files (one JSON
array ``[query_id, [paragraph, ...]]`` per line); see ``read_grades``.
"""

from __future__ import annotations

import contextlib
import gc
import os
from dataclasses import dataclass
from typing import IO, Callable, Iterable, Iterator, NamedTuple

from ..errors import InputError, UsageError
from .jsonl import dumps, iter_jsonl, json_id, require_fields
from .openers import display_name
from .judge_detail import NO_DETAIL, JudgeDetail
from .trec_rules import LABEL_MAX


@dataclass(slots=True)
class Grade:
    query_id: str
    doc_id: str
    item_id: str | None
    kind: str | None
    grade: int | None
    probs: dict[str, float] | None
    answer: str | None
    parse_ok: bool
    model: str
    prompt: str
    prompt_hash: str | None = None
    item_hash: str | None = None
    # the engine that computed it where a back end has several ("ctranslate2/int8",
    # "torch"): int8 and float32 grades of one model differ on a few % of pairs
    engine: str | None = None
    # what the model was shown besides the item and the prompt's template (passage or
    # context, the query where the prompt shows it, answer keys): a resume regrades a pair
    # whose passage, query or keys changed, as it does one whose item text changed
    input_hash: str | None = None
    # the grader's settings (back end, model files, decoding, token limits, verifier, ...):
    # a resume refuses to append grades of other settings under the same model and prompt
    grader_hash: str | None = None
    # what the judge said besides the grade (label mass, fallback, reasoning, served
    # model), as its back end answered it: written after the fields above where set
    detail: JudgeDetail = NO_DETAIL

    @property
    def key(self) -> tuple:
        return (self.query_id, self.doc_id, self.item_id, self.model, self.prompt)

    @property
    def resume_key(self) -> tuple:
        """What "already graded" means: same pair, item text, grader, prompt text and input."""
        return (self.query_id, self.doc_id, self.item_id, self.item_hash, self.model, self.prompt, self.prompt_hash,
                self.input_hash)

    @property
    def grader(self) -> tuple[str, str]:
        return (self.model, self.prompt)

    def to_json(self) -> dict:
        out = {
            "query_id": self.query_id, "doc_id": self.doc_id, "item_id": self.item_id,
            "kind": self.kind, "grade": self.grade, "probs": self.probs, "answer": self.answer,
            "parse_ok": self.parse_ok, "model": self.model, "prompt": self.prompt,
            "prompt_hash": self.prompt_hash, "item_hash": self.item_hash,
        }
        # filled in place, in this order: a line is written for every pair graded
        if self.engine is not None:
            out["engine"] = self.engine
        if self.input_hash is not None:
            out["input_hash"] = self.input_hash
        if self.grader_hash is not None:
            out["grader_hash"] = self.grader_hash
        if self.detail is not NO_DETAIL:
            out.update(self.detail.to_json())
        return out


def grade_line(g: Grade) -> str:
    return dumps(g.to_json()) + "\n"


def write_grades(grades: Iterable[Grade], out: IO[str]) -> int:
    n = 0
    for g in grades:
        out.write(grade_line(g))
        n += 1
    return n


_REQUIRED = ("query_id", "doc_id", "item_id", "grade", "parse_ok", "model", "prompt")
WORKBENCH_SCALE = (0, 5)  # the reference workbench's self-ratings


def _text_or_null(obj: dict, key: str, name: str, lineno: int) -> str | None:
    v = obj.get(key)
    if v is not None and not isinstance(v, str):
        raise InputError(f"'{key}' must be a string or null, got {_show(v)}", name, lineno)
    return v


def _show(v) -> str:
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


_NUMBERS = {int, float}
#: what a grade is of: a bank item, or a sentence's citation (exam-nuggets support); null: a passage (direct prompts)
GRADE_KINDS = ("question", "nugget", "statement")


class PromptScale(NamedTuple):
    """What a published prompt's grades are held to: its scale and, for a scoring prompt,
    the labels its ``probs`` are over (None: any)."""
    scale: tuple[int, int]
    labels: frozenset[str] | None


#: a grade line's prompt id -> its PromptScale, or None where the prompt is not a published
#: one (a custom prompt file, a workbench prompt class): its grades are only held to
#: LABEL_MAX. The prompt registry is above io: exam_eval.grading.grade_files passes it in.
ScaleOf = Callable[[str], PromptScale | None]


def no_published_prompts(prompt: str) -> PromptScale | None:
    return None


def _check_grade(grade: int, scale: tuple[int, int] | None, what: str, name: str, lineno: int) -> None:
    if scale is not None and not scale[0] <= grade <= scale[1]:
        raise InputError(f"grade {grade} is outside the {scale[0]}-{scale[1]} scale of {what}", name, lineno)
    if scale is None and not -LABEL_MAX <= grade <= LABEL_MAX:  # a custom prompt's grade becomes a label
        raise InputError(f"grade {grade} is out of range (at most {LABEL_MAX} either way)", name, lineno)


def _grade_from_ours(obj: dict, name: str, lineno: int, scale_of: ScaleOf) -> Grade:
    require_fields(obj, _REQUIRED, name, lineno)
    grade = obj["grade"]
    parse_ok = obj["parse_ok"]
    if not isinstance(parse_ok, bool):
        raise InputError("'parse_ok' must be true or false", name, lineno)
    if grade is not None and (isinstance(grade, bool) or not isinstance(grade, int)):
        raise InputError(f"'grade' must be an integer or null, got {grade!r}", name, lineno)
    if grade is None and parse_ok:
        raise InputError("'grade' is null but 'parse_ok' is true", name, lineno)
    if grade is not None and not parse_ok:  # an unparsed output has no grade: which one is wrong?
        raise InputError(f"'grade' is {grade} but 'parse_ok' is false (an unparsed output's grade is null)",
                         name, lineno)
    for key in ("model", "prompt"):
        if not isinstance(obj[key], str) or not obj[key]:
            raise InputError(f"'{key}' must be a non-empty string, got {_show(obj[key])}", name, lineno)
    published = scale_of(obj["prompt"])
    if grade is not None:
        _check_grade(grade, published and published.scale, f"prompt {obj['prompt']}", name, lineno)
    probs = obj.get("probs")
    if probs is not None:
        values = probs.values() if isinstance(probs, dict) else None
        if values is None or (values and (not set(map(type, values)) <= _NUMBERS
                                          or min(values) < -1e-6 or max(values) > 1 + 1e-6)):
            raise InputError("'probs' must be an object of label -> probability (0 to 1), or null", name, lineno)
        if values and not sum(values) > 0:
            raise InputError("'probs' sum to 0: no distribution (null where there is none)", name, lineno)
        labels = published and published.labels
        stray = sorted(set(probs) - labels) if labels is not None else []
        if stray:
            raise InputError(f"'probs' holds label {stray[0]!r}, which prompt {obj['prompt']} does not have "
                             f"(its labels: {' '.join(sorted(labels))})", name, lineno)
    kind = obj.get("kind")
    if kind is not None and kind not in GRADE_KINDS:
        raise InputError(f"'kind' must be {', '.join(GRADE_KINDS)} or null, got {_show(kind)}", name, lineno)
    return Grade(
        query_id=json_id(obj["query_id"], "query_id", name, lineno), doc_id=json_id(obj["doc_id"], "doc_id", name, lineno),
        item_id=json_id(obj["item_id"], "item_id", name, lineno, trec=False, nullable=True), kind=kind,
        grade=grade, probs=probs, answer=_text_or_null(obj, "answer", name, lineno), parse_ok=parse_ok,
        model=obj["model"], prompt=obj["prompt"], prompt_hash=_text_or_null(obj, "prompt_hash", name, lineno),
        item_hash=_text_or_null(obj, "item_hash", name, lineno), engine=_text_or_null(obj, "engine", name, lineno),
        input_hash=_text_or_null(obj, "input_hash", name, lineno),
        grader_hash=_text_or_null(obj, "grader_hash", name, lineno),
        detail=JudgeDetail.from_json(obj, refuse=lambda key, must_be, v: _refuse(key, must_be, v, name, lineno)),
    )


def _refuse(key: str, must_be: str, v, name: str, lineno: int):
    raise InputError(f"'{key}' must be {must_be} or null, got {_show(v)}", name, lineno)


def _objects(value, what: str, name: str, lineno: int) -> list[dict]:
    """A workbench list of objects (null: none)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise InputError(f"workbench {what} must be a list of objects", name, lineno)
    return value


def _workbench_rating(value, key: str, name: str, lineno: int) -> bool:
    """Whether a workbench rating was parsed: an integer; null (or absent) where the
    workbench could not read one. Anything else (4.5, "4", true) is not the workbench's
    output, and counting it as unparsed would hide it."""
    if value is None:
        return False
    if type(value) is not int:
        raise InputError(f"'{key}' must be an integer or null, got {_show(value)}", name, lineno)
    return True


def _grades_from_workbench(obj: list, name: str, lineno: int) -> Iterator[Grade]:
    """One workbench line: ``[query_id, [paragraph, ...]]`` with ``exam_grades``."""
    if len(obj) != 2 or not isinstance(obj[1], list):
        raise InputError("workbench line must be [query_id, [paragraphs]]", name, lineno)
    qid = json_id(obj[0], "query_id", name, lineno)
    for para in obj[1]:
        if not isinstance(para, dict) or "paragraph_id" not in para:
            raise InputError("workbench paragraph without 'paragraph_id'", name, lineno)
        doc_id = json_id(para["paragraph_id"], "paragraph_id", name, lineno)
        for block in _objects(para.get("exam_grades"), "'exam_grades'", name, lineno):
            model = str(block.get("llm"))
            info = block.get("prompt_info") or {}
            options = block.get("llm_options") or {}
            if not isinstance(info, dict) or not isinstance(options, dict):
                raise InputError("workbench 'prompt_info' and 'llm_options' must be objects", name, lineno)
            prompt = str(info.get("prompt_class") or options.get("prompt_template"))
            answers = {}
            for p in _pairs(block.get("answers"), name, lineno):
                answers[str(p[0])] = p[1]
            for rating in _objects(block.get("self_ratings"), "'self_ratings'", name, lineno):
                kind = "question" if rating.get("question_id") is not None else "nugget"
                key = "question_id" if kind == "question" else "nugget_id"
                if rating.get(key) is None:
                    raise InputError("self_rating without question_id or nugget_id", name, lineno)
                item_id = json_id(rating[key], key, name, lineno, trec=False)
                value = rating.get("self_rating")
                ok = _workbench_rating(value, "self_rating", name, lineno)
                if ok:
                    _check_grade(value, WORKBENCH_SCALE, "the workbench's self-ratings", name, lineno)
                answer = answers.get(item_id)
                yield Grade(qid, doc_id, item_id, kind, value if ok else None, None,
                            answer if isinstance(answer, str) else None, ok, model, prompt, None)
        for block in _objects(para.get("grades"), "'grades'", name, lineno):
            # direct relevance prompts: one label per passage
            info = block.get("prompt_info") or {}
            if not isinstance(info, dict):
                raise InputError("workbench 'prompt_info' must be an object", name, lineno)
            value = block.get("self_ratings")
            ok = _workbench_rating(value, "self_ratings", name, lineno)
            if ok:
                _check_grade(value, None, "", name, lineno)
            answer = block.get("answer")
            yield Grade(qid, doc_id, None, None, value if ok else None, None,
                        answer if isinstance(answer, str) else None, ok,
                        str(block.get("llm")), str(info.get("prompt_class")), None)


def _pairs(value, name: str, lineno: int) -> list:
    """The workbench's ``answers``: [[item id, answer text], ...]."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(p, list) and len(p) == 2 for p in value):
        raise InputError("workbench 'answers' must be a list of [item id, answer] pairs", name, lineno)
    return value


def iter_grades(path: str | os.PathLike, scale_of: ScaleOf = no_published_prompts) -> Iterator[tuple[int, Grade]]:
    """Every grade line, in file order, from either format; ``scale_of``: the published
    prompts whose scales hold (exam_eval.grading.grade_files reads with them)."""
    name = display_name(path)
    for lineno, obj in iter_jsonl(path):
        if isinstance(obj, list):
            for g in _grades_from_workbench(obj, name, lineno):
                yield lineno, g
        elif isinstance(obj, dict):
            yield lineno, _grade_from_ours(obj, name, lineno, scale_of)
        else:
            raise InputError("expected a grade object or a workbench [query_id, paragraphs] line", name, lineno)


@contextlib.contextmanager
def _gc_paused():
    """Bulk parsing allocates ~10 objects per grade and no reference cycles; the cyclic
    collector would otherwise rescan the growing heap again and again (a third of the time)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_grades(
    paths: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    model: str | None = None,
    prompt: str | None = None,
    kind: str | None = None,
    single_grader: bool = True,
    scale_of: ScaleOf = no_published_prompts,
) -> list[Grade]:
    """Grades after "last line wins" per key, filtered by model / prompt / kind.

    With ``single_grader`` (the default for qrels and cover) a file that still holds
    several (model, prompt) graders after filtering is a usage error that lists them,
    rather than silently mixing two scales. ``scale_of``: as in :func:`iter_grades`.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    latest: dict[tuple, Grade] = {}
    names = []
    with _gc_paused():
        _collect(paths, latest, names, model, prompt, kind, scale_of)
    return _finish(latest, names, model, prompt, kind, single_grader)


def _collect(paths, latest, names, model, prompt, kind, scale_of) -> None:
    for path in paths:
        names.append(display_name(path))
        filtered = model is not None or prompt is not None or kind is not None
        for _, g in iter_grades(path, scale_of):
            if filtered and ((model is not None and g.model != model)
                             or (prompt is not None and g.prompt != prompt)
                             or (kind is not None and g.kind != kind)):
                continue
            latest[(g.query_id, g.doc_id, g.item_id, g.model, g.prompt)] = g


def _finish(latest, names, model, prompt, kind, single_grader) -> list[Grade]:
    grades = list(latest.values())
    if not grades:
        filt = ", ".join(f"{k}={v}" for k, v in (("model", model), ("prompt", prompt), ("kind", kind)) if v)
        raise InputError("no grades" + (f" matching {filt}" if filt else ""), ", ".join(names))
    if single_grader:
        graders = sorted({g.grader for g in grades})
        if len(graders) > 1:
            listing = "; ".join(f"--model {m!r} --prompt {p!r}" for m, p in graders)
            raise UsageError(f"{', '.join(names)} holds grades of several graders; choose one: {listing}")
    return grades

