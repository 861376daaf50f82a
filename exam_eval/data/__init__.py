"""Package data (the English stopword list); no code, imports nothing."""
