"""exam_eval: evaluate retrieval and generation systems by answerability.

Light on purpose: importing the package (or any exam-qrels / exam-cover code path)
must never pull in torch or transformers.
"""

__version__ = "0.1.0"
