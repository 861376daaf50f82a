"""Readers and writers for every file the suite touches (TREC runs/qrels, topics,
passages, banks, grades, leaderboards). All readers accept a path, ``-`` for stdin,
and transparently decompress ``.gz``. The lowest layer after errors: io imports
nothing else of exam_eval, and every other package may import it."""
