"""--batch-out / --batch-in of the chat commands (exam-nuggets assign, exam-genq generate
and nuggetize): the rounds of batch files reach the outputs a live run writes.

A live run asks a stand-in server (tests/openai_stub.py) whose answers depend on the
request body only; the batch service here answers each request file with the same
function, writing the results as the OpenAI Batch API writes them (one line per
request, in another order), and round 1 loses a few answers and answers a few with an
error, which the next round asks again."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from openai_stub import OpenAIStub
from refusals import one_line_refusal

pytestmark = pytest.mark.timeout(300)

ENV = {"EXAM_EVAL_PROGRESS": "0", "OPENAI_API_KEY": "sk-test"}


def _service(requests: Path, results: Path, respond, *, lose=(), fail=()) -> int:
    """Answer a request file as a batch service does; ``lose``/``fail``: indices of the
    requests left without an answer / answered with an error. Returns the requests."""
    lines = [json.loads(x) for x in requests.read_text(encoding="utf-8").splitlines() if x.strip()]
    out = []
    for k, req in enumerate(lines):
        assert req["method"] == "POST" and req["url"] == "/v1/chat/completions"
        if k in lose:
            continue
        if k in fail:
            out.append({"id": f"batch_req_{k}", "custom_id": req["custom_id"], "response": None,
                        "error": {"code": "server_error", "message": "the batch worker crashed"}})
            continue
        text = respond(SimpleNamespace(json=req["body"]))
        body = {"id": f"chatcmpl-{k}", "object": "chat.completion", "model": req["body"]["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        out.append({"id": f"batch_req_{k}", "custom_id": req["custom_id"],
                    "response": {"status_code": 200, "request_id": f"req-{k}", "body": body}, "error": None})
    out.reverse()  # a service answers in any order
    results.write_text("".join(json.dumps(x) + "\n" for x in out), encoding="utf-8")
    return len(lines)


def _rounds(run_round, tmp_path: Path, respond, max_rounds: int = 12):
    """Run rounds until one writes no request; round 1 loses and fails a few answers."""
    results: list[Path] = []
    for k in range(max_rounds):
        requests = tmp_path / f"requests-{k}.jsonl"
        ins = [a for r in results for a in ("--batch-in", r)]
        res = run_round("--batch-out", requests, *ins)
        assert res.returncode == 0, res.stderr
        n = len([x for x in requests.read_text().splitlines() if x.strip()])
        if n == 0:
            assert "nothing is left to ask" in res.stderr
            return res, k, results
        results.append(tmp_path / f"results-{k}.jsonl")
        trouble = dict(lose={0, 3}, fail={1}) if k == 0 and n > 4 else {}
        _service(requests, results[-1], respond, **trouble)
    raise AssertionError("the rounds did not end")


# --------------------------------------------------------------------------- assign

def _assign_inputs(tmp_path: Path):
    from tests.grading.test_chat_reasks import _inputs

    return _inputs(tmp_path, ["fine", "FLAKY", "BROKEN", "plain"])


def _assign_respond(req):
    from nuggetizer_stub import answer

    msgs = req.json["messages"]
    return answer(msgs[0]["content"], msgs[1]["content"], req.json.get("temperature", 0))


def _assign_args(tmp_path, out, *extra):
    return ["assign", "--reports", tmp_path / "runs.jsonl", "--bank", tmp_path / "bank.jsonl", "--topics",
            tmp_path / "topics.tsv", "--model", "stub", "--no-cache", "--retries", "2", "-o", out / "g.jsonl",
            "--assignments", out / "a.jsonl", *extra]


def test_assign_rounds_reach_the_live_outputs(tmp_path, run_cli):
    _assign_inputs(tmp_path)
    live, batch = tmp_path / "live", tmp_path / "batch"
    live.mkdir(), batch.mkdir()
    with OpenAIStub(_assign_respond) as stub:
        res = run_cli("exam-nuggets", *_assign_args(tmp_path, live, "--base-url", stub.url), env=ENV)
        assert res.returncode == 0, res.stderr
        live_calls = len(stub.requests)
    res, rounds, results = _rounds(lambda *a: run_cli("exam-nuggets", *_assign_args(tmp_path, batch, *a), env=ENV),
                                   tmp_path, _assign_respond)
    # first asks; FLAKY's re-asks; BROKEN's second re-asks (and round 1's lost and failed answers)
    assert rounds >= 3
    for name in ("g.jsonl", "a.jsonl"):
        assert (batch / name).read_bytes() == (live / name).read_bytes(), name
    asked = sum(len(p.read_text().splitlines()) for p in tmp_path.glob("requests-*.jsonl"))
    assert asked == live_calls + 3  # round 1's two lost answers and its error are asked again
    again = run_cli("exam-nuggets", *_assign_args(tmp_path, tmp_path, "--batch-out", tmp_path / "again.jsonl",
                                                  "--batch-in", results[0]), env=ENV)
    assert again.returncode == 0 and "1 requests were answered with an error and are asked again" in again.stderr


def test_assign_first_round_writes_nothing_unanswered_and_without_batch_out_the_last_answer_stands(tmp_path,
                                                                                                 run_cli):
    _assign_inputs(tmp_path)
    out = tmp_path / "o"
    out.mkdir()
    res = run_cli("exam-nuggets", *_assign_args(tmp_path, out, "--batch-out", tmp_path / "r0.jsonl"), env=ENV)
    assert res.returncode == 0, res.stderr
    assert "8 requests written to" in res.stderr and "8 windows wait for their answers" in res.stderr
    assert not (out / "g.jsonl").exists() and not (out / "a.jsonl").exists()
    _service(tmp_path / "r0.jsonl", tmp_path / "x0.jsonl", _assign_respond)
    # the results without --batch-out: FLAKY's and BROKEN's first answers stand, unparsed
    res = run_cli("exam-nuggets", *_assign_args(tmp_path, out, "--batch-in", tmp_path / "x0.jsonl"), env=ENV)
    assert res.returncode == 0, res.stderr
    assert "4 answers did not parse and were not asked again" in res.stderr
    grades = [json.loads(x) for x in (out / "g.jsonl").read_text().splitlines()]
    assert len(grades) == 48 and sum(not g["parse_ok"] for g in grades) == 24


def test_assign_refuses_the_results_of_another_grader(tmp_path, run_cli):
    _assign_inputs(tmp_path)
    res = run_cli("exam-nuggets", *_assign_args(tmp_path, tmp_path, "--batch-out", tmp_path / "r0.jsonl"), env=ENV)
    assert res.returncode == 0, res.stderr
    _service(tmp_path / "r0.jsonl", tmp_path / "x0.jsonl", _assign_respond)
    res = run_cli("exam-nuggets", *_assign_args(tmp_path, tmp_path, "--grades", "2", "--batch-in",
                                                tmp_path / "x0.jsonl"), env=ENV)
    assert res.returncode == 2
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and re.search(r"x0\.jsonl:1: answers the requests of another grader", err[0]), res.stderr
    assert not (tmp_path / "g.jsonl").exists()
    res = run_cli("exam-nuggets", *_assign_args(tmp_path, tmp_path, "--backend", "scripted", "--batch-out",
                                                tmp_path / "r.jsonl"), env=ENV)
    assert res.returncode == 1 and "--batch-out takes the requests of the endpoint back end" in res.stderr


# --------------------------------------------------------------------------- generate

def _gen_respond(req):
    prompt = req.json["messages"][0]["content"]
    qid = re.search(r"query about (q\d)", prompt).group(1)
    if qid == "q2" and not req.json.get("temperature"):
        return "No list here."  # parses only when asked again at 0.2
    if qid == "q4":
        return "I cannot answer that."
    return json.dumps({"questions": [f"What is {qid}?", f"Why {qid} {req.json.get('temperature')}?"]})


def test_generate_rounds_reach_the_live_bank(tmp_path, run_cli):
    topics = tmp_path / "t.tsv"
    topics.write_text("".join(f"{q}\tquery about {q}\n" for q in ("q1", "q2", "q3", "q4", "q5", "q6")))

    def args(out, *extra):
        return ["generate", "--model", "m", "--no-cache", "--retries", "2", str(topics), "-o", out, "--force", *extra]

    with OpenAIStub(_gen_respond) as stub:
        live = run_cli("exam-genq", *args(tmp_path / "live.jsonl", "--base-url", stub.url), env=ENV)
        assert live.returncode == 3 and "q4: no list of questions" in live.stderr, live.stderr
    rounds = []

    def run_round(*a):
        res = run_cli("exam-genq", *args(tmp_path / "batch.jsonl", *a), env=ENV)
        rounds.append(res)
        return SimpleNamespace(returncode=0 if res.returncode in (0, 3) else res.returncode, stderr=res.stderr)

    last, k, _ = _rounds(run_round, tmp_path, _gen_respond)
    assert k >= 3 and rounds[-1].returncode == 3 and "q4: no list of questions" in last.stderr
    assert rounds[0].returncode == 0, rounds[0].stderr  # round 1: every unit in the batch file, nothing failed
    assert "6 queries wait for their answers" in rounds[0].stderr
    assert (tmp_path / "batch.jsonl").read_bytes() == (tmp_path / "live.jsonl").read_bytes()
    temps = [json.loads(x)["body"]["temperature"] for p in sorted(tmp_path.glob("requests-*.jsonl"))
             for x in p.read_text().splitlines()]
    assert temps.count(0.2) == 1 + 2 and set(temps) == {0, 0.2}  # q2's re-ask, q4's two


def test_generate_refuses_another_graders_results(tmp_path, run_cli):
    topics = tmp_path / "t.tsv"
    topics.write_text("q1\tquery about q1\n")
    res = run_cli("exam-genq", "generate", "--model", "m", str(topics), "--batch-out", tmp_path / "r.jsonl", env=ENV)
    assert res.returncode == 0, res.stderr
    _service(tmp_path / "r.jsonl", tmp_path / "x.jsonl", _gen_respond)
    res = run_cli("exam-genq", "generate", "--model", "m", "--kind", "nugget", str(topics), "--batch-in",
                  tmp_path / "x.jsonl", env=ENV)
    assert "x.jsonl:1: answers the requests of another grader" in one_line_refusal(res)
    res = run_cli("exam-genq", "generate", "--dry-run", str(topics), "--batch-out", tmp_path / "r.jsonl", env=ENV)
    assert res.returncode == 1 and "--dry-run and --batch-out" in res.stderr


# --------------------------------------------------------------------------- nuggetize

def test_nuggetize_rounds_reach_the_live_bank(tmp_path, run_cli):
    from nuggetizer_stub import answer

    def respond(req):
        msgs = req.json["messages"]
        return answer(msgs[0]["content"], msgs[1]["content"], req.json.get("temperature", 0))

    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    docs = [{"doc_id": f"d{i}", "text": " ".join(words[(i + k) % len(words)] for k in range(6))
             + (" FLAKY" if i == 4 else "")} for i in range(7)]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (tmp_path / "q.tsv").write_text("q1\tfirst topic\nq2\tsecond topic\n")
    (tmp_path / "qrels").write_text("".join(f"q{1 + i % 2} 0 d{i} 1\n" for i in range(7)))

    def args(out, *extra):
        return ["nuggetize", tmp_path / "q.tsv", "--qrels", tmp_path / "qrels", "--passages", tmp_path / "docs.jsonl",
                "--model", "m", "--no-cache", "--window", "2", "--max-nuggets", "5", "-o", out, "--force", *extra]

    with OpenAIStub(respond) as stub:
        live = run_cli("exam-genq", *args(tmp_path / "live.jsonl", "--base-url", stub.url), env=ENV)
        assert live.returncode == 0, live.stderr
    last, k, _ = _rounds(lambda *a: run_cli("exam-genq", *args(tmp_path / "batch.jsonl", *a), env=ENV),
                         tmp_path, respond)
    assert k >= 3  # two creation windows a topic at least, then importance
    assert (tmp_path / "batch.jsonl").read_bytes() == (tmp_path / "live.jsonl").read_bytes()
