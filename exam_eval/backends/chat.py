"""Chat models for the steps that send whole conversations and read free text: the
AutoNuggetizer's nugget creation, importance scoring and listwise assignment.

A chat model has ``model_id``, ``cache_identity`` and ``chat(conversations, temperature)
-> list[ChatResult]`` (one result per conversation, in order; a call that failed for good
is a result with ``error`` set, never an exception). A new one is a class and its name's
``chat`` entry in :mod:`exam_eval.backends.registry`.

Only back ends that generate text from a system and a user message can serve: the
OpenAI-compatible endpoint (OpenAI, vLLM, TGI, ...; what the nuggetizer itself calls), a
local Hugging Face causal LM with a chat template, and canned answers (``scripted``: the
demo's authored answers, rehearsals of a pipeline). Scoring-only back ends (embedding,
seq2seq rating models) cannot run these prompts, and saying so is better than recording
a prompt that never ran.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from ..errors import InputError, UsageError
from ..grading.fitting import BatchLimit, TooLarge, call_in_halves
from ..grading.prompts.base import Prompt
from ..grading.reasoning import join_reasoning
from ..grading.types import GradeRequest, InterruptedBatch
from ..io.jsonl import iter_jsonl
from ..io.openers import display_name
from . import get_backend
from .endpoint import DEFAULT_CONCURRENCY, chat_extras, check_served_model, checked_endpoint, extras_identity
from .http_client import DEFAULT_TIMEOUT, ChatResult, OpenAIClient, server_identity
from .registry import client_class

# The nuggetizer sends max_completion_tokens=2048 on every call (core/llm.py).
NUGGETIZER_MAX_TOKENS = 2048
# a local chat model's conversations are sent (and cached) this many batches at a time
CHUNK_BATCHES = 4


def after_reasoning(results: Sequence[ChatResult]) -> list[ChatResult]:
    """Each answer without the judge's reasoning (its ``reasoning`` keeps it): a reasoning
    model's nugget list or questions come after its thinking, and an answer cut off while
    reasoning is empty, so that it is read as unparsed and asked again."""
    import dataclasses

    out = []
    for res in results:
        if res.text is None:
            out.append(res)
            continue
        said = join_reasoning(getattr(res, "reasoning", None), res.text, res.finish_reason == "length")
        if said.reasoning is None and said.answer == res.text:
            out.append(res)
        else:
            out.append(dataclasses.replace(res, text="" if said.unfinished else (said.answer or ""),
                                           reasoning=said.reasoning))
    return out


def generate_fitting(backend, requests: Sequence, max_tokens: int, limit, advance=None) -> list[ChatResult]:
    """A local back end's generated texts as ChatResults, at most ``limit.units`` prompts a
    call (a :class:`~exam_eval.grading.fitting.BatchLimit`): a call that runs the device
    out of memory is made in halves and later calls are cut to half its size; a prompt
    that does not fit alone, and every prompt of a call that fails otherwise, fails with
    its reason (a rerun asks again), never the run. ``advance(n)`` after each call.
    An interrupt raises :class:`InterruptedBatch` with the calls finished before it (None
    for the rest), so that the caller keeps the answers already computed."""
    out: list[ChatResult] = []
    start = 0
    while start < len(requests):
        chunk = list(requests[start:start + max(1, limit.units)])
        try:
            texts = call_in_halves(backend, lambda rs: backend._generate(rs, max_tokens), chunk, limit)
            err = "the model returned no text"
        except KeyboardInterrupt:
            raise InterruptedBatch(out + [None] * (len(requests) - len(out))) from None
        except Exception as exc:  # noqa: BLE001 - a failing call fails its prompts, not the run
            texts, err = [None] * len(chunk), f"{type(exc).__name__}: {exc}"
        for t in texts:
            if isinstance(t, TooLarge):
                out.append(ChatResult(None, f"the device ran out of memory on this prompt alone ({t.reason})", None, 1))
            else:
                out.append(ChatResult(t, None if t is not None else err, None, 1))
        if advance is not None:
            advance(len(chunk))
        start += len(chunk)
    return out


class EndpointChat:
    """Any OpenAI-compatible ``/chat/completions`` endpoint."""

    name = "endpoint"

    def __init__(self, *, model: str | None = None, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 concurrency: int = DEFAULT_CONCURRENCY, max_retries: int = 5, timeout: float = DEFAULT_TIMEOUT,
                 max_tokens: int = NUGGETIZER_MAX_TOKENS, backend_options: dict | None = None,
                 cache_any_server: bool | None = None, **_ignored: Any):
        base_url = checked_endpoint(base_url, model)
        self._server = server_identity(base_url, cache_any_server)
        self.model_id = model
        self.max_tokens = max_tokens
        options = dict(backend_options or {})
        self.extras = chat_extras(options)
        self._identity = extras_identity(self.extras)
        self.client = OpenAIClient(base_url, model, api_key_env=api_key_env, concurrency=concurrency,
                                   max_retries=max_retries, timeout=timeout)
        self._checked = False

    @property
    def cache_identity(self) -> str:
        return f"chat:endpoint:{self.model_id}{self._server}:max_tokens={self.max_tokens}" + self._identity

    @property
    def usage(self):
        """Tokens the server reported for this run's calls (backends.token_usage.TokenUsage)."""
        return self.client.usage

    def chat(self, conversations: Sequence[Sequence[dict]], temperature: float = 0.0) -> list[ChatResult]:
        if not self._checked:
            check_served_model(self.client, self.model_id)
            self._checked = True
        return after_reasoning(self.client.chat(conversations, max_tokens=self.max_tokens, temperature=temperature,
                                                **self.extras))

    def close(self) -> None:
        pass


class HFChat:
    """A local Hugging Face causal LM through its chat template (greedy decoding: the
    nuggetizer's re-asks at temperature 0.2 are greedy here, so a re-ask repeats the
    answer unless the model is sampled with -O do_sample=true)."""

    name = "hf-causal"

    def __init__(self, *, model: str | None = None, max_tokens: int = NUGGETIZER_MAX_TOKENS,
                 backend_options: dict | None = None, **_ignored: Any):
        if not model:
            raise UsageError("the hf-causal back end needs --model (a Hugging Face id or path)")

        options = {"model": model, "max_new_tokens": max_tokens}
        options.update(backend_options or {})
        self.backend = get_backend("hf-causal", **options)
        self.model_id = model
        self.max_tokens = max_tokens
        self._loaded = False
        self.limit = None  # prompts a call (grading.fitting.BatchLimit), from the loaded back end's batch size

    @property
    def memory_note(self) -> str | None:
        """What the run should say at its end if the device ran out of memory."""
        return None if self.limit is None else self.limit.note("-O batch_size=N")

    @property
    def chunk_size(self) -> int:
        """Conversations to send at once, and commit to the cache before the next
        (grading.asking): a few batches, so that an interrupt loses little of a slow
        local model's work and the re-asks of a chunk still fill a batch."""
        units = self.limit.units if self.limit is not None else self.backend.batch_size
        return CHUNK_BATCHES * max(1, int(units))

    @property
    def cache_identity(self) -> str:
        return f"chat:{self.backend.cache_identity}:max_tokens={self.max_tokens}"

    def chat(self, conversations: Sequence[Sequence[dict]], temperature: float = 0.0) -> list[ChatResult]:
        if not self._loaded:
            self.backend.load()
            self._loaded = True
            self.limit = BatchLimit(max(1, int(self.backend.batch_size)))
        requests = []
        for conv in conversations:
            system = next((m["content"] for m in conv if m["role"] == "system"), None)
            user = "\n".join(m["content"] for m in conv if m["role"] == "user")
            passthrough = Prompt(id="chat-passthrough", source="exam_eval", target="direct", mode="generate",
                                 labels=(), scale=(0, 1), template="{query}", system=system)
            requests.append(GradeRequest(passthrough, user, None, ""))
        # the caller hands over hundreds of conversations at once: one generate() over all
        # of them would hold every one's key/value cache together
        return after_reasoning(generate_fitting(self.backend, requests, self.max_tokens, self.limit))

    def close(self) -> None:
        self.backend.close()


class ScriptedChat:
    """Canned answers from a JSONL script, one rule a line, tried in order::

        {"match": ["NuggetizeScoreLLM", "Search Query: how do vaccines work\n"], "output": "['vital', 'okay']"}
        {"match": ["NuggetizeAssignerLLM"], "fail": "HTTP 500"}     # the call fails

    A rule answers a conversation whose messages (system and user, joined) contain every
    string of ``match``; a conversation no rule matches fails ("no scripted answer"), so
    a script never answers what its author did not write."""

    name = "scripted"

    def __init__(self, *, script: str | None = None, model: str | None = None, **_ignored: Any):
        if not script:
            raise UsageError("--backend scripted needs --script FILE (JSONL rules: match, output)")
        self.model_id = model or "scripted"
        self.rules: list[dict] = []
        name = display_name(script)
        for lineno, rule in iter_jsonl(script):
            match = rule.get("match") if isinstance(rule, dict) else None
            if not (isinstance(match, list) and all(isinstance(m, str) for m in match)):
                raise InputError("a rule needs 'match', a list of strings", name, lineno)
            if not isinstance(rule.get("output"), str) and "fail" not in rule:
                raise InputError("a rule needs an 'output' string or 'fail'", name, lineno)
            self.rules.append(rule)
        digest = hashlib.sha256(json.dumps(self.rules, sort_keys=True).encode("utf-8")).hexdigest()[:16]
        self.cache_identity = f"chat:scripted:{self.model_id}:{digest}"  # a new script is asked again
        self.calls = 0

    def chat(self, conversations: Sequence[Sequence[dict]], temperature: float = 0.0) -> list[ChatResult]:
        out = []
        for conv in conversations:
            self.calls += 1
            text = "\n".join(m["content"] for m in conv)
            rule = next((r for r in self.rules if all(m in text for m in r["match"])), None)
            if rule is None or "fail" in rule:
                error = "no scripted answer" if rule is None else str(rule["fail"])
                out.append(ChatResult(None, error, None, 1))
            else:
                out.append(ChatResult(rule["output"], None, None, 1))
        return out

    def close(self) -> None:
        pass


def get_chat_model(name: str, **options: Any):
    return client_class(name, "chat")(**options)
