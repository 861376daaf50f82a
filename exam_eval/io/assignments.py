"""Nugget assignment files (the nuggetizer's assign output) read back as grades.

One JSON line per report: ``{"qid", "run_id", "nuggets": [{"text", "importance",
"assignment"}]}``, as ``exam-nuggets assign --assignments`` and ``score --assignments``
write it and the nuggetizer's assign step writes it (without ``run_id`` when it judged
one run; such a line is matched to the only report on its topic).

Each nugget becomes the grade a whole-report grader would have written: doc_id the
report's id, item_id the bank item with that text on the topic, grade support 2 /
partial_support 1 / not_support 0; any other assignment (the nuggetizer's "failed") is a
line with parse_ok false, counted as no support. A nugget text the bank lacks, or a line
no report matches, is bad input naming file and line.
"""

from __future__ import annotations

import os
from typing import Mapping, Sequence

from ..errors import InputError
from .bank_items import BankItem
from .grades import Grade
from .jsonl import iter_jsonl, loads_checked
from .openers import display_name, iter_lines
from .reports import Report

PROMPT = "nuggetizer-listwise"  # the labels' scale is the listwise assigner's (0-2)
GRADES = {"not_support": 0, "partial_support": 1, "support": 2}


def is_assignment_file(path: str | os.PathLike) -> bool:
    """Whether the first non-blank line is an assignment line (nuggets with "assignment")."""
    spec = str(path)
    if spec == "-" or not os.path.isfile(spec):
        return False
    for _, line in iter_lines(spec):
        if not line.strip():
            continue
        try:
            obj = loads_checked(line)  # not json.loads: a line nested 10^5 deep is a RecursionError there
        except ValueError:
            return False
        nuggets = obj.get("nuggets") if isinstance(obj, dict) else None
        return isinstance(nuggets, list) and any(isinstance(n, dict) and "assignment" in n for n in nuggets)
    return False


def read_assignment_grades(path: str | os.PathLike, reports: Sequence[Report],
                           items: Mapping[str, Sequence[BankItem]]) -> list[Grade]:
    name = display_name(path)
    by_run = {(r.run_id, r.topic_id): r for r in reports}
    by_topic: dict[str, list[Report]] = {}
    for r in reports:
        by_topic.setdefault(r.topic_id, []).append(r)
    out: list[Grade] = []
    # (report, nugget) -> the line that assigned it and the label: a second assignment is the
    # input contradicting (or repeating) itself, where scoring took the best label silently;
    # but the nuggetizer assigns a nugget its bank lists twice twice, in one line, alike
    # (the bank's reader drops the repeat, with a notice): that one is the same assignment
    assigned: dict[tuple[str, str, str], tuple[int, str]] = {}
    for lineno, obj in iter_jsonl(path):
        if not isinstance(obj, dict) or not isinstance(obj.get("nuggets"), list):
            raise InputError("expected an assignment line {qid, run_id, nuggets: [...]}", name, lineno)
        qid = str(obj.get("qid", obj.get("query_id", "")))
        run = obj.get("run_id")
        if run is not None:
            report = by_run.get((str(run), qid))
        else:
            candidates = by_topic.get(qid, [])
            report = candidates[0] if len(candidates) == 1 else None
        if report is None:
            what = f"run {run}" if run is not None else "no run_id, and not exactly one report"
            raise InputError(f"no report matches this line (topic {qid}, {what})", name, lineno)
        texts = {i.text.strip(): i for i in items.get(qid, ())}
        for n in obj["nuggets"]:
            text = n.get("text") if isinstance(n, dict) else None
            item = texts.get(text.strip()) if isinstance(text, str) else None
            if item is None:
                raise InputError(f"nugget {text!r} is not in the bank for topic {qid}", name, lineno)
            label = str(n.get("assignment", "")).lower()
            first = assigned.get((qid, report.doc_id, item.item_id))
            if first == (lineno, label):
                continue
            if first is not None:
                raise InputError(f"nugget {text!r} of run {report.run_id} is assigned again (first on line {first[0]})",
                                 name, lineno)
            assigned[(qid, report.doc_id, item.item_id)] = (lineno, label)
            grade = GRADES.get(label)
            out.append(Grade(qid, report.doc_id, item.item_id, item.kind, grade, None, label, grade is not None,
                             "assignments-file", PROMPT, item_hash=item.text_hash))
    return out
