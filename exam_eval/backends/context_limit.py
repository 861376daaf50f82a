"""A prompt longer than the model's context, as servers say it.

A small local model (``transformers serve`` of a 512-token model, llama.cpp started with
``--n_ctx 2048``, vLLM with ``--max-model-len``) refuses a prompt that leaves no room for
the answer. Every later prompt of the same shape would be refused too, so the client
sends nothing more after the first such answer (:class:`OpenAIClient`), keeps what was
answered, and the command says in one line how long the prompt was, what the model
takes, and which of its flags shrinks the prompt (:func:`too_long_line`).

What the servers answer (status 400, or 422 for TGI), read from their sources:

- ``transformers serve`` (5.25): ``The prompt has 634 tokens, but the model takes at most
  512, prompt and answer (`--max-model-len`).``
- vLLM, the OpenAI API and llama-cpp-python's server: ``This model's maximum context
  length is 2048 tokens. However, you requested 2100 tokens (1100 in the messages, 1000
  in the completion). ...``, or ``... your request has 1500 input tokens ...``, or
  ``your messages resulted in 9000 tokens``, or ``'max_tokens' or 'max_completion_tokens' is
  too large: 8000. This model's maximum context length is 4096 tokens and your request has
  2778 input tokens (8000 > 4096 - 2778).``; vLLM's V1 engine: ``The decoder prompt
  (length 5000) is longer than the maximum model length of 4096.``; vLLM lists the limit
  as ``max_model_len`` in ``/v1/models`` (read where the text gives none).
- llama.cpp's server: ``{"error": {"type": "exceed_context_size_error", "message": "the
  request exceeds the available context size, try increasing it", "n_prompt_tokens":
  634, "n_ctx": 512}}``.
- TGI: ``Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096.
  Given: 4000 `inputs` tokens and 1000 `max_new_tokens```.

Other texts that name the context (``context length``, ``context window``, ``maximum
model length``, ``context_length_exceeded``) count too, with the sizes unknown.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass

#: the statuses a refused request comes with (TGI answers 422); a 5xx is a server's
#: trouble, retried as such, never read as a size
STATUSES = (400, 413, 422)

_N = r"(\d[\d,]*)"
# (pattern, which group is what): the sizes each server's text gives
_PATTERNS: list[tuple[re.Pattern, dict[str, int]]] = [
    (re.compile(rf"prompt has {_N} tokens, but the model takes at most {_N}", re.I), {"prompt": 1, "limit": 2}),
    (re.compile(rf"maximum context length is {_N} tokens", re.I), {"limit": 1}),
    (re.compile(rf"\({_N} in the messages, {_N} in the completion\)", re.I), {"prompt": 1, "answer": 2}),
    (re.compile(rf"(?:request has|messages resulted in|prompt contains at least) {_N} (?:input )?tokens", re.I),
     {"prompt": 1}),
    (re.compile(rf"is too large: {_N}\. This model's maximum context length", re.I), {"answer": 1}),
    (re.compile(rf"prompt \(length {_N}\) is longer than the maximum model length of {_N}", re.I),
     {"prompt": 1, "limit": 2}),
    (re.compile(rf"must be <= {_N}\. Given: {_N} `inputs` tokens and {_N} `max_new_tokens`", re.I),
     {"limit": 1, "prompt": 2, "answer": 3}),
]
_WORDS = re.compile(r"context (?:length|window|size)|maximum model length|max[-_]model[-_]len|"
                    r"context_length_exceeded|exceed_context_size", re.I)


@dataclass(frozen=True)
class ContextOverflow:
    """What the server said of a prompt too long for its model; a size is None where it
    did not say."""

    said: str  # the server's words, one line
    prompt_tokens: int | None = None
    limit: int | None = None
    answer_tokens: int | None = None  # the answer's share the server counted (max_tokens)

    def with_limit(self, limit: int | None) -> ContextOverflow:
        return self if limit is None or self.limit is not None else dataclasses.replace(self, limit=limit)

    def sizes(self) -> str:
        """``a prompt of 634 tokens where the model takes at most 512, prompt and answer``."""
        prompt = "a prompt" if self.prompt_tokens is None else f"a prompt of {self.prompt_tokens:,} tokens"
        if self.answer_tokens is not None:
            prompt += f" (and {self.answer_tokens:,} for the answer)"
        if self.limit is None:
            return f"{prompt} longer than the model's context (the server gave no limit)"
        return f"{prompt} where the model takes at most {self.limit:,} tokens, prompt and answer"


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _llamacpp_sizes(body: object) -> tuple[int | None, int | None] | None:
    """(prompt tokens, context) of llama.cpp's refusal, whose sizes are fields, not words."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict) or err.get("type") != "exceed_context_size_error":
        return None
    prompt, limit = (err.get(k) if isinstance(err.get(k), int) and not isinstance(err.get(k), bool) else None
                     for k in ("n_prompt_tokens", "n_ctx"))
    return prompt, limit


def read_overflow(status: int, raw: bytes, said: str) -> ContextOverflow | None:
    """The overflow a refused request's answer reports (``said``: its message, one line),
    or None where it is about something else."""
    if status not in STATUSES:
        return None
    try:
        found = _llamacpp_sizes(json.loads(raw))
    except (ValueError, UnicodeDecodeError, RecursionError):
        found = None
    if found is not None:
        return ContextOverflow(said, *found)
    sizes: dict[str, int] = {}
    for pattern, groups in _PATTERNS:
        m = pattern.search(said)
        if m:
            for name, g in groups.items():
                sizes.setdefault(name, _int(m.group(g)))
    if not sizes and not _WORDS.search(said):
        return None
    return ContextOverflow(said, sizes.get("prompt"), sizes.get("limit"), sizes.get("answer"))


def model_limit(models_body: object, model: str) -> int | None:
    """``max_model_len`` of ``model`` in a ``/v1/models`` answer (vLLM lists it), or of the
    only model listed; None where it is not given."""
    data = models_body.get("data") if isinstance(models_body, dict) else None
    if not isinstance(data, list):
        return None
    entries = [m for m in data if isinstance(m, dict)]
    mine = [m for m in entries if m.get("id") == model] or (entries if len(entries) == 1 else [])
    for m in mine:
        limit = m.get("max_model_len")
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
            return limit
    return None


def overflow_of(model) -> ContextOverflow | None:
    """The overflow that stopped ``model``'s server calls in this run (a back end, chat
    model or generator talking to a server through a client), or None."""
    return getattr(getattr(model, "client", None), "too_long", None)


def too_long_line(model, prompt_fix: str | None, answer_flag: str, answer_tokens: int, kept: str) -> str | None:
    """A command's one line for a run the server stopped at a prompt longer than the model's
    context (None: it did not): the sizes, the flag that shrinks what was too long, what
    was kept (``kept``), and the server's own words. ``prompt_fix`` (e.g. ``a smaller
    --window (documents per call; now 10)``) shrinks the prompt; ``answer_flag`` the
    answer's share, named where the answer counted (the server said so, or the prompt alone
    was within the limit) or where nothing shrinks the prompt."""
    overflow = overflow_of(model)
    if overflow is None:
        return None
    answer_counted = overflow.answer_tokens is not None or (
        overflow.prompt_tokens is not None and overflow.limit is not None and overflow.prompt_tokens < overflow.limit)
    fixes = [prompt_fix] if prompt_fix else []
    if answer_counted or not fixes:
        fixes.append(f"a smaller {answer_flag} (the answer's share; now {answer_tokens})")
    return (f"{overflow.sizes()}: the server refused it, and nothing more was sent; run again with "
            f"{' or '.join(fixes)}, or on a server with a longer context; {kept} (the server said: {overflow.said})")
