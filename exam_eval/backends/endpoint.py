"""Any OpenAI-compatible endpoint (OpenAI, vLLM, TGI, llama.cpp server, transformers serve ...).

Every pair is one chat request (or a legacy completion with ``-O api=completions``),
sent with an in-flight window that adapts to the server (at most ``--concurrency``) and
retried with backoff by :class:`exam_eval.backends.http_client.OpenAIClient`; a server
that refuses every connection for ``-O down_after=S`` seconds (default 5) is taken as
down, and the pairs left fail at once (exit 3, a rerun retries them). The API key comes
from an environment variable only. Where the server lists its models (``/v1/models``),
``--model`` must be one of them: a server that answers any name (llama.cpp's) would
otherwise record a name that did not grade.

Score-mode prompts ask for the first token's ``top_logprobs`` as well. The grade is the
labels' argmax, exactly as in the local scoring mode, only where it measures the judge:
the labels hold at least ``--min-label-mass`` of the first token's probability among the
alternatives the server listed, the most probable of them is a label, the judge did not
reason first, and the answer's text states no other grade. Elsewhere the grade is read
from the answer's text as generate mode reads it (or is unparsed), and the grade line
says why (``fallback``). Servers that give no logprobs still grade that way.

Reasoning judges: the answer is read after the reasoning (``reasoning_content`` /
``reasoning`` fields, ``<think>`` and the other markers of exam_eval.grading.reasoning),
which is kept in the grade line. ``-O reasoning_effort=low`` and ``-O
chat_template_kwargs='{"enable_thinking": false}'`` are sent to the server as they are.
A request that fails after all retries yields no grade at all (not recorded, retried by
a rerun).
"""

from __future__ import annotations

import math
import os
from typing import Sequence

from ..errors import UsageError
from ..grading.types import FAILED, GradeRequest, GradeResult, Generated, InterruptedBatch, LabelWeights
from .base import flag_option, label_mass_fallback, scored_result, PromptBackend
from .http_client import DEFAULT_TIMEOUT, DOWN_AFTER, OpenAIClient, check_base_url, server_identity
from ..io.judge_detail import JudgeDetail


DEFAULT_CONCURRENCY = 64


def json_object_option(name: str, value) -> dict | None:
    """An -O value that is a JSON object (``-O chat_template_kwargs='{"enable_thinking": false}'``)."""
    import json

    if value is None or isinstance(value, dict):
        return value
    try:
        obj = json.loads(str(value))
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise UsageError(f"-O {name}= must be a JSON object, e.g. '{{\"enable_thinking\": false}}', got {value!r}")
    return obj


def request_extras(reasoning_effort, chat_template_kwargs) -> dict:
    """What a reasoning judge is asked besides the prompt, sent as it is."""
    extras: dict = {}
    if reasoning_effort is not None:
        if not isinstance(reasoning_effort, str) or not reasoning_effort.strip():
            raise UsageError(f"-O reasoning_effort= must be a word such as low, medium or high, got {reasoning_effort!r}")
        extras["reasoning_effort"] = reasoning_effort.strip()
    kwargs = json_object_option("chat_template_kwargs", chat_template_kwargs)
    if kwargs is not None:
        extras["chat_template_kwargs"] = kwargs
    return extras


def chat_extras(options: dict | None) -> dict:
    """The -O pairs a chat command's endpoint takes (what :func:`request_extras` sends);
    any other is refused, as a flag the back end does not take."""
    options = dict(options or {})
    extras = request_extras(options.pop("reasoning_effort", None), options.pop("chat_template_kwargs", None))
    if options:
        raise UsageError(f"back end 'endpoint' does not take --backend-option {', '.join(sorted(options))} "
                         "(it takes reasoning_effort and chat_template_kwargs)")
    return extras


def extras_identity(extras: dict) -> str:
    import json

    return "".join(f":{k}={json.dumps(v, sort_keys=True, separators=(',', ':'))}" for k, v in sorted(extras.items()))


def check_served_model(client, model: str) -> None:
    """Where the server lists its models, ``model`` must be one of them."""
    served = client.list_models()
    if served and model not in served:
        shown = ", ".join(served[:8]) + (f" and {len(served) - 8} more" if len(served) > 8 else "")
        raise UsageError(f"--model {model!r}: the server at {client.base_url} serves {shown}; give one of them")


def checked_endpoint(base_url: str | None, model: str | None) -> str:
    """The base URL (or $OPENAI_BASE_URL), refused with a usage error when it or the
    model name is missing or the URL is not http(s)."""
    base_url = base_url or os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        raise UsageError("the endpoint back end needs --base-url (or $OPENAI_BASE_URL), e.g. http://localhost:8000/v1")
    try:
        check_base_url(base_url)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not model:
        raise UsageError("the endpoint back end needs --model (the name the server serves)")
    return base_url


def _number(name: str, value, default, kind=float, minimum: float = 0.0, above: bool = False,
            maximum: float = math.inf):
    """An -O value as a number in range, or a usage error naming the option."""
    if value is None:
        return default
    try:
        number = kind(value)
        if kind is int and float(value) != number:  # 1.5 retries
            number = None
    except (TypeError, ValueError, OverflowError):
        number = None
    if number is None or not math.isfinite(number) or number < minimum or (above and number == minimum) \
            or number > maximum:
        bound = f"above {minimum:g}" if above else f"at least {minimum:g}"
        bound += f" and at most {maximum:g}" if maximum < math.inf else ""
        raise UsageError(f"-O {name}= must be {'an integer' if kind is int else 'a number'} {bound}, got {value!r}")
    return number


class EndpointBackend(PromptBackend):
    name = "endpoint"
    can_score = True

    def __init__(self, model: str | None = None, base_url: str | None = None, api_key_env: str | None = None,
                 concurrency: int | None = None, batch_size: int | None = None,
                 max_input_tokens: int | None = None, max_new_tokens: int | None = None,
                 timeout: float | str | None = None, max_retries: int | str | None = None,
                 api: str | None = None, logprobs: bool | str | None = None, top_logprobs: int | str | None = None,
                 backoff: float | str | None = None, down_after: float | str | None = None,
                 reasoning_effort: str | None = None, chat_template_kwargs: str | dict | None = None,
                 cache_any_server: bool | None = None):
        self.base_url = checked_endpoint(base_url, model)
        self._server = server_identity(self.base_url, cache_any_server)
        self.model_id = model
        self.api_key_env = api_key_env or "OPENAI_API_KEY"
        # a vLLM-class server batches what is in flight: 64 keeps one GPU busy (man
        # exam-nuggets, THROUGHPUT: 8 in flight capped a 150 ms server at ~47 calls/s)
        self.concurrency = _number("concurrency", concurrency, DEFAULT_CONCURRENCY, int, 1)
        # enough requests per engine batch to keep every connection busy
        self.batch_size = _number("batch_size", batch_size, self.concurrency * 4, int, 1)
        self._window = None if max_input_tokens is None else int(max_input_tokens)
        self.max_new_tokens = _number("max_new_tokens", max_new_tokens, 64, int, 1)
        self.timeout = _number("timeout", timeout, DEFAULT_TIMEOUT, above=True, maximum=86400)
        self.max_retries = _number("max_retries", max_retries, 5, int)
        self.api = (api or "chat").lower()
        if self.api not in ("chat", "completions"):
            raise UsageError(f"-O api= must be chat or completions, got {api!r}")
        self.logprobs = True if logprobs is None else flag_option("logprobs", logprobs)
        self.top_logprobs = _number("top_logprobs", top_logprobs, 20, int, 1)
        self.client = None
        self.errors: dict[str, int] = {}  # error message -> count, reported by exam-grade
        self.cut_off = 0  # generated answers the server cut at max_new_tokens
        self.backoff = _number("backoff", backoff, 1.0)

        self.down_after = _number("down_after", down_after, DOWN_AFTER)
        self.extras = request_extras(reasoning_effort, chat_template_kwargs)

    @property
    def cache_identity(self) -> str:
        # the API, and what changes an answer: the window the prompt is cut to, the tokens
        # it may take, whether scoring reads logprobs (and among how many alternatives).
        # Not the server: the output's settings are the grader's, and --shard's split must
        # not move with the host; the cache keys the server apart (cache_server)
        opts = (f":max_in={self._window}" if self._window is not None else "") + \
               (f":max_new={self.max_new_tokens}" if self.max_new_tokens != 64 else "") + \
               ("" if self.logprobs else ":logprobs=false") + \
               (f":top_logprobs={self.top_logprobs}" if self.top_logprobs != 20 else "")
        return super().cache_identity + f":{self.api}" + opts + extras_identity(self.extras)

    @property
    def cache_server(self) -> str:
        """The server whose grades the cache may give this back end (another may serve other
        weights under the model's name); "" with --cache-any-server and for batch files."""
        return self._server

    @property
    def context_window(self) -> int | None:
        return self._window

    def load(self) -> None:
        if self.client is None:
            self.client = OpenAIClient(self.base_url, self.model_id, api_key_env=self.api_key_env,
                                       concurrency=self.concurrency, max_retries=self.max_retries,
                                       timeout=self.timeout, backoff=self.backoff, down_after=self.down_after)
            check_served_model(self.client, self.model_id)

    def uses_scoring(self, prompt) -> bool:
        return False  # score-mode prompts take the logprobs path in grade()

    def _call(self, requests: Sequence[GradeRequest], max_tokens: int, logprobs: bool):
        self.load()
        # the prompt's published decoding (UMBRELA: temperature 0, top_p 1, penalties)
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(tuple(r.prompt.decoding), []).append(i)
        replies: list = [None] * len(requests)
        for decoding, idx in groups.items():
            kw = dict(max_tokens=max_tokens, temperature=0.0)
            kw.update(decoding)
            kw.update(self.extras)
            if logprobs:
                kw.update(logprobs=True, top_logprobs=self.top_logprobs)
            batch = [requests[i] for i in idx]
            try:
                if self.api == "chat":
                    got = self.client.chat([self.messages(r) for r in batch], **kw)
                else:
                    got = self.client.complete([self.render(r) for r in batch], **kw)
            except InterruptedBatch as stop:
                for i, reply in zip(idx, stop.results):
                    replies[i] = reply
                raise InterruptedBatch(replies) from None
            for i, reply in zip(idx, got):
                replies[i] = reply
        for r in replies:
            if r.error is not None:
                self.errors[r.error] = self.errors.get(r.error, 0) + 1
        return replies

    def failure_summary(self) -> str | None:
        if not self.errors:
            return None
        msg, n = max(self.errors.items(), key=lambda kv: kv[1])
        hint = " (the server may not offer logprobs: try -O logprobs=false)" if "logprob" in msg.lower() else ""
        return f"most frequent endpoint error ({n}x): {msg}{hint}"

    def _generate(self, requests, max_new_tokens):
        replies = self._call(requests, max_new_tokens, False)
        self.cut_off += sum(r.error is None and r.finish_reason == "length" for r in replies)
        return [self._said(r) for r in replies]

    def _said(self, reply):
        """A reply's text with what came beside it (None: the call failed)."""
        if reply.error is not None or reply.text is None:
            return None
        served = getattr(reply, "model", None)
        return Generated.of(reply.text, getattr(reply, "reasoning", None), reply.finish_reason == "length",
                            served if served and served != self.model_id else None)

    def usage_line(self) -> str | None:
        usage = getattr(self.client, "usage", None)
        return usage.line() if usage else None

    def run_note(self) -> str | None:
        # a cut answer is still parsed (a rating usually comes first), but the user should know
        if not self.cut_off:
            return None
        return (f"{self.cut_off} generated answers were cut off at --max-tokens {self.max_new_tokens} "
                "(finish_reason length): raise it if the prompt's answers are longer")

    def grade(self, requests: Sequence[GradeRequest]) -> list[GradeResult]:
        results: list[GradeResult | None] = [None] * len(requests)
        score = [i for i, r in enumerate(requests) if r.prompt.mode == "score"]
        gen = [i for i, r in enumerate(requests) if r.prompt.mode != "score"]
        try:
            if score:
                try:
                    replies = self._call([requests[i] for i in score], self.max_new_tokens, self.logprobs)
                except InterruptedBatch as stop:
                    self._score_into(results, requests, score, stop.results)  # the answers that came were paid for
                    raise
                self._score_into(results, requests, score, replies)
            if gen:  # the shared path: parse, answer keys, LLM verification
                for i, res in zip(gen, PromptBackend.grade(self, [requests[i] for i in gen])):
                    results[i] = res
        except KeyboardInterrupt:
            # the engine writes what was answered; the rest (generated answers still to be
            # parsed or verified included) is asked again by a rerun
            raise InterruptedBatch([FAILED if r is None else r for r in results]) from None
        return results  # type: ignore[return-value]

    def _score_into(self, results: list, requests: Sequence[GradeRequest], idx: list[int], replies: list) -> None:
        for i, reply in zip(idx, replies):
            if reply is not None:
                results[i] = self._scored(requests[i], reply)

    def _scored(self, req: GradeRequest, reply) -> GradeResult:
        said = self._said(reply)
        if said is None:
            return FAILED
        read = self.interpret(req, said)  # the judge's own answer, as generate mode reads it
        weights = label_weights(req.prompt.labels, reply.top_logprobs) if self.logprobs else None
        mass = None if weights is None else weights.mass
        if weights is None:
            why = "no logprobs"
        elif read.detail.reasoning is not None and self.min_label_mass > 0:
            why = "reasoning judge"  # the first token is the reasoning's, not the answer's
        else:
            why = label_mass_fallback(weights, self.min_label_mass)
        if why is None:
            scored = scored_result(req.prompt, req.prompt.labels, weights)
            if not scored.parse_ok:
                why = "no label among the alternatives"
            elif self.min_label_mass > 0 and read.parse_ok and read.grade is not None and read.grade != scored.grade:
                why = "the answer states another grade"
            else:
                return GradeResult(reply.text, scored.grade, scored.probs, True,
                                   detail=JudgeDetail(label_mass=mass, served_model=read.detail.served_model))
        return read.with_detail(label_mass=mass, fallback=read.detail.fallback or why)


def label_weights(labels: Sequence[str], top_logprobs: list[dict[str, float]] | None) -> dict[str, float] | None:
    """Probabilities of the labels at the first generated token, from its alternatives,
    as LabelWeights: ``mass`` their sum (of what the server listed), ``top_is_label``
    whether the most probable alternative is a label. None where the server sent none.

    Tokens are compared after stripping spaces (" 4" and "4" are the same answer) and,
    when the labels stay distinct that way, case-insensitively ("yes"/"Yes"); variants
    of one label add up.
    """
    if not top_logprobs or not top_logprobs[0]:
        return None
    first = top_logprobs[0]
    fold = len({lab.lower() for lab in labels}) == len(labels)
    norm = (lambda s: s.strip().lower()) if fold else (lambda s: s.strip())
    index = {norm(lab): lab for lab in labels}
    weights: dict[str, float] = {}
    best, best_is_label = -math.inf, False
    for token, logprob in first.items():
        if logprob is None or not math.isfinite(logprob):
            continue
        lab = index.get(norm(token))
        if lab is not None:
            weights[lab] = weights.get(lab, 0.0) + math.exp(logprob)
        if logprob > best:
            best, best_is_label = logprob, lab is not None
    return LabelWeights.of(weights, min(1.0, sum(weights.values())), best_is_label)
