"""Grid display: passages x bank items with their grades (and the grader's answers),
per query, as TSV or as an HTML page with a colour per grade."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO

from ..io.grades import Grade
from ..trec_eval.trec_files import Qrels
from .htmlkit import esc, grade_class, page
from .table import GradeTable, item_label, one_line


@dataclass
class QueryGrid:
    query_id: str
    items: list[str]
    rows: list[tuple[str, int | None, dict[str, Grade]]]   # doc, judgment, item -> grade


def build_grid(table: GradeTable, qrels: Qrels | None = None, *,
               queries: Iterable[str] | None = None) -> list[QueryGrid]:
    wanted = set(queries) if queries else None
    grids = []
    for qid in table.queries():
        if wanted is not None and qid not in wanted:
            continue
        labels = (qrels or {}).get(qid, {})
        rows = [(doc, labels.get(doc), grades) for doc, grades in table.by_doc[qid].items()]
        # judged-relevant first so a reader sees what the assessors found, then by doc id
        rows.sort(key=lambda r: (r[1] is None, -(r[1] or 0), r[0]))
        grids.append(QueryGrid(qid, table.items(qid), rows))
    return grids


def _cell(g: Grade | None) -> str:
    if g is None:
        return ""
    return "unparsed" if g.grade is None else str(g.grade)


def _answer(qid: str, doc: str, item: str, g: Grade, extracted: dict | None) -> str:
    # with an extraction prompt, its answer is what a human wants to read; else the raw output
    if extracted is not None:
        return one_line(extracted.get((qid, doc, item), ""))
    return one_line(g.answer or "")


def write_grid_tsv(grids: list[QueryGrid], out: IO[str], *, answers: bool = False,
                   extracted: dict | None = None) -> None:
    """One block per query (its own header line: items differ between queries),
    blocks separated by an empty line."""
    for n, grid in enumerate(grids):
        if n:
            out.write("\n")
        header = ["query_id", "doc_id", "judgment"]
        for item in grid.items:
            header.append(item)
            if answers:
                header.append(item + ":answer")
        out.write("\t".join(header) + "\n")
        for doc, label, grades in grid.rows:
            cells = [grid.query_id, doc, "-" if label is None else str(label)]
            for item in grid.items:
                g = grades.get(item)
                cells.append(_cell(g))
                if answers:
                    cells.append(_answer(grid.query_id, doc, item, g, extracted) if g is not None else "")
            out.write("\t".join(cells) + "\n")


def grid_html(grids: list[QueryGrid], *, bank: dict, texts: dict, min_grade: int, answers: bool = False,
              extracted: dict | None = None, max_text: int = 300) -> str:
    parts = []
    for grid in grids:
        cols = {item: f"Q{i}" for i, item in enumerate(grid.items, 1)}
        head = "".join(f'<th title="{esc(item_label(item, bank))}">{cols[item]}</th>' for item in grid.items)
        body = []
        for doc, label, grades in grid.rows:
            cells = []
            for item in grid.items:
                g = grades.get(item)
                if g is None:
                    cells.append("<td></td>")
                    continue
                tip = esc(_answer(grid.query_id, doc, item, g, extracted))
                shown = esc(_cell(g)) + (f'<br><span class="small">{tip}</span>' if answers and tip else "")
                cells.append(f'<td class="{grade_class(g.grade, min_grade)}" title="{tip}">{shown}</td>')
            text = one_line(texts.get((grid.query_id, doc), ""))
            if len(text) > max_text:
                text = text[: max_text - 3] + "..."
            body.append(f"<tr><td>{esc(doc)}</td><td class=\"n\">{'&ndash;' if label is None else label}</td>"
                        + "".join(cells) + f'<td class="text small">{esc(text)}</td></tr>')
        legend = "".join(f"<li><b>{cols[item]}</b> {esc(item_label(item, bank))} "
                         f'<span class="small">{esc(item)}</span></li>' for item in grid.items)
        parts.append(f'<h3 id="grid-{esc(grid.query_id)}">Query {esc(grid.query_id)}</h3>'
                     f"<ol class=\"small\" style=\"list-style:none;padding-left:0\">{legend}</ol>"
                     f"<table><thead><tr><th>doc_id</th><th>judged</th>{head}<th>passage</th></tr></thead>"
                     f"<tbody>{''.join(body)}</tbody></table>")
    return "\n".join(parts)


def grid_legend(min_grade: int) -> str:
    return (f'<p class="legend small"><span class="g-hit">grade &ge; {min_grade}</span>'
            f'<span class="g-mid">0 &lt; grade &lt; {min_grade}</span><span class="g-zero">0</span>'
            '<span class="g-bad">unparsed</span> Hover a cell for the grader\'s answer, a column head '
            "for the item text.</p>")


def grid_page(grids: list[QueryGrid], **kw) -> str:
    return page("exam-verify grid", grid_legend(kw["min_grade"]) + grid_html(grids, **kw))
