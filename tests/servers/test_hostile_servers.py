"""Servers that misbehave (a sweep with ~60 hostile server modes): what the client and the
endpoint back end make of malformed logprobs, redirects, trickled and oversized bodies,
compressed or non-UTF-8 bodies, refusals that every request would get, bad Retry-After
values, unprintable error texts and unusable base URLs."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from openai_stub import OpenAIStub, Reply, chat_body

from exam_eval.backends.endpoint import EndpointBackend, label_weights
from exam_eval.backends.http_client import OpenAIClient, check_base_url
from exam_eval.backends.http_replies import chat_logprobs, completion_logprobs, retry_after_seconds
from exam_eval.errors import UsageError

pytestmark = pytest.mark.timeout(60)

MSG = [{"role": "user", "content": "hi"}]


def client(url, **kw):
    kw.setdefault("backoff", 0.01)
    kw.setdefault("timeout", 5.0)
    return OpenAIClient(url, "stub-model", **kw)


def _choice(content_logprobs):
    return {"message": {"content": "3"}, "logprobs": {"content": content_logprobs}}


@pytest.mark.parametrize("block", [
    [{"token": "3", "logprob": None, "top_logprobs": []}],
    [{"token": "3", "logprob": "abc", "top_logprobs": []}],
    [{"token": "3", "logprob": -0.1, "top_logprobs": [{"tok_str": "3", "prob": 0.9}]}],  # old llama.cpp shape
    [None, 5],
    [{"token": "3", "logprob": -0.1, "top_logprobs": [{"token": "3", "logprob": float("nan")},
                                                       {"token": "1", "logprob": -1.0}]}],
    [{"token": "3", "logprob": 1e6, "top_logprobs": []}],
    [{"token": 3, "logprob": -0.1, "top_logprobs": []}],
    [{"token": "3", "logprob": True, "top_logprobs": []}],
])
def test_a_logprobs_block_that_is_not_one_is_ignored_whole(block):
    assert chat_logprobs(_choice(block)) is None


def test_well_formed_logprobs_still_read():
    block = [{"token": "3", "logprob": -0.1, "top_logprobs": [{"token": "3", "logprob": -0.1},
                                                               {"token": "1", "logprob": float("-inf")},
                                                               {"token": "2", "logprob": 1e-7}]}]
    assert chat_logprobs(_choice(block)) == [{"3": -0.1, "1": float("-inf"), "2": 0.0}]
    legacy = {"logprobs": {"top_logprobs": [{"3": -0.2, "4": -2.0}]}}
    assert completion_logprobs(legacy) == [{"3": -0.2, "4": -2.0}]
    assert completion_logprobs({"logprobs": {"top_logprobs": [{"3": "x"}]}}) is None
    assert completion_logprobs({"logprobs": {"tokens": ["3"], "token_logprobs": [float("nan")]}}) is None


def test_nan_and_huge_logprobs_grade_from_the_text_not_from_what_is_left():
    """The chosen token's NaN renormalised the rest into a confident grade; 1e6 overflowed."""
    from exam_eval.grading.prompts import get_prompt
    from exam_eval.grading.types import GradeRequest

    prompt = get_prompt("question-selfrating")
    replies = [Reply(200, json={"choices": [{"message": {"content": "4"}, "finish_reason": "stop", "logprobs": {
        "content": [{"token": "4", "logprob": float("nan"),
                     "top_logprobs": [{"token": "4", "logprob": float("nan")}, {"token": "1", "logprob": -1.0}]}]}}]}),
               Reply(200, json={"choices": [{"message": {"content": "2"}, "finish_reason": "stop", "logprobs": {
                   "content": [{"token": "2", "logprob": 1e6, "top_logprobs": []}]}}]})]
    with OpenAIStub(replies) as stub:
        b = EndpointBackend(model="m", base_url=stub.url, concurrency=1, backoff=0.01)
        out = b.grade([GradeRequest(prompt, "q", "what?", "passage one"), GradeRequest(prompt, "q", "why?", "passage two")])
    assert [r.grade for r in out] == [4, 2] and all(r.probs is None for r in out)
    assert label_weights(["0", "1"], [{"1": -1.0}]) == {"1": pytest.approx(0.3679, abs=1e-4)}


class _Server:
    """A raw server for what the stub does not do: redirects, trickles, huge and gzip bodies."""

    def __init__(self, handler):
        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.server.seen.append(dict(self.headers))
                handler(self)

            do_GET = do_POST

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.httpd.seen = []
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _send(h, status, body: bytes, **headers):
    h.send_response(status)
    h.send_header("Content-Length", str(len(body)))
    for k, v in headers.items():
        h.send_header(k.replace("_", "-"), v)
    h.end_headers()
    h.wfile.write(body)


def test_a_redirect_is_not_followed_and_the_key_goes_nowhere_else(monkeypatch):
    monkeypatch.setenv("EXAM_TEST_KEY", "sk-SECRET")
    target = _Server(lambda h: _send(h, 200, json.dumps(chat_body("hijacked")).encode()))
    source = _Server(lambda h: _send(h, 301, b"", Location=target.url + "/chat/completions"))
    try:
        [res] = client(source.url, api_key_env="EXAM_TEST_KEY").chat([MSG])
    finally:
        source.close()
        target.close()
    assert target.httpd.seen == [] and len(source.httpd.seen) == 1
    assert res.text is None and "redirects to " + target.url in res.error and "not followed" in res.error


def test_a_trickling_server_is_timed_out_on_the_whole_request():
    def trickle(h):
        h.send_response(200)
        h.send_header("Content-Length", "100000")
        h.end_headers()
        try:
            for _ in range(100):
                h.wfile.write(b" ")
                h.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass

    srv = _Server(trickle)
    try:
        t0 = time.monotonic()
        [res] = client(srv.url, timeout=1.0, max_retries=1).chat([MSG])
        took = time.monotonic() - t0
    finally:
        srv.close()
    assert res.text is None and "timed out" in res.error and took < 6, (took, res)


def test_an_oversized_reply_is_refused_not_read(monkeypatch):
    import exam_eval.backends.http_client as hc

    monkeypatch.setattr(hc, "MAX_BODY", 1000)
    srv = _Server(lambda h: _send(h, 200, b" " * 5000 + json.dumps(chat_body("x")).encode()))
    try:
        [res] = client(srv.url).chat([MSG])
    finally:
        srv.close()
    assert res.text is None and "larger than" in res.error and len(srv.httpd.seen) == 1  # not retried


def test_gzip_bodies_are_read_and_non_utf8_ones_are_named():
    body = gzip.compress(json.dumps(chat_body("zipped")).encode())
    srv = _Server(lambda h: _send(h, 200, body, Content_Encoding="gzip"))
    bad = _Server(lambda h: _send(h, 200, b'{"choices": [{"message": {"content": "caf\xe9"}}]}'))
    try:
        [res] = client(srv.url).chat([MSG])
        [res2] = client(bad.url, max_retries=0).chat([MSG])
    finally:
        srv.close()
        bad.close()
    assert res.text == "zipped"
    assert res2.text is None and "not UTF-8" in res2.error


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_refusal_every_request_would_get_stops_the_run(status):
    with OpenAIStub(lambda r: Reply(status)) as stub:
        results = client(stub.url, concurrency=1).chat([MSG] * 50)
    assert len(stub.requests) == 1
    assert all(r.text is None and f"HTTP {status}" in r.error and "no further requests sent" in r.error
               for r in results)


@pytest.mark.parametrize("value", ["-5", "nan", "NaN", "-inf"])
def test_an_unusable_retry_after_means_the_usual_back_off(value):
    assert retry_after_seconds(value) is None
    with OpenAIStub([Reply(429, retry_after=value), "ok"]) as stub:
        t0 = time.monotonic()
        [res] = client(stub.url, backoff=0.3).chat([MSG])
        took = time.monotonic() - t0
    assert res.text == "ok" and took >= 0.15  # jitter 0.5-1.5 of the 0.3 s back-off


def test_error_texts_are_one_printable_line():
    html = b"<html>\r\n<body>\x1b[2J Bad\r\ngateway</body>\n</html>"
    with OpenAIStub([Reply(400, body=html)]) as stub:
        [res] = client(stub.url).chat([MSG])
    assert res.error == "HTTP 400: <html> <body> [2J Bad gateway</body> </html>"
    with OpenAIStub([Reply(400, body=b"")]) as stub:
        [res] = client(stub.url).chat([MSG])
    assert res.error.startswith("HTTP 400: ") and len(res.error) > len("HTTP 400: ")  # the reason phrase


@pytest.mark.parametrize("url, says", [
    ("http://[::1:8000/v1", "is not a URL"), ("http://127.0.0.1:abc/v1", "is not a URL"),
    ("http://127.0.0.1:99999/v1", "is not a URL"), ("http://exa mple.com/v1", "white space"),
    ("http://user:pw@host/v1", "user name or password"), ("http:///v1", "names no host"),
    ("ftp://x/v1", "must start with http"), ("http://h/v1\r\n", "white space"),
])
def test_unusable_base_urls_are_usage_errors_before_any_request(url, says):
    with pytest.raises(ValueError, match=says):
        check_base_url(url)
    with pytest.raises(UsageError, match=says):
        EndpointBackend(model="m", base_url=url)
    assert "pw" not in str(pytest.raises(ValueError, check_base_url, "http://u:pw@h/v1").value)


def test_timeouts_beyond_a_day_are_refused():
    with pytest.raises(UsageError, match="at most 86400"):
        EndpointBackend(model="m", base_url="http://127.0.0.1:9/v1", timeout="1e300")
    with pytest.raises(ValueError):
        OpenAIClient("http://127.0.0.1:9/v1", "m", timeout=1e300)


def test_exam_nuggets_assign_says_why_its_calls_failed(tmp_path):
    from pathlib import Path

    from inproc import run

    demo = Path(__file__).resolve().parents[2] / "exam_eval" / "demo_data"
    reports = tmp_path / "reports.jsonl"
    reports.write_text(json.dumps({"metadata": {"run_id": "r", "team_id": "t", "topic_id": "101"}, "responses": [
        {"text": "Bees make honey from nectar.", "citations": []}], "references": []}) + "\n")
    with OpenAIStub(lambda r: Reply(500)) as stub:
        r = run("nuggets", "assign", "--reports", reports, "--bank", demo / "nuggetized.jsonl", "--topics",
                demo / "topics.tsv", "--backend", "endpoint", "--base-url", stub.url, "--model", "m",
                "--max-retries", "0", "--no-cache", "-o", tmp_path / "a.jsonl")
    assert r.escaped is None and r.code == 3, r.stderr
    assert "most frequent error" in r.stderr and "HTTP 500" in r.stderr, r.stderr


def test_a_port_that_is_not_listening_is_still_taken_as_down_quickly():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    t0 = time.monotonic()
    results = client(f"http://127.0.0.1:{port}/v1", down_after=0.5).chat([MSG] * 20)
    assert time.monotonic() - t0 < 10
    assert all(r.text is None and ("taken as down" in r.error or "refused" in r.error) for r in results)


def test_answers_cut_at_max_new_tokens_are_counted_and_said(tmp_path):
    from pathlib import Path

    from inproc import run

    demo = Path(__file__).resolve().parents[2] / "exam_eval" / "demo_data"
    run_file = tmp_path / "one.run"
    run_file.write_text("101 Q0 p064 1 6.0 good\n")
    bank = tmp_path / "bank.jsonl"
    bank.write_text((demo / "questions.jsonl").read_text().splitlines()[0] + "\n")
    cut = Reply(200, json={"choices": [{"message": {"content": "The passage does not"}, "finish_reason": "length"}]})
    with OpenAIStub(lambda r: cut) as stub:
        r = run("grade", "--backend", "endpoint", "--base-url", stub.url, "--model", "m", "--prompt",
                "question-extraction", "--bank", bank, "--passages", demo / "passages.jsonl", "--no-cache",
                "-o", tmp_path / "g.jsonl", run_file)
    assert r.escaped is None and r.code in (0, None), r.stderr
    assert "1 generated answers were cut off at --max-tokens 64" in r.stderr, r.stderr


def test_a_long_base_url_is_not_taken_for_control_characters():
    url = "http://127.0.0.1:8000/" + "a" * 400 + "/v1"
    assert check_base_url(url) == url
