"""Meta-evaluation statistics: leaderboard correlation, agreement with human labels,
and confidence intervals (empirical bootstrap, PPI, CRC) that combine a few human
labels with many LLM labels."""
