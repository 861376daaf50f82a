"""What a grade may say about its judge besides the grade: one record for a back end's
answer (exam_eval.grading.types.GradeResult), the grade line (exam_eval.io.grades.Grade)
and the grading cache's ``detail`` column, so that a field added here is written, read
and cached everywhere at once. A leaf of io: the grading types stand on it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable


def _share(v) -> bool:
    return type(v) in (int, float) and -1e-6 <= v <= 1 + 1e-6


def _text(v) -> bool:
    return isinstance(v, str)


def _kind(ok: Callable[[Any], bool], must_be: str):
    return field(default=None, metadata={"ok": ok, "must_be": must_be})


@dataclass(frozen=True, slots=True)
class JudgeDetail:
    # scored prompts: the share of the judge's first-token probability that fell on the
    # labels (the whole distribution locally, the top alternatives over an endpoint;
    # exam_eval.backends.base.label_mass_fallback)
    label_mass: float | None = _kind(_share, "a number from 0 to 1")
    # why a scored prompt's grade was read from the answer's text instead ("label mass
    # below 0.5", "reasoning judge": a short, stable reason the summary counts), or why an
    # answer has no grade beyond parsing ("cut off while reasoning")
    fallback: str | None = _kind(_text, "a string")
    # what a reasoning judge thought before its answer (kept for exam-verify and audits)
    reasoning: str | None = _kind(_text, "a string")
    # the model id the server reported, where it differs from the one asked for
    served_model: str | None = _kind(_text, "a string")

    def to_json(self) -> dict:
        """The fields that are set, in declaration order: what a grade line appends and
        the cache's ``detail`` column holds."""
        return {key: v for key, _, _ in _CHECKS if (v := getattr(self, key)) is not None}

    def rounded(self) -> "JudgeDetail":
        """As a grade line keeps it: the label mass to 4 decimals (the judge's own
        numbers are no finer than that, and a line of 17 digits tells nothing more)."""
        if self.label_mass is None:
            return self
        # built field by field: dataclasses.replace costs more than the rest of a grade line
        return JudgeDetail(label_mass=round(self.label_mass, 4), fallback=self.fallback, reasoning=self.reasoning,
                           served_model=self.served_model)

    @classmethod
    def from_json(cls, obj: dict, refuse: Callable[[str, str, Any], None] | None = None) -> "JudgeDetail":
        """The fields of ``obj`` (a grade line, a cache row's ``detail``); absent or null
        ones stay None. A value of another type is passed to ``refuse(key, must_be,
        value)``, which raises (the grades reader: a line in error), or, without it, left
        out (the cache: a row an older or newer exam_eval wrote is still a grade)."""
        kept = {}
        for key, ok, must_be in _CHECKS:  # once per grade line: the rules read once, here
            v = obj.get(key)
            if v is None:
                continue
            if not ok(v):
                if refuse is not None:
                    refuse(key, must_be, v)
                continue
            kept[key] = float(v) if ok is _share else v
        return cls(**kept) if kept else NO_DETAIL


NO_DETAIL = JudgeDetail()
_CHECKS = tuple((f.name, f.metadata["ok"], f.metadata["must_be"]) for f in fields(JudgeDetail))
