"""The design of a human-labelling sample, written down before the first label.

The intervals of ``exam-correlate interval`` are valid for queries drawn uniformly at
random, so the draw is part of the result: ``design.json`` in the label folder names the
runs (with their SHA-256), the depth, the seed, the LLM labels' file and the queries in
the order they were drawn. The draw is a seeded permutation of the queries every run
has, and the sample is its first N: asking for more queries later takes the next ones
of the same permutation, so the extended sample is still a uniform draw and keeps every
label given. The pairs are each sampled query's pool, as exam-grade pools (the top
``depth`` of every run in trec_eval order, first appearance first); in nugget mode
(:mod:`exam_eval.verify.label_nuggets`) every (report, nugget) of the query, the runs
being the reports' run ids and the queries the topics every run reports on and the bank
has nuggets for.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import dataclass, field
from typing import Callable

from ..errors import InputError, UsageError
from ..grading.pool import Pool
from ..io.openers import display_name
from ..io.outputs import atomic_output
from ..trec_eval.trec_files import read_run

FORMAT = "exam-eval-label-design/1"
DESIGN_FILE = "design.json"
#: what --scale takes: the label scale of the page's keys
SCALES = {"0-1": 1, "0-2": 2, "0-3": 3}


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", display_name(path)) from None
    return h.hexdigest()


@dataclass
class Design:
    queries: list[str]                 # the sample, in the order drawn
    seed: int
    depth: int
    runs: list[dict]                   # {"path", "sha256"}
    scale: str = "0-3"
    llm: dict | None = None            # {"path", "sha256"} of the LLM labels, if given
    passages: str | None = None
    topics: str | None = None
    shared_queries: int = 0            # how many queries the runs share (the population)
    pairs: dict[str, list[str]] = field(default_factory=dict)   # qid -> docnos, pool order
    missing: dict[str, list[str]] = field(default_factory=dict)  # pooled docnos without text
    mode: str = "passage"              # or "nugget": pairs are "RUN_ID<TAB>ITEM_ID"
    bank: dict | None = None           # {"path", "sha256"} of the nugget bank (nugget mode)

    @property
    def top_label(self) -> int:
        return SCALES[self.scale]

    def pair_list(self) -> list[tuple[str, str]]:
        return [(q, d) for q in self.queries for d in self.pairs.get(q, [])]

    def to_json(self) -> dict:
        return {"format": FORMAT, "mode": self.mode, "seed": self.seed, "depth": self.depth, "scale": self.scale,
                "shared_queries": self.shared_queries, "n_queries": len(self.queries), "queries": self.queries,
                "runs": self.runs, "llm": self.llm, "bank": self.bank, "passages": self.passages, "topics": self.topics,
                "n_pairs": sum(len(v) for v in self.pairs.values()), "pairs": self.pairs,
                "missing_text": self.missing}


def draw_order(shared: set[str], seed: int) -> list[str]:
    """Every shared query in a seeded random order; a sample of N is its first N."""
    order = sorted(shared)
    random.Random(seed).shuffle(order)
    return order


def shared_queries(runs: list[str]) -> set[str]:
    shared: set[str] | None = None
    for path in runs:
        qids = set(read_run(path))
        shared = qids if shared is None else shared & qids
    if not shared:
        raise InputError("the runs share no query: nothing to sample", display_name(runs[-1]))
    return shared


def pool_pairs(runs: list[str], queries: list[str], depth: int) -> dict[str, list[str]]:
    pool = Pool()
    for path in runs:
        pool.add_run(path, depth)
    return {q: list(pool.docs.get(q, {})) for q in queries}


def new_design(runs: list[str], n: int, depth: int, seed: int, *, scale: str, llm: str | None,
               passages: str | None, topics: str | None) -> Design:
    shared = shared_queries(runs)
    if not 1 <= n <= len(shared):
        raise UsageError(f"-n must be between 1 and {len(shared)} (the queries the runs share)")
    queries = draw_order(shared, seed)[:n]
    return Design(queries=queries, seed=seed, depth=depth, runs=[file_entry(p) for p in runs], scale=scale,
                  llm=None if llm is None else file_entry(llm), passages=passages, topics=topics,
                  shared_queries=len(shared), pairs=pool_pairs(runs, queries, depth))


def passage_population(design: Design) -> tuple[set[str], Callable[[list[str]], dict[str, list[str]]]]:
    """The queries a passage sample is drawn from, and the pairs of some of them."""
    runs = [r["path"] for r in design.runs]
    return shared_queries(runs), lambda queries: pool_pairs(runs, queries, design.depth)


def extend(design: Design, n: int, shared: set[str], pairs_of: Callable[[list[str]], dict[str, list[str]]]) -> list[str]:
    """The next queries of the same draw of ``shared``, up to N in all; the queries added."""
    if n < len(design.queries):
        raise UsageError(f"-n {n}: the design already has {len(design.queries)} queries, and a label given is "
                         "never dropped; give -n of at least that many to extend it")
    order = draw_order(shared, design.seed)
    if n > len(order):
        raise UsageError(f"-n must be at most {len(order)} (the queries the runs share)")
    if order[:len(design.queries)] != design.queries:   # checked hashes make this a broken file
        raise InputError("the design's queries are not the draw of its seed", DESIGN_FILE)
    added = order[len(design.queries):n]
    design.queries = order[:n]
    design.pairs.update(pairs_of(added))
    return added


def file_entry(path: str) -> dict:
    return {"path": os.path.abspath(path), "sha256": sha256_of(path)}


def check_unchanged(design: Design, folder: str) -> None:
    """The runs and LLM labels are the ones the design drew from, byte for byte: a sample
    of other runs is another design."""
    for entry in design.runs + [e for e in (design.llm, design.bank) if e]:
        if not os.path.exists(entry["path"]):
            raise InputError(f"{entry['path']} is gone; the design of this sample names it (a new sample needs "
                             "a new label folder)", os.path.join(folder, DESIGN_FILE))
        if sha256_of(entry["path"]) != entry["sha256"]:
            raise InputError(f"{entry['path']} changed since the sample was drawn (its SHA-256 differs); a sample "
                             "of other inputs needs a new label folder", os.path.join(folder, DESIGN_FILE))


def read_design(folder: str) -> Design | None:
    path = os.path.join(folder, DESIGN_FILE)
    if not os.path.exists(path):
        return None
    name = display_name(path)
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"not a label design ({exc})", name) from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise InputError(f"not a label design (format is not {FORMAT})", name)
    try:
        return Design(queries=list(obj["queries"]), seed=int(obj["seed"]), depth=int(obj["depth"]),
                      runs=list(obj["runs"]), scale=obj["scale"], llm=obj.get("llm"), passages=obj.get("passages"),
                      topics=obj.get("topics"), shared_queries=int(obj["shared_queries"]),
                      pairs={str(k): list(v) for k, v in obj["pairs"].items()},
                      missing={str(k): list(v) for k, v in obj.get("missing_text", {}).items()},
                      mode=obj.get("mode", "passage"), bank=obj.get("bank"))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"not a label design (field {exc})", name) from None


def write_design(design: Design, folder: str) -> None:
    with atomic_output(os.path.join(folder, DESIGN_FILE)) as out:
        json.dump(design.to_json(), out, indent=1)
        out.write("\n")
