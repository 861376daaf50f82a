"""Readers and writers for every file the suite touches (TREC runs/qrels, topics,
passages, banks, grades, leaderboards). All readers accept a path, ``-`` for stdin,
and transparently decompress ``.gz``."""
