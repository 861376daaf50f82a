"""Grading: the shared types (``types``), output parsing, the published prompts, answer
verification, the pool and the engine that grades it once and resumes. Uses only io and
errors; the engine never imports a back end (back ends are handed to it)."""
