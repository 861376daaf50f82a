"""Measures: trec_eval-identical ones (registry in ``registry``; values per query from
pytrec_eval, aggregation and output bytes ours), EXAM-Qrels labels and EXAM-Cover."""
