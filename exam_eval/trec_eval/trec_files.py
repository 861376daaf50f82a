"""TREC run and qrels files, read as strictly as trec_eval and with better locations.

Run:   ``qid Q0 docno rank score tag`` (rank ignored; order = score desc, docno desc);
       fields after the sixth are ignored, as trec_eval 9.0.8 ignores them.
Qrels: ``qid iter docno label`` (integer label; negative = judged but unjudged-like,
       as in trec_eval); no blank lines, which trec_eval refuses in qrels.
"""

from __future__ import annotations

import os
from typing import IO, TYPE_CHECKING, Iterator, Mapping

from ..errors import InputError, UsageError
from .c_numbers import c_fields, checked_label, strict_number
from ..io.leaderboard import run_name
from ..io.openers import Slurped, display_name, iter_lines, slurp
from ..io.trec_rules import trec_ranked

if TYPE_CHECKING:
    from .bulk import RunTable

Run = dict[str, dict[str, float]]      # qid -> docno -> score
Qrels = dict[str, dict[str, int]]      # qid -> docno -> label


def read_run(path: str | os.PathLike, *, allow_empty: bool = False) -> Run:
    return read_run_tagged(path, allow_empty=allow_empty)[0]


def read_run_table(path: str | os.PathLike, *, allow_empty: bool = False) -> RunTable | tuple[Run, str]:
    """The run read in bulk (a :class:`RunTable`: documents built a batch of queries at a
    time), or, for what the bulk reader leaves to the line reader, (run, tag) from it.
    Either way the same queries, documents, scores and tag, and the same refusals; a
    duplicate document in a table is refused when its query's documents are built."""
    from .bulk import Decline, scan_run  # numpy: not loaded for a command's --help

    got = slurp(path)
    if got is not None and got.data is not None:
        try:
            table = scan_run(got.data)
        except Decline:
            pass
        else:
            def duplicate() -> None:
                _read_run_lines(path, got)
                raise AssertionError("the bulk reader saw a duplicate the line reader did not")
            table.on_duplicate = duplicate
            return table
    return _read_run_lines(path, got, allow_empty=allow_empty)


def read_run_tagged(path: str | os.PathLike, *, allow_empty: bool = False) -> tuple[Run, str]:
    """The run and the tag of its last line (what trec_eval 9.0.8 prints as runid: it
    keeps the tag of the last line it parses, whatever the other lines say)."""
    got = read_run_table(path, allow_empty=allow_empty)
    if isinstance(got, tuple):
        return got
    return got.docs(list(range(len(got.qids)))), got.tag


def read_run_any(path: str) -> tuple[Run | RunTable, str]:
    """(run, tag): a RunTable where the bulk reader took the file (see :func:`read_run_table`)."""
    got = read_run_table(path)
    return got if isinstance(got, tuple) else (got, got.tag)


def run_names(paths: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """(leaderboard name, path) of each run file of a leaderboard: names must be unique."""
    seen: dict[str, str] = {}
    for path in paths:
        name = run_name(path) if path != "-" else "stdin"
        if not name.isprintable() or "\t" in name:
            # a tab or newline would add a column or a row to the leaderboard's TSV
            raise UsageError(f"the run file {path!r} would give the leaderboard name {name!r}, which holds a tab, "
                             "newline or control character: rename the file")
        if name in seen:
            raise UsageError(f"two runs would share the leaderboard name {name!r}: {seen[name]} and {path}")
        seen[name] = path
        yield name, path


def read_runs(paths: tuple[str, ...]) -> list[tuple[str, Run, str]]:
    """[(leaderboard name, run, tag)], all read (and so validated) before any output."""
    return [(name, *read_run_tagged(path)) for name, path in run_names(paths)]


def _read_run_lines(path: str | os.PathLike, got: Slurped | None, *, allow_empty: bool = False) -> tuple[Run, str]:
    name = display_name(path)
    run: Run = {}
    tag = ""
    where: dict[tuple[str, str], int] = {}
    for lineno, line in iter_lines(path, raw=None if got is None else got.raw):
        fields = c_fields(line, name, lineno)
        if not fields:
            continue
        if len(fields) < 6:
            raise InputError(f"expected 6 fields 'qid Q0 docno rank score tag', found {len(fields)}", name, lineno)
        qid, _, docno, _, score_s, line_tag = fields[:6]
        tag = line_tag
        score = strict_number(score_s, "score", name, lineno)
        key = (qid, docno)
        if key in where:
            raise InputError(f"duplicate document {docno} for query {qid} (first on line {where[key]})", name, lineno)
        where[key] = lineno
        run.setdefault(qid, {})[docno] = score
    if not run and not allow_empty:
        raise InputError("run is empty", name)
    return run, tag


def read_qrels(path: str | os.PathLike, *, allow_empty: bool = False) -> Qrels:
    from .bulk import Decline, scan_qrels  # numpy: as read_run_table

    got = slurp(path)
    if got is not None and got.data is not None:
        try:
            return scan_qrels(got.data)
        except Decline:
            pass
    name = display_name(path)
    qrels: Qrels = {}
    where: dict[tuple[str, str], int] = {}
    for lineno, line in iter_lines(path, raw=None if got is None else got.raw):
        fields = c_fields(line, name, lineno)
        if not fields:
            # trec_eval skips blank lines in a run, not in qrels (get_qrels.c: Malformed line)
            raise InputError("blank line (trec_eval reads every qrels line as 'qid iter docno label')", name, lineno)
        if len(fields) != 4:
            raise InputError(f"expected 4 fields 'qid iter docno label', found {len(fields)}", name, lineno)
        qid, _, docno, label_s = fields
        label = checked_label(label_s, name, lineno)
        key = (qid, docno)
        if key in where:
            raise InputError(f"duplicate judgment of {docno} for query {qid} (first on line {where[key]})", name, lineno)
        where[key] = lineno
        qrels.setdefault(qid, {})[docno] = label
    if not qrels and not allow_empty:
        raise InputError("qrels file is empty", name)
    return qrels


def ranked(docs: Mapping[str, float]) -> list[str]:
    """Docnos in trec_eval order: score descending as a C float (scores that differ only
    beyond single precision tie, as in trec_eval), ties broken by docno descending; the
    order every depth (exam-grade -k, exam-cover -k) cuts at, and the measures'."""
    return trec_ranked(docs)


def write_qrels(qrels: Qrels, out: IO[str]) -> int:
    """Queries and documents in lexicographic order (stable bytes for make and diff)."""
    n = 0
    for qid in sorted(qrels):
        docs = qrels[qid]
        for docno in sorted(docs):
            out.write(f"{qid} 0 {docno} {docs[docno]}\n")
            n += 1
    return n


def write_run(run: Run, out: IO[str], tag: str) -> int:
    n = 0
    for qid in sorted(run):
        for rank, docno in enumerate(ranked(run[qid]), 1):
            out.write(f"{qid} Q0 {docno} {rank} {run[qid][docno]!r} {tag}\n")
            n += 1
    return n
