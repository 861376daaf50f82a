"""The trec_eval measures we expose, in trec_eval's own table order (measures.c).

trec_eval prints measures in this order whatever order ``-m`` names them in, so the
order of registration below is part of the output contract. Adding a measure that
pytrec_eval computes is one ``register(...)`` line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UsageError
from .c_numbers import c_atof, c_atol

_CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_RECALL_LEVELS = tuple(i / 10 for i in range(11))
_RPREC_MULTS = tuple(i / 10 for i in range(2, 21, 2))


def _float_name(name: str, value: float) -> str:
    """trec_eval's append_float: "%s_%3.2f" into strlen(name) + 10 bytes, so at most 8
    characters of the number are kept (iprec_at_recall_123456.0); C prints a NaN with its
    sign."""
    number = f"{value:3.2f}"
    if value != value and math.copysign(1.0, value) < 0:
        number = "-" + number
    return f"{name}_{number}"[:len(name) + 9]


@dataclass(frozen=True)
class TrecMeasure:
    name: str
    value: str = "float"      # float | long | string | relstring: how trec_eval prints it
    agg: str = "mean"         # mean | sum | gm (geometric, log values per query) | num_q | runid | none
    # None | "long" / "float": cutoffs, one value each | "values": parameters of one value |
    # "gains": trec_eval's level=gain pairs (ndcg.1=3,2=9: the value is named ndcg_1=3,2=9)
    params: str | None = None
    defaults: tuple = ()
    gain: bool = False        # uses raw labels as gains, so unaffected by -l
    per_query: bool = True    # trec_eval prints nothing per query for num_q, runid, gm_*
    summary: bool = True      # trec_eval prints no 'all' line for relstring
    source: str = "pytrec"    # pytrec (pytrec_eval computes it) | ours (computed in evaluate.py) |
                              # qrels_jg, prefs (computed in qrels_jg.py, prefs.py)
    # the judgment formats (trec_eval -R) it computes from; None: any (runid, num_q)
    formats: tuple[str, ...] | None = ("qrels",)


REGISTRY: dict[str, TrecMeasure] = {}


def register(m: TrecMeasure) -> TrecMeasure:
    REGISTRY[m.name] = m
    return m


# trec_eval 9.0.8's te_trec_measures[] table, in its order.
register(TrecMeasure("runid", value="string", agg="runid", per_query=False, source="ours", formats=None))
register(TrecMeasure("num_q", value="long", agg="num_q", per_query=False, source="ours", formats=None))
register(TrecMeasure("num_ret", value="long", agg="sum"))
register(TrecMeasure("num_rel", value="long", agg="sum"))
register(TrecMeasure("num_rel_ret", value="long", agg="sum"))
register(TrecMeasure("map"))
register(TrecMeasure("gm_map", agg="gm", per_query=False))
register(TrecMeasure("Rprec"))
register(TrecMeasure("bpref"))
register(TrecMeasure("recip_rank"))
register(TrecMeasure("iprec_at_recall", params="float", defaults=_RECALL_LEVELS))
register(TrecMeasure("P", params="long", defaults=_CUTS))
register(TrecMeasure("relstring", value="relstring", agg="none", params="values", defaults=(10.0,),
                     summary=False, source="ours"))
register(TrecMeasure("recall", params="long", defaults=_CUTS))
register(TrecMeasure("infAP"))
register(TrecMeasure("gm_bpref", agg="gm", per_query=False))
register(TrecMeasure("Rprec_mult", params="float", defaults=_RPREC_MULTS))
register(TrecMeasure("utility", params="values", defaults=(1.0, -1.0, 0.0, 0.0), source="ours"))
register(TrecMeasure("11pt_avg", params="values", defaults=_RECALL_LEVELS))
register(TrecMeasure("binG"))
register(TrecMeasure("G", gain=True, params="gains"))
register(TrecMeasure("ndcg", gain=True, params="gains"))
register(TrecMeasure("ndcg_rel", gain=True, params="gains"))
register(TrecMeasure("Rndcg", gain=True, params="gains"))
register(TrecMeasure("ndcg_cut", params="long", defaults=_CUTS, gain=True))
register(TrecMeasure("map_cut", params="long", defaults=_CUTS))
register(TrecMeasure("relative_P", params="long", defaults=_CUTS))
register(TrecMeasure("success", params="long", defaults=(1, 5, 10)))
register(TrecMeasure("set_P"))
register(TrecMeasure("set_relative_P"))
register(TrecMeasure("set_recall"))
register(TrecMeasure("set_map"))
register(TrecMeasure("set_F", params="values", defaults=(1.0,)))
register(TrecMeasure("num_nonrel_judged_ret", value="long", agg="sum"))

# The rest of the 9.0.8 table reads other judgment formats (trec_eval -R prefs /
# qrels_prefs / qrels_jg); on other judgments trec_eval stops with "Can't calculate",
# as the measures above do on these.
_PREFS_COUNTS = ("prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret")
_PREFS = _PREFS_COUNTS + (
    "prefs_simp", "prefs_pair", "prefs_avgjg", "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret",
    "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp", "prefs_pair_imp", "prefs_avgjg_imp")
for _name in _PREFS:
    register(TrecMeasure(_name, source="prefs", formats=("prefs", "qrels_prefs"),
                         **(dict(value="long", agg="sum") if _name in _PREFS_COUNTS else {})))
register(TrecMeasure("map_avgjg", source="qrels_jg", formats=("qrels_jg",)))
register(TrecMeasure("P_avgjg", params="long", defaults=_CUTS, source="qrels_jg", formats=("qrels_jg",)))
register(TrecMeasure("Rprec_mult_avgjg", params="float", defaults=_RPREC_MULTS, source="qrels_jg",
                     formats=("qrels_jg",)))
# last in the 9.0.8 table and in no nickname; from qrels (pytrec_eval's C code has it too)
register(TrecMeasure("yaap"))

_OFFICIAL = ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref",
             "recip_rank", "iprec_at_recall", "P")
NICKNAMES = {
    "official": _OFFICIAL,
    "set": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P", "set_recall",
            "set_relative_P", "set_map", "set_F"),
    "all_trec": _OFFICIAL + ("relstring", "recall", "infAP", "gm_bpref", "utility", "11pt_avg", "ndcg",
                             "relative_P", "Rprec_mult", "success", "map_cut", "ndcg_cut", "ndcg_rel",
                             "Rndcg", "binG", "G", "set_P", "set_recall", "set_relative_P", "set_map",
                             "set_F", "num_nonrel_judged_ret"),
    "all_prefs": ("runid", "num_q") + _PREFS,
    "prefs": ("runid", "num_q") + _PREFS[:6],
    "qrels_jg": ("runid", "num_q", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg"),
}


@dataclass(frozen=True)
class Request:
    """One requested measure with its (sorted) cutoffs, as trec_eval would init it."""

    measure: TrecMeasure
    cutoffs: tuple = ()
    raw: str | None = None   # the parameter text of a "values" measure, as given (trec_eval names it so)

    @property
    def names(self) -> list[str]:
        """The value names trec_eval prints (P_5, iprec_at_recall_0.10, map, utility_1,-1,0,0)."""
        if self.measure.params is None:
            return [self.measure.name]
        if self.measure.params in ("values", "gains"):
            return [self.measure.name if self.raw is None else f"{self.measure.name}_{self.raw}"]
        if self.measure.params == "long":
            return [f"{self.measure.name}_{c}" for c in self.cutoffs]
        return [_float_name(self.measure.name, c) for c in self.cutoffs]

    @property
    def pytrec_keys(self) -> list[str]:
        """What pytrec_eval calls the values of ``names`` (it names a "values" measure bare)."""
        if self.measure.params in ("values", "gains"):
            return [self.measure.name]
        return self.names

    @property
    def pytrec_spec(self) -> str:
        if self.measure.params is None:
            return self.measure.name
        if self.measure.params in ("values", "gains"):
            return self.measure.name if self.raw is None else f"{self.measure.name}.{self.raw}"
        if self.measure.params == "long":
            return self.measure.name + "." + ",".join(str(c) for c in self.cutoffs)
        return self.measure.name + "." + ",".join(repr(c) for c in self.cutoffs)


def _check_gain_pairs(text: str, spec: str) -> None:
    # trec_eval's get_param_pairs: every comma-separated part holds exactly one '='
    if any(part.count("=") != 1 for part in text.split(",")):
        raise UsageError(f"measure {spec!r}: gains must be level=gain pairs separated by commas "
                         f"(trec_eval: malformed pair parameters in '{text}')")


def _parse_cutoffs(m: TrecMeasure, text: str, spec: str) -> tuple:
    if m.params == "gains":
        _check_gain_pairs(text, spec)
        return ()
    parts = text.split(",")
    if m.params == "long":
        values = [c_atol(p) for p in parts]
    else:
        values = [c_atof(p) for p in parts]
    if m.params == "values":
        # ordered parameters, not cutoffs (trec_eval: get_float_params); relstring and
        # set_F read the first, utility needs 4 (see improper)
        return tuple(values)
    values.sort()
    if m.params == "long" and values[0] <= 0:
        raise UsageError(f"measure {spec!r}: cutoffs must be positive (trec_eval: Negative cutoff detected)")
    if any(a == b for a, b in zip(values, values[1:])):
        raise UsageError(f"measure {spec!r}: duplicate cutoffs (trec_eval: duplicate cutoffs detected)")
    return tuple(values)


def _same_params(m: TrecMeasure, param: str, spec: str, first: tuple, first_raw: str) -> bool:
    try:
        cutoffs = _parse_cutoffs(m, param, spec)
    except UsageError:
        return False
    return (cutoffs, param if m.params == "gains" else None) == (first, first_raw if m.params == "gains" else None)


def parse_measures(specs: list[str] | tuple[str, ...], warn=None) -> list[Request]:
    """``-m`` arguments -> requests in trec_eval's table order.

    As in trec_eval, marking a measure and giving it parameters are separate: the first
    parameter string given for a measure wins wherever it appears (``-m official -m P.5``
    gives P_5 only); a later, different one is ignored unchecked (``-m P.5 -m P.0`` is
    P_5, as in trec_eval), and we say so through ``warn``. A parameter on a nickname or on
    a measure that takes none (``-m official.5``, ``-m map.5``) is ignored as trec_eval
    ignores it, with a word through ``warn``: it may have been meant as a cutoff.
    """
    if not specs:
        specs = ["official"]
    marked: set[str] = set()
    params: dict[str, tuple] = {}
    raws: dict[str, str] = {}
    for spec in specs:
        root, dot, param = spec.partition(".")
        if dot and not param:
            raise UsageError(f"measure {spec!r}: empty parameter after '.' (trec_eval: improper measure in parameter)")
        if root in NICKNAMES:
            if dot and warn:
                warn(f"-m {spec}: {root} names a set of measures, which takes no parameters; "
                     "trec_eval ignores them, and so does exam-qrels")
            marked.update(NICKNAMES[root])
            continue
        m = REGISTRY.get(root)
        if m is None:
            known = ", ".join(list(REGISTRY) + list(NICKNAMES))
            raise UsageError(f"unknown measure {spec!r} (trec_eval: illegal measure); known: {known}")
        marked.add(root)
        if param and not m.params:
            if warn:
                warn(f"-m {spec}: {root} takes no parameters; trec_eval ignores them, and so does exam-qrels")
            continue
        if param and root not in params:
            params[root] = _parse_cutoffs(m, param, spec)
            raws[root] = param
        elif param and warn and not _same_params(m, param, spec, params[root], raws[root]):
            warn(f"-m {spec}: trec_eval uses the first parameters given for {root}; ignoring these")
    return [Request(m, params.get(name, m.defaults), raws.get(name)) for name, m in REGISTRY.items()
            if name in marked]


def improper(r: Request) -> str | None:
    """Why trec_eval cannot calculate ``r`` whatever the judgments, or None: m_utility.c
    refuses other than four coefficients (at the first query it scores)."""
    if r.measure.name == "utility" and len(r.cutoffs) != 4:
        return f"utility takes 4 coefficients, not {len(r.cutoffs)}; trec_eval: improper number of coefficients"
    return None


def first_unavailable(requests: list[Request], rel_format: str) -> tuple[TrecMeasure, str] | None:
    """The first requested measure (in table order, as trec_eval computes them) that
    cannot be computed from judgments of ``rel_format``, and why: trec_eval stops on it
    with "Can't calculate measure" once a query has both results and judgments."""
    for r in requests:
        if r.measure.formats is not None and rel_format not in r.measure.formats:
            return r.measure, f"{r.measure.name} is not computed from -R {rel_format} judgments"
        if improper(r):
            return r.measure, improper(r)
    return None
