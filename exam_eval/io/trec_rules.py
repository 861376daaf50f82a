"""Two of trec_eval's rules that exam_eval's own files follow as well, kept below
exam_eval.trec_eval so that io needs nothing above it: the bound on a relevance label
(a grade of a custom prompt becomes a label, so the grades reader holds it to the same
bound) and trec_eval's ranking order (reports built from a run cite its passages in it)."""

from __future__ import annotations

from array import array
from typing import Mapping

# trec_eval (and pytrec_eval) size per-query tables by the largest label: at 10^6, nDCG
# runs for minutes, and at 2*10^9 it takes 15 GB; no test collection grades that finely
LABEL_MAX = 10_000


def trec_ranked(docs: Mapping[str, float], docno_ascending: bool = False) -> list[str]:
    """Docnos in trec_eval's order: score (as a C float) descending, ties by docno
    descending (form_res_rels.c), or ascending (form_prefs_counts.c)."""
    # array('f') stores each score as a C float, as trec_eval does (numpy costs 50 us a
    # call on the small rankings the statistics sort by the thousand)
    pairs = zip(array("f", docs.values()), docs)
    if docno_ascending:
        return [d for _, d in sorted(pairs, key=lambda p: (-p[0], p[1]))]
    return [d for _, d in sorted(pairs, reverse=True)]
