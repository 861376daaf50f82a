"""Nugget mode of exam-verify label: an assessor says whether a report supports a nugget.

The AutoNuggetizer assigns each nugget of a topic to each whole report (support,
partial support, no support); the page asks the same of a person, showing the report
sentence by sentence beside the nugget, with keys 0 (not_support), 1 (partial_support)
and 2 (support). The population is the topics every run (a report's run_id) reports on
and the bank has nuggets for; a query's pairs are every (run, nugget), runs in name
order, nuggets in bank order. The labels go out in the nuggetizer's assignment format,
which ``exam-nuggets score`` reads as it reads the AutoNuggetizer's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import InputError, UsageError
from ..io.bank_items import BankItem
from ..io.banks import items_by_query, read_bank
from ..io.nugget_banks import query_texts, write_assignment_lines
from ..io.outputs import atomic_output
from ..io.reports import Report, read_reports
from ..io.reports import report_files as _report_files
from .label_design import Design, arranged, draw_order, file_entry
from .label_export import Export, export_of, write_notes
from .label_store import Labels

SCALE = "0-2"
SEP = "\t"   # a pair's second half: RUN_ID<TAB>ITEM_ID (a run id is one TREC token: no tab)


def pair_key(run_id: str, item_id: str) -> str:
    return f"{run_id}{SEP}{item_id}"


@dataclass
class Population:
    reports: dict[tuple[str, str], Report]      # (run_id, topic) -> report
    items: dict[str, list[BankItem]]            # topic -> nuggets, bank order
    runs: list[str]
    topics: set[str]

    def pairs(self, queries) -> dict[str, list[str]]:
        return {q: [pair_key(r, i.item_id) for r in self.runs for i in self.items[q]] for q in queries}


def report_files(paths: list[str]) -> list[str]:
    return [f for p in paths for f in _report_files(p)]


def nugget_population(report_paths: list[str], bank: str) -> Population:
    reports = {(r.run_id, r.topic_id): r for r in read_reports(report_paths)}
    items = items_by_query(read_bank(bank, kind="nugget"))
    runs = sorted({run for run, _ in reports})
    topics = {t for _, t in reports if all((r, t) in reports for r in runs)} & set(items)
    if not topics:
        raise InputError("no topic has a report of every run and nuggets in the bank: nothing to sample", bank)
    return Population(reports, items, runs, topics)


def nugget_population_of(design: Design):
    """As label_design.passage_population, for a nugget sample."""
    pop = nugget_population([r["path"] for r in design.runs], design.bank["path"])
    return pop.topics, lambda queries: arranged(pop.pairs(queries), design.order, design.seed)


def new_nugget_design(reports: list[str], bank: str, n: int, seed: int, *, topics: str | None,
                      order: str = "shuffled") -> Design:
    files = report_files(reports)
    pop = nugget_population(files, bank)
    if not 1 <= n <= len(pop.topics):
        raise UsageError(f"-n must be between 1 and {len(pop.topics)} (the topics every run reports on and the "
                         "bank has nuggets for)")
    queries = draw_order(pop.topics, seed)[:n]
    return Design(queries=queries, seed=seed, depth=0, runs=[file_entry(f) for f in files], scale=SCALE,
                  topics=topics, shared_queries=len(pop.topics), pairs=arranged(pop.pairs(queries), order, seed),
                  mode="nugget", bank=file_entry(bank), order=order)


def nugget_texts(design: Design, topics: dict[str, str]) -> dict:
    """What the page shows of each pair: the query, the report's sentences, the nugget."""
    pop = nugget_population([r["path"] for r in design.runs], design.bank["path"])

    queries = query_texts([i for q in design.queries for i in pop.items[q]], topics)
    shown = {}
    for q in design.queries:
        by_id = {i.item_id: i for i in pop.items[q]}
        for key in design.pairs[q]:
            run, item_id = key.split(SEP)
            item = by_id[item_id]
            shown[(q, key)] = {"run_id": run, "report": [s.text for s in pop.reports[(run, q)].sentences],
                               "nugget": item.text, "importance": item.importance or "vital"}
    return {"queries": queries, "pairs": shown, "items": pop.items}


@dataclass
class _Assignment:   # the shape write_assignment_lines takes (measures.nugget_scores.Assignment's)
    topic_id: str
    run_id: str
    levels: dict[str, int]


def write_nugget_export(design: Design, assessor: str, labels: Labels, out_dir: str) -> Export:
    """NAME.assignments.jsonl: a line per report of every labelled query (each nugget's
    assignment as the assessor gave it), and NAME.labelled.txt."""
    ex = export_of(design, assessor, labels)
    items = nugget_population([r["path"] for r in design.runs], design.bank["path"]).items
    lines = []
    for q in ex.labelled:
        levels: dict[str, dict[str, int]] = {}
        for key in design.pairs[q]:
            run, item_id = key.split(SEP)
            if (q, key) in labels.given:   # a pair that could not be judged has no assignment
                levels.setdefault(run, {})[item_id] = labels.given[(q, key)][0]
        lines += [_Assignment(q, run, lv) for run, lv in sorted(levels.items())]
    os.makedirs(out_dir, exist_ok=True)
    with atomic_output(os.path.join(out_dir, f"{assessor}.assignments.jsonl")) as out:
        write_assignment_lines(lines, items, out)
    with atomic_output(os.path.join(out_dir, f"{assessor}.labelled.txt")) as out:
        out.write("".join(q + "\n" for q in ex.labelled))
    write_notes(design, labels, os.path.join(out_dir, f"{assessor}.notes.tsv"))
    return ex
