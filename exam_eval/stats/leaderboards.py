"""Rank correlation of leaderboards, as ``exam-correlate leaderboard`` computes it: which
columns to compare, ranks turned into scores, systems that only one side has, per-topic
rows and their mean. Reads leaderboards with exam_eval.io.leaderboard; notes go to ``log``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ..errors import InputError, UsageError
from ..io.assignments import is_assignment_file
from ..io.leaderboard import leaderboard_files, read_leaderboard
from ..io.openers import display_name
from ..measures.assignment_scores import leaderboard_from_assignments

Log = Callable[[str], None]


def fmt(v: float) -> str:
    return "nan" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"


def is_rank(column: str) -> bool:
    return "rank" in column.lower()


def pick_column(board, path: str, wanted: str | None, prefer_rank: bool) -> str:
    if wanted is not None:
        if wanted not in board.columns:
            raise UsageError(f"{display_name(path)} has no column {wanted!r}; columns: {', '.join(board.columns)}")
        return wanted
    numeric = [c for c in board.columns if board.column(c)]
    if prefer_rank and "official_rank" in numeric:
        return "official_rank"
    for c in numeric:
        if not is_rank(c):
            return c
    if numeric:
        return numeric[0]
    raise InputError("no column with values", display_name(path))


def pick_columns(board, path: str, wanted: tuple[str, ...], prefer_rank: bool) -> list[str]:
    """The measures asked for; by default every measure of a per-topic leaderboard, one
    column (see _pick_column) of a TSV one."""
    if wanted:
        return [pick_column(board, path, w, prefer_rank) for w in dict.fromkeys(wanted)]
    if board.format != "tsv":
        return list(board.columns)
    return [pick_column(board, path, None, prefer_rank)]


def read_board(path: str, fmt: str, aggregate: str, log: Log):
    board = None
    if fmt == "auto":
        files = leaderboard_files(path)
        if len(files) == 1 and is_assignment_file(files[0]):  # the nuggetizer's assign output: score it
            board = leaderboard_from_assignments(files[0])
    if board is None:
        board = read_leaderboard(path, fmt)
    if board.format != "tsv" and (fmt == "auto" or board.computed):
        note = f" (no 'all' rows for {', '.join(board.computed)}: mean over topics)" if board.computed else ""
        log(f"{display_name(path)}: {board.format} leaderboard, {len(board.rows)} run(s){note}")
    if aggregate == "mean":
        if board.format == "tsv":
            raise UsageError(f"--aggregate mean needs per-topic values; {display_name(path)} is a TSV leaderboard")
        board = board.recomputed(source=display_name(path))
    return board


def signed(board, col: str, values: dict[str, float]) -> dict[str, float]:
    # only TSV columns follow the 'rank' naming rule; long-shape measures are taken as they are
    if board.format == "tsv" and is_rank(col):
        return {k: -v for k, v in values.items()}
    return values


def _too_few(n: int, truth, pred) -> None:
    raise InputError(f"only {n} system(s) in common with {display_name(truth)}; need at least 3 for a correlation",
                     display_name(pred))


def check_systems(tvals, pvals, tb, pb, tcol, pcol, truth, pred, strict, log: Log) -> None:
    for board, col, path in ((tb, tcol, truth), (pb, pcol, pred)):
        empty = [r for r in board.rows if board.rows[r].get(col) is None]
        if empty:
            log(f"{display_name(path)}: no {col} value, left out: {', '.join(sorted(empty))}")
    # a system listed in both files but without a value in one column was reported above
    only_t = sorted(set(tvals) - set(pb.rows))
    only_p = sorted(set(pvals) - set(tb.rows))
    for names, where, other in ((only_t, truth, pred), (only_p, pred, truth)):
        if names:
            msg = f"{len(names)} system(s) of {display_name(where)} not in {display_name(other)}: {', '.join(names)}"
            if strict:
                raise InputError(msg, display_name(where))
            log(msg + " (left out)")


def per_topic_rows(lead, truth_topics, pred_topics, top_k, names, log: Log) -> list[list[str]]:
    """One row per topic in both, then 'mean' (of each coefficient where defined)."""
    from .correlation import correlate  # scipy: only when correlating, not for --help

    rows, results, skipped = [], [], []
    for topic in sorted(set(truth_topics) & set(pred_topics)):
        r = correlate(truth_topics[topic], pred_topics[topic], top_k)
        if r["n"] < 3:
            skipped.append(topic)
            continue
        results.append(r)
        rows.append(lead + [topic] + [str(r[k]) if k == "n" else fmt(r[k]) for k in names])
    if skipped and results:
        log(f"{lead[1]} vs {lead[2]}: {len(skipped)} topic(s) with fewer than 3 systems in common left out: "
              + ", ".join(skipped))
    if not results:
        log(f"{lead[0]}: {lead[1]} vs {lead[2]}: no topic has 3 systems in common (pair left out)")
        return []
    mean = []
    for k in names:
        if k == "n":
            mean.append(str(len(results)))
            continue
        vals = [r[k] for r in results if not math.isnan(r[k])]
        mean.append(fmt(sum(vals) / len(vals)) if vals else "nan")
    rows.append(lead + ["mean"] + mean)
    return rows


@dataclass
class LeaderboardCorrelation:
    """What the leaderboard subcommand prints: one pair's coefficients (``single``, with
    the pair's values for a plot) or a table of rows."""

    names: tuple[str, ...]
    header: list[str]
    rows: list[list[str]]
    single: dict | None = None
    pair: tuple | None = field(default=None, repr=False)  # (truth values, pred values, truth column, pred column)


def correlate_leaderboards(truth: str, preds, *, truth_columns=(), pred_columns=(), truth_format="auto",
                           pred_format="auto", top_k=(10,), aggregate="file", shared_topics=False,
                           per_topic=False, table=False, strict=False, plot=False,
                           log: Log = lambda msg: None) -> LeaderboardCorrelation:
    """TRUTH's leaderboard against each of PREDS (paths), per measure pair."""
    from .correlation import correlate, keys  # scipy: only when correlating, not for --help

    if any(k < 3 for k in top_k):
        raise UsageError("--top-k must be at least 3 (a correlation over fewer systems says nothing)")
    top_k = tuple(dict.fromkeys(top_k))
    tb = read_board(truth, truth_format, aggregate, log)
    tcols = pick_columns(tb, truth, truth_columns, prefer_rank=True)
    pboards = [(p, read_board(p, pred_format, aggregate, log)) for p in preds]
    pairs = [(p, pb, tcol, pcol) for p, pb in pboards for tcol in tcols
             for pcol in pick_columns(pb, p, pred_columns, prefer_rank=False)]
    if (per_topic or shared_topics) and tb.format == "tsv":
        raise UsageError(f"--per-topic/--shared-topics need per-topic values; {display_name(truth)} is a TSV leaderboard")
    for p, pb in pboards:
        if (per_topic or shared_topics) and pb.format == "tsv":
            raise UsageError(f"--per-topic/--shared-topics need per-topic values; {display_name(p)} is a TSV leaderboard")
    single = len(pairs) == 1 and not per_topic and not table
    if plot and not single:
        raise UsageError("--plot draws one leaderboard pair: give one PRED and one measure on each side")
    names = keys(top_k)

    rows: list[list[str]] = []
    for pred, pb, tcol, pcol in pairs:
        t_board, p_board = tb, pb
        if shared_topics:
            common = tb.topic_ids(tcol) & pb.topic_ids(pcol)
            if not common:
                raise InputError(f"no topic of {tcol} in {display_name(truth)} has {pcol} values", display_name(pred))
            log(f"{tcol} vs {pcol}: means over the {len(common)} topic(s) in both")
            t_board = tb.recomputed(common, display_name(truth))
            p_board = pb.recomputed(common, display_name(pred))
        tvals, pvals = t_board.column(tcol), p_board.column(pcol)
        shared = len(set(tvals) & set(pvals))
        if shared < 3:  # refused in one line, before notes about the systems
            _too_few(shared, truth, pred)
        if len(pairs) <= 4:  # with every measure of big leaderboards, one line per pair is noise
            for side, board, path, col in (("truth", tb, truth, tcol), ("pred", pb, pred, pcol)):
                rank = " (rank: lower is better)" if board.format == "tsv" and is_rank(col) else ""
                log(f"{side}: {display_name(path)} column {col}{rank}")
        check_systems(tvals, pvals, t_board, p_board, tcol, pcol, truth, pred, strict, log)
        t, pv = signed(tb, tcol, tvals), signed(pb, pcol, pvals)
        result = correlate(t, pv, top_k)
        if result["n"] < 3:
            _too_few(result["n"], truth, pred)
        if single:
            return LeaderboardCorrelation(names, [], [], result, (tvals, pvals, tcol, pcol))
        lead = [display_name(pred), tcol, pcol]
        if not per_topic:
            rows.append(lead + [str(result[k]) if k == "n" else fmt(result[k]) for k in names])
            continue
        rows.extend(per_topic_rows(lead, tb.per_topic(tcol), pb.per_topic(pcol), top_k, names, log))
    if len(pairs) > 4:
        log(f"{len(pairs)} measure pair(s) of {display_name(truth)} and {len(preds)} leaderboard(s)")
    if not rows:
        raise InputError("no measure pair has a topic with 3 systems in common", display_name(preds[0]))
    header = ["pred", "truth_measure", "pred_measure"] + (["topic"] if per_topic else []) + list(names)
    return LeaderboardCorrelation(names, header, rows)
