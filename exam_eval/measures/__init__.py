"""Measures: trec_eval-identical ones (registry in ``registry``; values per query from
pytrec_eval, aggregation and output bytes ours), EXAM-Qrels labels, EXAM-Cover and the
nugget scores of reports. Uses io (and the prompt registry for scales); imported by
stats, verify, api and the commands."""
