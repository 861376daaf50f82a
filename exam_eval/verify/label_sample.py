"""The sample a label folder holds (exam-verify label, label-qrels): its design drawn from
the flags (:class:`SampleSpec`) or resumed, and checked against what a later call gives
again; the texts its page shows; each assessor's labels exported. Messages go to ``say``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from ..errors import InputError, UsageError
from ..io.openers import display_name
from ..io.passages import read_passages
from ..io.topics import read_topics
from ..measures.grade_labels import load_labels
from .label_design import (DESIGN_FILE, Design, check_follows, extend, in_folder, new_design, passage_population,
                           read_design, write_design)
from .label_export import write_export as write_passage_export
from .label_guidelines import default_guidelines, read_guidelines
from .label_nuggets import (new_nugget_design, nugget_population_of, nugget_texts, report_files,
                            write_nugget_export)
from .label_session import Texts
from .label_store import assessors, labels_path, read_labels

DEFAULT_DEPTH = 10   # exam-correlate interval's default metric is dcg@10: the pairs it reads

Say = Callable[[str], None]


@dataclass(frozen=True)
class SampleSpec:
    """What exam-verify label is told of the sample (None: not given): a new sample's
    inputs, or a resumed one's, which must be its design's."""

    runs: tuple[str, ...]
    n_queries: int | None
    depth: int | None
    seed: int | None
    topics: str | None
    passages: str | None
    reports: tuple[str, ...]
    bank: str | None
    llm: str | None
    scale: str | None
    on_missing: str
    order: str | None
    guidelines: str | None

    def check(self) -> None:
        """Nugget mode (--reports and --bank) takes none of passage mode's inputs."""
        if not (self.reports or self.bank):
            return
        if not (self.reports and self.bank):
            raise UsageError("nugget mode needs both --reports and --bank")
        given = [name for name, v in (("RUN", self.runs), ("--passages", self.passages), ("--llm", self.llm),
                                      ("-k", self.depth)) if v]
        if self.scale not in (None, "0-2"):
            given.append(f"--scale {self.scale}")
        if given:
            raise UsageError(f"{', '.join(given)}: not in nugget mode (--reports, --bank: each report's support of "
                             "each nugget, on the scale 0-2)")


def folder_name(folder: str) -> str:
    """FOLDER as every file in it is named: sample// or ./sample/ is sample, so that the
    labels, lock and token paths joined to it read as a user writes them."""
    return in_folder(folder, "")


def open_sample(folder: str, spec: SampleSpec, say: Say) -> Design:
    """FOLDER's design: drawn and written where it has none, else read, checked against
    ``spec`` and extended to ``spec.n_queries``."""
    design = read_design(folder)
    if design is None:
        design = _new_design(spec, say)
        if spec.guidelines is not None:
            design.guidelines = [list(g) for g in read_guidelines(spec.guidelines, design.top_label)]
        if design.mode == "nugget" and design.topics is not None:
            read_topics(design.topics)   # every input read and checked before the folder is written
        os.makedirs(folder, exist_ok=True)
        write_design(design, folder)
        say(f"drew {len(design.queries)} of the {design.shared_queries} queries the runs share (seed "
            f"{design.seed}): {len(design.pair_list())} pairs to label; the design is {in_folder(folder, DESIGN_FILE)}")
        return design
    if (design.mode == "nugget") != bool(spec.reports or spec.bank) and (spec.runs or spec.reports or spec.bank):
        raise UsageError(f"this folder's sample is in {design.mode} mode; a sample of the other mode needs a new "
                         "FOLDER")
    _check_same(design, folder, spec)
    check_follows(design, folder, _population(design))   # the runs unchanged, the queries and pairs theirs
    if spec.order is not None and spec.order != design.order:
        raise UsageError(f"--order {spec.order} differs from the design in {in_folder(folder, DESIGN_FILE)} "
                         f"({design.order}); a sample of other inputs needs a new FOLDER")
    if spec.guidelines is not None and [list(g) for g in read_guidelines(spec.guidelines, design.top_label)] != \
            (design.guidelines or [list(g) for g in default_guidelines(design.top_label, design.mode)]):
        raise UsageError(f"--guidelines {spec.guidelines} differs from the wording the design's labels were given "
                         f"with ({in_folder(folder, DESIGN_FILE)}); a sample of other guidelines needs a new FOLDER")
    n = spec.n_queries
    if n is not None and n != len(design.queries):
        added = extend(design, n, *_population(design)(design))
        if design.mode == "passage":
            _check_texts(design, [(q, d) for q in added for d in design.pairs[q]], spec.on_missing, say)
        write_design(design, folder)
        say(f"added {len(added)} queries of the same draw ({', '.join(added)}): {len(design.queries)} queries, "
            f"{len(design.pair_list())} pairs")
    return design


def _new_design(spec: SampleSpec, say: Say) -> Design:
    order = spec.order or "shuffled"
    if spec.reports:
        if spec.n_queries is None:
            raise UsageError("a new sample needs -n (FOLDER has no design.json)")
        return new_nugget_design(list(spec.reports), spec.bank, spec.n_queries, spec.seed or 0,
                                 topics=spec.topics and _spec(spec.topics), order=order)
    if not spec.runs or spec.n_queries is None or spec.topics is None or spec.passages is None:
        raise UsageError("a new sample needs RUN..., -n, --topics and --passages (FOLDER has no design.json)")
    design = new_design(list(spec.runs), spec.n_queries, spec.depth or DEFAULT_DEPTH, spec.seed or 0,
                        scale=spec.scale or "0-3", llm=spec.llm, order=order, passages=_spec(spec.passages),
                        topics=_spec(spec.topics))
    _check_texts(design, design.pair_list(), spec.on_missing, say)
    return design


def _population(design: Design):
    """What a sample of DESIGN's mode is drawn from: (queries, their pairs) of a design."""
    if design.mode == "nugget":
        return nugget_population_of
    return passage_population


def _spec(spec: str) -> str:
    return os.path.abspath(spec) if os.path.exists(spec) else spec   # an ir_datasets ID stays as it is


def _check_same(design: Design, folder, spec: SampleSpec) -> None:
    """What a later call gives again must be what the design says: another value would be
    another sample, where a label of this one means nothing."""
    runs = list(spec.runs if design.mode == "passage" else spec.reports)
    if design.mode == "nugget" and runs:
        runs = report_files(runs)
    given = {"RUN": [os.path.abspath(r) for r in runs] or None, "-k": spec.depth, "--seed": spec.seed,
             "--scale": spec.scale, "--topics": spec.topics and _spec(spec.topics),
             "--passages": spec.passages and _spec(spec.passages), "--llm": spec.llm and os.path.abspath(spec.llm),
             "--bank": spec.bank and os.path.abspath(spec.bank)}
    have = {"RUN": [r["path"] for r in design.runs], "-k": design.depth, "--seed": design.seed,
            "--scale": design.scale, "--topics": design.topics, "--passages": design.passages,
            "--llm": design.llm and design.llm["path"], "--bank": design.bank and design.bank["path"]}
    for flag, value in given.items():
        if value is not None and value != have[flag]:
            raise UsageError(f"{flag} differs from the design in {in_folder(folder, DESIGN_FILE)} ({have[flag]}); "
                             "a sample of other inputs needs a new FOLDER")


def _check_texts(design: Design, pairs, on_missing: str, say: Say) -> None:
    topics = read_topics(design.topics)
    no_topic = sorted({q for q, _ in pairs} - set(topics))
    if no_topic:
        raise InputError(f"no text for the drawn queries {', '.join(no_topic[:5])}", display_name(design.topics))
    have = read_passages(design.passages, {d for _, d in pairs})
    missing = [(q, d) for q, d in pairs if d not in have]
    if missing and on_missing == "error":
        raise InputError(f"{len(missing)} pooled passages have no text (first: {missing[0][1]} of query "
                         f"{missing[0][0]}); --on-missing skip leaves them out", display_name(design.passages))
    for q, d in missing:
        design.pairs[q].remove(d)
        design.missing.setdefault(q, []).append(d)
    if missing:
        say(f"{len(missing)} pooled passages have no text in {display_name(design.passages)}: left out of the "
            "sample (design.json lists them)")


def sample_texts(design: Design, show_llm: bool, say: Say) -> Texts:
    """What the page shows of each pair: query, passage or report and nugget, and (with
    ``show_llm``) the LLM's label."""
    topics = {} if design.topics is None else read_topics(design.topics)
    if design.mode == "nugget":
        if show_llm:
            raise UsageError("--show-llm: nugget mode has no LLM labels to show")
        shown = nugget_texts(design, {q: t.text for q, t in topics.items()})
        return Texts(shown["queries"], {}, None, shown["pairs"], topics=_topic_details(topics))
    passages = read_passages(design.passages, {d for _, d in design.pair_list()})
    llm = None
    if show_llm:
        if design.llm is None:
            raise UsageError("--show-llm: the design names no LLM labels (give --llm when drawing the sample)")

        llm = load_labels(design.llm["path"], log=say)
    return Texts({q: t.text for q, t in topics.items()}, passages, llm, topics=_topic_details(topics))


def _topic_details(topics) -> dict[str, dict[str, str]]:
    """What a TREC topic says beyond its title, for the assessor (where the topics have it)."""
    return {q: {k: v for k, v in (("description", t.description), ("narrative", t.narrative)) if v}
            for q, t in topics.items()}


def check_inputs_here(design: Design, folder: str, say: Say) -> None:
    """Before an export: the design's queries and pairs still those of its inputs, where
    they are on this machine (a label folder carried elsewhere still exports)."""
    named = [e["path"] for e in design.runs + [e for e in (design.llm, design.bank) if e]]
    gone = [p for p in named if not os.path.exists(p)]
    if gone:
        say(f"{gone[0]}{f' and {len(gone) - 1} more files' if len(gone) > 1 else ''} named in the design "
            "are not here: its queries and pairs are not checked against them")
    else:
        check_follows(design, folder, _population(design))


def export_labels(design: Design, folder: str, only: str | None, say: Say) -> None:
    """Each assessor's labels (``only``'s) as FOLDER/qrels/NAME.qrels (nugget mode:
    NAME.assignments.jsonl) and NAME.labelled.txt."""
    names = [only] if only else assessors(folder)
    out_dir = in_folder(folder, "qrels")   # the command's own folder: it replaces only what it wrote
    write_export = write_nugget_export if design.mode == "nugget" else write_passage_export
    for name in names:
        labels = read_labels(labels_path(folder, name), say, pairs=design.pair_list(), top=design.top_label)
        ex = write_export(design, name, labels, out_dir)
        say(ex.summary())
    if names:
        what = "NAME.assignments.jsonl" if design.mode == "nugget" else "NAME.qrels"
        say(f"labels and labelled queries in {display_name(out_dir)}/ ({what}, NAME.labelled.txt)")
