"""Grades files read as every command reads them: held to the published prompts' scales
(a grade outside its prompt's scale, or ``probs`` over a label the prompt lacks, is refused
naming file and line). exam_eval.io.grades reads the lines and knows no prompt, since the
prompt registry stands above io; everything above grading reads grades through here."""

from __future__ import annotations

import functools
import os
from typing import Iterable, Iterator

from ..io import grades as _lines
from ..io.grades import Grade, PromptScale
from .prompts import REGISTRY


def published_prompt(prompt: str):
    """The registered prompt of a grade line's prompt id (None: a custom prompt file, a
    workbench prompt class)."""
    return REGISTRY.get(prompt) if not prompt.startswith("file:") else None


@functools.cache
def published_scale(prompt: str) -> PromptScale | None:
    p = published_prompt(prompt)
    if p is None:
        return None
    return PromptScale(tuple(p.scale), frozenset(p.labels) if p.labels else None)


def iter_grades(path: str | os.PathLike) -> Iterator[tuple[int, Grade]]:
    """Every grade line, in file order, from either format (io.grades.iter_grades)."""
    return _lines.iter_grades(path, published_scale)


def read_grades(paths: str | os.PathLike | Iterable[str | os.PathLike], **filters) -> list[Grade]:
    """Grades after "last line wins" per key, filtered by ``model``, ``prompt`` and
    ``kind``, one grader unless ``single_grader=False`` (io.grades.read_grades)."""
    return _lines.read_grades(paths, scale_of=published_scale, **filters)
