"""The Prompt type and the prompt registry.

A prompt is data: the published text (``template``, optional ``system``), how a grade is
read from the model (``mode`` "score" = next-token probabilities of ``labels``; "generate"
= parse the generated text) and the scale. Adding a prompt family is one module under
``exam_eval.grading.prompts`` that calls :func:`register`, plus one import line in the
package ``__init__``.

Placeholders are ``{query}``, ``{question}``, ``{nugget}``, ``{item}`` (question and
nugget are both filled with the bank item's text), ``{context}`` (the passage),
``{answer}`` (an extracted answer, for answer verification) and ``{correct_answer}`` (the
answer key, for answer verification). They are substituted in ONE regex pass, never with
``str.format``: a passage that itself contains ``{question}`` or a brace is inserted
literally and not expanded again, and literal braces in the published text are kept.

Score mode convention: ``labels[i]`` stands for grade ``scale[0] + i`` (so
``labels=("No", "Yes")`` with ``scale=(0, 1)`` reads "Yes" as 1). A back end that scores
takes the argmax over the labels' next-token probabilities; ``label_grades()`` gives the
mapping. Back ends that cannot score generate text and call ``parse``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass, field

from exam_eval.errors import UsageError
from exam_eval.grading.parsing import PARSERS, RATING_RULES
from exam_eval.grading.types import Parsed

PLACEHOLDER = re.compile(r"\{(query|question|nugget|item|context|answer|correct_answer)\}")
TARGETS = ("question", "nugget", "direct")
MODES = ("score", "generate")


@dataclass(frozen=True)
class Prompt:
    id: str
    source: str
    target: str  # "question" | "nugget" | "direct"
    mode: str  # "score" | "generate"
    labels: tuple[str, ...]
    scale: tuple[int, int]
    template: str
    system: str | None = None
    needs_verification: bool = False
    # Name of the output parser in exam_eval.grading.parsing.PARSERS.
    parser: str = "rating"
    # How system, few-shot turns and user text become one string for seq2seq models.
    joiner: str = "\n"
    # Few-shot examples given as separate chat turns ((user, assistant), ...); fixed text.
    # The published prompts write their examples inline in the template and leave this empty.
    shots: tuple[tuple[str, str], ...] = ()
    description: str = ""
    # Decoding settings the prompt was published with, e.g. UMBRELA's temperature 0,
    # top_p 1, frequency_penalty 0.5, presence_penalty 0 (OpenAI parameter names); back
    # ends that can apply them do so when they generate (see the man page of exam-grade).
    decoding: tuple[tuple[str, float], ...] = ()
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        if self.target not in TARGETS:
            raise ValueError(f"prompt {self.id}: target must be one of {TARGETS}")
        if self.mode not in MODES:
            raise ValueError(f"prompt {self.id}: mode must be one of {MODES}")
        if self.mode == "score" and not self.labels:
            raise ValueError(f"prompt {self.id}: score mode needs labels")
        if self.labels and len(self.labels) != self.scale[1] - self.scale[0] + 1:
            raise ValueError(f"prompt {self.id}: one label per grade of the scale is needed")

    # -- rendering ---------------------------------------------------------------------
    @staticmethod
    def _values(query, item, context, answer, correct_answer) -> dict[str, str]:
        item_text = "" if item is None else item
        return {
            "query": query,
            "question": item_text,
            "nugget": item_text,
            "item": item_text,
            "context": context,
            "answer": "" if answer is None else answer,
            "correct_answer": "" if correct_answer is None else correct_answer,
        }

    @staticmethod
    def _fill(text: str, values: dict[str, str]) -> str:
        return PLACEHOLDER.sub(lambda m: values[m.group(1)], text)

    def _parts(self, query, item, context, answer, correct_answer):
        values = self._values(query, item, context, answer, correct_answer)
        system = None if self.system is None else self._fill(self.system, values)
        return system, self._fill(self.template, values)

    def render(self, *, query: str, item: str | None, context: str, answer: str | None = None,
               correct_answer: str | None = None) -> str:
        """One string for seq2seq/completion models: system, few-shot turns, user."""
        system, user = self._parts(query, item, context, answer, correct_answer)
        parts = [] if system is None else [system]
        for shot_user, shot_assistant in self.shots:
            parts += [shot_user, shot_assistant]
        parts.append(user)
        return self.joiner.join(parts)

    def overhead(self, query: str, item: str | None, answer: str | None = None,
                 correct_answer: str | None = None) -> str:
        """The rendered prompt without the passage: what truncation must leave room for."""
        return self.render(query=query, item=item, context="", answer=answer, correct_answer=correct_answer)

    def messages(self, *, query: str, item: str | None, context: str, answer: str | None = None,
                 correct_answer: str | None = None) -> list[dict]:
        """Chat form: optional system message, few-shot turns, then the user turn."""
        system, user = self._parts(query, item, context, answer, correct_answer)
        out: list[dict] = [] if system is None else [{"role": "system", "content": system}]
        for shot_user, shot_assistant in self.shots:
            out.append({"role": "user", "content": shot_user})
            out.append({"role": "assistant", "content": shot_assistant})
        out.append({"role": "user", "content": user})
        return out

    def label_grades(self) -> dict[str, int]:
        """Score mode: which grade each label stands for (``labels[i]`` -> ``scale[0] + i``)."""
        return {label: self.scale[0] + i for i, label in enumerate(self.labels)}

    def variant(self, *, generate: bool = False, rule: str = "strict") -> "Prompt":
        """This prompt read another way: ``generate`` a rating prompt's answer and parse it
        (the workbench's way with local models) instead of scoring the labels; read the
        answer with another ``rule`` (exam_eval.grading.parsing.RATING_RULES). The id
        says how (``question-selfrating/generate/workbench``), and the hash differs, so
        grades and cache entries of the variants never stand in for each other."""
        import dataclasses

        if not generate and rule == "strict":
            return self
        if self.parser != "rating" or self.target not in ("question", "nugget"):
            raise UsageError(f"prompt {self.id!r} is not a self-rating prompt of bank items: "
                             "--generate-ratings and --rating-rule apply to question-selfrating, nugget-selfrating "
                             "and rating prompt files")
        if rule not in RATING_RULES:
            raise UsageError(f"unknown rating rule {rule!r}; choose one of {', '.join(RATING_RULES)}")
        suffix = ("/generate" if generate else "") + ("" if rule == "strict" else f"/{rule}")
        return dataclasses.replace(self, id=self.id + suffix, mode="generate" if generate else self.mode,
                                   parser=RATING_RULES[rule])

    # -- reading the model's output ------------------------------------------------------
    def parse(self, text: str) -> Parsed:
        return PARSERS[self.parser](self, text)

    @functools.cached_property
    def hash(self) -> str:
        """Stable over what changes a grade: the texts, labels, scale, mode and parser.
        Computed once a prompt (it is frozen; a changed copy is made by
        ``dataclasses.replace``, which computes its own): every pair's cache key, resume
        key and grade line carry it, and serialising the prompt each time cost about 10 us
        a pair."""
        fields = {
            "template": self.template,
            "system": self.system,
            "shots": [list(s) for s in self.shots],
            "joiner": self.joiner,
            "labels": list(self.labels),
            "scale": list(self.scale),
            "mode": self.mode,
            "parser": self.parser,
        }
        if self.decoding:  # only when set, so the other prompts keep their hashes (and caches)
            fields["decoding"] = [list(kv) for kv in self.decoding]
        payload = json.dumps(fields, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]

    @property
    def placeholders(self) -> set[str]:
        texts = [self.template, self.system or ""] + [t for shot in self.shots for t in shot]
        return {m.group(1) for t in texts for m in PLACEHOLDER.finditer(t)}


# How every 0-5 self-rating prompt (EXAM++, the workbench) is read: the digit the model
# ranks highest, 0 worst to 5 best; generated text goes through the rating parser.
SELF_RATING = dict(mode="score", labels=("0", "1", "2", "3", "4", "5"), scale=(0, 5), parser="rating")

REGISTRY: dict[str, Prompt] = {}


def register(prompt: Prompt) -> Prompt:
    if prompt.id in REGISTRY and REGISTRY[prompt.id] != prompt and not prompt.id.startswith("file:"):
        raise ValueError(f"prompt id {prompt.id!r} registered twice")
    REGISTRY[prompt.id] = prompt
    return prompt
