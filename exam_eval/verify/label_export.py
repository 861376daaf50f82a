"""Human labels out of the label folder: TREC qrels per assessor, and the labelled queries.

``NAME.qrels`` holds every label the assessor gave (``qid 0 docno label``), as
``exam-correlate interval HUMAN``, ``exam-correlate agreement`` and ``exam-qrels
--human`` read qrels. ``NAME.labelled.txt`` lists the queries the intervals may treat as
labelled: the longest run of the draw, from its first query on, whose every pair has a
label. A query finished out of that order is left out (and said): queries an assessor
chose to finish first are not a uniform draw, and the intervals' coverage holds only
for one. ``NAME.notes.tsv``: the notes given with the labels, and every pair the assessor
could not judge (label ``cannot_judge``), which is in no qrels.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..io.outputs import atomic_output
from ..trec_eval.trec_files import write_qrels
from .label_design import Design
from .label_store import Labels

#: the label column of notes.tsv for a pair that could not be judged
CANNOT_JUDGE = "cannot_judge"


@dataclass
class Export:
    assessor: str
    labels: int
    labelled: list[str]                          # the complete prefix of the draw
    out_of_order: list[str] = field(default_factory=list)   # complete, after an incomplete query
    partial: list[str] = field(default_factory=list)        # some pairs labelled, not all

    def summary(self) -> str:
        line = (f"{self.assessor}: {self.labels} labels; {len(self.labelled)} labelled queries "
                f"(the first {len(self.labelled)} of the draw)")
        if self.partial:
            line += f"; {len(self.partial)} queries in part ({', '.join(self.partial)})"
        if self.out_of_order:
            line += (f"; {len(self.out_of_order)} complete after an unfinished query, left out of the labelled "
                     f"list to keep it a uniform draw ({', '.join(self.out_of_order)})")
        return line


def export_of(design: Design, assessor: str, labels: Labels) -> Export:
    ex = Export(assessor, len(labels.given), [])
    prefix = True
    for qid in design.queries:
        pairs = design.pairs.get(qid, [])
        done = sum(labels.done((qid, d)) for d in pairs)   # a pair not to be judged is done, with no label
        complete = done == len(pairs) and pairs
        if complete and prefix:
            ex.labelled.append(qid)
            continue
        prefix = False
        if complete:
            ex.out_of_order.append(qid)
        elif done:
            ex.partial.append(qid)
    return ex


def write_export(design: Design, assessor: str, labels: Labels, out_dir: str) -> Export:
    ex = export_of(design, assessor, labels)
    qrels: dict[str, dict[str, int]] = {}
    for (qid, docno), (label, _note) in labels.given.items():
        qrels.setdefault(qid, {})[docno] = label
    os.makedirs(out_dir, exist_ok=True)
    with atomic_output(os.path.join(out_dir, f"{assessor}.qrels")) as out:
        write_qrels(qrels, out)
    with atomic_output(os.path.join(out_dir, f"{assessor}.labelled.txt")) as out:
        out.write("".join(q + "\n" for q in ex.labelled))
    write_notes(design, labels, os.path.join(out_dir, f"{assessor}.notes.tsv"))
    return ex


def write_notes(design: Design, labels: Labels, path: str) -> None:
    """The notes an assessor wrote, a TSV line per noted label (and per pair that could
    not be judged, noted or not) in the design's order
    (``qid docno label note``; in nugget mode docno is RUN_ID<TAB>ITEM_ID, two columns):
    what an organizer reads before adjudicating."""
    def clean(note: str) -> str:   # one line, one cell
        return " ".join(note.replace("\t", " ").split())

    with atomic_output(path) as out:
        out.write("qid\tdocno\tlabel\tnote\n" if design.mode == "passage" else "qid\trun_id\titem_id\tlabel\tnote\n")
        for pair in design.pair_list():
            if pair in labels.cannot:   # apart from the labels: a broken or unreadable passage, no 0
                out.write(f"{pair[0]}\t{pair[1]}\t{CANNOT_JUDGE}\t{clean(labels.cannot[pair])}\n")
                continue
            label, note = labels.given.get(pair, (None, ""))
            if note.strip():
                out.write(f"{pair[0]}\t{pair[1]}\t{label}\t{clean(note)}\n")
