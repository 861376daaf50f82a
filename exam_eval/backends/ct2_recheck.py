"""Close calls regraded in float32: int8's speed with float32's grades.

int8 changes a grade only where the two most likely labels are nearly tied: on the
random flan-t5-base of ``make bench`` the 33 of 600 pairs whose int8 grade differs from
float32's all have a top-two probability margin below 0.99 under int8, while 83% of all
pairs are above it (bench/README.md). So a CTranslate2 engine running a quantized compute
type scores every batch in that type, then scores again in float32 the pairs whose margin
is below ``--recheck-margin`` and keeps float32's probabilities for them. Generation has
no margin to read and is not rechecked.

The margin is part of the grader's identity (``engine`` ``ctranslate2/int8+float32@0.99``,
the cache key), so grades with and without rechecks never mix.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import UsageError

#: Chosen on one seeded 600-pair pool and random model, checked on another (bench/README.md).
DEFAULT_MARGIN = 0.99
#: The compute types rechecked by default: the int8 ones, whose grades measurably differ.
RECHECKED_BY_DEFAULT = ("int8", "int8_float32", "int8_float16", "int8_bfloat16")
RECHECK_TYPE = "float32"


def recheck_margin(compute_type: str, margin: float | None) -> float:
    """The margin in effect: the default for int8 compute types, 0 (off) otherwise."""
    if margin is None:
        return DEFAULT_MARGIN if compute_type in RECHECKED_BY_DEFAULT else 0.0
    margin = float(margin)
    if not 0.0 <= margin <= 1.0:
        raise UsageError(f"--recheck-margin {margin:g}: give a label-probability margin from 0 (off) to 1")
    if margin and compute_type == RECHECK_TYPE:
        raise UsageError("--recheck-margin: --compute-type float32 grades are what a recheck would give")
    return margin


def top_two_margin(probs: dict[str, float]) -> float:
    """p(most likely label) - p(second), over the normalised label probabilities."""
    values = sorted(probs.values(), reverse=True)
    return values[0] - (values[1] if len(values) > 1 else 0.0)


class RecheckMixin:
    """Scoring with float32 rechecks, for a CTranslate2 back end (a mixin before it).

    The back end provides ``_score_on(model, requests, labels)`` (label probabilities from
    one loaded CTranslate2 model) and ``_open(compute_type)`` (that model, converted on
    first use); it sets ``compute_type`` and calls :meth:`init_recheck` in ``__init__``
    and :meth:`load_recheck` in ``load``.
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
        probs = self._score_on(self.model, requests, labels)
        if not self.margin:
            return probs
        close = [i for i, p in enumerate(probs) if p is not None and top_two_margin(p) < self.margin]
        if close:
            again = self._score_on(self.recheck_model, [requests[i] for i in close], labels)
            for i, p in zip(close, again):
                probs[i] = p
        self.scored_pairs += len(probs)
        self.rechecked_pairs += len(close)
        return probs

    def run_note(self) -> str | None:
        """The line the command prints after its summary."""
        if not self.margin or not self.scored_pairs:
            return None
        share = self.rechecked_pairs / self.scored_pairs
        return (f"{self.rechecked_pairs} of {self.scored_pairs} scored model calls ({share:.1%}) were close calls in "
                f"{self.compute_type} (label margin < {self.margin:g}) and regraded in {RECHECK_TYPE}")

    def close_recheck(self) -> None:
        self.recheck_model = None
