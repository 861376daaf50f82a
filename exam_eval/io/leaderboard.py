"""Leaderboards, in the four shapes evaluation tools exchange them.

- ``tsv``: header ``run`` then one column per measure, one row per run (what
  exam-qrels and exam-cover print for several runs, and ``shared/data/*/official.tsv``).
  Empty cells are missing values (None). Aggregates only.
- ``tot``: ``run measure topic value`` lines (TREC RAG / AutoJudge leaderboards).
- ``ir_measures``: ``run topic measure value`` lines (AutoJudge's "ir_measures"), or the
  ir_measures command line's own per-run output, ``topic measure value`` (``-q``) and
  ``measure value`` (summary) lines, the run named by the file.
- ``trec_eval``: ``measure topic value`` lines as ``trec_eval -q`` prints them, one run
  per file (or several runs' outputs concatenated); the run is named by trec_eval's
  ``runid`` line, else by the file name without its extensions (.eval, .trec_eval,
  .ir_measures, .gz and run-file ones); ``relstring`` lines (not numbers) are skipped.

Fields of the long shapes are separated by white space (as autojudge-evaluate splits
them); an optional header line naming the columns (``run_id topic_id measure value``
...) fixes their order. Topic ``all`` holds a run's aggregate. A leaderboard may be a
directory: every regular, non-hidden file in it, in name order, read in one shape.

Per-topic values are kept (``Leaderboard.topics``) so rankings can be correlated per
topic and aggregates recomputed over a subset of topics.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import IO, Iterable, Mapping, Sequence

from ..errors import InputError
from .openers import display_name, iter_lines

FORMATS = ("auto", "tsv", "tot", "ir_measures", "trec_eval")
ALL = "all"

# column names autojudge-base's format detection knows, plus the obvious ones
_RUN_NAMES = {"run_id", "runtag", "run", "runid", "system"}
_TOPIC_NAMES = {"topic_id", "request_id", "query_id", "narrative_id", "topicid", "queryid", "topic", "qid"}
_MEASURE_NAMES = {"metric", "measure", "eval_metric"}
_VALUE_NAMES = {"value", "score"}


@dataclass
class Leaderboard:
    columns: list[str]                                   # measures, in order of first appearance
    rows: dict[str, dict[str, float | None]]             # run -> measure -> aggregate value
    # measure -> run -> topic -> value (long shapes only; topic 'all' is not in here)
    topics: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    format: str = "tsv"
    computed: list[str] = field(default_factory=list)    # measures whose aggregate is a computed mean

    def column(self, name: str) -> dict[str, float]:
        return {run: vals[name] for run, vals in self.rows.items() if vals.get(name) is not None}

    def topic_ids(self, measure: str) -> set[str]:
        return {t for per_run in self.topics.get(measure, {}).values() for t in per_run}

    def per_topic(self, measure: str) -> dict[str, dict[str, float]]:
        """topic -> run -> value (runs in leaderboard order)."""
        out: dict[str, dict[str, float]] = {}
        for run, per_run in self.topics.get(measure, {}).items():
            for topic, v in per_run.items():
                out.setdefault(topic, {})[run] = v
        return out

    def recomputed(self, topics: Iterable[str] | None = None, source: str = "leaderboard") -> "Leaderboard":
        """Aggregates replaced by the mean over each run's per-topic values (only ``topics``
        when given), as autojudge-evaluate recomputes them. Measures with aggregates only
        (trec_eval's gm_map) are dropped."""
        keep = None if topics is None else set(topics)
        rows: dict[str, dict[str, float | None]] = {run: {} for run in self.rows}
        columns: list[str] = []
        for measure in self.columns:
            per_run = self.topics.get(measure)
            if not per_run:
                continue
            columns.append(measure)
            for run, values in per_run.items():
                vals = [v for t, v in values.items() if keep is None or t in keep]
                rows.setdefault(run, {})[measure] = sum(vals) / len(vals) if vals else None
        if not columns:
            raise InputError("no per-topic values to average", source)
        return Leaderboard(columns, rows, self.topics, self.format, list(columns))


# --------------------------------------------------------------------------- reading

def read_leaderboard(path: str | os.PathLike, fmt: str = "tsv") -> Leaderboard:
    """Read a leaderboard file or directory in the given shape (``auto`` sniffs it)."""
    global _stdin_lines
    if fmt not in FORMATS:
        raise ValueError(f"unknown leaderboard format {fmt!r}")
    try:
        return _read_leaderboard(path, fmt)
    finally:
        # standard input is kept for one read only: the next read (a notebook's second
        # leaderboard from "-", a second command in one process) reads it anew
        _stdin_lines = None


def _read_leaderboard(path: str | os.PathLike, fmt: str) -> Leaderboard:
    files = leaderboard_files(path)
    if fmt == "auto":
        fmt = sniff_format(files[0])
    if fmt == "tsv":
        if len(files) != 1:
            raise InputError("a TSV leaderboard is one file, not a directory", display_name(path))
        return _read_tsv(files[0])
    return _read_long(files, fmt, display_name(path))


def leaderboard_files(path: str | os.PathLike) -> list[str]:
    p = os.fspath(path)
    if p != "-" and os.path.isdir(p):
        names = sorted(n for n in os.listdir(p) if not n.startswith(".") and os.path.isfile(os.path.join(p, n)))
        if not names:
            raise InputError("directory has no leaderboard files", p)
        return [os.path.join(p, n) for n in names]
    return [p]


_stdin_lines: list[tuple[int, str]] | None = None


def _raw_lines(path: str | os.PathLike):
    """Numbered lines; standard input is read once and kept for the rest of this read
    (:func:`read_leaderboard`), so that sniffing its shape does not consume it."""
    global _stdin_lines
    if str(path) != "-":
        return iter_lines(path)
    if _stdin_lines is None:
        _stdin_lines = list(iter_lines(path))
    return iter(_stdin_lines)


def _data_lines(path: str, limit: int | None = None) -> list[tuple[int, list[str]]]:
    out = []
    for lineno, line in _raw_lines(path):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        out.append((lineno, fields))
        if limit is not None and len(out) >= limit:
            break
    return out


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _header_order(fields: Sequence[str]) -> dict[str, int] | None:
    """Positions of run/topic/measure/value when ``fields`` is a header line."""
    if _is_number(fields[-1]):
        return None
    pos: dict[str, int] = {}
    for i, f in enumerate(x.lower() for x in fields):
        for role, names in (("run", _RUN_NAMES), ("topic", _TOPIC_NAMES), ("measure", _MEASURE_NAMES),
                            ("value", _VALUE_NAMES)):
            if f in names and role not in pos:
                pos[role] = i
    if "topic" in pos and "measure" in pos and "value" in pos and len(pos) == len(fields):
        return pos
    return None


# trec_eval's measures whose values are not numbers (runid names the run; relstring,
# in -m all_trec, is the relevance of the top 10)
_TREC_EVAL_STRINGS = {"runid", "relstring"}

_ORDERS = {
    "tot": {"run": 0, "measure": 1, "topic": 2, "value": 3},
    "ir_measures": {"run": 0, "topic": 1, "measure": 2, "value": 3},
    "ir_measures/3": {"topic": 0, "measure": 1, "value": 2},
    "ir_measures/2": {"measure": 0, "value": 1},
    "trec_eval": {"measure": 0, "topic": 1, "value": 2},
}


def sniff_format(path: str) -> str:
    """Which shape a leaderboard file has; an InputError when it cannot be told."""
    name = display_name(path)
    lines = _data_lines(path, limit=2000)
    if not lines:
        raise InputError("leaderboard is empty", name)
    first = lines[0][1]
    header = _header_order(first)
    if header is not None:
        measure_first = header["measure"] < header["topic"]
        if "run" in header:
            return "tot" if measure_first else "ir_measures"
        return "trec_eval" if measure_first else "ir_measures"
    if first[0] == "run":
        return "tsv"
    if all(len(f) >= 3 and all(map(_is_number, f[1:])) and not f[1].lstrip("+-").isdigit() for _, f in lines):
        # "good 0.92 0.95": a TSV leaderboard whose header line is missing; read as trec_eval's
        # output it became a measure "good" at a topic "0.92"
        raise InputError("every line is a name and then numbers: a TSV leaderboard without its header line "
                         "('run', then one name per measure column)?", name, lines[0][0])
    counts = {len(f) for _, f in lines}
    if counts <= {2, 3} and 2 in counts:
        return "ir_measures"  # the ir_measures CLI's per-run output: summary lines have 2 fields
    if counts == {4}:
        return _tell(lines, "tot", 2, "ir_measures", 1, name)
    if counts == {3}:
        if any(f[0] == "runid" for _, f in lines):
            return "trec_eval"
        return _tell(lines, "trec_eval", 1, "ir_measures", 0, name)
    raise InputError(f"cannot tell the leaderboard's shape: lines have {sorted(counts)} fields "
                     "(tot and ir_measures have 4, trec_eval 3, a TSV leaderboard starts with 'run')", name)


def _tell(lines, a: str, a_topic: int, b: str, b_topic: int, name: str) -> str:
    """Two shapes that differ in which column holds the topic: 'all' rows decide, then
    numeric topic ids (measure names are never numbers)."""
    col_a = [f[a_topic] for _, f in lines]
    col_b = [f[b_topic] for _, f in lines]
    if ALL in col_a and ALL not in col_b:
        return a
    if ALL in col_b and ALL not in col_a:
        return b
    num_a = sum(_is_number(v) for v in col_a)
    num_b = sum(_is_number(v) for v in col_b)
    if num_a and not num_b:
        return a
    if num_b and not num_a:
        return b
    raise InputError(f"cannot tell {a} from {b} (no 'all' rows, no numeric topic ids): "
                     "name the shape with --truth-format/--pred-format", name)


def _parse_value(s: str, name: str, lineno: int) -> float:
    try:
        v = float(s)
    except ValueError:
        raise InputError(f"value {s!r} is not a number", name, lineno) from None
    if not math.isfinite(v):
        raise InputError(f"value {s!r} is not finite", name, lineno)
    return v


class _Collector:
    """Cells of a long-shape leaderboard; a duplicate cell names both lines."""

    def __init__(self):
        self.cells: dict[tuple[str, str, str], float] = {}
        self.where: dict[tuple[str, str, str], str] = {}
        self.runs: dict[str, None] = {}
        self.measures: dict[str, None] = {}

    def add(self, run: str, measure: str, topic: str, value: float, name: str, lineno: int) -> None:
        key = (run, measure, topic)
        if key in self.where:
            raise InputError(f"duplicate value of {measure} for run {run}, topic {topic} "
                             f"(first at {self.where[key]})", name, lineno)
        self.where[key] = f"{name}:{lineno}"
        self.cells[key] = value
        self.runs.setdefault(run)
        self.measures.setdefault(measure)


def _read_long(files: list[str], fmt: str, source: str) -> Leaderboard:
    col = _Collector()
    for path in files:
        if fmt == "trec_eval":
            _read_trec_eval_file(path, col)
        else:
            _read_columns_file(path, fmt, col)
    if not col.cells:
        raise InputError("leaderboard has no values", source)
    return _assemble(col, fmt, source)


def run_name(path: str | os.PathLike) -> str:
    """Leaderboard name of a run file: the file name without its extensions, and for a
    file named as TREC names submitted runs, ``input.TAG`` (``input.TAG.gz`` in NIST's
    results area), the TAG: TREC's official leaderboards name runs by tag, so rows of
    NIST's files would otherwise match none of theirs. ``input`` alone, or ``input.gz``,
    has no tag and keeps its name."""
    base = os.path.basename(str(path))
    for ext in (".gz", ".run", ".txt", ".trec", ".tsv", ".res"):
        if base.endswith(ext) and len(base) > len(ext):
            base = base[: -len(ext)]
    tag = base.removeprefix("input.")
    return tag if tag and tag != base else base


def _run_from_file(path: str) -> str:
    """A per-run evaluation file's run: its name without evaluation and run-file extensions."""
    base = os.path.basename(path)
    for ext in (".gz", ".eval", ".trec_eval", ".ir_measures"):
        if base.endswith(ext) and len(base) > len(ext):
            base = base[: -len(ext)]
    return run_name(base)


def _read_columns_file(path: str, fmt: str, col: _Collector) -> None:
    name = display_name(path)
    lines = _data_lines(path)
    if not lines:
        raise InputError("leaderboard is empty", name)
    order = _header_order(lines[0][1])
    if order is not None:
        lines = lines[1:]
    for lineno, f in lines:
        if order is not None:
            if len(f) != len(order):
                raise InputError(f"expected {len(order)} fields as the header says, found {len(f)}", name, lineno)
            o = order
        elif fmt == "tot":
            if len(f) != 4:
                raise InputError(f"expected 4 fields 'run measure topic value' (tot), found {len(f)}", name, lineno)
            o = _ORDERS["tot"]
        else:
            o = _ORDERS.get("ir_measures" if len(f) == 4 else f"ir_measures/{len(f)}")
            if o is None:
                raise InputError(f"expected 'run topic measure value' (ir_measures), or 'topic measure value' / "
                                 f"'measure value' (its command line's output), found {len(f)} fields", name, lineno)
        run = f[o["run"]] if "run" in o else _run_from_file(path)
        topic = f[o["topic"]] if "topic" in o else ALL
        col.add(run, f[o["measure"]], topic, _parse_value(f[o["value"]], name, lineno), name, lineno)


def _read_trec_eval_file(path: str, col: _Collector) -> None:
    """One or several concatenated ``trec_eval [-q]`` outputs: a run's block ends with its
    summary ('all') lines, the first of which is ``runid all NAME`` unless -m chose measures."""
    name = display_name(path)
    lines = _data_lines(path)
    if not lines:
        raise InputError("leaderboard is empty", name)
    header = _header_order(lines[0][1])
    if header is not None:
        if header != _ORDERS["trec_eval"]:
            raise InputError("the header does not say 'measure topic value' (trec_eval)", name, lines[0][0])
        lines = lines[1:]
    blocks: list[list[tuple[int, list[str]]]] = [[]]
    in_summary = False
    for lineno, f in lines:
        if len(f) != 3:
            raise InputError(f"expected 3 fields 'measure topic value' (trec_eval), found {len(f)}", name, lineno)
        summary = f[1] == ALL
        if (in_summary and not summary) or (f[0] == "runid" and any(x[1][0] == "runid" for x in blocks[-1])):
            blocks.append([])
        in_summary = summary
        blocks[-1].append((lineno, f))
    fallback = _run_from_file(path)
    if len(blocks) > 1 and not all(any(f[0] == "runid" for _, f in b) for b in blocks):
        raise InputError("several trec_eval outputs in one file need their 'runid' lines to tell the runs apart",
                         name, blocks[1][0][0])
    for block in blocks:
        run = next((f[2] for _, f in block if f[0] == "runid"), fallback)
        for lineno, f in block:
            if f[0] in _TREC_EVAL_STRINGS:
                continue
            col.add(run, f[0], f[1], _parse_value(f[2], name, lineno), name, lineno)


def _assemble(col: _Collector, fmt: str, source: str) -> Leaderboard:
    rows: dict[str, dict[str, float | None]] = {run: {} for run in col.runs}
    topics: dict[str, dict[str, dict[str, float]]] = {}
    for (run, measure, topic), v in col.cells.items():
        if topic == ALL:
            rows[run][measure] = v
        else:
            topics.setdefault(measure, {}).setdefault(run, {})[topic] = v
    computed: list[str] = []
    for measure in col.measures:
        with_all = [r for r in col.runs if measure in rows[r]]
        per_run = topics.get(measure, {})
        if not with_all:
            computed.append(measure)  # no 'all' rows (trec_eval -n, ir_measures -n): the mean over topics
            for run, values in per_run.items():
                rows[run][measure] = sum(values.values()) / len(values)
            continue
        missing = [r for r in per_run if r not in with_all]
        if missing:
            raise InputError(f"measure {measure}: run(s) {', '.join(missing)} have per-topic values but no "
                             f"'{ALL}' row while other runs have one (--aggregate mean recomputes every run's mean)",
                             source)
    return Leaderboard(list(col.measures), rows, topics, fmt, computed)


def _read_tsv(path: str | os.PathLike) -> Leaderboard:
    name = display_name(path)
    header: list[str] | None = None
    rows: dict[str, dict[str, float | None]] = {}
    for lineno, line in _raw_lines(path):
        if not line.strip():
            continue
        cells = line.split("\t")
        if header is None:
            header = [c.strip() for c in cells]
            if len(header) < 2:
                raise InputError("leaderboard header needs 'run' and at least one column (tab-separated)", name, lineno)
            if len(set(header)) != len(header):
                raise InputError("duplicate column names in header", name, lineno)
            if all(map(_is_number, header[1:])):
                raise InputError("the first line holds numbers where the header's column names go: is the header "
                                 "line ('run', then one name per measure column) missing?", name, lineno)
            continue
        if len(cells) != len(header):
            raise InputError(f"expected {len(header)} tab-separated cells, found {len(cells)}", name, lineno)
        run = cells[0].strip()
        if not run:
            raise InputError("empty run name", name, lineno)
        if run in rows:
            raise InputError(f"duplicate run {run}", name, lineno)
        vals: dict[str, float | None] = {}
        for col, cell in zip(header[1:], cells[1:]):
            cell = cell.strip()
            if cell == "":
                vals[col] = None
                continue
            try:
                v = float(cell)
            except ValueError:
                raise InputError(f"column {col}: {cell!r} is not a number", name, lineno) from None
            if not math.isfinite(v):
                raise InputError(f"column {col}: {cell!r} is not finite", name, lineno)
            vals[col] = v
        rows[run] = vals
    if header is None:
        raise InputError("leaderboard is empty", name)
    if not rows:
        raise InputError("leaderboard has a header but no runs", name)
    return Leaderboard(header[1:], rows)


# --------------------------------------------------------------------------- writing

def format_value(v) -> str:
    if v is None:
        return ""
    if isinstance(v, int):
        return str(v)
    return f"{v:.4f}"


def write_leaderboard(rows: Mapping[str, Mapping[str, object]], columns: Sequence[str], out: IO[str]) -> None:
    out.write("\t".join(["run", *columns]) + "\n")
    for run, vals in rows.items():
        out.write("\t".join([run, *(format_value(vals.get(c)) for c in columns)]) + "\n")
