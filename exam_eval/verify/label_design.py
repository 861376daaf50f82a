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
from pathlib import PurePath
from typing import Callable

from ..errors import InputError, UsageError
from ..grading.pool import Pool
from ..io.openers import display_name
from ..io.outputs import atomic_output
from ..trec_eval.trec_files import read_run

FORMAT = "exam-eval-label-design/1"
DESIGN_FILE = "design.json"


def in_folder(folder: str, name: str) -> str:
    """FOLDER/NAME as messages name it: joined by pathlib, so a FOLDER typed with a trailing
    slash (sample/, as a shell completes it) gives sample/design.json, not sample//design.json."""
    return str(PurePath(folder, name))


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
    #: a query's pairs in pool order, or shuffled (seeded by the design's seed and the
    #: query), so that the pool's best-ranked passages are not always judged first; a
    #: design written before the field existed is in pool order
    order: str = "pool"
    guidelines: list | None = None     # [name, what it means] per label (--guidelines); None: the scale's

    @property
    def top_label(self) -> int:
        return SCALES[self.scale]

    def pair_list(self) -> list[tuple[str, str]]:
        return [(q, d) for q in self.queries for d in self.pairs.get(q, [])]

    def to_json(self) -> dict:
        return {"format": FORMAT, "mode": self.mode, "seed": self.seed, "depth": self.depth, "scale": self.scale,
                "shared_queries": self.shared_queries, "n_queries": len(self.queries), "queries": self.queries,
                "runs": self.runs, "llm": self.llm, "bank": self.bank, "passages": self.passages, "topics": self.topics,
                "n_pairs": sum(len(v) for v in self.pairs.values()), "order": self.order, "pairs": self.pairs,
                "missing_text": self.missing, "guidelines": self.guidelines}


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


ORDERS = ("shuffled", "pool")


def arranged(pairs: dict[str, list[str]], order: str, seed: int) -> dict[str, list[str]]:
    """Each query's pairs in the design's ORDER: as pooled, or shuffled by a generator
    seeded with the design's seed and the query (the same on every machine and Python)."""
    if order == "pool":
        return pairs
    out = {}
    for q, docs in pairs.items():
        docs = list(docs)
        random.Random(f"{seed}/{q}").shuffle(docs)
        out[q] = docs
    return out


def pool_pairs(runs: list[str], queries: list[str], depth: int) -> dict[str, list[str]]:
    pool = Pool()
    for path in runs:
        pool.add_run(path, depth)
    return {q: list(pool.docs.get(q, {})) for q in queries}


def new_design(runs: list[str], n: int, depth: int, seed: int, *, scale: str, llm: str | None,
               passages: str | None, topics: str | None, order: str = "shuffled") -> Design:
    shared = shared_queries(runs)
    if not 1 <= n <= len(shared):
        raise UsageError(f"-n must be between 1 and {len(shared)} (the queries the runs share)")
    queries = draw_order(shared, seed)[:n]
    return Design(queries=queries, seed=seed, depth=depth, runs=[file_entry(p) for p in runs], scale=scale,
                  llm=None if llm is None else file_entry(llm), passages=passages, topics=topics,
                  shared_queries=len(shared), pairs=arranged(pool_pairs(runs, queries, depth), order, seed),
                  order=order)


def passage_population(design: Design) -> tuple[set[str], Callable[[list[str]], dict[str, list[str]]]]:
    """The queries a passage sample is drawn from, and the pairs of some of them."""
    runs = [r["path"] for r in design.runs]
    return shared_queries(runs), lambda queries: arranged(pool_pairs(runs, queries, design.depth), design.order,
                                                          design.seed)


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
                             "a new label folder)", in_folder(folder, DESIGN_FILE))
        if sha256_of(entry["path"]) != entry["sha256"]:
            raise InputError(f"{entry['path']} changed since the sample was drawn (its SHA-256 differs); a sample "
                             "of other inputs needs a new label folder", in_folder(folder, DESIGN_FILE))


_HEX = frozenset("0123456789abcdef")
_MODES = ("passage", "nugget")


def _shown(value) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _count_is(value, count: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == count


class _Fields:
    """The checks of design.json's fields: each refusal one line naming the file and the field."""

    def __init__(self, obj: dict, name: str):
        self.obj, self.name = obj, name
        self.mode = "passage"

    def bad(self, field: str, why: str) -> InputError:
        return InputError(f"not a label design: field {json.dumps(field)} {why}", self.name)

    def get(self, field: str, default=...):
        if field not in self.obj:
            if default is ...:
                raise self.bad(field, "is missing")
            return default
        return self.obj[field]

    def absent(self, field: str) -> str:
        return "null" if field in self.obj else "missing"

    def integer(self, field: str, low: int, default=...) -> int:
        value = self.get(field, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.bad(field, f"is {_shown(value)}, not a whole number of at least {low}")
        return value

    def text(self, field: str, value, what: str = "a string") -> str:
        if not isinstance(value, str) or not value:
            raise self.bad(field, f"is {_shown(value)}, not {what}")
        return value

    def entry(self, field: str, value, item: str = "") -> dict:
        """A file the design names: {"path": STR, "sha256": 64 hex digits}."""
        if (not isinstance(value, dict) or not isinstance(value.get("path"), str) or not value["path"]
                or not isinstance(value.get("sha256"), str) or len(value["sha256"]) != 64
                or not set(value["sha256"]) <= _HEX):
            raise self.bad(field, f"{item}is {_shown(value)}, not {{\"path\": FILE, \"sha256\": its 64 hex digits}}")
        return {"path": value["path"], "sha256": value["sha256"]}

    def optional(self, field: str, required: bool | None, read):
        """REQUIRED: True must be there, False must be null, None either; READ(field, value)
        checks a value that is there."""
        value = self.get(field, None)
        if value is None:
            if required:
                raise self.bad(field, f"is {self.absent(field)}; a {self.mode} sample names it")
            return None
        if required is False:
            raise self.bad(field, f"is {_shown(value)}; a {self.mode} sample has none (null)")
        return read(field, value)

    def file_or_id(self, field: str, value) -> str:
        return self.text(field, value, "a file or an ir_datasets ID")

    def lists(self, field: str, value, queries: list[str]) -> dict[str, list[str]]:
        """{QUERY: [STR, ...]} with no key outside the sample and nothing twice in a list."""
        if not isinstance(value, dict):
            raise self.bad(field, f"is {_shown(value)}, not an object of each query's list")
        out = {}
        for q, items in value.items():
            if q not in queries:
                raise self.bad(field, f"names the query {_shown(q)}, which is not in the sample's \"queries\"")
            if not isinstance(items, list) or not all(isinstance(x, str) and x for x in items):
                raise self.bad(field, f"of query {_shown(q)} is {_shown(items)}, not a list of strings")
            if len(set(items)) != len(items):
                twice = next(x for i, x in enumerate(items) if x in items[:i])
                raise self.bad(field, f"of query {_shown(q)} names {_shown(twice)} twice")
            out[q] = list(items)
        return out


def read_design(folder: str) -> Design | None:
    """FOLDER/design.json as written, every field checked: a broken or hand-edited design
    is refused in one line naming the file and the field. That its queries and pairs are
    the draw of its seed and the pool of its runs at its depth is :func:`check_follows`'s
    (it reads the runs)."""
    path = in_folder(folder, DESIGN_FILE)
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
    f = _Fields(obj, name)
    mode = f.get("mode", "passage")
    if mode not in _MODES:
        raise f.bad("mode", f"is {_shown(mode)}, not one of {', '.join(_MODES)}")
    f.mode, nugget = mode, mode == "nugget"
    if nugget != (obj.get("bank") is not None):
        raise f.bad("mode", f"is {_shown(mode)}, but the design " + ("names no nugget \"bank\"" if nugget else
                            "names a nugget \"bank\"") + "; a sample of the other mode needs a new label folder")
    seed = f.integer("seed", 0)
    depth = f.get("depth")
    if nugget:
        if depth != 0 or isinstance(depth, bool):
            raise f.bad("depth", f"is {_shown(depth)}; a nugget sample's is 0 (every nugget of every report)")
    else:
        depth = f.integer("depth", 1)
    scale = f.get("scale")
    if not isinstance(scale, str) or scale not in SCALES or (nugget and scale != "0-2"):
        allowed = "0-2 (nugget mode)" if nugget else ", ".join(SCALES)
        raise f.bad("scale", f"is {_shown(scale)}, not one of {allowed}")
    queries = f.get("queries")
    if not isinstance(queries, list) or not queries or not all(isinstance(q, str) and q for q in queries):
        raise f.bad("queries", f"is {_shown(queries)}, not a list of query ids")
    if len(set(queries)) != len(queries):
        twice = next(q for i, q in enumerate(queries) if q in queries[:i])
        raise f.bad("queries", f"names the query {_shown(twice)} twice")
    shared = f.integer("shared_queries", 1)
    if shared < len(queries):
        raise f.bad("shared_queries", f"is {shared}, fewer than the {len(queries)} queries drawn from them")
    if "n_queries" in obj and not _count_is(obj["n_queries"], len(queries)):
        raise f.bad("n_queries", f"is {_shown(obj['n_queries'])}, but \"queries\" has {len(queries)}")
    runs = f.get("runs")
    if not isinstance(runs, list) or not runs:
        raise f.bad("runs", f"is {_shown(runs)}, not a list of the runs' {{\"path\", \"sha256\"}}")
    runs = [f.entry("runs", r, f"(item {i + 1}) ") for i, r in enumerate(runs)]
    llm = f.optional("llm", False if nugget else None, f.entry)
    bank = f.optional("bank", nugget or False, f.entry)
    passages = f.optional("passages", not nugget, f.file_or_id)
    topics = f.optional("topics", None if nugget else True, f.file_or_id)
    pairs = f.lists("pairs", f.get("pairs"), queries)
    if set(pairs) != set(queries):
        lacking = next(q for q in queries if q not in pairs)
        raise f.bad("pairs", f"has no list for the query {_shown(lacking)} of the sample")
    if nugget and not all(x.count("\t") == 1 for v in pairs.values() for x in v):
        raise f.bad("pairs", "has a pair that is not RUN_ID<TAB>ITEM_ID (nugget mode)")
    n_pairs = sum(len(v) for v in pairs.values())
    if "n_pairs" in obj and not _count_is(obj["n_pairs"], n_pairs):
        raise f.bad("n_pairs", f"is {_shown(obj['n_pairs'])}, but \"pairs\" has {n_pairs}")
    order = f.get("order", "pool")
    if order not in ORDERS:
        raise f.bad("order", f"is {_shown(order)}, not one of {', '.join(ORDERS)}")
    guidelines = f.get("guidelines", None)
    if guidelines is not None and not (isinstance(guidelines, list) and len(guidelines) == SCALES[scale] + 1 and all(
            isinstance(g, list) and len(g) == 2 and all(isinstance(x, str) for x in g) and g[0] for g in guidelines)):
        raise f.bad("guidelines", f"is {_shown(guidelines)}, not a [name, meaning] pair for each label of {scale}")
    missing = f.lists("missing_text", f.get("missing_text", {}), queries)
    if nugget and any(missing.values()):
        raise f.bad("missing_text", "lists pairs; a nugget sample has none")
    for q, docs in missing.items():
        both = set(docs) & set(pairs[q])
        if both:
            raise f.bad("missing_text", f"of query {_shown(q)} lists {_shown(min(both))}, which \"pairs\" has")
    return Design(queries=list(queries), seed=seed, depth=depth, runs=runs, scale=scale, llm=llm, passages=passages,
                  topics=topics, shared_queries=shared, pairs={q: pairs[q] for q in queries}, missing=missing,
                  mode=mode, bank=bank, order=order, guidelines=guidelines)


def check_follows(design: Design, folder: str, population=passage_population) -> None:
    """The design is what its inputs give: the runs (and LLM labels, bank) are the ones it
    drew from (:func:`check_unchanged`), its queries are the first of its seed's draw of
    the population, and each query's pairs its pool at its depth (in nugget mode every
    (report, nugget)), in pool order, less the passages it lists without text. A design
    edited by hand (queries reordered or picked, a depth or seed changed, a pair added or
    dropped) is refused: the labels would not be of a uniform draw of these runs.
    ``population``: the sample's population and pairs (label_nuggets.nugget_population_of
    in nugget mode, which imports this module)."""
    check_unchanged(design, folder)
    name = display_name(in_folder(folder, DESIGN_FILE))
    shared, pairs_of = population(design)
    if design.shared_queries != len(shared):
        raise InputError(f"not a label design: field \"shared_queries\" is {design.shared_queries}, but the runs "
                         f"share {len(shared)} queries", name)
    order = draw_order(shared, design.seed)
    if design.queries != order[:len(design.queries)]:
        at = next((i for i, q in enumerate(design.queries) if i >= len(order) or order[i] != q))
        raise InputError(f"not a label design: field \"queries\" is not the draw of field \"seed\" "
                         f"({design.seed}) of the queries the runs share (query "
                         f"{at + 1} is {_shown(design.queries[at])}, the draw's is "
                         f"{_shown(order[at]) if at < len(order) else 'none'}); a sample of other queries "
                         "needs a new label folder", name)
    pools = pairs_of(design.queries)
    for q in design.queries:
        gone = set(design.missing.get(q, []))
        if not gone <= set(pools[q]):
            raise InputError(f"not a label design: field \"missing_text\" of query {_shown(q)} lists "
                             f"{_shown(min(gone - set(pools[q])))}, which is not in its pool", name)
        want = [d for d in pools[q] if d not in gone]
        if design.pairs[q] == want:
            continue
        have = design.pairs[q]
        pool = ("every (report, nugget) of the query" if design.mode == "nugget" else
                f"the pool of the runs' top field \"depth\" ({design.depth})")
        pool += "" if design.order == "pool" else ", shuffled by field \"seed\" (field \"order\")"
        extra = [d for d in have if d not in want]
        lacking = [d for d in want if d not in have]
        if extra:
            why = f"names {_shown(extra[0])}, which is not in {pool}"
        elif lacking:
            unlisted = "" if design.mode == "nugget" else ", and \"missing_text\" does not list it"
            why = f"lacks {_shown(lacking[0])} of {pool}{unlisted}"
        else:
            why = f"is not in the order of {pool}"
        raise InputError(f"not a label design: field \"pairs\" of query {_shown(q)} {why}", name)


def write_design(design: Design, folder: str) -> None:
    with atomic_output(in_folder(folder, DESIGN_FILE)) as out:
        json.dump(design.to_json(), out, indent=1)
        out.write("\n")
