"""The text roles of the registry: ``chat`` (a system and a user message, read as free
text: the AutoNuggetizer's nugget creation, importance scoring and listwise assignment)
and ``complete`` (one prompt, the text it asks for: exam-genq generate's banks). A
completion is a chat of one user message, so each back end that writes text is one class
here with both roles as methods, ``chat(conversations, temperature)`` and
``generate(prompts, keys, temperature)``, each returning one :class:`ChatResult` per
input, in order (a call that failed for good is a result with ``error`` set, never an
exception), besides ``model_id``, ``cache_identity`` and ``close()``. The role a client is made for (``role``) names its cache identity and, for
canned answers, how its script reads.

Only back ends that generate text can serve: the OpenAI-compatible endpoint (OpenAI,
vLLM, TGI, ...; what the nuggetizer itself calls), a local Hugging Face model (chat: a
causal LM through its chat template), and canned answers (``scripted``: the demo's
authored answers, rehearsals of a pipeline). Scoring-only back ends (embedding, extractive
QA) cannot run these prompts, and saying so is better than recording a prompt that never
ran. A new one is a class and its name's ``chat``/``complete`` entries in
:mod:`exam_eval.backends.registry`; :func:`exam_eval.backends.factory.make_client` makes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence

from ..errors import InputError, UsageError
from ..grading.fitting import BatchLimit, TooLarge, call_in_halves
from ..grading.prompts.base import Prompt
from ..grading.reasoning import join_reasoning
from ..grading.types import GradeRequest, InterruptedBatch
from ..io.jsonl import iter_jsonl
from ..io.openers import display_name
from ..progress import progress_bar
from .endpoint import DEFAULT_CONCURRENCY, chat_extras, check_served_model, checked_endpoint, extras_identity
from .factory import make_client
from .http_client import DEFAULT_TIMEOUT, ChatResult, OpenAIClient, server_identity

# The nuggetizer sends max_completion_tokens=2048 on every call (core/llm.py).
NUGGETIZER_MAX_TOKENS = 2048
# a local chat model's conversations are sent (and cached) this many batches at a time
CHUNK_BATCHES = 4
#: the roles a text client is made for
TEXT_ROLES = ("chat", "complete")


def after_reasoning(results: Sequence[ChatResult]) -> list[ChatResult]:
    """Each answer without the judge's reasoning (its ``reasoning`` keeps it): a reasoning
    model's nugget list or questions come after its thinking, and an answer cut off while
    reasoning is empty, so that it is read as unparsed and asked again."""
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


def _role(role: str) -> str:
    if role not in TEXT_ROLES:
        raise ValueError(f"a text client's role is one of {', '.join(TEXT_ROLES)}, not {role!r}")
    return role


def _one_message(prompts: Sequence[str]) -> list[list[dict]]:
    return [[{"role": "user", "content": p}] for p in prompts]


class EndpointChat:
    """Any OpenAI-compatible ``/chat/completions`` endpoint."""

    name = "endpoint"
    #: the -O pairs it takes, checked before anything is asked (a dry run's too)
    check_options = staticmethod(chat_extras)

    def __init__(self, *, role: str = "chat", model: str | None = None, base_url: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", concurrency: int = DEFAULT_CONCURRENCY, max_retries: int = 5,
                 timeout: float = DEFAULT_TIMEOUT, max_tokens: int = NUGGETIZER_MAX_TOKENS, temperature: float = 0.0,
                 backend_options: dict | None = None, cache_any_server: bool | None = None):
        self.role = _role(role)
        base_url = checked_endpoint(base_url, model)
        self._server = server_identity(base_url, cache_any_server)
        self.model_id = model
        self.max_tokens = max_tokens
        self.temperature = temperature  # of generate's first ask
        self.extras = chat_extras(backend_options)
        self._identity = extras_identity(self.extras)
        self.client = OpenAIClient(base_url, model, api_key_env=api_key_env, concurrency=concurrency,
                                   max_retries=max_retries, timeout=timeout)
        self._checked = False

    @property
    def cache_identity(self) -> str:
        """What an answer depends on besides its prompt: the server too, as with exam-grade's
        endpoint (another may serve other weights under the model's name)."""
        if self.role == "chat":
            return f"chat:endpoint:{self.model_id}{self._server}:max_tokens={self.max_tokens}" + self._identity
        return f"genq-endpoint:{self.model_id}{self._server}:max_tokens={self.max_tokens}:" \
            f"temperature={self.temperature!r}" + self._identity

    @property
    def usage(self):
        """Tokens the server reported for this run's calls (backends.token_usage.TokenUsage)."""
        return self.client.usage

    def chat(self, conversations: Sequence[Sequence[dict]], temperature: float = 0.0, progress=None) -> list[ChatResult]:
        if not self._checked:
            check_served_model(self.client, self.model_id)
            self._checked = True
        extra = {} if progress is None else {"progress": progress}
        return after_reasoning(self.client.chat(conversations, max_tokens=self.max_tokens, temperature=temperature,
                                                **extra, **self.extras))

    def generate(self, prompts: Sequence[str], keys: Sequence[tuple],
                 temperature: float | None = None) -> list[ChatResult]:
        """``temperature``: this call's (a re-ask's); None: the client's own."""
        temperature = self.temperature if temperature is None else temperature
        # from a batch file nothing is called: the bar counts the answers read, not calls/s
        unit = "answers" if getattr(self.client, "from_files", False) else "calls"
        with progress_bar(len(prompts), "generating", unit) as bar:
            # a failed call is not done: the bar passes only the answered ones
            return self.chat(_one_message(prompts), temperature,
                             progress=lambda res: bar.advance() if getattr(res, "error", None) is None else None)

    def close(self) -> None:
        pass


class LocalChat:
    """A local Hugging Face model through the grading back ends (``hf-causal`` applies the
    model's chat template, ``hf-seq2seq`` feeds the prompt to e.g. FLAN-T5), so its own
    tokenizer, chat template, batching and greedy decoding apply unchanged: each text is
    passed as a "direct" request whose template is just ``{query}`` (substituted
    literally, once). Greedy decoding whatever the temperature: the nuggetizer's re-asks at
    0.2 repeat the answer unless the model is sampled with -O do_sample=true."""

    def __init__(self, *, role: str = "chat", name: str = "hf-causal", model: str | None = None,
                 max_tokens: int = NUGGETIZER_MAX_TOKENS, device: str | None = None, dtype: str | None = None,
                 batch_size: int | None = None, backend_options: dict | None = None):
        self.role = _role(role)
        if not model:
            raise UsageError(f"the {name} back end needs --model (a Hugging Face id or path)")
        options = {"model": model, "device": device, "dtype": dtype, "batch_size": batch_size,
                   "max_new_tokens": max_tokens}
        options = {k: v for k, v in options.items() if v is not None}
        options.update(backend_options or {})
        self.name = name
        self.backend = make_client(name, "score", **options)  # validates the model reference; loads nothing
        self.model_id = model
        self.max_tokens = max_tokens
        self._loaded = False
        self.limit = None  # prompts a call (grading.fitting.BatchLimit), from the loaded back end's batch size

    @property
    def cache_identity(self) -> str:
        if self.role == "chat":
            return f"chat:{self.backend.cache_identity}:max_tokens={self.max_tokens}"
        return f"genq-{self.backend.cache_identity}:max_new={self.max_tokens}"

    @property
    def memory_note(self) -> str | None:
        """What the run should say at its end if the device ran out of memory."""
        if self.limit is None:
            return None
        return self.limit.note("-O batch_size=N") if self.role == "chat" else self.limit.note()

    @property
    def chunk_size(self) -> int:
        """Conversations to send at once, and commit to the cache before the next
        (grading.asking): a few batches, so that an interrupt loses little of a slow
        local model's work and the re-asks of a chunk still fill a batch."""
        units = self.limit.units if self.limit is not None else self.backend.batch_size
        return CHUNK_BATCHES * max(1, int(units))

    def _load(self) -> None:
        if not self._loaded:
            self.backend.load()
            self._loaded = True
            self.limit = BatchLimit(max(1, int(getattr(self.backend, "batch_size", 8))))

    def chat(self, conversations: Sequence[Sequence[dict]], temperature: float = 0.0) -> list[ChatResult]:
        self._load()
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

    def generate(self, prompts: Sequence[str], keys: Sequence[tuple],
                 temperature: float | None = None) -> list[ChatResult]:
        self._load()
        passthrough = Prompt(id="genq-passthrough", source="exam-genq", target="direct", mode="generate",
                             labels=(), scale=(0, 1), template="{query}")
        requests = [GradeRequest(passthrough, p, None, "") for p in prompts]
        with progress_bar(len(requests), "generating", "prompts") as bar:
            return generate_fitting(self.backend, requests, self.max_tokens, self.limit, advance=bar.advance)

    def close(self) -> None:
        self.backend.close()


class ScriptedChat:
    """Canned answers from a JSONL script, for tests and rehearsals. For ``chat``, one rule
    a line, tried in order::

        {"match": ["NuggetizeScoreLLM", "Search Query: how do vaccines work\n"], "output": "['vital', 'okay']"}
        {"match": ["NuggetizeAssignerLLM"], "fail": "HTTP 500"}     # the call fails

    A rule answers a conversation whose messages (system and user, joined) contain every
    string of ``match``; a conversation no rule matches fails ("no scripted answer"), so
    a script never answers what its author did not write. For ``complete``, the lines of
    a query (and facet) are used in order, one per call, so re-asking can be scripted::

        {"query_id": "q1", "response": "{\\"questions\\": [\\"...\\"]}"}
        {"query_id": "q2", "facet_id": "f1", "fail": "HTTP 500"}   # the call fails

    and a unit without (more) lines fails with "no scripted response"."""

    name = "scripted"

    def __init__(self, *, role: str = "chat", script: str | None = None, model: str | None = None):
        self.role = _role(role)
        if not script:
            raise UsageError("--backend scripted needs --script FILE (JSONL rules: match, output)" if role == "chat"
                             else "--script FILE is required for the scripted back end")
        self.model_id = model or "scripted"
        sname = display_name(script)
        lines = [(lineno, obj) for lineno, obj in iter_jsonl(script)]
        for lineno, obj in lines:
            problem = _rule_problem(obj) if role == "chat" else _line_problem(obj)
            if problem:
                raise InputError(problem, sname, lineno)
        self.rules = [obj for _, obj in lines]
        self.queue: dict[tuple, list[dict]] = {}
        for obj in self.rules if role == "complete" else ():
            facet = obj.get("facet_id")
            self.queue.setdefault((str(obj["query_id"]), None if facet is None else str(facet)), []).append(obj)
        digest = hashlib.sha256(json.dumps(self.rules, sort_keys=True).encode("utf-8")).hexdigest()
        # a new script is asked again
        self.cache_identity = (f"chat:scripted:{self.model_id}:{digest[:16]}" if role == "chat"
                               else f"genq-scripted:{self.model_id}:script={digest[:12]}")
        self.calls = 0
        self.prompts_seen: list[str] = []

    def chat(self, conversations: Sequence[Sequence[dict]], temperature: float = 0.0) -> list[ChatResult]:
        out = []
        for conv in conversations:
            self.calls += 1
            text = "\n".join(m["content"] for m in conv)
            rule = next((r for r in self.rules if all(m in text for m in r["match"])), None)
            if rule is None or "fail" in rule:
                out.append(ChatResult(None, "no scripted answer" if rule is None else str(rule["fail"]), None, 1))
            else:
                out.append(ChatResult(rule["output"], None, None, 1))
        return out

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

    def close(self) -> None:
        pass


def _rule_problem(rule) -> str | None:
    match = rule.get("match") if isinstance(rule, dict) else None
    if not (isinstance(match, list) and all(isinstance(m, str) for m in match)):
        return "a rule needs 'match', a list of strings"
    if not isinstance(rule.get("output"), str) and "fail" not in rule:
        return "a rule needs an 'output' string or 'fail'"
    return None


def _line_problem(obj) -> str | None:
    if not isinstance(obj, dict) or "query_id" not in obj:
        return "a script line needs 'query_id'"
    if not isinstance(obj.get("response"), str) and "fail" not in obj:
        return "a script line needs a 'response' string or 'fail'"
    return None
