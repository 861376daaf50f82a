"""A small client for OpenAI-compatible HTTP endpoints (OpenAI, vLLM, TGI, llama.cpp ...).

Shared by ``exam-genq`` (question generation) and the grading back end. It sends many
independent requests with bounded concurrency and returns one :class:`ChatResult` per
request, in input order; a request that fails for good is a result with ``error`` set
and ``text`` None, never an exception, so one bad query cannot sink a run of thousands.

Retries (exponential backoff with jitter, at most ``max_retries`` after the first try):
429 (honouring ``Retry-After``), 5xx, timeouts (ours, and the server's 408), connection errors, and bodies that are not
the JSON the protocol promises (a proxy's HTML error page, a truncated body). Other 4xx
answers mean the request itself is wrong; repeating it cannot help, so they fail at once.

A server that cannot be reached at all (connection refused, unknown host, no route) for
``down_after`` seconds (default 5) in a row, with no answer of any kind in between, is
taken as down: every request still waiting fails at once, and no further request is sent.
Retries before that point wait no longer than the rest of that bound, so a server that is
down ends a run of thousands of requests within seconds, while a restart shorter than the
bound is ridden through.

Interrupts: the requests run on daemon threads and the caller's thread only waits, so
Ctrl-C (or SIGTERM made an interrupt) returns at once. The requests in flight are
abandoned: their threads send nothing more (no retry, no queued request) and never hold
up the interpreter's exit, as the worker threads of ``concurrent.futures`` would (they are
joined at exit, where a second Ctrl-C broke in with a traceback).

The API key is read only from an environment variable (``OPENAI_API_KEY`` by default);
there is deliberately no way to pass it on a command line, where it would end up in shell
history and process listings. Without the variable no ``Authorization`` header is sent,
which is what a local vLLM server expects.

Implementation note: the standard library (``urllib``) is used rather than ``requests``:
the client only POSTs JSON, and this keeps the core install free of another dependency.
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
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..grading.types import InterruptedBatch
from .http_replies import (MAX_BODY, BadReply, chat_logprobs, completion_logprobs, decoded_body, error_message,
                           json_body, one_line, retry_after_seconds)

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


@dataclass
class ChatResult:
    """One request's outcome.

    ``text`` is the model's output (None on failure); ``error`` says why it failed (None on
    success); ``top_logprobs`` has, per generated token, a ``{token: logprob}`` dict of the
    alternatives the server reported (None unless logprobs were requested and returned);
    ``attempts`` counts HTTP tries including the successful one.
    """

    text: str | None
    error: str | None
    top_logprobs: list[dict[str, float]] | None
    attempts: int
    finish_reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class _Retryable(Exception):
    """A failure worth another try; ``wait`` overrides the backoff (Retry-After)."""

    def __init__(self, message: str, wait: float | None = None):
        super().__init__(message)
        self.wait = wait


class _Unreachable(_Retryable):
    """No server answered: the connection was refused or the host cannot be reached."""


class _Fatal(Exception):
    """A failure that another try cannot fix (4xx other than 429)."""


class _Refused(_Fatal):
    """An answer that every request of the run would get (401, 403, 404): nothing more is sent."""


def _unreachable_reason(exc: BaseException) -> str | None:
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host name ({exc.strerror or exc})"
    if isinstance(exc, OSError) and exc.errno in _UNREACHABLE:
        return os.strerror(exc.errno).lower()
    return None


def _run_on_daemons(work: Callable[[int], None], n: int, threads: int, stop: threading.Event) -> None:
    """``work(i)`` for i in range(n) on ``threads`` daemon threads, while the calling thread
    waits, interruptibly. Stops at the first exception (re-raised here) or interrupt,
    setting ``stop``; the threads then take no further item and are left to end alone."""
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

    def worker() -> None:
        while not stop.is_set():
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            try:
                work(i)
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


class OpenAIClient:
    """Concurrent, retrying client for ``/chat/completions`` and ``/completions``.

    ``base_url`` includes the version prefix, as in the OpenAI SDK
    (``https://api.openai.com/v1``, ``http://localhost:8000/v1``).
    """

    def __init__(self, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY",
                 concurrency: int = 8, max_retries: int = 5, timeout: float = 60.0,
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
        payloads = []
        for messages in conversations:
            body: dict[str, Any] = {"model": self.model, "messages": list(messages),
                                    "max_tokens": max_tokens, "temperature": temperature}
            if logprobs or top_logprobs:
                body["logprobs"] = True
                if top_logprobs:
                    body["top_logprobs"] = int(top_logprobs)
            body.update(extra)
            payloads.append(body)
        return self._run("/chat/completions", payloads, self._parse_chat, progress)

    def complete(self, prompts: Sequence[str], *, max_tokens: int = 512, temperature: float = 0.0,
                 logprobs: bool = False, top_logprobs: int | None = None,
                 progress: Callable[[ChatResult], Any] | str | None = None,
                 **extra: Any) -> list[ChatResult]:
        """One legacy text completion per prompt (the ``/completions`` route)."""
        payloads = []
        for prompt in prompts:
            body: dict[str, Any] = {"model": self.model, "prompt": prompt,
                                    "max_tokens": max_tokens, "temperature": temperature}
            if logprobs or top_logprobs:
                # the legacy API takes the number of alternatives in `logprobs` itself
                body["logprobs"] = int(top_logprobs or 1)
            body.update(extra)
            payloads.append(body)
        return self._run("/completions", payloads, self._parse_completion, progress)

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

        def work(i: int) -> None:
            res = self._request(url, headers, payloads[i], parse, stop)
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
                _run_on_daemons(work, len(payloads), min(self.concurrency, len(payloads)), stop)
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

    def _request(self, url: str, headers: dict, payload: dict, parse,
                 stop: threading.Event | None = None) -> ChatResult:
        data = json.dumps(payload).encode("utf-8")
        last_error = "no attempt made"
        attempt = 0
        for attempt in range(1, self.max_retries + 2):
            if self.down is not None:
                return ChatResult(None, self.down, None, attempt - 1)
            if stop is not None and stop.is_set():
                return ChatResult(None, "interrupted", None, attempt - 1)
            try:
                body = self._post(url, headers, data)
                text, logprobs, finish = parse(body)
                return ChatResult(text, None, logprobs, attempt, finish)
            except _Refused as exc:
                with self._reach_lock:
                    if self.down is None:
                        self.down = str(exc)
                return ChatResult(None, self.down, None, attempt)
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
                if attempt <= self.max_retries:
                    self._pause(self._sleep_for(attempt, exc.wait), stop)
        return ChatResult(None, f"{last_error} (gave up after {attempt} attempts)", None, attempt)

    @staticmethod
    def _pause(seconds: float, stop: threading.Event | None) -> None:
        """A back-off sleep that an interrupt cuts short."""
        if stop is None:
            time.sleep(seconds)
        else:
            stop.wait(seconds)

    def _post(self, url: str, headers: dict, data: bytes) -> Any:
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        deadline = time.monotonic() + self.timeout
        try:
            with _OPENER.open(req, timeout=self.timeout) as resp:
                self._reached()
                raw = self._read(resp, deadline)
                encoding = resp.headers.get("Content-Encoding")
        except urllib.error.HTTPError as exc:
            self._reached()
            raise self._http_error(exc, url) from None
        except TimeoutError:
            raise _Retryable(f"timed out after {self.timeout:g}s") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (TimeoutError, socket.timeout)):
                raise _Retryable(f"timed out after {self.timeout:g}s") from None
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
            return _Retryable(msg, retry_after_seconds(exc.headers.get("Retry-After")))
        if exc.code >= 500 or exc.code == 408:  # 408: the server's own request timeout
            return _Retryable(msg)
        if exc.code in _REFUSALS:
            fix = _REFUSALS[exc.code].replace("${env}", self.api_key_env)
            return _Refused(f"{msg} (POST {url}); no further requests sent: {fix}")
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

    def _parse_chat(self, body: Any):
        choice = self._first_choice(body)
        message = choice.get("message")
        if not isinstance(message, dict):
            raise _Retryable("malformed response: choice without message")
        content = message.get("content")
        if content is None:
            content = ""  # a refusal or a tool call: no text, but a well-formed answer
        if not isinstance(content, str):
            raise _Retryable("malformed response: message content is not a string")
        return content, chat_logprobs(choice), choice.get("finish_reason")

    def _parse_completion(self, body: Any):
        choice = self._first_choice(body)
        text = choice.get("text")
        if not isinstance(text, str):
            raise _Retryable("malformed response: choice without text")
        return text, completion_logprobs(choice), choice.get("finish_reason")
