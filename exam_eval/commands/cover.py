"""exam-cover: EXAM-Cover@k of runs from grades."""

from __future__ import annotations

import click

from ..errors import InputError
from ..io.leaderboard import write_leaderboard
from ..io.outputs import atomic_output
from ..measures.exam_cover import exam_cover, read_cover_index
from ..measures.exam_measures import cover_values
from ..trec_eval.trec_files import read_runs
from ._base import CONTEXT_SETTINGS, grader_options, make_main, output_option, stderr_log

PROG = "exam-cover"

EPILOG = """\b
Examples:
  exam-cover grades.jsonl.gz run.txt                 # one run: trec_eval-style lines
  exam-cover -q -k 10 grades.jsonl.gz run.txt        # per query, top 10 passages
  exam-cover --min-grade 3 grades.jsonl.gz runs/*.run > cover.tsv   # leaderboard
  exam-cover -c --bank bank.jsonl grades.jsonl.gz runs/*.run

Exit status: 0 success, 1 usage error, 2 bad input. See man exam-cover.
"""


def _line(name: str, qid: str, value) -> str:
    if isinstance(value, int):
        return "%-22s\t%s\t%d\n" % (name, qid, value)
    return "%-22s\t%s\t%6.4f\n" % (name, qid, value)


@click.command(context_settings=CONTEXT_SETTINGS, epilog=EPILOG)
@click.argument("grades", metavar="GRADES")
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@click.option("-k", "--depth", "k", type=click.IntRange(min=1), default=20, show_default=True,
              help="Passages of each run considered per query (top k in trec_eval order).")
@click.option("--min-grade", type=click.IntRange(min=0), default=4, show_default=True,
              help="An item counts as answered by a passage graded >= this.")
@click.option("-q", "per_query", is_flag=True, help="Also print per-query values (one run only).")
@click.option("-c", "complete", is_flag=True,
              help="Average over every query with items, not just the queries the run has.")
@click.option("-n", "no_summary", is_flag=True, help="No summary ('all') lines.")
@click.option("--bank", default=None, metavar="FILE",
              help="The bank defines each query's items (default: the items found in GRADES); "
                   "grades of deleted items and of edited items' old text are left out.")
@grader_options
@output_option
def cli(grades, runs, k, min_grade, per_query, complete, no_summary, bank, model, prompt, kind, output):
    """EXAM-Cover@k: the fraction of a query's exam items that a run's top-k passages answer.

    Prints `exam_cover` (over all items of the query) and `n_exam_cover` (normalized: over
    the items that any graded passage answers), mean and standard error over queries. The
    mean runs over the queries the run has (like the reference workbench); -c averages over
    every query with items instead, scoring missing queries 0.
    """
    log = stderr_log(PROG)
    if per_query and len(runs) > 1:
        raise click.UsageError("-q prints per-query values for one run; give a single RUN")
    notes: list[str] = []  # said once no run can be refused: a refusal is one line
    index = read_cover_index(grades, min_grade, bank=bank, model=model, prompt=prompt, kind=kind, log=notes.append)
    loaded = read_runs(runs)
    results = []
    for (name, run, _), path in zip(loaded, runs):
        res = exam_cover(index, run, k=k, complete=complete)
        if not res.per_query:
            raise InputError(f"no query of this run has graded items in {grades}", path)
        if res.ungraded_in_topk:
            notes.append(f"{path}: {res.ungraded_in_topk} of its top-{k} passages have no grades and answer nothing")
        results.append((name, res))
    for note in notes:
        log(note)
    with atomic_output(output) as out:
        if len(results) == 1:
            res = results[0][1]
            if per_query:
                for qid, (cover, norm) in sorted(res.per_query.items()):
                    out.write(_line("exam_cover", qid, cover))
                    if norm is not None:
                        out.write(_line("n_exam_cover", qid, norm))
            if not no_summary:
                out.write(_line("num_q", "all", res.n_queries))
                out.write(_line("exam_cover", "all", res.mean))
                out.write(_line("exam_cover_stderr", "all", res.stderr))
                if res.n_defined:  # else undefined: left out, as per query
                    out.write(_line("n_exam_cover", "all", res.n_mean))
                    out.write(_line("n_exam_cover_stderr", "all", res.n_stderr))
        else:
            columns = ["exam_cover", "stderr", "n_exam_cover", "n_stderr"]
            rows = {name: {**cover_values(r), "stderr": r.stderr, "n_stderr": r.n_stderr if r.n_defined else None}
                    for name, r in results}
            write_leaderboard(rows, columns, out)
    undefined = [name for name, r in results if not r.n_defined]
    if undefined:
        log(f"n_exam_cover is undefined for {', '.join(undefined[:3])}{' ...' if len(undefined) > 3 else ''}: "
            "no query of it has an item any passage answers (left out, not 0)")
    return 0


main = make_main(cli, PROG)

if __name__ == "__main__":
    main()
