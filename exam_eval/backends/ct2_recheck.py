"""Close calls regraded in float32: int8's speed with float32's grades.

int8 changes a grade only where the two best labels are nearly tied. How near is "near"
depends on the model, because int8's error in a logit grows with the size of the logits:
a random T5 has logits with a standard deviation of about 28 over the vocabulary and
int8 flips label pairs up to 4.7 logits apart; a trained SmolLM2 has about 3.3 and int8
flips pairs up to 2.1 apart. So closeness is measured in the logits' own scale: the gap
between the two largest label logits divided by the standard deviation of the logits
over the whole vocabulary (both from the same decoding step). A CTranslate2 engine
running a quantized compute type scores every batch in that type, then scores again in
float32 the pairs whose gap is below ``--recheck-margin`` standard deviations and keeps
float32's probabilities for them. Generation has no label logits and is not rechecked.

(A margin in label probability cannot serve every model: on the random T5, int8's
flips all had an int8 probability margin below 0.99, but SmolLM2's grades are so much
less certain that every one of its pairs is below 0.99; bench/README.md.)

The margin is part of the grader's identity (``engine`` ``ctranslate2/int8+float32@0.2``,
the cache key), so grades with and without rechecks never mix.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

from ..errors import UsageError
from ..grading.types import LabelWeights

#: In standard deviations of the vocabulary logits (bench/README.md: chosen on one seeded
#: pool and random model, checked on other pools, random models and SmolLM2).
DEFAULT_MARGIN = 0.2
#: The compute types rechecked by default: the int8 ones, whose grades measurably differ.
RECHECKED_BY_DEFAULT = ("int8", "int8_float32", "int8_float16", "int8_bfloat16")
RECHECK_TYPE = "float32"


class LabelScore(NamedTuple):
    """One pair's label probabilities, and how close its call was."""

    probs: dict[str, float]
    #: the gap between the two largest label logits, in standard deviations of the logits
    #: over the vocabulary at that step (inf when it cannot be measured)
    gap: float


def label_score(logits, labels: Sequence[str], ids: Sequence[int]) -> LabelScore:
    """The softmax over the labels' logits (p(label) / sum p(labels), as the torch engines
    compute it, in float64 here), and the gap of the two best labels in the logits' scale."""
    import numpy as np

    vocab = np.asarray(logits, dtype=np.float64)
    x = vocab[list(ids)]
    w = np.exp(x - x.max())
    top = np.sort(x)[::-1]
    spread = vocab.std()
    gap = float((top[0] - top[1]) / spread) if len(top) > 1 and spread > 0 else float("inf")
    # the labels' share of the whole distribution, and whether the top token is a label
    # (exam_eval.backends.base.label_mass_fallback): log-sum-exp over the labels less that
    # over the vocabulary
    peak = vocab.max()
    mass = float(np.exp(np.log(w.sum()) + x.max() - peak - np.log(np.exp(vocab - peak).sum())))
    weights = LabelWeights.of(dict(zip(labels, (w / w.sum()).tolist())), mass, bool(top[0] >= peak))
    return LabelScore(weights, gap)


def recheck_margin(compute_type: str, margin: float | None) -> float:
    """The margin in effect: the default for int8 compute types, 0 (off) otherwise."""
    if margin is None:
        return DEFAULT_MARGIN if compute_type in RECHECKED_BY_DEFAULT else 0.0
    margin = float(margin)
    if not margin >= 0.0 or margin == float("inf"):
        raise UsageError(f"--recheck-margin {margin:g}: give a gap in standard deviations, 0 (off) or more")
    if margin and compute_type == RECHECK_TYPE:
        raise UsageError("--recheck-margin: --compute-type float32 grades are what a recheck would give")
    return margin


class RecheckMixin:
    """Scoring with float32 rechecks, for a CTranslate2 back end (a mixin before it).

    The back end provides ``_score_on(model, requests, labels)`` (a :class:`LabelScore` per
    request from one loaded CTranslate2 model) and ``_open(compute_type)`` (that model,
    converted on first use); it sets ``compute_type`` and calls :meth:`init_recheck` in
    ``__init__`` and :meth:`load_recheck` in ``load``.
    """

    compute_type: str
    margin: float = 0.0
    recheck_model: Any = None

    def init_recheck(self, margin: float | None) -> None:
        self.margin = recheck_margin(self.compute_type, margin)
        self.recheck_model = None
        self.scored_pairs = 0
        self.rechecked_pairs = 0

    def load_recheck(self) -> None:
        # loaded with the main model, so a failed float32 conversion stops the run
        # before any grading rather than at the first close call
        if self.margin and self.recheck_model is None:
            self.recheck_model = self._open(RECHECK_TYPE)

    @property
    def recheck_suffix(self) -> str:
        return f"+{RECHECK_TYPE}@{self.margin:g}" if self.margin else ""

    def _score(self, requests: Sequence, labels: tuple[str, ...]):
        scores = self._score_on(self.model, requests, labels)
        if self.margin:
            close = [i for i, s in enumerate(scores) if s is not None and s.gap < self.margin]
            if close:
                for i, s in zip(close, self._score_on(self.recheck_model, [requests[i] for i in close], labels)):
                    scores[i] = s
            self.scored_pairs += len(scores)
            self.rechecked_pairs += len(close)
        return [None if s is None else s.probs for s in scores]

    def run_note(self) -> str | None:
        """The line the command prints after its summary."""
        if not self.margin or not self.scored_pairs:
            return None
        share = self.rechecked_pairs / self.scored_pairs
        return (f"{self.rechecked_pairs} of {self.scored_pairs} scored model calls ({share:.1%}) were close calls in "
                f"{self.compute_type} (label logits < {self.margin:g} sd apart) and regraded in {RECHECK_TYPE}")

    def close_recheck(self) -> None:
        self.recheck_model = None
