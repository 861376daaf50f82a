"""Text generators (the ``complete`` role of :mod:`exam_eval.backends.registry`): each turns
prompts into :class:`ChatResult`s, for ``exam-genq generate``. Adding one is a class with
``generate(prompts, keys)`` and its name's ``complete`` entry in the registry.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from .base import get_backend
from .chat import NUGGETIZER_MAX_TOKENS, after_reasoning, generate_fitting
from .endpoint import DEFAULT_CONCURRENCY, chat_extras, check_served_model, checked_endpoint, extras_identity
from .http_client import DEFAULT_TIMEOUT, ChatResult, OpenAIClient, server_identity
from .registry import client_class
from ..errors import InputError, UsageError
from ..grading.fitting import BatchLimit
from ..grading.prompts.base import Prompt
from ..grading.types import GradeRequest
from ..io.jsonl import iter_jsonl
from ..io.openers import display_name
from ..progress import progress_bar


def generator_class(name: str) -> type:
    return client_class(name, "complete")


def get_generator(name: str, **options: Any):
    return generator_class(name)(name=name, **options)


class EndpointGenerator:
    """Any OpenAI-compatible chat-completions endpoint; one user message per prompt."""

    #: the -O pairs it takes, checked before anything is asked (a dry run's too)
    check_options = staticmethod(chat_extras)

    def __init__(self, *, name: str = "endpoint", model: str | None = None, base_url: str = "",
                 api_key_env: str = "OPENAI_API_KEY", concurrency: int = DEFAULT_CONCURRENCY, max_retries: int = 5,
                 timeout: float | None = None, max_tokens: int = NUGGETIZER_MAX_TOKENS, temperature: float = 0.0,
                 progress: bool = True, backend_options: dict | None = None, cache_any_server: bool | None = None,
                 **_ignored: Any):
        if not model:
            raise UsageError("--model is required for the endpoint back end")

        base_url = checked_endpoint(base_url, model)
        self._server = server_identity(base_url, cache_any_server)
        options = dict(backend_options or {})
        self.extras = chat_extras(options)
        self.client = OpenAIClient(base_url, model, api_key_env=api_key_env, concurrency=concurrency,
                                   max_retries=max_retries, timeout=timeout or DEFAULT_TIMEOUT)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.progress = progress
        self.model = model
        self._identity = extras_identity(self.extras)
        self._checked = False

    @property
    def cache_identity(self) -> str:
        """What an answer depends on besides its prompt: the server too, as with exam-grade's
        endpoint (another may serve other weights under the model's name)."""
        return f"genq-endpoint:{self.model}{self._server}:max_tokens={self.max_tokens}:" \
            f"temperature={self.temperature!r}" + self._identity

    @property
    def usage(self):
        """Tokens the server reported for this run's calls (backends.token_usage.TokenUsage)."""
        return self.client.usage

    def generate(self, prompts: Sequence[str], keys: Sequence[tuple],
                 temperature: float | None = None) -> list[ChatResult]:
        """``temperature``: this call's (a re-ask's); None: the generator's own."""
        if not self._checked:
            check_served_model(self.client, self.model)
            self._checked = True
        temperature = self.temperature if temperature is None else temperature
        convs = [[{"role": "user", "content": p}] for p in prompts]
        if not self.progress:
            return after_reasoning(self.client.chat(convs, max_tokens=self.max_tokens, temperature=temperature,
                                                    **self.extras))
        # from a batch file nothing is called: the bar counts the answers read, not calls/s
        unit = "answers" if getattr(self.client, "from_files", False) else "calls"
        with progress_bar(len(convs), "generating", unit) as bar:
            # a failed call is not done: the bar passes only the answered ones
            return after_reasoning(self.client.chat(convs, max_tokens=self.max_tokens, temperature=temperature,
                                                    progress=lambda res: bar.advance() if _answered(res) else None,
                                                    **self.extras))


def _answered(res) -> bool:
    return getattr(res, "error", None) is None


class ScriptedGenerator:
    """Canned answers for tests and rehearsals, from a JSONL script::

        {"query_id": "q1", "response": "{\\"questions\\": [\\"...\\"]}"}
        {"query_id": "q2", "facet_id": "f1", "fail": "HTTP 500"}   # the call fails

    Lines for the same query (and facet) are used in order, one per call, so re-asking
    can be scripted; a unit without (more) lines fails with "no scripted response".
    """

    def __init__(self, *, name: str = "scripted", script: str | None = None, model: str | None = None,
                 **_ignored: Any):
        if not script:
            raise UsageError("--script FILE is required for the scripted back end")
        self.model = model or "scripted"
        self.queue: dict[tuple, list[dict]] = {}
        sname = display_name(script)
        lines = []
        for lineno, obj in iter_jsonl(script):
            lines.append(obj)
            if not isinstance(obj, dict) or "query_id" not in obj:
                raise InputError("a script line needs 'query_id'", sname, lineno)
            if not isinstance(obj.get("response"), str) and "fail" not in obj:
                raise InputError("a script line needs a 'response' string or 'fail'", sname, lineno)
            facet = obj.get("facet_id")
            key = (str(obj["query_id"]), None if facet is None else str(facet))
            self.queue.setdefault(key, []).append(obj)
        self.prompts_seen: list[str] = []
        self._script_id = hashlib.sha256(json.dumps(lines, sort_keys=True).encode("utf-8")).hexdigest()[:12]

    @property
    def cache_identity(self) -> str:
        return f"genq-scripted:{self.model}:script={self._script_id}"

    def generate(self, prompts: Sequence[str], keys: Sequence[tuple],
                 temperature: float | None = None) -> list[ChatResult]:
        out = []
        for prompt, key in zip(prompts, keys):
            self.prompts_seen.append(prompt)
            lines = self.queue.get(tuple(key))
            if not lines:
                out.append(ChatResult(None, "no scripted response", None, 1))
                continue
            line = lines.pop(0)
            if "fail" in line:
                out.append(ChatResult(None, str(line["fail"]), None, 1))
            else:
                out.append(ChatResult(line["response"], None, None, 1))
        return out


class HFGenerator:
    """A local Hugging Face model through the grading back ends (``hf-causal`` applies
    the model's chat template, ``hf-seq2seq`` feeds the prompt to e.g. FLAN-T5).

    The generation prompt is passed through the back end as a "direct" request whose
    template is just ``{query}`` (substituted literally, once), so the back end's own
    tokenizer, chat template, batching and greedy decoding apply unchanged.
    """

    def __init__(self, *, name: str, model: str | None = None, max_tokens: int = NUGGETIZER_MAX_TOKENS,
                 device: str | None = None, dtype: str | None = None, batch_size: int | None = None,
                 backend_options: dict | None = None, **_ignored: Any):
        if not model:
            raise UsageError(f"--model is required for the {name} back end")

        options = {"model": model, "device": device, "dtype": dtype, "batch_size": batch_size,
                   "max_new_tokens": max_tokens}
        options = {k: v for k, v in options.items() if v is not None}
        options.update(backend_options or {})
        self.backend = get_backend(name, **options)  # validates the model reference; loads nothing
        self.max_tokens = max_tokens
        self.model = model
        self._loaded = False
        self.limit = None  # prompts a call (grading.fitting.BatchLimit), from the loaded back end's batch size

    @property
    def cache_identity(self) -> str:
        return f"genq-{self.backend.cache_identity}:max_new={self.max_tokens}"

    @property
    def memory_note(self) -> str | None:
        """What the run should say at its end if the device ran out of memory."""
        return None if self.limit is None else self.limit.note()

    def generate(self, prompts: Sequence[str], keys: Sequence[tuple],
                 temperature: float | None = None) -> list[ChatResult]:
        """Greedy decoding whatever ``temperature`` (a re-ask repeats the answer unless the
        back end samples, -O do_sample=true)."""
        if not self._loaded:
            self.backend.load()
            self._loaded = True
            self.limit = BatchLimit(max(1, int(getattr(self.backend, "batch_size", 8))))
        passthrough = Prompt(id="genq-passthrough", source="exam-genq", target="direct", mode="generate",
                             labels=(), scale=(0, 1), template="{query}")
        requests = [GradeRequest(passthrough, p, None, "") for p in prompts]
        with progress_bar(len(requests), "generating", "prompts") as bar:
            return generate_fitting(self.backend, requests, self.max_tokens, self.limit, advance=bar.advance)
