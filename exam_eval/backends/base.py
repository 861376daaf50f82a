"""The back-end interface.

A back end grades a batch of :class:`GradeRequest` (prompt, query, bank item text or
None for direct prompts, passage text, optional answer keys) and returns one
:class:`GradeResult` ``(answer, grade, probs, parse_ok)`` per request, in order.

Two kinds of back ends implement it:

- LLM back ends subclass :class:`PromptBackend` and implement only ``_score`` (next-token
  probabilities of the prompt's labels, one forward pass) and/or ``_generate`` (text).
  Rendering, truncating the passage to the model window, parsing and answer-key checks
  live here, once, for all of them.
- Non-prompt graders (the embedding-similarity baseline) subclass :class:`Backend` and
  implement ``grade`` directly; they ignore the prompt's text but must still return
  grades on the prompt's scale.

The registry (:mod:`exam_eval.backends.registry`, the ``score`` role) maps a name to
``"module:Class"`` so that listing back ends or resolving ``--backend`` never imports
torch; adding a back end is one module plus one line there, and
:func:`exam_eval.backends.factory.make_client` makes it.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

from ..errors import UsageError
from ..grading.answer_check import matches
from ..grading.reasoning import join_reasoning
from ..grading.types import CUT_OFF_REASONING, FAILED, GradeRequest, GradeResult
from ..io.judge_detail import JudgeDetail

if TYPE_CHECKING:  # pragma: no cover
    from ..grading.prompts.base import Prompt
    from ..grading.types import Parsed


def flag_option(name: str, value) -> bool:
    """An -O value that is a switch: true/false (1/0, yes/no, on/off); anything else, a typo
    such as "ture", is a usage error, not a silent false."""
    if isinstance(value, bool):
        return value
    low = str(value).strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"-O {name}= must be true or false, got {value!r}")


class Backend(ABC):
    """What the engine needs from any grader."""

    name: ClassVar[str] = ""
    #: True when the back end can read label probabilities (scoring mode).
    can_score: ClassVar[bool] = False
    #: How many requests the engine should hand over at once.
    batch_size: int = 8
    #: What computes the grades when one back end has several engines (recorded in every
    #: grade line; None: the back end has one way only)
    engine: str | None = None

    #: Prompt that checks an extracted answer against the key (``--verify llm``); None:
    #: lexical matching (answer_check.matches) as in the EXAM paper.
    verifier: "Prompt | None" = None
    #: The model that answers ``verifier`` (``--verifier-model``); None: this back end itself.
    verifier_backend: "Backend | None" = None
    #: Whether the back end can hand extracted answers to ``verifier`` at all.
    can_verify: ClassVar[bool] = False

    def __init__(self, model: str | None = None, **_ignored: Any):
        self.model_id = model or ""

    # -- what the engine and the cache see --------------------------------------------
    @property
    def cache_identity(self) -> str:
        """Everything besides the prompt that changes a grade (model, decoding options,
        the answer verifier and its model).

        The cache keys on this, so grades from beam search and greedy decoding, or from
        scoring and generation, never stand in for each other.
        """
        return f"{self.name}:{self.model_id}" + self.verify_identity()

    def verify_identity(self) -> str:
        if self.verifier is None:
            return ""
        by = "" if self.verifier_backend is None else f"@{self.verifier_backend.cache_identity}"
        return f"+verify={self.verifier.hash}{by}"

    @property
    def context_window(self) -> int | None:
        """Input tokens the model accepts (None: no limit the engine must respect)."""
        return None

    #: the server the cache takes grades from for this back end ("" for a local model:
    #: its files are part of cache_identity); see grading.cache.ServerCache
    cache_server: str = ""

    def count_tokens(self, text: str) -> int:
        """Token count used for truncation and length-sorted batching.

        The fallback (about 4 characters per token, as for English BPE vocabularies) is
        only used by back ends without a tokenizer of their own.
        """
        return max(1, math.ceil(len(text) / 4)) if text else 0

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        if self.count_tokens(text) <= max_tokens:
            return text
        return text[: max_tokens * 4]

    @abstractmethod
    def grade(self, requests: Sequence[GradeRequest]) -> list[GradeResult]:
        """One result per request, in order. Must not raise for an unparseable output."""

    #: True when :meth:`submit` returns before the work is done (a GPU computing on its
    #: own): the engine then submits the next batch before collecting this one
    overlaps: bool = False

    def submit(self, requests: Sequence[GradeRequest]) -> Callable[[], list[GradeResult]]:
        """Start grading ``requests``; the call returned waits for them and gives
        :meth:`grade`'s results. Here: graded at once."""
        results = self.grade(requests)
        return lambda: results

    def check_prompt(self, prompt: "Prompt") -> None:
        """Raise UsageError when this back end cannot grade with ``prompt``."""

    def load(self) -> None:
        """Load weights / open connections. Called once, after all inputs are validated."""

    def close(self) -> None:
        """Release resources (connections, GPU memory)."""

    def run_note(self) -> str | None:
        """What the command should say about this run besides its summary (None: nothing)."""
        return None

    def usage_line(self) -> str | None:
        """The tokens a server reported for this run (None: no server was asked)."""
        return None


#: A scored grade stands where the judge put at least this share of its first token's
#: probability on the prompt's labels and its most probable first token is a label;
#: elsewhere the answer is generated and read as generate mode reads it (man exam-grade,
#: JUDGES). Measured: FLAN-T5 puts nearly all of it there, a chat model answering "- 5:
#: ..." almost none (bench/servers/README.md).
DEFAULT_MIN_LABEL_MASS = 0.5


def label_mass_fallback(weights, min_mass: float) -> str | None:
    """Why the label weights of one answer do not measure the judge (None: they do)."""
    if min_mass <= 0 or weights is None:
        return None
    mass = getattr(weights, "mass", None)
    if mass is not None and not mass >= min_mass:
        return f"label mass below {min_mass:g}"
    if getattr(weights, "top_is_label", None) is False:
        return "first token not a label"
    return None


class PromptBackend(Backend):
    """Shared logic of LLM back ends: render, truncate, score or generate, parse."""

    can_verify = True
    #: see DEFAULT_MIN_LABEL_MASS; 0 reads the labels' probabilities whatever the judge wrote
    min_label_mass: float = DEFAULT_MIN_LABEL_MASS
    #: whether scored weights carry the label mass (a scripted back end's do not)
    reports_label_mass: bool = True

    @property
    def cache_identity(self) -> str:
        # a grade scored under another threshold may have been read from the text here
        rule = f":min_label_mass={self.min_label_mass:g}" if self.min_label_mass != DEFAULT_MIN_LABEL_MASS else ""
        return super().cache_identity + rule

    #: Tokens kept free for the answer (generation) and template special tokens.
    reserve_tokens: int = 8
    max_new_tokens: int = 64

    def uses_scoring(self, prompt: "Prompt") -> bool:
        return prompt.mode == "score" and self.can_score

    def will_score(self, prompt: "Prompt") -> bool:
        """:meth:`uses_scoring` as it will be once the model is loaded, asked before
        (options are checked before any model loads): a local model's tokenizer decides
        only then, and scores every label set it can read as single tokens."""
        return self.uses_scoring(prompt)

    # -- hooks a back end implements ------------------------------------------------------
    def _score(self, requests: Sequence[GradeRequest], labels: tuple[str, ...]) -> list[dict[str, float] | None]:
        """Unnormalised probabilities (any positive weights) of each label as next token.

        None for a request means the call failed (retried by a rerun); weights that are
        all zero or not finite are recorded as parse_ok false, never turned into a grade.
        """
        raise NotImplementedError

    def _score_async(self, requests: Sequence[GradeRequest],
                     labels: tuple[str, ...]) -> Callable[[], list[dict[str, float] | None]]:
        """:meth:`_score` started: the call returned waits for its weights. A back end
        whose device computes on its own launches the work here and reads it back there."""
        weights = self._score(requests, labels)
        return lambda: weights

    @abstractmethod
    def _generate(self, requests: Sequence[GradeRequest], max_new_tokens: int) -> list[str | None]:
        """Generated text per request, None when the model call failed."""

    # -- shared machinery ------------------------------------------------------------------

    def overhead_tokens(self, req: GradeRequest) -> int:
        return self.count_tokens(req.prompt.overhead(req.query, req.item_text, req.answer, req.correct_answer))

    def fit_context(self, req: GradeRequest) -> str:
        """The passage, cut so that instructions, question and passage fit the window.

        Only the passage is shortened: a truncated question would be graded as a
        different question.
        """
        window = self.context_window
        if window is None or not req.context:
            return req.context
        return self.truncate(req.context, window - self.overhead_tokens(req) - self.reserve_tokens)

    def render(self, req: GradeRequest) -> str:
        return req.prompt.render(**req.texts(self.fit_context(req)))

    def messages(self, req: GradeRequest) -> list[dict]:
        return req.prompt.messages(**req.texts(self.fit_context(req)))

    def grade(self, requests: Sequence[GradeRequest]) -> list[GradeResult]:
        return self.submit(requests)()

    def submit(self, requests: Sequence[GradeRequest]) -> Callable[[], list[GradeResult]]:
        """Scoring is started (:meth:`_score_async`) and read back by the call returned;
        generation and answer verification are done here, at once."""
        results: list[GradeResult | None] = [None] * len(requests)
        score_idx: dict[tuple[str, ...], list[int]] = {}
        gen_idx: list[int] = []
        for i, req in enumerate(requests):
            if self.uses_scoring(req.prompt):
                score_idx.setdefault(tuple(req.prompt.labels), []).append(i)
            else:
                gen_idx.append(i)
        started = [(labels, idx, self._score_async([requests[i] for i in idx], labels))
                   for labels, idx in score_idx.items()]
        if gen_idx:
            texts = self._generate([requests[i] for i in gen_idx], self.max_new_tokens)
            pending: list[tuple[int, str]] = []
            for i, text in zip(gen_idx, texts):
                req = requests[i]
                if text is not None and self.verifier is not None and req.answer_keys:
                    answer = answer_of(text)
                    parsed = req.prompt.parse(answer) if answer is not None else None
                    if parsed is not None and parsed.parse_ok and parsed.grade is None and parsed.answer:
                        pending.append((i, answer))
                        continue
                results[i] = self.interpret(req, text)
            if pending:
                for (i, _text), res in zip(pending, self.verify([requests[i] for i, _ in pending],
                                                               [t for _, t in pending])):
                    results[i] = res

        def collect() -> list[GradeResult]:
            grades: dict[int, dict[str, int]] = {}  # per prompt object: one table a batch, not one a pair
            unsure: list[tuple[int, str, float | None]] = []
            for labels, idx, weights in started:
                for i, w in zip(idx, weights()):
                    prompt = requests[i].prompt
                    table = grades.get(id(prompt))
                    if table is None:
                        table = grades[id(prompt)] = prompt_label_grades(prompt)
                    mass = getattr(w, "mass", None)
                    why = label_mass_fallback(w, self.min_label_mass)
                    if why is not None:
                        unsure.append((i, why, mass))
                        continue
                    res = scored_result(prompt, labels, w, table)
                    results[i] = res.with_detail(label_mass=mass) if mass is not None and not res.failed else res
            if unsure:
                self.read_from_text(requests, results, unsure)
            return results  # type: ignore[return-value]

        return collect

    def read_from_text(self, requests: Sequence[GradeRequest], results: list,
                       unsure: list[tuple[int, str, float | None]]) -> None:
        """Scored answers whose label weights do not measure the judge: generated and read
        as generate mode reads them (``unsure``: index, reason, label mass)."""
        texts = self._generate([requests[i] for i, _, _ in unsure], self.max_new_tokens)
        for (i, why, mass), text in zip(unsure, texts):
            res = self.interpret(requests[i], text)
            results[i] = res if res.failed else res.with_detail(label_mass=mass, fallback=res.detail.fallback or why)

    def verify(self, requests: Sequence[GradeRequest], texts: Sequence[str]) -> list[GradeResult]:
        """EXAM++'s LLM answer verification, by this model or by ``verifier_backend``."""
        assert self.verifier is not None
        answers = [req.prompt.parse(text).answer for req, text in zip(requests, texts)]
        return llm_verify(self.verifier_backend or self, self.verifier, requests, answers, texts)

    def interpret(self, req: GradeRequest, text: str | None) -> GradeResult:
        """Parse generated text (the answer after any reasoning: exam_eval.grading.reasoning);
        apply the answer key when the bank has one."""
        if text is None:
            return FAILED

        said = join_reasoning(getattr(text, "reasoning", None), str(text), bool(getattr(text, "cut_off", False)))
        served = getattr(text, "served_model", None)
        if said.unfinished:
            return GradeResult(said.answer or "", None, None, False, detail=JudgeDetail(
                fallback=CUT_OFF_REASONING, reasoning=said.reasoning, served_model=served))
        # without reasoning the answer is the text as it came, byte for byte
        answer = str(text) if said.reasoning is None else (said.answer or "")
        parsed = req.prompt.parse(answer)
        grade, ok = finish_parsed(req, parsed)
        return GradeResult(answer, grade, None, ok, detail=JudgeDetail(reasoning=said.reasoning, served_model=served))


def answer_of(text: str) -> str | None:
    """A generated text's answer after any reasoning (None: cut off while reasoning)."""
    said = join_reasoning(getattr(text, "reasoning", None), str(text), bool(getattr(text, "cut_off", False)))
    if said.unfinished:
        return None
    return str(text) if said.reasoning is None else (said.answer or "")


def llm_verify(backend: Backend, verifier: "Prompt", requests: Sequence[GradeRequest], answers: Sequence[str | None],
               texts: Sequence[str]) -> list[GradeResult]:
    """EXAM++'s LLM answer verification: an extracted answer is correct (1) when
    ``backend`` says yes to ``verifier`` for any of the request's answer keys, else 0;
    a verdict that cannot be read gives no grade rather than a guess. ``texts``: what
    each result records as the answer."""
    checks: list[GradeRequest] = []
    owner: list[int] = []
    for n, (req, answer) in enumerate(zip(requests, answers)):
        for key in req.answer_keys or ():
            checks.append(GradeRequest(verifier, req.query, req.item_text, "", None, answer, key))
            owner.append(n)
    verdicts = backend.grade(checks) if checks else []
    out = []
    for n, text in enumerate(texts):
        mine = [v for o, v in zip(owner, verdicts) if o == n]
        if any(v.failed for v in mine):
            out.append(FAILED)
        elif any(v.parse_ok and v.grade for v in mine):
            out.append(GradeResult(text, 1, None, True))
        elif mine and all(v.parse_ok for v in mine):
            out.append(GradeResult(text, 0, None, True))
        else:
            out.append(GradeResult(text, None, None, False))
    return out


def prompt_label_grades(prompt: "Prompt") -> dict[str, int]:
    """The grade each label stands for where the prompt says (``Prompt.label_grades``)."""
    return prompt.label_grades() if hasattr(prompt, "label_grades") else {}


def label_grade(prompt: "Prompt", labels: Sequence[str], index: int, grades: dict[str, int] | None = None) -> int:
    """The grade a label stands for, as the prompt defines it (labels[i] -> scale[0] + i).
    ``grades``: the prompt's :func:`prompt_label_grades`, where the caller has them."""
    if grades is None:
        grades = prompt_label_grades(prompt)
    if labels[index] in grades:
        return grades[labels[index]]
    return prompt.scale[0] + index


def scored_result(prompt: "Prompt", labels: Sequence[str], weights: dict[str, float] | None,
                  grades: dict[str, int] | None = None) -> GradeResult:
    """The label weights of one answer as a grade: normalised over the labels (negative
    weights count as 0), the most probable label (the first of equals) and its grade;
    unparsed where a weight is not finite or none is positive. ``grades``: the prompt's
    :func:`prompt_label_grades`, for a caller scoring many answers of one prompt."""
    if weights is None:
        return FAILED
    if not weights:
        return GradeResult(None, None, None, False)
    get = weights.get
    values = [float(get(lab, 0.0)) for lab in labels]
    if not all(map(math.isfinite, values)):
        return GradeResult(None, None, None, False)
    clipped = [v if v > 0.0 else 0.0 for v in values]
    total = sum(clipped)
    if not total > 0 or not math.isfinite(total):
        return GradeResult(None, None, None, False)
    shares = [v / total for v in clipped]
    probs = dict(zip(labels, shares))
    if len(probs) == len(shares):
        best = shares.index(max(shares))
    else:  # a label named twice: its one entry decides at both places
        best = max(range(len(labels)), key=lambda j: (probs[labels[j]], -j))
    return GradeResult(labels[best], label_grade(prompt, labels, best, grades), probs, True)


def finish_parsed(req: GradeRequest, parsed: "Parsed") -> tuple[int | None, bool]:
    """(grade, parse_ok) after the answer-key check of extraction prompts.

    An extraction prompt's parser returns the extracted answer with ``grade`` None when
    only an answer key can decide; with keys the grade is 1 (match) or 0, without keys
    the answer counts as given (1) unless the parser already said unanswerable (0).
    """
    if not parsed.parse_ok:
        return None, False
    if parsed.grade is not None and not (req.answer_keys and parsed.answer is not None):
        return parsed.grade, True
    if parsed.answer is None:
        return parsed.grade, parsed.grade is not None
    if req.answer_keys:
        if parsed.grade == 0:  # unanswerable expressions stay 0 whatever the key
            return 0, True

        return (1 if matches(parsed.answer, list(req.answer_keys)) else 0), True
    return (parsed.grade if parsed.grade is not None else 1), True
