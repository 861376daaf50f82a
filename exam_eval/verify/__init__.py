"""Phase-3 oversight (workbench paper, sections 3.3 and 4.4): analyses that let a human
check the grader and fix the bank instead of judging passages.

- ``item_grades``: (exam-verify grading) per bank item, its graded passages by grade,
  with the grader's answers.
- ``spurious``:  items reaching grade >= tau on many passages judged non-relevant.
- ``uncovered``: passages judged relevant that no item grades >= tau.
- ``grid``:      passages x items with grades (TSV or HTML).
- ``report``:    one self-contained HTML page with all of it plus the leaderboards.

Uses io, measures and stats; imported only by exam-verify (and exam-correlate's plot).
"""
