"""The endpoint back end against a real HTTP server on 127.0.0.1 (tests/openai_stub.py)
with injected 429 / 500 / timeouts / garbage, and exam-grade end to end through it."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from inproc import command

from exam_eval.backends import get_backend
from exam_eval.grading.types import GradeRequest
from exam_eval.backends.endpoint import label_weights
from exam_eval.errors import UsageError
from exam_eval.grading.prompts import get_prompt
from openai_stub import OpenAIStub, Reply, chat_body, completion_body

RATE = get_prompt("question-selfrating")
EXTRACT = get_prompt("question-extraction")
ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"


def backend(url, **kw):
    kw.setdefault("backoff", 0.01)
    b = get_backend("endpoint", model="m", base_url=url, **kw)
    b.load()
    return b


def req(prompt=RATE, item="what is the capital?", context="Paris is the capital.", keys=None):
    return GradeRequest(prompt, "q", item, context, keys)


def test_logprobs_give_label_probabilities():
    lp = [{"4": math.log(0.5), " 3": math.log(0.2), "3": math.log(0.05), "x": math.log(0.25)}]
    with OpenAIStub([chat_body("4", logprobs=lp)]) as stub:
        res = backend(stub.url).grade([req()])[0]
        sent = stub.requests[0].json
    assert sent["logprobs"] is True and sent["top_logprobs"] == 20 and sent["temperature"] == 0.0
    total = 0.5 + 0.2 + 0.05
    assert res.grade == 4 and res.parse_ok and res.answer == "4"
    assert res.probs == pytest.approx({"0": 0, "1": 0, "2": 0, "3": 0.25 / total, "4": 0.5 / total, "5": 0})


def test_yes_no_labels_fold_case():
    w = label_weights(("No", "Yes"), [{"yes": math.log(0.6), " Yes": math.log(0.2), "no": math.log(0.1)}])
    assert w == pytest.approx({"Yes": 0.8, "No": 0.1})


def test_without_logprobs_the_text_is_parsed():
    with OpenAIStub(["Grade: 3", "banana"]) as stub:
        got = backend(stub.url, concurrency=1).grade([req(), req(context="other")])
    assert (got[0].grade, got[0].parse_ok, got[0].probs) == (3, True, None)
    assert (got[1].grade, got[1].parse_ok, got[1].answer) == (None, False, "banana")  # recorded, not guessed


def test_retries_429_500_and_garbage_then_succeeds():
    script = [Reply(429, retry_after=0), Reply(500), Reply(200, body=b"<html>bad gateway</html>"), "5"]
    with OpenAIStub(script) as stub:
        res = backend(stub.url, concurrency=1, logprobs="false").grade([req()])[0]
        assert len(stub.requests) == 4
    assert res.grade == 5 and res.parse_ok


def test_timeout_after_all_retries_is_a_failed_call_not_a_grade():
    with OpenAIStub([Reply(delay=1.5, text="4")] * 3) as stub:
        res = backend(stub.url, timeout=0.3, max_retries=1, logprobs="false").grade([req()])[0]
        assert len(stub.requests) == 2
    assert res.failed and res.grade is None and not res.parse_ok


def test_concurrent_answers_land_on_their_requests():
    def responder(r):
        n = re.search(r"number (\d)", r.prompt_text).group(1)
        return f"{n}"
    reqs = [req(item=f"question number {i}?") for i in range(6)]
    with OpenAIStub(responder) as stub:
        got = backend(stub.url, concurrency=4, logprobs="false").grade(reqs)
    assert [r.grade for r in got] == list(range(6))


def test_completions_api_and_api_key_from_environment(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sekrit")
    with OpenAIStub([completion_body("2")]) as stub:
        res = backend(stub.url, api="completions", api_key_env="MY_KEY", logprobs="false").grade([req()])[0]
        r = stub.requests[0]
    assert r.path.endswith("/completions") and not r.is_chat
    assert r.headers.get("Authorization") == "Bearer sekrit"
    assert r.json["prompt"] == RATE.render(query="q", item="what is the capital?", context="Paris is the capital.")
    assert res.grade == 2


def test_llm_answer_verification():
    def responder(r):
        if "equally correct" in r.prompt_text:
            return chat_body("yes" if 'Is "Paris"' in r.prompt_text else "no")
        return "Paris" if "what is the capital" in r.prompt_text else "Lyon"
    b = get_backend("endpoint", model="m", base_url="http://127.0.0.1:1", logprobs="false")
    with OpenAIStub(responder) as stub:
        b.base_url = stub.url
        b.verifier = get_prompt("answer-verification")
        got = b.grade([req(EXTRACT, keys=("Paris",)), req(EXTRACT, item="largest city?", keys=("Paris",)),
                       req(EXTRACT, keys=None)])
    assert [(r.grade, r.answer) for r in got] == [(1, "Paris"), (0, "Lyon"), (1, "Paris")]
    assert "+verify=" in b.cache_identity


def test_options_are_validated():
    with pytest.raises(UsageError):
        get_backend("endpoint", model="m")
    with pytest.raises(UsageError):
        get_backend("endpoint", base_url="http://x/v1")
    with pytest.raises(UsageError):
        get_backend("endpoint", model="m", base_url="ftp://x")


def _grade(*args):
    return command("grade", *args, env={"EXAM_EVAL_PROGRESS": "0"})


def _query_101(tmp_path):
    """The demo's query 101: its bank items and good.run's passages (60 pairs), and an output path."""
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join(x + "\n" for x in (DEMO / "questions.jsonl").read_text().splitlines()
                            if json.loads(x)["query_id"] == "101"))
    run = tmp_path / "r.run"
    run.write_text("".join(x + "\n" for x in (DEMO / "good.run").read_text().splitlines() if x.startswith("101 ")))
    return bank, run, tmp_path / "g.jsonl"


def test_exam_grade_through_the_endpoint_failures_are_retried_by_a_rerun(tmp_path):
    bank, run, out = _query_101(tmp_path)
    args = ["--backend", "endpoint", "--model", "m", "--prompt", "question-selfrating", "--bank", bank,
            "--passages", DEMO / "passages.jsonl", run, "--cache", tmp_path / "c.sqlite", "-o", out,
            "--max-retries", "0", "-O", "backoff=0.01", "--concurrency", "4"]
    flaky = "Where do bees carry nectar back to the hive?"  # every request about this question fails
    with OpenAIStub(lambda r: Reply(500) if flaky in r.prompt_text else chat_body(
            "3", logprobs=[{"3": math.log(0.7), "2": math.log(0.3)}])) as stub:
        r = _grade("--base-url", stub.url, *args)
    assert r.returncode == 3, r.stderr
    assert "failed" in r.stderr and "again" in r.stderr and "most frequent endpoint error (6x)" in r.stderr
    first = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(first) == 9 * 6 and all(g["grade"] == 3 and g["probs"]["3"] == pytest.approx(0.7) for g in first)
    with OpenAIStub(lambda r: chat_body("1")) as stub:
        r = _grade("--base-url", stub.url, *args)
        assert len(stub.requests) == 6  # only the failed pairs
    assert r.returncode == 0, r.stderr
    final = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(final) == 60 and len({(g["doc_id"], g["item_id"]) for g in final}) == 60


def test_retry_unparsed_asks_again_only_for_the_unparsed_pairs(tmp_path):
    """An answer that cannot be read is recorded as such (parse_ok false) and a resume keeps
    it; --retry-unparsed grades exactly those pairs again, appends their lines, and readers
    then take the new ones."""
    bank, run, out = _query_101(tmp_path)
    args = ["--backend", "endpoint", "--model", "m", "--prompt", "question-selfrating", "--bank", bank,
            "--passages", DEMO / "passages.jsonl", run, "--cache", tmp_path / "c.sqlite", "-o", out,
            "-O", "logprobs=false", "--concurrency", "4"]
    murky = "Where do bees carry nectar back to the hive?"  # its 6 pairs get no rating at first
    with OpenAIStub(lambda r: "I would rather not say." if murky in r.prompt_text else "4") as stub:
        r = _grade("--base-url", stub.url, *args)
    assert r.returncode == 0, r.stderr
    first = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(first) == 60 and sum(not g["parse_ok"] for g in first) == 6
    with OpenAIStub(lambda r: "5") as stub:
        r = _grade("--base-url", stub.url, *args)
        assert r.returncode == 0 and len(stub.requests) == 0, r.stderr  # a resume keeps them
        dry = _grade("--base-url", stub.url, *args, "--retry-unparsed", "--dry-run")
        assert dry.returncode == 0 and re.search(r"to grade \(pairs\)\s+6\b", dry.stdout + dry.stderr), dry.stdout
        r = _grade("--base-url", stub.url, *args, "--retry-unparsed")
        assert r.returncode == 0 and len(stub.requests) == 6, r.stderr
        assert all(murky in q.prompt_text for q in stub.requests)
        again = _grade("--base-url", stub.url, *args, "--retry-unparsed")
        assert again.returncode == 0 and len(stub.requests) == 6  # nothing left unparsed
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    last = {(g["doc_id"], g["item_id"]): g for g in lines}
    assert len(lines) == 66 and len(last) == 60 and all(g["parse_ok"] for g in last.values())
    assert sorted(g["grade"] for g in last.values()) == [4] * 54 + [5] * 6
