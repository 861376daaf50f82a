"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import math
import threading
import time

import pytest
from openai_stub import OpenAIStub, Reply, chat_body, completion_body

from exam_eval.backends.http_client import ChatResult, OpenAIClient

pytestmark = pytest.mark.timeout(60)

MSG = [{"role": "user", "content": "hi"}]


def client(stub, **kw):
    kw.setdefault("backoff", 0.01)
    kw.setdefault("timeout", 5.0)
    return OpenAIClient(stub.url, "stub-model", **kw)


def test_plain_chat_and_request_shape(monkeypatch):
    monkeypatch.setenv("EXAM_TEST_KEY", "sk-secret")
    with OpenAIStub(["hello there"]) as stub:
        [res] = client(stub, api_key_env="EXAM_TEST_KEY").chat([MSG], max_tokens=7)
    assert res == ChatResult("hello there", None, None, 1, "stop", None,
                             {"prompt_tokens": 0, "completion_tokens": 0, "reasoning_tokens": 0}, "stub")
    [req] = stub.requests
    assert req.path == "/v1/chat/completions"
    assert req.json["model"] == "stub-model"
    assert req.json["messages"] == MSG
    assert req.json["max_tokens"] == 7 and req.json["temperature"] == 0.0
    assert req.headers["Authorization"] == "Bearer sk-secret"


def test_no_key_no_authorization_header(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAIStub(["x"]) as stub:
        client(stub).chat([MSG])
    assert "Authorization" not in stub.requests[0].headers


def test_429_retry_after_is_honoured():
    with OpenAIStub([Reply(429, retry_after=0.4), "ok"]) as stub:
        t0 = time.monotonic()
        [res] = client(stub, backoff=0.0).chat([MSG])
        elapsed = time.monotonic() - t0
    assert res.text == "ok" and res.attempts == 2
    assert elapsed >= 0.4  # backoff is 0, so only Retry-After can explain the wait


def test_5xx_timeout_malformed_are_retried():
    script = [Reply(500), Reply(503), Reply(200, text="late", delay=1.5),
              Reply(200, body=b'{"choices": [tru'), "finally"]
    with OpenAIStub(script) as stub:
        [res] = client(stub, timeout=0.5).chat([MSG])
    assert res.text == "finally" and res.error is None
    assert res.attempts == 5
    assert len(stub.requests) == 5


def test_malformed_json_reported_never_text():
    with OpenAIStub([Reply(200, body=b"<html>bad gateway</html>")] * 3) as stub:
        [res] = client(stub, max_retries=2).chat([MSG])
    assert res.text is None
    assert "malformed JSON" in res.error and "3 attempts" in res.error
    assert res.attempts == 3


def test_other_4xx_not_retried():
    with OpenAIStub([Reply(400, json={"error": {"message": "context too long"}}), "never"]) as stub:
        [res] = client(stub).chat([MSG])
    assert res.text is None and res.attempts == 1
    assert res.error == "HTTP 400: context too long"
    assert stub.remaining == 1


def test_gives_up_after_max_retries():
    with OpenAIStub([Reply(500)] * 10) as stub:
        [res] = client(stub, max_retries=3).chat([MSG])
    assert res.attempts == 4 and len(stub.requests) == 4
    assert res.error.startswith("HTTP 500")


def test_connection_refused_is_an_error_result():
    with OpenAIStub([]) as stub:
        url = stub.url
    # the server is gone: nothing listens on that port now
    [res] = OpenAIClient(url, "m", max_retries=1, backoff=0.01, timeout=2).chat([MSG])
    assert res.text is None and "connection error" in res.error and res.attempts == 2


def test_concurrency_is_bounded_and_order_kept():
    active = 0
    peak = 0
    lock = threading.Lock()

    def responder(req):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.05)
        with lock:
            active -= 1
        return "echo " + req.prompt_text

    convs = [[{"role": "user", "content": f"q{i}"}] for i in range(20)]
    with OpenAIStub(responder) as stub:
        results = client(stub, concurrency=3).chat(convs)
    assert [r.text for r in results] == [f"echo q{i}" for i in range(20)]
    assert 1 < peak <= 3


def test_many_connections_at_once_are_all_served_without_retries():
    """The stand-in takes as many connections at once as a real server: with
    socketserver's backlog of 5, 16 in flight got resets here (failed calls in
    bench_nuggetizer), which would read as a client fault."""
    convs = [[{"role": "user", "content": f"q{i}"}] for i in range(256)]
    with OpenAIStub(lambda req: Reply(text="echo " + req.prompt_text, delay=0.02)) as stub:
        results = client(stub, concurrency=64, max_retries=0).chat(convs)
    assert [r.error for r in results if not r.ok] == []
    assert [r.text for r in results] == [f"echo q{i}" for i in range(256)]
    assert all(r.attempts == 1 for r in results)


def test_chat_logprobs_parsed():
    alts = [{"4": -0.1, "3": -2.5}, {"<eos>": -0.01}]
    with OpenAIStub([chat_body("4", logprobs=alts)]) as stub:
        [res] = client(stub).chat([MSG], logprobs=True, top_logprobs=2)
    assert stub.requests[0].json["logprobs"] is True
    assert stub.requests[0].json["top_logprobs"] == 2
    assert res.top_logprobs == alts
    assert math.isclose(sum(math.exp(v) for v in res.top_logprobs[0].values()),
                        math.exp(-0.1) + math.exp(-2.5))


def test_completions_route_and_logprobs():
    alts = [{" yes": -0.2, " no": -1.7}]
    with OpenAIStub([completion_body(" yes", logprobs=alts), "plain"]) as stub:
        res = client(stub, concurrency=1).complete(["Is it?", "Again?"], logprobs=True, top_logprobs=2)
    assert stub.requests[0].path == "/v1/completions"
    assert stub.requests[0].json["prompt"] == "Is it?"
    assert stub.requests[0].json["logprobs"] == 2
    assert res[0].text == " yes" and res[0].top_logprobs == alts
    assert res[1].text == "plain" and res[1].top_logprobs is None


def test_progress_callback_sees_every_result():
    seen = []
    with OpenAIStub(lambda r: "a") as stub:
        client(stub, concurrency=4).chat([MSG] * 9, progress=seen.append)
    assert len(seen) == 9 and all(r.text == "a" for r in seen)


def test_retry_after_http_date():
    from email.utils import formatdate

    with OpenAIStub([Reply(429, retry_after=formatdate(time.time() - 5, usegmt=True)), "ok"]) as stub:
        [res] = client(stub).chat([MSG])
    assert res.text == "ok" and res.attempts == 2


def test_failing_callback_does_not_wait_for_the_queue():
    def slow(req):
        time.sleep(0.2)
        return "x"

    def boom(_res):
        raise RuntimeError("stop")

    with OpenAIStub(slow) as stub:
        t0 = time.monotonic()
        with pytest.raises(RuntimeError):
            client(stub, concurrency=2).chat([MSG] * 40, progress=boom)
        elapsed = time.monotonic() - t0
        time.sleep(0.5)  # let the two requests in flight finish
        served = len(stub.requests)
    assert elapsed < 2.0  # 40 calls at 2 in parallel would take 4 s
    assert served < 10


def test_408_is_retried():
    with OpenAIStub([Reply(408), "ok"]) as stub:
        [res] = client(stub).chat([MSG])
    assert res.text == "ok" and res.attempts == 2
