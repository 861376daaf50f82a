"""Measures: EXAM-Qrels labels, EXAM-Cover and the nugget scores of reports, named in one
table (``exam_measures``); trec_eval's own measures live in :mod:`exam_eval.trec_eval`
(its registry, ``trec_eval.registry``). Uses io (and the prompt registry for scales); imported by
stats, verify, api and the commands."""
