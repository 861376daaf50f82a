"""Per-topic leaderboards in the three shapes TREC tracks and the AutoJudge tools read.

One line per (run, measure, topic) plus an ``all`` line per (run, measure) with the
mean over topics, whitespace separated (we write tabs):

- ``tot``          ``run measure topic value``  (TREC RAG / AutoJudge "tot" files)
- ``ir_measures``  ``run topic measure value``
- ``trec_eval``    ``measure topic value``, one run per file, as ``trec_eval -q`` prints
                   it: ``%-22s\\t%s\\t%6.4f``, topic by topic (every measure of a
                   topic together), the ``all`` lines last

tot and ir_measures lines are ordered by run, then measure, then topic (string order,
as trec_eval orders queries), the ``all`` line last. Values are printed with ``digits``
decimals (4 by default; trec_eval's layout always has 4).
"""

from __future__ import annotations

import contextlib
import os
from typing import IO, Mapping, Sequence

from .nugget_banks import write_assignment_lines
from .outputs import atomic_output, output_folder

SHAPES = ("tot", "ir_measures", "trec_eval")


def _rows(per_topic: Mapping[str, Mapping[str, float | None]], summary: Mapping[str, float],
          measures: Sequence[str], with_topics: bool, by_topic: bool = False):
    if by_topic:
        if with_topics:
            for topic in sorted(per_topic):
                for m in measures:
                    v = per_topic[topic].get(m)
                    if v is not None:
                        yield m, topic, v
        for m in measures:
            if m in summary:
                yield m, "all", summary[m]
        return
    for m in measures:
        if with_topics:
            for topic in sorted(per_topic):
                v = per_topic[topic].get(m)
                if v is not None:
                    yield m, topic, v
        if m in summary:
            yield m, "all", summary[m]


def write_track_leaderboard(out: IO[str], shape: str, measures: Sequence[str],
                            per_topic: Mapping[str, Mapping[str, Mapping[str, float | None]]],
                            summary: Mapping[str, Mapping[str, float]], *, with_topics: bool = True,
                            digits: int = 4) -> int:
    """``per_topic``: run -> topic -> measure -> value; ``summary``: run -> measure ->
    value (the ``all`` rows). Returns the number of lines written."""
    if shape not in SHAPES:
        raise ValueError(f"unknown leaderboard shape {shape!r}")
    if shape == "trec_eval" and len(per_topic) > 1:
        raise ValueError("the trec_eval shape holds one run per file")
    n = 0
    for run in sorted(per_topic):
        for m, topic, v in _rows(per_topic[run], summary.get(run, {}), measures, with_topics,
                                 by_topic=shape == "trec_eval"):
            if shape == "tot":
                out.write(f"{run}\t{m}\t{topic}\t{v:.{digits}f}\n")
            elif shape == "ir_measures":
                out.write(f"{run}\t{topic}\t{m}\t{v:.{digits}f}\n")
            else:
                out.write("%-22s\t%s\t%6.4f\n" % (m, topic, v))
            n += 1
    return n


def write_score_outputs(res, items, *, output: str | None, to_dir: bool, shape: str, summary_only: bool,
                        digits: int, assignments: str | None, default_importance: str) -> None:
    """exam-nuggets score's outputs from its ``ReportScores``: the leaderboard (``shape``
    tot, ir_measures, trec_eval, or table: the TSV of io.leaderboard with ``digits``
    decimals; trec_eval into a folder: one RUN.txt per run) and the nuggetizer's
    assignment file. Each is written to its temp file before any replaces its file: a
    failure (a full disk, a folder in the way) leaves every output as it was. The
    assignments are entered first, so they are renamed last."""
    chosen, means = res.measures, res.means
    by_run: dict[str, dict[str, dict[str, float | None]]] = {run: {} for run in means}  # a run none of whose
    for (run, topic), vals in res.per.items():                                           # topics was scored too
        by_run.setdefault(run, {})[topic] = vals
    with contextlib.ExitStack() as stack:
        if assignments:
            write_assignment_lines(res.assigned, items, stack.enter_context(atomic_output(assignments)),
                                   default_importance)
        if shape == "trec_eval" and to_dir:
            stack.enter_context(output_folder(output))
            files = {run: stack.enter_context(atomic_output(os.path.join(output, f"{run}.txt")))
                     for run in sorted(by_run) if by_run[run] or means[run]}  # (nothing to say: no file)
            for run, out in files.items():
                write_track_leaderboard(out, "trec_eval", chosen, {run: by_run[run]}, {run: means[run]},
                                        with_topics=not summary_only)
            return
        out = stack.enter_context(atomic_output(output))
        if shape == "table":
            out.write("\t".join(["run", *chosen]) + "\n")
            for run in sorted(means):
                out.write("\t".join([run, *(f"{means[run][m]:.{digits}f}" if m in means[run] else ""
                                             for m in chosen)]) + "\n")
        else:
            write_track_leaderboard(out, shape, chosen, by_run, means, with_topics=not summary_only, digits=digits)
