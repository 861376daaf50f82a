"""The project's HTTP client and the endpoint back end against real OpenAI-compatible
servers, not stubs: a real protocol (FastAPI/pydantic request validation, real reply
shapes) and a real chat template.

``transformers serve`` (the ``transformers[serving]`` extra, part of ``make test``) runs a
tiny random-weight Llama with a trained tokenizer and a chat template (tests/tiny_models.py),
pinned: what it does, as of transformers 5.24 (transformers/cli/serving/):

- ``/v1/models`` lists the one model, its ``id`` the local path it was started with; a
  request naming any other model is answered 400 ("Server is pinned to ...").
- ``/v1/chat/completions`` applies the model's chat template (``add_generation_prompt``);
  replies carry ``usage`` (prompt, completion and total tokens) and ``finish_reason``
  ``length`` when ``max_tokens`` was reached; ``temperature: 0`` is greedy.
- ``logprobs`` / ``top_logprobs`` are accepted and ignored (the server logs "Ignoring
  unsupported fields"): no ``logprobs`` block in the reply, the text is unchanged. So is
  ``n``. Unknown fields are refused with 422; ``stop`` breaks on a word-level tokenizer (500).
- requests are answered one at a time (one inference thread): concurrent requests queue
  and all complete.
- ``/v1/completions`` (legacy) takes the raw prompt, no chat template; ``logprobs`` ignored.

llama.cpp's server (``pytest -m servers``; skips without llama-cpp-python, see
tests/real_servers.py) runs the real SmolLM2-135M-Instruct GGUF and does give
``top_logprobs``: those tests check that the scoring path reads them.
"""

from __future__ import annotations

import json
import math

import pytest
from real_servers import llamacpp_server, transformers_server  # noqa: F401 (fixtures)

from exam_eval.backends.endpoint import label_weights
from exam_eval.backends.http_client import OpenAIClient

QUESTION = [{"role": "user", "content": "what is the capital of France?"}]


def conversations(n: int) -> list[list[dict]]:
    return [[{"role": "user", "content": f"Question: what is the capital of France? {i % 10}"}] for i in range(n)]


# -- transformers serve ---------------------------------------------------------------------


def test_models_endpoint_lists_the_served_model(transformers_server):
    status, body = transformers_server.get("/v1/models")
    assert status == 200, body
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == [transformers_server.model]


def test_chat_reply_shape_usage_and_chat_template(transformers_server):
    """The reply as the protocol has it, and ``usage.prompt_tokens`` is the length of the
    chat template's rendering: the server applied the model's real template."""
    from transformers import AutoTokenizer

    status, body = transformers_server.post("/v1/chat/completions", {
        "model": transformers_server.model, "messages": QUESTION, "max_tokens": 3, "temperature": 0})
    assert status == 200, body
    assert body["object"] == "chat.completion" and body["model"] == transformers_server.model
    (choice,) = body["choices"]
    assert choice["message"]["role"] == "assistant" and isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("length", "stop")
    assert "logprobs" not in choice or choice["logprobs"] is None
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert 1 <= usage["completion_tokens"] <= 3
    if choice["finish_reason"] == "length":
        assert usage["completion_tokens"] == 3
    tok = AutoTokenizer.from_pretrained(transformers_server.model)
    rendered = tok.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=True, return_dict=True)
    assert usage["prompt_tokens"] == len(rendered["input_ids"])
    assert usage["prompt_tokens"] > len(tok(QUESTION[0]["content"])["input_ids"])  # role markers and all


def test_client_chat_completion(transformers_server):
    client = OpenAIClient(transformers_server.base_url, transformers_server.model)
    (res,) = client.chat([QUESTION], max_tokens=4)
    assert res.ok, res.error
    assert isinstance(res.text, str) and res.text.strip()
    assert res.finish_reason in ("length", "stop")  # length, unless the random model says </s> at once
    assert res.attempts == 1 and res.top_logprobs is None


def test_concurrent_requests_all_complete_in_order(transformers_server):
    """The server answers one request at a time; the client's requests in flight queue
    there and all complete, each result at its request's place (compared with the same
    requests sent one by one)."""
    convs = conversations(12)
    together = OpenAIClient(transformers_server.base_url, transformers_server.model).chat(convs, max_tokens=3)
    assert all(r.ok for r in together), [r.error for r in together if not r.ok]
    alone = OpenAIClient(transformers_server.base_url, transformers_server.model, concurrency=1).chat(
        convs, max_tokens=3)
    assert [r.text for r in together] == [r.text for r in alone]
    assert all(r.attempts == 1 for r in together + alone)
    assert len({r.text for r in together}) > 1  # the prompts do reach the model


def test_logprobs_are_ignored_not_refused(transformers_server):
    """transformers serve takes ``logprobs``/``top_logprobs`` and drops them: the reply has
    no logprobs (the scoring path then parses the text), and the same text."""
    client = OpenAIClient(transformers_server.base_url, transformers_server.model)
    plain = client.chat([QUESTION, QUESTION], max_tokens=2)
    asked = client.chat([QUESTION], max_tokens=2, logprobs=True, top_logprobs=20)
    assert asked[0].ok, asked[0].error
    assert asked[0].top_logprobs is None
    assert asked[0].text == plain[0].text == plain[1].text
    assert label_weights([str(i) for i in range(6)], asked[0].top_logprobs) is None
    assert "Ignoring unsupported fields" in transformers_server.log()


def test_legacy_completions_route(transformers_server):
    client = OpenAIClient(transformers_server.base_url, transformers_server.model)
    res = client.complete(["Question: what is the capital of France?", "Yes"], max_tokens=3, logprobs=True,
                          top_logprobs=5)
    assert all(r.ok for r in res), [r.error for r in res]
    assert all(isinstance(r.text, str) and r.finish_reason in ("length", "stop") for r in res)
    assert all(r.top_logprobs is None for r in res)


def test_another_model_name_is_refused_at_once(transformers_server):
    client = OpenAIClient(transformers_server.base_url, "not-the-served-model", backoff=0.01)
    (res,) = client.chat([QUESTION], max_tokens=2)
    assert not res.ok and res.attempts == 1  # a 4xx: no retries
    assert "HTTP 400" in res.error and "pinned" in res.error


def test_unknown_request_field_is_refused(transformers_server):
    status, body = transformers_server.post("/v1/chat/completions", {
        "model": transformers_server.model, "messages": QUESTION, "max_tokens": 2, "no_such_field": 1})
    assert status == 422, body


def _grade_inputs(tmp_path, n_questions: int = 2, n_passages: int = 2):
    from exam_eval.demo import demo_data_dir

    data = demo_data_dir()
    bank = tmp_path / "bank.jsonl"
    rows = [line for line in (data / "questions.jsonl").read_text().splitlines()
            if json.loads(line)["query_id"] == "101"][:n_questions]
    bank.write_text("\n".join(rows) + "\n")
    run = tmp_path / "r.run"
    lines = [line for line in (data / "good.run").read_text().splitlines() if line.startswith("101 ")]
    run.write_text("\n".join(lines[:n_passages]) + "\n")
    return ["--bank", bank, "--passages", data / "passages.jsonl", "--topics", data / "topics.tsv", run]


def _grade_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_exam_grade_endpoint_against_transformers_serve(transformers_server, tmp_path, run_cli):
    """exam-grade's endpoint back end, end to end: every pair gets a line; no logprobs from
    this server, so the self-rating is read from the generated text."""
    out = tmp_path / "grades.jsonl"
    res = run_cli("exam-grade", "--backend", "endpoint", "--base-url", transformers_server.base_url,
                  "--model", transformers_server.model, "--prompt", "question-selfrating",
                  "--max-tokens", "4", "--no-cache", "-o", out, *_grade_inputs(tmp_path), timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = _grade_lines(out)
    assert len(lines) == 4, lines
    assert "Traceback" not in res.stderr


# -- llama.cpp's server, SmolLM2-135M-Instruct (pytest -m servers) ----------------------------

LABELS = [str(i) for i in range(6)]
RATE = [{"role": "user", "content": "Can the question be answered based on the available context? choose one: "
                                    "0 1 2 3 4 5 (5 = highly relevant, complete, and accurate).\n"
                                    "Question: what is the capital of France?\n"
                                    "Context: Paris is the capital of France.\nRating:"}]


@pytest.mark.servers
def test_llamacpp_models_and_chat(llamacpp_server):
    status, body = llamacpp_server.get("/v1/models")
    assert status == 200, body
    assert llamacpp_server.model in [m["id"] for m in body["data"]]
    client = OpenAIClient(llamacpp_server.base_url, llamacpp_server.model)
    (res,) = client.chat([QUESTION], max_tokens=16)
    assert res.ok, res.error
    assert "paris" in res.text.lower()
    assert res.finish_reason in ("stop", "length")


@pytest.mark.servers
def test_llamacpp_top_logprobs_feed_the_label_weights(llamacpp_server):
    client = OpenAIClient(llamacpp_server.base_url, llamacpp_server.model)
    (res,) = client.chat([RATE], max_tokens=1, logprobs=True, top_logprobs=20)
    assert res.ok, res.error
    assert res.top_logprobs is not None and len(res.top_logprobs) == 1
    first = res.top_logprobs[0]
    assert 1 < len(first) <= 20
    assert all(lp <= 0 and math.isfinite(lp) for lp in first.values())
    assert 0.99 < sum(math.exp(lp) for lp in first.values()) or len(first) == 20
    weights = label_weights(LABELS, res.top_logprobs)
    assert weights, first  # SmolLM2 puts some mass on the digits after "Rating:"


@pytest.mark.servers
def test_llamacpp_concurrent_requests_complete(llamacpp_server):
    convs = conversations(6)
    res = OpenAIClient(llamacpp_server.base_url, llamacpp_server.model).chat(convs, max_tokens=4)
    assert all(r.ok for r in res), [r.error for r in res if not r.ok]


@pytest.mark.servers
def test_exam_grade_endpoint_against_llamacpp(llamacpp_server, tmp_path, run_cli):
    out = tmp_path / "grades.jsonl"
    res = run_cli("exam-grade", "--backend", "endpoint", "--base-url", llamacpp_server.base_url,
                  "--model", llamacpp_server.model, "--prompt", "question-selfrating", "--no-cache",
                  "-o", out, *_grade_inputs(tmp_path), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = _grade_lines(out)
    assert len(lines) == 4, lines


# -- every command that talks to a chat model, through transformers serve --------------------

def _said_or_unparsed(lines, prompt_id):
    """Every grade is what the judge's text says, or none (this server sends no logprobs)."""
    from exam_eval.grading.prompts import get_prompt

    prompt = get_prompt(prompt_id)
    for g in lines:
        parsed = prompt.parse(g["answer"] or "")
        assert (g["grade"], g["parse_ok"]) == ((parsed.grade, True) if parsed.parse_ok else (None, False)), g
        assert g["probs"] is None


@pytest.mark.parametrize("prompt_id", ["question-selfrating", "umbrela"])
def test_exam_grade_score_and_generate_prompts_give_the_judges_own_answer(transformers_server, tmp_path, run_cli,
                                                                          prompt_id):
    out = tmp_path / "grades.jsonl"
    res = run_cli("exam-grade", "--backend", "endpoint", "--base-url", transformers_server.base_url,
                  "--model", transformers_server.model, "--prompt", prompt_id, "--max-tokens", "6",
                  "--no-cache", "-o", out, *_grade_inputs(tmp_path), timeout=180, env={"EXAM_EVAL_PROGRESS": "0"})
    assert res.returncode == 0, res.stderr[-3000:]
    lines = _grade_lines(out)
    pairs = 4 if prompt_id == "question-selfrating" else 2  # umbrela grades the passages directly
    assert len(lines) == pairs
    _said_or_unparsed(lines, prompt_id)
    if prompt_id == "question-selfrating":  # scored: the server listed no logprobs
        assert all(g["fallback"] == "no logprobs" for g in lines)
        assert "4 of 4 scored pairs were read from the answer's text" in res.stderr
    assert "tokens: " in res.stderr and " prompt, " in res.stderr and f"over {pairs} replies" in res.stderr


def test_exam_nuggets_assign_and_exam_genq_through_the_server(transformers_server, tmp_path, run_cli):
    """The AutoNuggetizer's prompts and question generation against a real chat template:
    the random model's answers do not parse, which must end in a clean summary (with the
    tokens the server counted), never a traceback."""
    from exam_eval.demo import demo_data_dir

    data = demo_data_dir()
    server = ["--base-url", transformers_server.base_url, "--model", transformers_server.model,
              "--max-tokens", "8", "--retries", "0", "--no-cache"]
    env = {"EXAM_EVAL_PROGRESS": "0"}
    reports = tmp_path / "reports.jsonl"
    reports.write_text(json.dumps({"metadata": {"run_id": "r", "topic_id": "101", "team_id": "t"},
                                   "responses": [{"text": "Bees make honey from nectar.", "citations": []}],
                                   "references": []}) + "\n")
    bank = tmp_path / "nuggets.jsonl"
    bank.write_text("".join(x + "\n" for x in (data / "nuggets.jsonl").read_text().splitlines()
                            if json.loads(x)["query_id"] == "101"))
    out = tmp_path / "assigned.jsonl"
    res = run_cli("exam-nuggets", "assign", "--reports", reports, "--bank", bank, "--topics", data / "topics.tsv",
                  *server, "-o", out, timeout=180, env=env)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert "tokens: " in res.stderr and len(_grade_lines(out)) == len(bank.read_text().splitlines())
    topics = tmp_path / "topics.tsv"
    topics.write_text((data / "topics.tsv").read_text().splitlines()[0] + "\n")
    res = run_cli("exam-genq", "generate", topics, *server, "-o", tmp_path / "q.jsonl", timeout=180, env=env)
    assert res.returncode in (0, 3) and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert "tokens: " in res.stderr
    # 2 documents a window: the prompt fits the tiny model's 512 tokens (10 do not: below)
    res = run_cli("exam-genq", "nuggetize", topics, "--qrels", data / "qrels.txt", "--passages",
                  data / "passages.jsonl", "--window", "2", *server, "-o", tmp_path / "n.jsonl", timeout=180, env=env)
    assert res.returncode in (0, 3) and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert "tokens: " in res.stderr and "longer than" not in res.stderr and "takes at most" not in res.stderr


def test_a_prompt_longer_than_the_models_context_is_one_line(transformers_server, tmp_path, run_cli):
    """The default window of 10 documents makes a nuggetize prompt longer than the tiny
    model's 512 tokens, and transformers serve refuses it: one line with the prompt's size,
    the limit and the flag, one call for three topics (nothing more is sent), no bank; with
    a window that fits, the same command completes."""
    import re

    from exam_eval.demo import demo_data_dir

    data = demo_data_dir()
    topics = tmp_path / "topics.tsv"
    topics.write_text("".join((data / "topics.tsv").read_text().splitlines(keepends=True)[:3]))
    out = tmp_path / "n.jsonl"
    cmd = ["exam-genq", "nuggetize", topics, "--qrels", data / "qrels.txt", "--passages", data / "passages.jsonl",
           "--base-url", transformers_server.base_url, "--model", transformers_server.model, "--max-tokens", "8",
           "--retries", "0", "--concurrency", "1", "--cache", tmp_path / "cache.sqlite", "-o", out]
    env = {"EXAM_EVAL_PROGRESS": "0"}
    res = run_cli(*cmd, timeout=180, env=env)
    assert res.returncode == 3 and "Traceback" not in res.stderr, res.stderr[-3000:]
    said = [x for x in res.stderr.splitlines() if "takes at most" in x]
    assert len(said) == 1, res.stderr
    (line,) = said
    m = re.search(r"3 topics failed and have no nuggets \(nothing written\): a prompt of (\d+) tokens where the "
                  r"model takes at most 512 tokens, prompt and answer: the server refused it, and nothing more was "
                  r"sent; run again with a smaller --window \(documents per call; now 10\)", line)
    assert m and int(m.group(1)) > 512, line
    assert "(the server said: The prompt has " in line and "{" not in line
    assert not any(x.strip().startswith(("101:", "102:", "103:")) for x in res.stderr.splitlines())  # no line a topic
    assert "creation: 3 prompts: 1 calls" in res.stderr  # the first refusal ended the sending
    assert not out.exists()
    res = run_cli(*cmd[:-2], "--window", "2", "-o", out, timeout=300, env=env)
    assert res.returncode in (0, 3) and "takes at most" not in res.stderr, res.stderr[-3000:]
    # every window answered (the random model's answers do not parse): nothing failed
    replies = re.search(r"over (\d+) replies", res.stderr)
    assert replies and f"({replies.group(1)} windows did not parse)" in res.stderr, res.stderr
    assert "failed" not in res.stderr


@pytest.mark.parametrize("prompt_id", ["question-selfrating", "umbrela"])
def test_batch_file_bodies_are_taken_by_a_real_server_and_read_back_as_live(transformers_server, tmp_path, run_cli,
                                                                          prompt_id):
    """--batch-out's request bodies pass a real server's request validation (it refuses
    unknown fields), and its answers, written as run_batch writes them, read back with
    --batch-in give the grades of the live run against the same server."""
    grade = ["exam-grade", "--backend", "endpoint", "--model", transformers_server.model, "--prompt", prompt_id,
             "--max-tokens", "6", "--no-cache", *_grade_inputs(tmp_path)]
    env = {"EXAM_EVAL_PROGRESS": "0"}
    live = run_cli(*grade, "--base-url", transformers_server.base_url, "-o", tmp_path / "live.jsonl",
                   timeout=180, env=env)
    assert live.returncode == 0, live.stderr[-3000:]
    res = run_cli(*grade, "-o", tmp_path / "batch.jsonl", "--batch-out", tmp_path / "req.jsonl", timeout=180, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    results = []
    for n, line in enumerate(_grade_lines(tmp_path / "req.jsonl")):
        assert line["url"] == "/v1/chat/completions"
        status, body = transformers_server.post(line["url"], line["body"])
        assert status == 200, body
        results.append({"id": f"vllm-{n}", "custom_id": line["custom_id"],
                        "response": {"status_code": 200, "request_id": f"req-{n}", "body": body}, "error": None})
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reversed(results)))
    res = run_cli(*grade, "-o", tmp_path / "batch.jsonl", "--batch-in", tmp_path / "results.jsonl", timeout=180,
                  env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    fields = ("grade", "probs", "answer", "parse_ok", "label_mass", "fallback", "grader_hash", "input_hash")

    def key(g):
        return g["query_id"], g["doc_id"], g.get("item_id")

    want = {key(g): [g.get(f) for f in fields] for g in _grade_lines(tmp_path / "live.jsonl")}
    got = {key(g): [g.get(f) for f in fields] for g in _grade_lines(tmp_path / "batch.jsonl")}
    assert got == want and len(got) == (4 if prompt_id == "question-selfrating" else 2)
