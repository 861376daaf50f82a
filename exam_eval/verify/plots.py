"""Figures for the report, as base64 PNG data URIs (the page must work offline and
without scripts), and exam-correlate's leaderboard scatter plot. matplotlib is imported
here only, and only when a figure is drawn."""

from __future__ import annotations

import base64
import io
import os

from ..io.openers import display_name
from ..io.outputs import atomic_output
from ..stats.leaderboards import fmt, is_rank


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display on servers and CI
    import matplotlib.pyplot as plt

    return plt


def _data_uri(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def scatter(points: list[tuple[str, float, float, float | None]], xlabel: str, ylabel: str, title: str) -> str:
    """One dot per run: (name, official score, EXAM score, standard error or None)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    try:
        xs = [p[1] for p in points]
        ys = [p[2] for p in points]
        errs = [p[3] or 0.0 for p in points]
        ax.errorbar(xs, ys, yerr=errs, fmt="o", ms=4, color="#2b6cb0", ecolor="#9bb7d4", elinewidth=1, capsize=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
        return _data_uri(fig)
    finally:
        plt.close(fig)


def heatmap(rows: list[str], cols: list[str], values, title: str, label: str) -> str:
    """values[i][j] in [0, 1] or NaN (runs x queries)."""
    import numpy as np

    plt = _pyplot()
    arr = np.array(values, dtype=float)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.22 * len(cols) + 2.5), max(3.0, 0.2 * len(rows) + 1.5)))
    try:
        im = ax.imshow(np.ma.masked_invalid(arr), aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_xticks(range(len(cols)))
        ax.set_xticklabels(cols, rotation=90, fontsize=6)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(rows, fontsize=6)
        ax.set_title(title, fontsize=10)
        fig.colorbar(im, ax=ax, label=label, fraction=0.03)
        return _data_uri(fig)
    finally:
        plt.close(fig)


def leaderboard_scatter(path, tvals, pvals, tcol, pcol, result, truth, pred) -> None:
    """exam-correlate leaderboard --plot: TRUTH vs PRED, one labelled dot per system, as a PNG file."""
    plt = _pyplot()

    names = sorted(set(tvals) & set(pvals))
    fig, ax = plt.subplots(figsize=(8, 6))
    xs, ys = [tvals[n] for n in names], [pvals[n] for n in names]
    ax.scatter(xs, ys, s=18)
    for n, x, y in zip(names, xs, ys):
        ax.annotate(n, (x, y), fontsize=6, xytext=(3, 2), textcoords="offset points")
    if is_rank(tcol):
        ax.invert_xaxis()
    if is_rank(pcol):
        ax.invert_yaxis()
    ax.set_xlabel(f"{os.path.basename(display_name(truth))}: {tcol}")
    ax.set_ylabel(f"{os.path.basename(display_name(pred))}: {pcol}")
    ax.set_title(f"Spearman {fmt(result['spearman'])}, Kendall tau-b {fmt(result['kendall_tau_b'])}, "
                 f"tau-AP {fmt(result['tau_ap'])} (n={result['n']})", fontsize=10)
    fig.tight_layout()
    with atomic_output(path, binary=True) as out:
        fig.savefig(out, format="png", dpi=150)
    plt.close(fig)


def compare_plot(path, scores, title: str) -> None:
    """exam-correlate compare --plot: the runs ordered by score, best on top, each with its
    interval; a filled dot for a run that does not differ from the reference run (the best,
    or --baseline), a hollow grey one for a run that does. SVG or PDF by FILE's extension, else PNG."""
    import numpy as np

    plt = _pyplot()
    order = np.argsort(-np.asarray(scores.score), kind="stable")
    fig, ax = plt.subplots(figsize=(7, max(2.5, 0.24 * len(order) + 1.2)))
    try:
        for y, i in enumerate(order[::-1]):  # the best run on the top row
            same = scores.same[i]
            colour = "#2b6cb0" if same else "#a0a0a0"
            ax.plot([scores.lower[i], scores.upper[i]], [y, y], color=colour, lw=1.4)
            ax.plot(scores.score[i], y, "o", ms=5, color=colour, mfc=colour if same else "white")
        ax.set_yticks(range(len(order)))
        ax.set_yticklabels([scores.names[i] + (" *" if scores.names[i] == scores.reference else "")
                            for i in order[::-1]], fontsize=7)
        n_same = sum(scores.same) - 1
        ax.set_xlabel(f"score and interval ({scores.method}); filled: does not differ from "
                      f"{scores.reference} (*), {n_same} run(s)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="x", alpha=0.3)
        fig.tight_layout()
        suffix = os.path.splitext(str(path))[1].lower().lstrip(".")
        fmt = suffix if suffix in ("svg", "pdf") else "png"  # /dev/stdout, a FIFO: the PNG of leaderboard --plot
        with atomic_output(path, binary=True) as out:
            fig.savefig(out, format=fmt, dpi=150)
    finally:
        plt.close(fig)
