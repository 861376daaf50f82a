"""What a labels argument is: a qrels file, an ir_datasets ID, or a grades file (ours or
the workbench's), sniffed by content, not by name. Reading it into qrels turns grades
into labels, a measure: exam_eval.measures.labels.load_labels."""

from __future__ import annotations

import os
import sys

from ..errors import InputError
from .irds import looks_like_irds_id
from .openers import display_name, iter_lines


def sniff_labels(spec: str) -> str:
    """'grades', 'qrels' or 'irds'."""
    if spec != "-" and not os.path.exists(spec):
        if looks_like_irds_id(spec):
            return "irds"
        raise InputError("no such file (and not an ir_datasets ID such as msmarco-passage/trec-dl-2019/judged)", spec)
    if spec == "-":
        raise InputError("labels cannot be read from stdin (the format is sniffed); pass a file", display_name(spec))
    for _, line in iter_lines(spec):
        s = line.lstrip()
        if s:
            return "grades" if s[0] in "{[" else "qrels"
    raise InputError("file is empty", spec)


def stderr_log(prog: str):
    return lambda msg: print(f"{prog}: {msg}", file=sys.stderr)
