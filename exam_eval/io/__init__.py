"""Readers and writers for every file the suite touches (TREC runs/qrels, topics,
passages, banks, grades, leaderboards). All readers accept a path, ``-`` for stdin,
and transparently decompress ``.gz``. The bottom layer: io imports nothing of exam_eval
but errors (``unfinished``, ``openers`` and ``outputs`` below the rest of it), and every
package above may import it (docs/architecture.md). What trec_eval and grading share with
it lives here: the label bound and ranking order (``trec_rules``), the judge's detail of a
grade (``judge_detail``); a grades file's lines are read here, held to the published
prompts' scales by exam_eval.grading.grade_files."""
