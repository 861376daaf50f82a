"""Options exam-nuggets' subcommands share: the reports and their track spec, the
support thresholds, score's -o (a file or a folder) and its format's own options."""

from __future__ import annotations

import os

import click

from ._base import claim_output, refuse_given
from ..io.outputs import check_output
from ..io.track_specs import SPECS


def threshold_options(f):
    f = click.option("--partial-min", type=int, default=None, metavar="N",
                     help="Grades >= N (and below --support-min) are partial support "
                          "[0-2 scales: 1; 0-5 self-rating: 2].")(f)
    f = click.option("--support-min", type=int, default=None, metavar="N",
                     help="Grades >= N are support [0-2 scales: 2; 0-5 self-rating: 4].")(f)
    return f


def _spec_names() -> str:
    return ", ".join(SPECS)


def reports_option(f):
    f = click.option("--track-spec", default=None, metavar="NAME",
                     help="Validate the reports against this track spec (" + _spec_names() + ").")(f)
    f = click.option("--reports", "reports", multiple=True, required=True, metavar="FILE|DIR",
                     help="RAG report files (JSONL) or directories of them (repeatable).")(f)
    return f


def check_file_or_dir(ctx, param, value):
    """-o of score: a file as everywhere, or a directory for per-run trec_eval files
    (an existing one is fine: its RUN.txt files are replaced, as any output is)."""
    if value is not None and not ctx.resilient_parsing and not (value.endswith(os.sep) or os.path.isdir(value)):
        check_output(value)
    return claim_output(ctx, param, value)


def check_shape_options(ctx: click.Context, shape: str) -> None:
    if shape == "table":  # its rows are the means already
        refuse_given(ctx, ("summary_only",), "applies to --format tot, ir_measures and trec_eval (a table holds "
                     "the means over topics only)")
    if shape == "trec_eval":
        refuse_given(ctx, ("digits",), "applies to --format tot, ir_measures and table (trec_eval prints 4)")
