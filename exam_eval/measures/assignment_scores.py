"""Nugget scores straight from an assignment file (the nuggetizer's assign output), which
holds everything they need: per report its run, topic and nuggets with importance and
assignment. This is how ``exam-correlate`` reads such a file as a leaderboard.

As the nuggetizer's ``calculate_nugget_scores``: a nugget is vital when its importance
is "vital" (anything else counts in All and, for Weighted, as okay); support 1, partial
support 0.5, anything else (the nuggetizer's "failed") 0. A run's value is the mean over
the topics it has.
"""

from __future__ import annotations

import os

from ..errors import InputError
from ..io.jsonl import dumps, iter_jsonl
from ..io.leaderboard import Leaderboard
from ..io.nugget_banks import ASSIGNMENT_LABELS
from ..io.openers import display_name
from ..io.outputs import atomic_output
from .exam_measures import NUGGET_MEASURES
from .nugget_scores import NOT_SUPPORT, PARTIAL, SUPPORT, average_runs, nugget_scores

LEVELS = {"support": SUPPORT, "partial_support": PARTIAL}


def leaderboard_from_assignments(path: str | os.PathLike) -> Leaderboard:
    name = display_name(path)
    per: dict[tuple[str, str], dict[str, float]] = {}
    for lineno, obj in iter_jsonl(path):
        nuggets = obj.get("nuggets") if isinstance(obj, dict) else None
        run = obj.get("run_id") if isinstance(obj, dict) else None
        if not isinstance(nuggets, list) or run is None:
            raise InputError("expected an assignment line {qid, run_id, nuggets: [...]} (a leaderboard needs "
                             "run_id)", name, lineno)
        qid = str(obj.get("qid", obj.get("query_id", "")))
        if (str(run), qid) in per:
            raise InputError(f"a second line for run {run}, topic {qid}", name, lineno)
        levels = []
        for n in nuggets:
            if not isinstance(n, dict):
                raise InputError("a nugget must be an object with importance and assignment", name, lineno)
            imp = "vital" if str(n.get("importance", "")).lower() == "vital" else "okay"
            levels.append((imp, LEVELS.get(str(n.get("assignment", "")).lower(), NOT_SUPPORT)))
        per[(str(run), qid)] = nugget_scores(levels)
    if not per:
        raise InputError("no assignment lines", name)
    measures = list(NUGGET_MEASURES)
    means = average_runs(per, measures)
    rows = {run: {m: v[0] for m, v in ms.items()} for run, ms in means.items()}
    topics: dict[str, dict[str, dict[str, float]]] = {}
    for (run, qid), vals in per.items():
        for m in measures:
            topics.setdefault(m, {}).setdefault(run, {})[qid] = vals[m]
    return Leaderboard(measures, rows, topics, "assignments", list(measures))


def write_listwise_assignments(reports, grades, items, path, default_importance: str = "vital") -> int:
    """The nuggetizer's assign-output file (one line per report, with run_id) of
    listwise grades (exam-nuggets assign --assignments): what was answered and nothing
    else. A report none of whose windows was answered (its calls failed) has no line; a
    report some of whose windows failed lists only the nuggets it has grades for; a
    grade that did not parse is "failed", as the nuggetizer writes a window that never
    parsed. So ``exam-nuggets score`` reads from this file the grades it reads from the
    grades file, and gives the same scores. Returns the lines written."""
    by_report: dict[tuple[str, str], dict[str, object]] = {}
    for g in grades:
        by_report.setdefault((g.query_id, g.doc_id), {})[g.item_id] = g
    n = 0
    with atomic_output(path) as out:
        for r in reports:
            got = by_report.get((r.topic_id, r.doc_id))
            if not got:
                continue
            nuggets = []
            for item in items.get(r.topic_id, ()):
                g = got.get(item.item_id)
                if g is None:
                    continue
                label = ASSIGNMENT_LABELS[g.grade] if g.parse_ok and g.grade is not None else "failed"
                nuggets.append({"text": item.text, "importance": item.importance or default_importance,
                                "assignment": label})
            out.write(dumps({"qid": r.topic_id, "run_id": r.run_id, "nuggets": nuggets}) + "\n")
            n += 1
    return n
