"""exam_eval: evaluate retrieval and generation systems by answerability.

Light on purpose: importing the package (or any exam-qrels / exam-cover code path)
must never pull in torch or transformers. Layers, lowest first (docs/architecture.md,
checked by tests/architecture/test_layers.py): errors/progress, io, grading, backends and measures,
stats, genq and verify, then api and commands; a module imports only from below.
"""

__version__ = "0.1.0"
