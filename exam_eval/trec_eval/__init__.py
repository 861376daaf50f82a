"""trec_eval compatibility, in one place: the run, qrels, prefs and qrels_jg readers
(``trec_files``, ``bulk``, ``packed_bytes``, ``prefs_files``, ``qrels_jg_files``), C's
number rules (``c_numbers``), the measure registry and the evaluation (``registry``,
``evaluate``: per-query values from pytrec_eval, the only importer of it besides
``pytrec_specs``), the measures computed from trec_eval's own source (``official_arrays``,
the numpy fast path; ``prefs``, ``qrels_jg``, ``gain_measures``, ``level_measures``,
``zscores``), the qrels cache (``qrels_cache``) and the forked workers (``parallel``, ``allocator``). It stands on
exam_eval.errors and exam_eval.io (the openers; ``trec_rules``: the label bound and the
ranking order, which exam_eval's own files follow too); everything that reads runs and
qrels stands on it."""
