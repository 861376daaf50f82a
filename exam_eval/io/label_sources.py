"""What a labels argument is: a qrels file, an ir_datasets ID, or a grades file (ours or
the workbench's), sniffed by content, not by name. Reading it into qrels turns grades
into labels, a measure: exam_eval.measures.grade_labels (load_labels; read_human_qrels,
where grades are refused)."""

from __future__ import annotations

import os

from ..errors import InputError, UsageError
from .irds import looks_like_irds_id, unresolved
from .openers import display_name, iter_lines


def sniff_labels(spec: str) -> str:
    """'grades', 'qrels' or 'irds'."""
    if spec != "-" and not os.path.exists(spec):
        if looks_like_irds_id(spec):  # the registry's, so msmarco-passage too; a path wins
            return "irds"
        raise unresolved(spec)
    if spec == "-":
        raise InputError("labels cannot be read from stdin (the format is sniffed); pass a file", display_name(spec))
    for _, line in iter_lines(spec):
        s = line.lstrip()
        if s:
            return "grades" if s[0] in "{[" else "qrels"
    raise InputError("file is empty", spec)


def refuse_unused_grade_options(spec: str, what: str, options: dict[str, object]) -> None:
    """Options that select or read grades (None when not given), given with labels that
    are not grades, would change nothing: said, not ignored, so that a Makefile whose
    grades file became a qrels file does not score another thing in silence."""
    for flag, value in options.items():
        if value is not None:
            raise UsageError(f"{flag} applies to a grades file, and {display_name(spec)} is {what}")


def looks_like_grades(path: str) -> bool:
    """Grades files are JSON lines; qrels are whitespace-separated columns."""
    for _, line in iter_lines(path):
        if line.strip():
            return line.lstrip()[:1] in "{["
    return False

