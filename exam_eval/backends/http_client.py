"""A small client for OpenAI-compatible HTTP endpoints (OpenAI, vLLM, TGI, llama.cpp ...).

Shared by ``exam-genq`` (question generation) and the grading back end. It sends many
independent requests with bounded concurrency and returns one :class:`ChatResult` per
request, in input order; a request that fails for good is a result with ``error`` set
and ``text`` None, never an exception, so one bad query cannot sink a run of thousands.

Retries (exponential backoff with jitter, at most ``max_retries`` after the first try):
429 (honouring ``Retry-After``), 5xx, timeouts (ours, and the server's 408), connection errors, and bodies that are not
the JSON the protocol promises (a proxy's HTML error page, a truncated body). Other 4xx
answers mean the request itself is wrong; repeating it cannot help, so they fail at once.
One of them ends the sending: a prompt longer than the model's context (the server's words
read in :mod:`.context_limit`), since the run's other prompts are made alike; the requests
not yet sent fail at once with ``NOT_SENT_TOO_LONG`` and :attr:`OpenAIClient.too_long`
says what the server said, for the command's one line.

Timeouts: ``timeout`` (default 600 s, the OpenAI SDK's) bounds one try, the whole reply
read included. A request that timed out may still be running on the server, which does
not notice that nobody waits for it: a retry sent at once would queue the same work
behind it (on a server answering one request at a time, 10 calls were each computed up
to 6 times). So the retry waits until the requests in flight have drained to what the
window allows after its cut (below), and gets twice the time of the try before (at most
``MAX_TIMEOUT_GROWTH`` times ``timeout``).

In flight: ``concurrency`` is the most requests in flight; how many are is adapted to the
server (:class:`.adaptive_window.Window`). A vLLM-class server batches what it is sent, and its latency
barely rises with load: there the window doubles each round trip, from ``START_WINDOW``
to the maximum within a few round trips. A server that answers one request at a time
queues them, and each one's latency grows with the number in flight: there the window
shrinks until about ``TOLERANCE`` requests are in flight, so each waits for about one
other, the server is never idle, and no request waits long enough to time out. The
signal is the latency of the replies (per generated token) relative to the fastest seen
for replies of their size (prompt and completion tokens, to within a factor of two; a
long answer is no sign of load). A timeout or a 429 halves the window at once, and a
request that timed out counts as in flight until the server has likely finished it.

A server that cannot be reached at all (connection refused, unknown host, no route) for
``down_after`` seconds (default 5) in a row, with no answer of any kind in between, is
taken as down: every request still waiting fails at once, and no further request is sent.
Retries before that point wait no longer than the rest of that bound, so a server that is
down ends a run of thousands of requests within seconds, while a restart shorter than the
bound is ridden through.

Interrupts: the requests run on daemon threads and the caller's thread only waits, so
Ctrl-C (or SIGTERM made an interrupt) returns at once. The requests in flight are
abandoned: their threads send nothing more (no retry, no queued request; a thread waiting
for room in the window looks at the stop flag at least every 0.25 s) and never hold
up the interpreter's exit, as the worker threads of ``concurrent.futures`` would (they are
joined at exit, where a second Ctrl-C broke in with a traceback).

The API key is read only from an environment variable (``OPENAI_API_KEY`` by default);
there is deliberately no way to pass it on a command line, where it would end up in shell
history and process listings. Without the variable no ``Authorization`` header is sent,
which is what a local vLLM server expects.

Implementation note: the standard library (``urllib``) is used rather than ``requests``:
the client only POSTs JSON (and GETs the model list), and this keeps the core install free
of another dependency.
"""

from __future__ import annotations

import errno
import http.client
import json
import os
import queue
import random
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..grading.types import InterruptedBatch
from .adaptive_window import Slot, Window
from .context_limit import ContextOverflow, model_limit, read_overflow
from .http_replies import (MAX_BODY, BadReply, chat_logprobs, completion_logprobs, decoded_body, error_message,
                           json_body, model_ids, model_name, one_line, reasoning_text, retry_after_seconds,
                           usage_counts)
from .token_usage import TokenUsage

__all__ = ["ChatResult", "OpenAIClient"]

# A server asking us to wait longer than this is treated as if it had asked for this long:
# a misconfigured Retry-After must not stall a grading job for hours.
MAX_RETRY_AFTER = 120.0
MAX_BACKOFF = 60.0
DOWN_AFTER = 5.0
# errors that mean no server answered at all (as opposed to resets and timeouts of a
# server that accepted the connection)
_UNREACHABLE = (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL)
# answers that say every request of this run will fail the same way: the key, the model or
# the address is wrong, and thousands of identical refusals help nobody (a paid API's
# quota error included)
_REFUSALS = {401: "check the API key in ${env}", 403: "check the API key in ${env} and its access to the model",
             404: "check --base-url (it usually ends in /v1) and --model"}
MAX_TIMEOUT = 86400.0
#: where a back end that must name a server points in batch mode: nothing is ever sent
NO_SERVER = "http://batch-file.invalid/v1"
#: seconds a request may take, the OpenAI SDK's: a long generation on a busy server takes
#: minutes, a server that serves one request at a time answers the last of a full window
#: late, and a timeout throws away work the server goes on doing
DEFAULT_TIMEOUT = 600.0
#: a retry after a timeout gets twice the time of the try before, up to this many times
#: ``timeout``: once its abandoned copy is out of the way it needs no more than the first
#: try had, and a server that hangs must not hold a request for hours
MAX_TIMEOUT_GROWTH = 4

def check_base_url(url: str) -> str:
    """A usable ``http(s)://host[:port]/path`` or ValueError saying what is wrong, before
    any request (a typo must not look like a server that is down)."""
    from urllib.parse import urlsplit

    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"--base-url must start with http:// or https://, got {url!r}")
    if any(c.isspace() or ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in url):
        raise ValueError(f"--base-url holds white space or control characters: {url!r}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"--base-url {url!r} is not a URL ({exc})") from None
    if not parts.hostname:
        raise ValueError(f"--base-url {url!r} names no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("--base-url must not carry a user name or password (they would be printed and "
                         "logged): put the key in the environment variable of --api-key-env")
    if port == 0:
        raise ValueError(f"--base-url {url!r}: port 0 is not a port")
    return url


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not an instruction: following it would send the request
    and its API key to another address (as a GET, which then fails for another reason)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def server_identity(base_url: str | None, any_server: bool | None = False) -> str:
    """The server's part of a cache identity (``@http://host:8000/v1``): a grade or answer
    is reused only from the server that gave it, since two servers may serve different
    weights under one model name ("m", "default"), unless the user shares them across
    hosts of one model (``any_server``: --cache-any-server). A batch file has no server."""
    if any_server or not base_url or base_url == NO_SERVER:
        return ""
    parts = urllib.parse.urlsplit(base_url.strip())
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443}.get(scheme)
    return f"@{scheme}://{(parts.hostname or '').lower()}:{port}{parts.path.rstrip('/')}"


@dataclass
class ChatResult:
    """One request's outcome.

    ``text`` is the model's output (None on failure); ``error`` says why it failed (None on
    success); ``top_logprobs`` has, per generated token, a ``{token: logprob}`` dict of the
    alternatives the server reported (None unless logprobs were requested and returned);
    ``attempts`` counts HTTP tries including the successful one. ``reasoning`` is a
    reasoning model's thinking where the server sends it beside the answer
    (``reasoning_content`` or ``reasoning``); ``usage`` the tokens the reply says it took
    (``prompt_tokens``, ``completion_tokens``, ``reasoning_tokens``); ``model`` the model id
    the server reported. Each is None where the reply does not say.
    """

    text: str | None
    error: str | None
    top_logprobs: list[dict[str, float]] | None
    attempts: int
    finish_reason: str | None = None
    reasoning: str | None = None
    usage: dict[str, int] | None = None
    model: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class _Parsed(NamedTuple):
    """What a reply body says, read and checked."""

    text: str
    logprobs: list[dict[str, float]] | None
    finish_reason: str | None
    reasoning: str | None
    usage: dict[str, int] | None
    model: str | None


class _Retryable(Exception):
    """A failure worth another try; ``wait`` overrides the backoff (Retry-After)."""

    def __init__(self, message: str, wait: float | None = None):
        super().__init__(message)
        self.wait = wait


class _TimedOut(_Retryable):
    """Our timeout: the server may still be working on the request."""


class _Busy(_Retryable):
    """429: the server (or its quota) asks for fewer requests."""


class _Unreachable(_Retryable):
    """No server answered: the connection was refused or the host cannot be reached."""


class _Fatal(Exception):
    """A failure that another try cannot fix (4xx other than 429)."""


class _Refused(_Fatal):
    """An answer that every request of the run would get (401, 403, 404): nothing more is sent."""


class _TooLong(_Fatal):
    """The prompt does not fit the model's context: the run's other prompts, made alike,
    would not either, so nothing more is sent (:attr:`OpenAIClient.too_long`)."""

    def __init__(self, message: str, overflow: ContextOverflow):
        super().__init__(message)
        self.overflow = overflow


#: the error of a request not sent because an earlier one was longer than the model's context
NOT_SENT_TOO_LONG = "not sent: an earlier prompt was longer than the model's context"


def _unreachable_reason(exc: BaseException) -> str | None:
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host name ({exc.strerror or exc})"
    if isinstance(exc, OSError) and exc.errno in _UNREACHABLE:
        return os.strerror(exc.errno).lower()
    return None


def _run_on_daemons(work: Callable[[int, Slot | None], None], n: int, threads: int, stop: threading.Event,
                    window: Window | None = None) -> None:
    """``work(i, slot)`` for i in range(n) on ``threads`` daemon threads, while the calling
    thread waits, interruptibly. A thread takes the next item only once ``window`` has room
    (``slot``: its place there, None without a window). Stops at the first exception
    (re-raised here) or interrupt, setting ``stop``; the threads then take no further item
    and are left to end alone."""
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for i in range(n):
        todo.put(i)
    left = [n]
    failed: list[BaseException] = []
    count = threading.Lock()
    # a bare lock, released once when the work is over: waiting on it is one C call, which
    # an interrupt leaves cleanly (a second Ctrl-C inside Event.wait's Python code can
    # leave its condition half released: "RuntimeError: release unlocked lock")
    over = threading.Lock()
    over.acquire()

    def finish() -> None:
        try:
            over.release()
        except RuntimeError:  # released already (a failure raced the last item)
            pass

    def next_item() -> tuple[int, Slot | None] | None:
        slot = None
        if window is not None:
            slot = window.enter(stop)
            if slot is None:
                return None
        try:
            return todo.get_nowait(), slot
        except queue.Empty:
            if slot is not None:
                window.release(slot)
            return None

    def worker() -> None:
        while not stop.is_set():
            item = next_item()
            if item is None:
                return
            try:
                work(*item)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                failed.append(exc)
                stop.set()
                finish()
                return
            with count:
                left[0] -= 1
                done = left[0] == 0
            if done:
                finish()

    for k in range(threads):
        threading.Thread(target=worker, name=f"exam_eval-http-{k}", daemon=True).start()
    try:
        while not over.acquire(timeout=0.25):  # short waits: a signal is handled at once everywhere
            pass
    finally:
        stop.set()
    if failed:
        raise failed[0]


CHAT_ROUTE = "/chat/completions"
COMPLETIONS_ROUTE = "/completions"


def chat_body(model: str, messages: Sequence[dict], *, max_tokens: int = 512, temperature: float = 0.0,
              logprobs: bool = False, top_logprobs: int | None = None, **extra: Any) -> dict[str, Any]:
    """The JSON body of one chat request, as :meth:`OpenAIClient.chat` sends it (and a
    batch file holds it: exam_eval.backends.batch_files)."""
    body: dict[str, Any] = {"model": model, "messages": list(messages), "max_tokens": max_tokens,
                            "temperature": temperature}
    if logprobs or top_logprobs:
        body["logprobs"] = True
        if top_logprobs:
            body["top_logprobs"] = int(top_logprobs)
    body.update(extra)
    return body


def completion_body(model: str, prompt: str, *, max_tokens: int = 512, temperature: float = 0.0,
                    logprobs: bool = False, top_logprobs: int | None = None, **extra: Any) -> dict[str, Any]:
    """The JSON body of one legacy text completion, as :meth:`OpenAIClient.complete` sends it."""
    body: dict[str, Any] = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": temperature}
    if logprobs or top_logprobs:
        # the legacy API takes the number of alternatives in `logprobs` itself
        body["logprobs"] = int(top_logprobs or 1)
    body.update(extra)
    return body


def reply_of(route: str, body: Any) -> ChatResult:
    """A reply body that came some other way (a batch service's results file), read as
    the client reads one from the server: a malformed one is an error, as it would be
    after the client's last retry."""
    try:
        reply = (OpenAIClient._parse_chat if route == CHAT_ROUTE else OpenAIClient._parse_completion)(body)
    except (_Retryable, BadReply) as exc:
        return ChatResult(None, str(exc), None, 1)
    return ChatResult(reply.text, None, reply.logprobs, 1, reply.finish_reason, reply.reasoning, reply.usage,
                      reply.model)


class OpenAIClient:
    """Concurrent, retrying client for ``/chat/completions`` and ``/completions``.

    ``base_url`` includes the version prefix, as in the OpenAI SDK
    (``https://api.openai.com/v1``, ``http://localhost:8000/v1``). ``concurrency`` is the
    most requests in flight (the window adapts below it); ``timeout`` bounds one try
    (``DEFAULT_TIMEOUT``, 600 s). :attr:`usage` totals the tokens of every successful reply.
    """

    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY",
                 concurrency: int = 8, max_retries: int = 5, timeout: float = DEFAULT_TIMEOUT,
                 backoff: float = 1.0, down_after: float = DOWN_AFTER):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if down_after < 0:
            raise ValueError("down_after must be >= 0")
        if not (isinstance(timeout, (int, float)) and 0 < timeout <= MAX_TIMEOUT):
            raise ValueError(f"timeout must be above 0 and at most {MAX_TIMEOUT:g} seconds, got {timeout!r}")
        self.base_url = check_base_url(base_url).rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.timeout = timeout
        self.backoff = backoff
        self.down_after = down_after
        self._rng = random.Random()
        self._rng_lock = threading.Lock()
        self._reach_lock = threading.Lock()
        self._unreachable_since: float | None = None  # first failure to connect with no answer since
        self.down: str | None = None  # why the server was taken as down; then nothing is sent
        #: the first prompt the server found longer than its model's context; then nothing is sent
        self.too_long: ContextOverflow | None = None
        # kept from one call to the next: what it learnt of the server holds for the next batch
        self._window = Window(concurrency)
        self.usage = TokenUsage()

    # -- public API -------------------------------------------------------------------

    def chat(self, conversations: Sequence[Sequence[dict]], *, max_tokens: int = 512,
             temperature: float = 0.0, logprobs: bool = False, top_logprobs: int | None = None,
             progress: Callable[[ChatResult], Any] | str | None = None,
             **extra: Any) -> list[ChatResult]:
        """One chat completion per message list (``[{"role", "content"}, ...]``).

        ``progress``: a callable invoked with each finished result (from worker threads),
        or a string, shown as the description of a rich progress bar on stderr.
        ``extra`` keys (``stop``, ``seed``, ...) are sent as they are.
        """
        payloads = [chat_body(self.model, messages, max_tokens=max_tokens, temperature=temperature,
                              logprobs=logprobs, top_logprobs=top_logprobs, **extra) for messages in conversations]
        return self._run(CHAT_ROUTE, payloads, self._parse_chat, progress)

    def complete(self, prompts: Sequence[str], *, max_tokens: int = 512, temperature: float = 0.0,
                 logprobs: bool = False, top_logprobs: int | None = None,
                 progress: Callable[[ChatResult], Any] | str | None = None,
                 **extra: Any) -> list[ChatResult]:
        """One legacy text completion per prompt (the ``/completions`` route)."""
        payloads = [completion_body(self.model, prompt, max_tokens=max_tokens, temperature=temperature,
                                    logprobs=logprobs, top_logprobs=top_logprobs, **extra) for prompt in prompts]
        return self._run(COMPLETIONS_ROUTE, payloads, self._parse_completion, progress)

    def list_models(self, timeout: float = 10.0) -> list[str] | None:
        """The ids of the models the server says it serves (``GET /models``), or None where
        it does not say: any HTTP error, no answer within ``timeout``, a body that is not a
        model list. Never raises (but KeyboardInterrupt) and never retries: a server that
        cannot list its models may still serve them."""
        return model_ids(self._models_body(timeout))

    def _models_body(self, timeout: float) -> Any:
        req = urllib.request.Request(self.base_url + "/models", headers=self._headers(), method="GET")
        try:
            with _OPENER.open(req, timeout=timeout) as resp:
                raw = self._read(resp, time.monotonic() + timeout)
                encoding = resp.headers.get("Content-Encoding")
            return json_body(decoded_body(raw, encoding))
        except Exception:  # noqa: BLE001 - every failure means the same here: no list
            return None

    # -- machinery --------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "User-Agent": "exam_eval-http-client"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _run(self, route: str, payloads: list[dict], parse, progress) -> list[ChatResult]:
        if not payloads:
            return []
        url = self.base_url + route
        headers = self._headers()
        results: list[ChatResult | None] = [None] * len(payloads)
        bar = None
        callback = progress if callable(progress) else None
        if isinstance(progress, str):
            from rich.console import Console
            from rich.progress import Progress

            bar = Progress(console=Console(stderr=True), transient=False)
            task = bar.add_task(progress, total=len(payloads))
            bar.start()
        lock = threading.Lock()
        stop = threading.Event()

        def work(i: int, slot: Slot | None = None) -> None:
            res = self._request(url, headers, payloads[i], parse, stop, slot)
            results[i] = res
            if callback is not None:
                with lock:
                    callback(res)
            if bar is not None:
                bar.advance(task)

        try:
            if self.concurrency == 1 or len(payloads) == 1:
                for i in range(len(payloads)):  # here a signal breaks into the request itself
                    work(i)
            else:
                _run_on_daemons(work, len(payloads), min(self.concurrency, len(payloads)), stop, self._window)
        except KeyboardInterrupt:  # the results that came travel with it (None: abandoned)
            raise InterruptedBatch(list(results)) from None
        finally:
            stop.set()  # an interrupt or a failing callback: the workers send nothing more
            if bar is not None:
                bar.stop()
        return results  # type: ignore[return-value]

    def _sleep_for(self, attempt: int, wait: float | None) -> float:
        if wait is not None:
            return min(wait, MAX_RETRY_AFTER)
        with self._rng_lock:
            jitter = self._rng.uniform(0.5, 1.5)
        return min(self.backoff * (2 ** (attempt - 1)) * jitter, MAX_BACKOFF)

    def _reached(self) -> None:
        if self._unreachable_since is not None:
            with self._reach_lock:
                self._unreachable_since = None

    def _unreachable(self, reason: str) -> float | None:
        """Note a failure to connect; the seconds left before the server counts as down
        (None once it does, and then :attr:`down` says why)."""
        now = time.monotonic()
        with self._reach_lock:
            if self.down is not None:
                return None
            if self._unreachable_since is None:
                self._unreachable_since = now
            left = self._unreachable_since + self.down_after - now
            if left > 0:
                return left
            self.down = (f"cannot connect to {self.base_url}: {reason} for {self.down_after:g}s; "
                         "taken as down, no further requests sent")
            return None

    def _too_long(self, overflow: ContextOverflow) -> None:
        """Note the first prompt too long for the model, with the limit ``/models`` gives
        (vLLM's ``max_model_len``) where the refusal named none."""
        if overflow.limit is None:
            overflow = overflow.with_limit(model_limit(self._models_body(10.0), self.model))
        with self._reach_lock:
            if self.too_long is None:
                self.too_long = overflow

    def _request(self, url: str, headers: dict, payload: dict, parse,
                 stop: threading.Event | None = None, slot: Slot | None = None) -> ChatResult:
        """One request with its retries. ``slot`` (the window's, for the first try) marks a
        request sent from the worker threads: its tries go through the window; without one
        (the caller's thread) they do not wait for it."""
        window = self._window if slot is not None else None
        data = json.dumps(payload).encode("utf-8")
        last_error = "no attempt made"
        timeout = self.timeout
        attempt = 0
        try:
            for attempt in range(1, self.max_retries + 2):
                if window is not None and slot is None:
                    slot = window.enter(stop)  # a retry after a timeout waits here for the cut window
                if self.down is not None:
                    return ChatResult(None, self.down, None, attempt - 1)
                if self.too_long is not None:
                    return ChatResult(None, NOT_SENT_TOO_LONG, None, attempt - 1)
                if (stop is not None and stop.is_set()) or (window is not None and slot is None):
                    return ChatResult(None, "interrupted", None, attempt - 1)
                try:
                    reply = self._attempt(url, headers, data, parse, timeout, slot)
                    self.usage.add(reply.usage)
                    return ChatResult(reply.text, None, reply.logprobs, attempt, reply.finish_reason,
                                      reply.reasoning, reply.usage, reply.model)
                except _Refused as exc:
                    with self._reach_lock:
                        if self.down is None:
                            self.down = str(exc)
                    return ChatResult(None, self.down, None, attempt)
                except _TooLong as exc:
                    self._too_long(exc.overflow)
                    return ChatResult(None, str(exc), None, attempt)
                except _Fatal as exc:
                    return ChatResult(None, str(exc), None, attempt)
                except _Unreachable as exc:
                    last_error = str(exc)
                    left = self._unreachable(str(exc).removeprefix("connection error: "))
                    if left is None:
                        return ChatResult(None, self.down, None, attempt)
                    if attempt <= self.max_retries:
                        self._pause(min(self._sleep_for(attempt, exc.wait), left), stop)
                except _Retryable as exc:
                    last_error = str(exc)
                    if isinstance(exc, _TimedOut):  # the try may still be running: give the next more time
                        timeout = min(timeout * 2, self.timeout * MAX_TIMEOUT_GROWTH, MAX_TIMEOUT)
                    if attempt <= self.max_retries:
                        self._pause(self._sleep_for(attempt, exc.wait), stop)
                finally:
                    slot = None  # _attempt gave it back
        finally:
            if slot is not None:  # taken, but nothing was sent with it
                self._window.release(slot)
        return ChatResult(None, f"{last_error} (gave up after {attempt} attempts)", None, attempt)

    def _attempt(self, url: str, headers: dict, data: bytes, parse, timeout: float, slot: Slot | None) -> _Parsed:
        """One try; the window (where the try holds a slot there) hears how it went."""
        try:
            reply = parse(self._post(url, headers, data, timeout))
        except _TimedOut:
            if slot is not None:
                self._window.congested(slot, linger=timeout)
            raise
        except _Busy:
            if slot is not None:
                self._window.congested(slot)
            raise
        except BaseException:
            if slot is not None:
                self._window.release(slot)
            raise
        if slot is not None:
            self._window.answered(slot, reply.usage)
        return reply

    @staticmethod
    def _pause(seconds: float, stop: threading.Event | None) -> None:
        """A back-off sleep that an interrupt cuts short."""
        if stop is None:
            time.sleep(seconds)
        else:
            stop.wait(seconds)

    def _post(self, url: str, headers: dict, data: bytes, timeout: float) -> Any:
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        deadline = time.monotonic() + timeout
        try:
            with _OPENER.open(req, timeout=timeout) as resp:
                self._reached()
                raw = self._read(resp, deadline)
                encoding = resp.headers.get("Content-Encoding")
        except urllib.error.HTTPError as exc:
            self._reached()
            raise self._http_error(exc, url) from None
        except TimeoutError:
            raise _TimedOut(f"timed out after {timeout:g}s") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (TimeoutError, socket.timeout)):
                raise _TimedOut(f"timed out after {timeout:g}s") from None
            unreachable = _unreachable_reason(exc.reason) if isinstance(exc.reason, BaseException) else None
            if unreachable is not None:
                raise _Unreachable(f"connection error: {unreachable}") from None
            raise _Retryable(f"connection error: {one_line(str(exc.reason))}") from None
        except (http.client.HTTPException, ConnectionError, OSError) as exc:
            unreachable = _unreachable_reason(exc)
            if unreachable is not None:
                raise _Unreachable(f"connection error: {unreachable}") from None
            raise _Retryable(f"connection error: {exc.__class__.__name__}: {one_line(str(exc))}") from None
        try:
            return json_body(decoded_body(raw, encoding))
        except BadReply as exc:
            raise _Retryable(str(exc)) from None

    def _read(self, resp, deadline: float) -> bytes:
        """The whole body within the request's time (a server trickling a byte a second
        must not hold a request for ever) and size (MAX_BODY)."""
        chunks, size = [], 0
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError
            chunk = resp.read1(65536)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > MAX_BODY:
                raise _Fatal(f"the reply is larger than {MAX_BODY // 2**20} MiB; not read")
            chunks.append(chunk)

    def _http_error(self, exc: urllib.error.HTTPError, url: str) -> Exception:
        try:
            raw = exc.read(65536)
        except (OSError, http.client.HTTPException):  # a cut-off body: the status says enough
            raw = b""
        said = error_message(raw) or one_line(str(exc.reason or ""))
        msg = f"HTTP {exc.code}" + (f": {said}" if said else "")
        if 300 <= exc.code < 400:
            where = one_line(exc.headers.get("Location") or "an address it did not give")
            return _Fatal(f"HTTP {exc.code}: {url} redirects to {where}; not followed (a request and its API key go "
                          "only to --base-url): give the address it should be as --base-url")
        if exc.code == 429:
            return _Busy(msg, retry_after_seconds(exc.headers.get("Retry-After")))
        if exc.code >= 500 or exc.code == 408:  # 408: the server's own request timeout
            return _Retryable(msg)
        if exc.code in _REFUSALS:
            fix = _REFUSALS[exc.code].replace("${env}", self.api_key_env)
            return _Refused(f"{msg} (POST {url}); no further requests sent: {fix}")
        overflow = read_overflow(exc.code, raw, said)
        if overflow is not None:
            return _TooLong(msg, overflow)
        return _Fatal(msg)

    @staticmethod
    def _first_choice(body: Any) -> dict:
        if not isinstance(body, dict):
            raise _Retryable("malformed response: not a JSON object")
        if "error" in body and "choices" not in body:
            raise _Retryable(f"server error in body: {error_message(json.dumps(body).encode())}")
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _Retryable("malformed response: no choices")
        return choices[0]

    @staticmethod
    def _details(body: dict, choice: dict) -> tuple[str | None, dict[str, int] | None, str | None]:
        """What a reply says beside its text: the finish reason, the usage, the model id."""
        finish = choice.get("finish_reason")
        return (finish if isinstance(finish, str) else None), usage_counts(body), model_name(body.get("model"))

    @staticmethod
    def _parse_chat(body: Any) -> _Parsed:
        choice = OpenAIClient._first_choice(body)
        message = choice.get("message")
        if not isinstance(message, dict):
            raise _Retryable("malformed response: choice without message")
        content = message.get("content")
        if content is None:
            content = ""  # a refusal or a tool call: no text, but a well-formed answer
        if not isinstance(content, str):
            raise _Retryable("malformed response: message content is not a string")
        finish, usage, model = OpenAIClient._details(body, choice)
        return _Parsed(content, chat_logprobs(choice), finish, reasoning_text(message), usage, model)

    @staticmethod
    def _parse_completion(body: Any) -> _Parsed:
        choice = OpenAIClient._first_choice(body)
        text = choice.get("text")
        if not isinstance(text, str):
            raise _Retryable("malformed response: choice without text")
        finish, usage, model = OpenAIClient._details(body, choice)
        return _Parsed(text, completion_logprobs(choice), finish, None, usage, model)
