"""Small HTML helpers shared by the grid page and the report: everything inline, no
network (the page must open from a file, offline, years later)."""

from __future__ import annotations

import html
import math
from importlib import resources
from string import Template

esc = html.escape


def css() -> str:
    return resources.files(__package__).joinpath("report.css").read_text(encoding="utf-8")


def page(title: str, body: str) -> str:
    template = Template(resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8"))
    return template.substitute(title=esc(title), css=css(), body=body)


def grade_class(grade: int | None, min_grade: int) -> str:
    if grade is None:
        return "g-bad"
    if grade >= min_grade:
        return "g-hit"
    return "g-mid" if grade > 0 else "g-zero"


def table(headers: list[str] | None, rows: list[list[str]], cls: str = "") -> str:
    """Cells are HTML already (callers escape text); headers are plain text (None: none)."""
    head = "" if headers is None else "<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr></thead>"
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}">{head}<tbody>{body}</tbody></table>'


def num(x: float | None, digits: int = 4) -> str:
    # undefined statistics (kappa of a constant column, no shared systems) show as a dash
    return "&ndash;" if x is None or math.isnan(x) else f"{x:.{digits}f}"
