"""Readers and writers for every file the suite touches (TREC runs/qrels, topics,
passages, banks, grades, leaderboards). All readers accept a path, ``-`` for stdin,
and transparently decompress ``.gz``. ``unfinished``, ``openers`` and ``outputs`` sit below
trec_eval; the rest stands on errors, trec_eval and grading's types, parsers and prompts
(docs/architecture.md), and every package above may import it."""
