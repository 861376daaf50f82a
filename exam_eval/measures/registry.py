"""The trec_eval measures we expose, in trec_eval's own table order (measures.c).

trec_eval prints measures in this order whatever order ``-m`` names them in, so the
order of registration below is part of the output contract. Adding a measure that
pytrec_eval computes is one ``register(...)`` line.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError

_CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_RECALL_LEVELS = tuple(i / 10 for i in range(11))
_RPREC_MULTS = tuple(i / 10 for i in range(2, 21, 2))


@dataclass(frozen=True)
class TrecMeasure:
    name: str
    value: str = "float"      # float | long | string: how trec_eval prints it
    agg: str = "mean"         # mean | sum | gm (geometric, log values per query) | num_q | runid
    params: str | None = None  # None | "long" | "float": cutoff parameters after a dot
    defaults: tuple = ()
    gain: bool = False        # uses raw labels as gains, so unaffected by -l
    per_query: bool = True    # trec_eval prints nothing per query for num_q / runid


REGISTRY: dict[str, TrecMeasure] = {}


def register(m: TrecMeasure) -> TrecMeasure:
    REGISTRY[m.name] = m
    return m


register(TrecMeasure("runid", value="string", agg="runid", per_query=False))
register(TrecMeasure("num_q", value="long", agg="num_q", per_query=False))
register(TrecMeasure("num_ret", value="long", agg="sum"))
register(TrecMeasure("num_rel", value="long", agg="sum"))
register(TrecMeasure("num_rel_ret", value="long", agg="sum"))
register(TrecMeasure("map"))
register(TrecMeasure("gm_map", agg="gm"))
register(TrecMeasure("Rprec"))
register(TrecMeasure("bpref"))
register(TrecMeasure("recip_rank"))
register(TrecMeasure("iprec_at_recall", params="float", defaults=_RECALL_LEVELS))
register(TrecMeasure("P", params="long", defaults=_CUTS))
register(TrecMeasure("recall", params="long", defaults=_CUTS))
register(TrecMeasure("infAP"))
register(TrecMeasure("gm_bpref", agg="gm"))
register(TrecMeasure("Rprec_mult", params="float", defaults=_RPREC_MULTS))
register(TrecMeasure("11pt_avg"))
register(TrecMeasure("binG"))
register(TrecMeasure("G", gain=True))
register(TrecMeasure("ndcg", gain=True))
register(TrecMeasure("ndcg_rel", gain=True))
register(TrecMeasure("Rndcg", gain=True))
register(TrecMeasure("ndcg_cut", params="long", defaults=_CUTS, gain=True))
register(TrecMeasure("map_cut", params="long", defaults=_CUTS))
register(TrecMeasure("relative_P", params="long", defaults=_CUTS))
register(TrecMeasure("success", params="long", defaults=(1, 5, 10)))
register(TrecMeasure("set_P"))
register(TrecMeasure("set_relative_P"))
register(TrecMeasure("set_recall"))
register(TrecMeasure("set_map"))
register(TrecMeasure("set_F"))
register(TrecMeasure("num_nonrel_judged_ret", value="long", agg="sum"))

NICKNAMES = {
    "official": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map",
                 "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P"),
    "set": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "set_P", "set_recall",
            "set_relative_P", "set_map", "set_F"),
}


@dataclass(frozen=True)
class Request:
    """One requested measure with its (sorted) cutoffs, as trec_eval would init it."""

    measure: TrecMeasure
    cutoffs: tuple = ()

    @property
    def names(self) -> list[str]:
        """The value names trec_eval prints (P_5, iprec_at_recall_0.10, map)."""
        if not self.measure.params:
            return [self.measure.name]
        if self.measure.params == "long":
            return [f"{self.measure.name}_{c}" for c in self.cutoffs]
        return [f"{self.measure.name}_{c:3.2f}" for c in self.cutoffs]

    @property
    def pytrec_spec(self) -> str:
        if not self.measure.params:
            return self.measure.name
        if self.measure.params == "long":
            return self.measure.name + "." + ",".join(str(c) for c in self.cutoffs)
        return self.measure.name + "." + ",".join(repr(c) for c in self.cutoffs)


def _parse_cutoffs(m: TrecMeasure, text: str, spec: str) -> tuple:
    parts = text.split(",")
    try:
        if m.params == "long":
            values = [int(p) for p in parts]
        else:
            values = [float(p) for p in parts]
    except ValueError:
        raise UsageError(f"measure {spec!r}: cutoffs must be comma-separated {'integers' if m.params == 'long' else 'numbers'}") from None
    values.sort()
    if m.params == "long" and values[0] <= 0:
        raise UsageError(f"measure {spec!r}: cutoffs must be positive (trec_eval: Negative cutoff detected)")
    if any(a == b for a, b in zip(values, values[1:])):
        raise UsageError(f"measure {spec!r}: duplicate cutoffs")
    return tuple(values)


def parse_measures(specs: list[str] | tuple[str, ...], warn=None) -> list[Request]:
    """``-m`` arguments -> requests in trec_eval's table order.

    As in trec_eval, marking a measure and giving it parameters are separate: the first
    parameter string given for a measure wins wherever it appears (``-m official -m P.5``
    gives P_5 only); a later, different one is ignored, and we say so through ``warn``.
    """
    if not specs:
        specs = ["official"]
    marked: set[str] = set()
    params: dict[str, tuple] = {}
    for spec in specs:
        root, dot, param = spec.partition(".")
        if root in NICKNAMES and not dot:
            marked.update(NICKNAMES[root])
            continue
        m = REGISTRY.get(root)
        if m is None:
            known = ", ".join(list(REGISTRY) + list(NICKNAMES))
            raise UsageError(f"unknown measure {spec!r}; known: {known}")
        if dot and not param:
            raise UsageError(f"measure {spec!r}: empty parameter after '.'")
        if param and not m.params:
            raise UsageError(f"measure {root!r} takes no parameters (got {spec!r})")
        marked.add(root)
        if param:
            cutoffs = _parse_cutoffs(m, param, spec)
            if root not in params:
                params[root] = cutoffs
            elif cutoffs != params[root] and warn:
                warn(f"-m {spec}: trec_eval uses the first parameters given for {root}; ignoring these")
    return [Request(m, params.get(name, m.defaults)) for name, m in REGISTRY.items() if name in marked]
