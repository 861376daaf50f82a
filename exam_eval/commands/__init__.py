"""One thin module per command; shared plumbing lives in ``_base``."""
