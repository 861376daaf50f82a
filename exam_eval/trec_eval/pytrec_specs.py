"""pytrec_eval's evaluator, given trec_eval's own measure strings unchanged.

pytrec_eval's Python wrapper rewrites each measure string with a pattern that knows
numeric cutoffs only: a gain list (``ndcg.1=3,2=9``) becomes ``ndcg.1`` and its C code
then crashes on the malformed pair. Its C class passes the strings to trec_eval's own
parameter parsing, which is what ``-m`` means, so the strings we build (already in
trec_eval's ``name.params`` form, see registry.Request.pytrec_spec) go there as they are.
Imported lazily: pytrec_eval is only needed when scoring.
"""

from __future__ import annotations

import pytrec_eval


class TrecSpecEvaluator(pytrec_eval.RelevanceEvaluator):
    def _expand_nicknames(self, measures):
        return set(measures)

    def _combine_measures(self, measures):
        return set(measures)
