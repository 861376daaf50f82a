"""Meta-evaluation statistics: leaderboard correlation, agreement with human labels,
and confidence intervals (empirical bootstrap, PPI, CRC) that combine a few human
labels with many LLM labels. Uses io and measures; imported by verify, api and
exam-correlate."""
