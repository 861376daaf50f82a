"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions and completions
protocol with scripted answers, for testing clients and back ends without a network.

Usage::

    from openai_stub import OpenAIStub, Reply, chat_body

    with OpenAIStub([Reply(429, retry_after=0), "first answer", Reply(500), "second"]) as stub:
        client = OpenAIClient(stub.url, "m", backoff=0.01)
        ...
        assert len(stub.requests) == 4

Script: either a **list** (a queue: each request takes the next entry, in arrival order;
when it runs dry the server answers 500 "stub script exhausted"), or a **callable**
``responder(request: StubRequest) -> entry`` that decides from the request itself (the
way to script per-prompt answers when requests arrive concurrently). An entry is:

- a ``str``: a 200 answer with that text, shaped for the route (chat ``message.content``
  or completions ``text``);
- a ``dict``: sent as the JSON body with status 200 (build one with :func:`chat_body` /
  :func:`completion_body` to add logprobs);
- a :class:`Reply`: full control: ``status``, ``text`` / ``json`` / raw ``body`` bytes
  (e.g. malformed JSON), ``retry_after`` header, ``delay`` seconds before answering
  (beyond the client's timeout to provoke a timeout), extra ``headers``.

Every request is recorded in ``stub.requests`` (``StubRequest``: ``path``, ``headers``,
``json``, ``arrived`` (time.monotonic()); ``prompt_text`` joins the messages or the prompt
for easy matching). POSTs to paths ending in ``/chat/completions`` or ``/completions`` are
served; ``GET .../models`` lists ``models`` where the stub was given some (a list of ids, or
a :class:`Reply` for full control; recorded in ``stub.gets``); anything else is a 404 in the
OpenAI error shape.

Compute: ``service_time`` seconds of work per request, before its scripted answer (and its
``delay``). With ``serial=True`` the work is done one request at a time, the others
queueing for it, as ``transformers serve`` or a one-slot llama.cpp does. Every request is
computed even where its client gave up on it (a real server does not notice until it
writes the answer); with either setting, ``stub.computed`` lists the prompt texts in the
order their work ended, so a test can count how often each was computed, and
``stub.peak`` is the most requests that were computing or queued for it at once.

Waiting on the stub, not sleeping (tests/waiting.py): ``stub.requests`` grows as requests
arrive; ``stub.answered`` lists the POST requests whose reply the stub has written, in that
order; once the clients have ended, ``stub.drain()`` returns when every request they sent is
in ``stub.requests`` (or ``stub.gets``), so that "no further request came" is a fact, not a
guess after a sleep. ``stub.start(port)`` serves on a given port (a server back after a
restart), as does ``OpenAIStub(..., port=P)`` on entry: the same server again for the
cache, which takes answers only from the server (address) that gave them.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = [
    "OpenAIStub",
    "Reply",
    "StubRequest",
    "chat_body",
    "chat_logprobs",
    "completion_body",
    "completion_logprobs",
]


@dataclass
class Reply:
    status: int = 200
    text: str | None = None          # shaped into a completion body for the route
    json: Any = None                 # sent as-is (JSON-encoded)
    body: bytes | None = None        # sent byte for byte (malformed JSON, HTML error pages)
    retry_after: float | str | None = None
    delay: float = 0.0
    headers: dict = field(default_factory=dict)
    logprobs: list[dict[str, float]] | None = None  # per-token alternatives, for ``text`` replies


@dataclass
class StubRequest:
    path: str
    headers: dict
    json: Any
    arrived: float = field(default_factory=time.monotonic)

    @property
    def is_chat(self) -> bool:
        return self.path.endswith("/chat/completions")

    @property
    def prompt_text(self) -> str:
        """All message contents joined by newlines (chat), or the prompt (completions)."""
        body = self.json if isinstance(self.json, dict) else {}
        if "messages" in body:
            return "\n".join(str(m.get("content", "")) for m in body["messages"])
        return str(body.get("prompt", ""))


def chat_logprobs(alternatives: list[dict[str, float]]) -> dict:
    """The chat ``logprobs`` object: one entry per generated token, first key = chosen."""
    content = []
    for alts in alternatives:
        token, lp = next(iter(alts.items()))
        content.append({"token": token, "logprob": lp,
                        "top_logprobs": [{"token": t, "logprob": v} for t, v in alts.items()]})
    return {"content": content}


def completion_logprobs(alternatives: list[dict[str, float]]) -> dict:
    """The legacy completions ``logprobs`` object."""
    tokens = [next(iter(a)) for a in alternatives]
    return {"tokens": tokens, "token_logprobs": [a[t] for a, t in zip(alternatives, tokens)],
            "top_logprobs": [dict(a) for a in alternatives]}


def chat_body(text: str, logprobs: list[dict[str, float]] | None = None, model: str = "stub",
              finish_reason: str = "stop") -> dict:
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                              "finish_reason": finish_reason}
    if logprobs is not None:
        choice["logprobs"] = chat_logprobs(logprobs)
    return {"id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [choice],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


def completion_body(text: str, logprobs: list[dict[str, float]] | None = None, model: str = "stub",
                    finish_reason: str = "stop") -> dict:
    choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": finish_reason}
    if logprobs is not None:
        choice["logprobs"] = completion_logprobs(logprobs)
    return {"id": "cmpl-stub", "object": "text_completion", "created": int(time.time()),
            "model": model, "choices": [choice]}


class _Server(ThreadingHTTPServer):
    # a real server's accept backlog (uvicorn's 2048), not socketserver's 5: past 5
    # connections arriving at once this kernel resets some (syncookies), which a client
    # without retries reports as failed calls (bench_nuggetizer's 16 in flight did)
    request_queue_size = 1024

    def __init__(self, address, handler, stub: OpenAIStub):
        self.stub = stub
        super().__init__(address, handler)

    def process_request(self, request, client_address):
        # here, in the accepting thread, in the order the connections came: a connection
        # is "unread" from now until its handler has read a request from it or its end
        self.stub._unread_add(request)
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.stub._unread_done(request)
            raise


def _error_json(message: str, kind: str = "stub_error") -> dict:
    return {"error": {"message": message, "type": kind}}


class OpenAIStub:
    """Context manager: starts the server on an ephemeral port, stops it on exit."""

    def __init__(self, script: list | Callable[[StubRequest], Any], *, models: list[str] | Reply | None = None,
                 serial: bool = False, service_time: float = 0.0, port: int = 0):
        self._queue = list(script) if not callable(script) else None
        self._responder = script if callable(script) else None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requests: list[StubRequest] = []
        self.answered: list[StubRequest] = []  # POST requests whose reply was written, in that order
        # connections accepted whose handler has not yet read a request (or the end) from
        # them: what drain() waits on
        self._unread: set = set()
        self._reading = threading.Condition(threading.Lock())
        self.models = models
        self.gets: list[StubRequest] = []
        self.serial = serial
        self.service_time = service_time
        # serial: requests are computed in the order they came (a lock's waiters are not
        # woken in order, and one overtaken again and again would look like a slow client)
        self._turns = threading.Condition(threading.Lock())
        self._arrived = 0  # tickets handed out
        self._serving = 0  # the ticket whose turn it is
        self.computed: list[str] = []
        self._load = 0
        self.peak = 0  # the most requests computing or queued for it at once
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = port  # where __enter__ serves (0: a free one): a server back on its address

    # -- lifecycle --------------------------------------------------------------------

    def __enter__(self) -> Self:
        self.start(self.port)
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, port: int = 0) -> None:
        """Serve on ``port`` (0: a free one the system picks)."""
        handler = self._make_handler()
        self._server = _Server(("127.0.0.1", port), handler, self)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()  # wakes handlers sleeping in a `delay`
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def port_in_use(self) -> int:
        assert self._server is not None, "stub not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """Base URL in the OpenAI SDK convention (with ``/v1``)."""
        assert self._server is not None, "stub not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def drain(self, timeout: float = 30.0) -> None:
        """Once the clients have ended (their process exited, their threads returned):
        return when every request they sent is in :attr:`requests` (or :attr:`gets`).

        The stub sends itself a last request on a new connection; the connections are
        accepted in the order they came, so once that one is answered every earlier one
        has been accepted, and then each is waited on until its handler has read a request
        or the end from it. A client still running can always send one more: this is no
        barrier against that."""
        assert self._server is not None, "stub not started"
        host, port = self._server.server_address[:2]
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        try:
            conn.request("GET", "/__drain__", headers={"Connection": "close"})
            conn.getresponse().read()
        finally:
            conn.close()
        with self._reading:
            if not self._reading.wait_for(lambda: not self._unread, timeout):
                raise AssertionError(f"{len(self._unread)} connections to the stub not read after {timeout:g}s: "
                                     "are their clients still running?")

    def _unread_add(self, conn: socket.socket) -> None:
        with self._reading:
            self._unread.add(conn)

    def _unread_done(self, conn: socket.socket) -> None:
        with self._reading:
            self._unread.discard(conn)
            self._reading.notify_all()

    @property
    def remaining(self) -> int:
        """Scripted entries not consumed yet (list scripts only)."""
        return len(self._queue or [])

    # -- answering --------------------------------------------------------------------

    def _next_entry(self, request: StubRequest) -> Any:
        with self._lock:
            self.requests.append(request)
            if self._responder is None:
                if not self._queue:
                    return Reply(500, json=_error_json("stub script exhausted"))
                return self._queue.pop(0)
        return self._responder(request)

    def _compute(self, request: StubRequest) -> bool:
        """The request's work; False where the stub stopped first."""
        if not (self.serial or self.service_time):
            return True
        with self._lock:
            self._load += 1
            self.peak = max(self.peak, self._load)
        try:
            return self._work(request)
        finally:
            with self._lock:
                self._load -= 1

    def _work(self, request: StubRequest) -> bool:
        if self.serial:
            with self._turns:
                ticket = self._arrived
                self._arrived += 1
                while self._serving != ticket:
                    if self._stop.is_set():
                        return False
                    self._turns.wait(0.1)
        try:
            if self._stop.wait(self.service_time):
                return False
            with self._lock:
                self.computed.append(request.prompt_text)
            return True
        finally:
            if self.serial:
                with self._turns:
                    self._serving += 1
                    self._turns.notify_all()

    def _models_reply(self) -> Reply:
        if isinstance(self.models, Reply):
            return self.models
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "stub"} for m in self.models or []]
        return Reply(200, json={"object": "list", "data": data})

    @staticmethod
    def _render(entry: Any, request: StubRequest) -> Reply:
        if isinstance(entry, Reply):
            return entry
        if isinstance(entry, str):
            return Reply(200, text=entry)
        if isinstance(entry, (dict, list)):
            return Reply(200, json=entry)
        raise TypeError(f"unsupported stub entry {entry!r}")

    def _make_handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep pytest output clean
                pass

            def handle_one_request(self):
                again = False
                try:
                    super().handle_one_request()
                    again = not self.close_connection
                finally:
                    # read to a request (or its end) by now, whatever the request was; a
                    # connection kept open is read again for the next one
                    (stub._unread_add if again else stub._unread_done)(self.connection)

            def _send(self, status: int, payload: bytes, headers: dict | None = None) -> bool:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, str(v))
                    self.end_headers()
                    self.wfile.write(payload)
                    return True
                except (BrokenPipeError, ConnectionResetError):
                    return False  # the client gave up (timeout): expected in timeout tests

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                request = StubRequest(self.path, dict(self.headers), body)
                if not (self.path.endswith("/chat/completions") or self.path.endswith("/completions")):
                    self._send(404, json.dumps(_error_json(f"no route {self.path}", "not_found")).encode())
                    return
                entry = stub._next_entry(request)
                stub._unread_done(self.connection)  # recorded: drain() need not wait for the delay
                reply = stub._render(entry, request)
                if not stub._compute(request):
                    return  # the stub is shutting down
                if reply.delay and stub._stop.wait(reply.delay):
                    return  # the stub is shutting down
                if self._answer(reply, request):
                    with stub._lock:
                        stub.answered.append(request)

            def _answer(self, reply: Reply, request: StubRequest) -> bool:
                headers = dict(reply.headers)
                if reply.retry_after is not None:
                    headers["Retry-After"] = reply.retry_after
                if reply.body is not None:
                    payload = reply.body
                elif reply.json is not None:
                    payload = json.dumps(reply.json).encode()
                elif reply.text is not None:
                    make = chat_body if request.is_chat else completion_body
                    payload = json.dumps(make(reply.text, reply.logprobs)).encode()
                elif reply.status >= 400:
                    payload = json.dumps(_error_json(f"scripted status {reply.status}")).encode()
                else:
                    payload = b""
                return self._send(reply.status, payload, headers)

            def do_GET(self):
                if stub.models is None or not self.path.rstrip("/").endswith("/models"):
                    self._send(404, json.dumps(_error_json("stub serves POST only", "not_found")).encode())
                    return
                request = StubRequest(self.path, dict(self.headers), None)
                with stub._lock:
                    stub.gets.append(request)
                stub._unread_done(self.connection)
                reply = stub._models_reply()
                if reply.delay and stub._stop.wait(reply.delay):
                    return
                self._answer(reply, request)

        return Handler


def interrupt_when_asked(argv: list[str], env: dict, stub: OpenAIStub, requests: int, *, settle: float = 0.3,
                         sig: int | None = None, wait: float = 60) -> tuple[int, str]:
    """Run the command ``argv`` against ``stub``; once it has sent ``requests`` requests
    (and ``settle`` seconds more for the answers to be read), send it ``sig`` (SIGTERM)
    and wait for it: (exit status, standard error)."""
    import signal
    import subprocess

    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + wait
    while len(stub.requests) < requests:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"only {len(stub.requests)} requests came"
        time.sleep(0.01)
    time.sleep(settle)
    proc.send_signal(signal.SIGTERM if sig is None else sig)
    _, err = proc.communicate(timeout=wait)
    return proc.returncode, err
