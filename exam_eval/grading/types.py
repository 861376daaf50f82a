"""The data every grader shares: what is asked of a back end, what it answers, and
what a parser reads. A leaf of exam_eval.grading: the engine, the cache, the parsers,
the prompts and every back end import these types from here, never from each other.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple, Protocol, Sequence

from ..io.judge_detail import NO_DETAIL, JudgeDetail

if TYPE_CHECKING:  # pragma: no cover
    from .prompts.base import Prompt


@dataclass(frozen=True)
class Parsed:
    grade: int | None  # None when unparseable (parse_ok False) or pending verification
    parse_ok: bool
    answer: str | None  # extracted answer text for extraction prompts, else None
    note: str = ""  # e.g. "unanswerable", "no rating found"


@dataclass(frozen=True)
class GradeRequest:
    prompt: "Prompt"
    query: str
    item_text: str | None  # None for direct relevance prompts
    context: str  # the passage
    answer_keys: tuple[str, ...] | None = None
    # for the answer-verification prompt: the extracted answer and the key it is checked against
    answer: str | None = None
    correct_answer: str | None = None

    def texts(self, context: str) -> dict:
        return dict(query=self.query, item=self.item_text, context=context, answer=self.answer,
                    correct_answer=self.correct_answer)


class GradeResult(NamedTuple):
    answer: str | None  # raw model output (or the label read in scoring mode)
    grade: int | None  # None exactly when parse_ok is False
    probs: dict[str, float] | None  # normalised over the prompt's labels, when scored
    parse_ok: bool
    # the model call itself failed (an endpoint error after all retries): nothing to
    # record; the engine neither writes nor caches it, so a rerun tries again
    failed: bool = False
    # what the answer says about its judge besides the grade (label mass, fallback,
    # reasoning, served model): one record with the grade line and the cache
    detail: JudgeDetail = NO_DETAIL

    def with_detail(self, **values) -> "GradeResult":
        """The same answer with these JudgeDetail fields set."""
        # built, not dataclasses.replace'd, in the common case: replace reads the fields'
        # list on every call, and this runs once per graded pair
        detail = JudgeDetail(**values) if self.detail is NO_DETAIL else replace(self.detail, **values)
        return self._replace(detail=detail)


FAILED = GradeResult(None, None, None, False, True)
#: JudgeDetail.fallback of an answer whose judge never finished reasoning
CUT_OFF_REASONING = "cut off while reasoning"


class LabelWeights(dict):
    """A scoring back end's label weights (label -> weight, any positive scale), with what
    the judge did besides: ``mass``, the share of the first token's probability on the
    labels (None where unknown), and ``top_is_label``, whether the judge's most probable
    first token is a label at all (None where unknown). A grade read from label weights
    measures the judge only where both say it was about to write a label."""

    mass: float | None = None
    top_is_label: bool | None = None

    @classmethod
    def of(cls, weights: dict, mass: float | None, top_is_label: bool | None) -> "LabelWeights":
        out = cls(weights)
        out.mass = mass
        out.top_is_label = top_is_label
        return out


class Generated(str):
    """A generated answer with what came beside it: the server's separate reasoning field
    and whether the answer was cut off at the token limit."""

    reasoning: str | None = None
    cut_off: bool = False
    served_model: str | None = None

    @classmethod
    def of(cls, text: str, reasoning: str | None = None, cut_off: bool = False,
           served_model: str | None = None) -> "Generated":
        out = cls(text)
        out.reasoning, out.cut_off, out.served_model = reasoning, cut_off, served_model
        return out


class Grader(Protocol):
    """What the engine needs from a back end (exam_eval.backends.base.Backend is one)."""

    name: str
    model_id: str
    batch_size: int
    engine: str | None

    @property
    def cache_identity(self) -> str: ...

    def grade(self, requests: Sequence[GradeRequest]) -> list[GradeResult]: ...


def padded_width(longest: int, multiple: int = 1) -> int:
    """A batch's width in tokens: its longest prompt rounded up to a multiple of
    ``multiple`` (a back end's ``pad_multiple``; the engine counts the same width against
    a token budget)."""
    return -(-longest // multiple) * multiple


class InterruptedBatch(KeyboardInterrupt):
    """An interrupt while a batch of requests was out, carrying what the batch got before
    it: ``results`` has one entry per request, in order; where no answer came, None (the
    HTTP client's) or FAILED (a back end's ``grade``: the engine writes the answered ones,
    and a rerun asks the rest again). Still a KeyboardInterrupt, so code that does not
    look for it stops as it always did."""

    #: the units ``results`` belong to, set by the engine (grading.fitting) on its way out
    units: list | None = None

    def __init__(self, results: list):
        super().__init__()
        self.results = results


#: the error of a request taken down for a batch file instead of being sent
#: (exam_eval.backends.batch_files): not answered yet, answered in a later round
NOT_SENT = "written to a batch file, not sent"
#: the error of a re-ask that no results file answers where no new requests are written:
#: the last answer stands (unparsed), as after the last of the live re-asks
NOT_ASKED_AGAIN = "not asked again: no --batch-out"
#: the error of a request that the batch results files do not answer: nothing was called
NO_ANSWER = "no answer in the results files"
