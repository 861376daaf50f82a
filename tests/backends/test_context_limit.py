"""A prompt longer than the model's context: the servers' refusals read into sizes, and the
client that stops sending at the first one (the commands' one line: tests/servers)."""

from __future__ import annotations

import json

import pytest
from openai_stub import OpenAIStub, Reply

from exam_eval.backends.context_limit import model_limit, read_overflow
from exam_eval.backends.http_client import NOT_SENT_TOO_LONG, OpenAIClient
from exam_eval.backends.http_replies import error_message

# what each server answers, as its source writes it (the module's docstring names them)
REFUSALS = [
    # transformers serve 5.25 (cli/serving/utils.py, _check_prompt_length), FastAPI's detail
    (400, {"detail": "The prompt has 634 tokens, but the model takes at most 512, prompt and answer "
                     "(`--max-model-len`)."}, (634, 512, None)),
    # vLLM (and llama-cpp-python's server, which words it the same)
    (400, {"object": "error", "message": "This model's maximum context length is 2048 tokens. However, you requested "
                                         "2100 tokens (1100 in the messages, 1000 in the completion). Please reduce "
                                         "the length of the messages or completion.", "type": "BadRequestError",
           "code": 400}, (1100, 2048, 1000)),
    (400, {"error": {"message": "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum "
                                "context length is 4096 tokens and your request has 2778 input tokens "
                                "(8000 > 4096 - 2778). None", "type": "BadRequestError", "code": 400}},
     (2778, 4096, 8000)),
    (400, {"error": {"message": "The decoder prompt (length 5000) is longer than the maximum model length of 4096. "
                                "Make sure that `max_model_len` is no smaller than the number of text tokens.",
                     "type": "BadRequestError"}}, (5000, 4096, None)),
    # the OpenAI API
    (400, {"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages "
                                "resulted in 9,000 tokens. Please reduce the length of the messages.",
                     "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}},
     (9000, 8192, None)),
    # llama.cpp's server: the sizes are fields of the error, not words
    (400, {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                     "type": "exceed_context_size_error", "n_prompt_tokens": 634, "n_ctx": 512}}, (634, 512, None)),
    # TGI answers 422
    (422, {"error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 "
                    "`inputs` tokens and 1000 `max_new_tokens`", "error_type": "validation"}, (4000, 4096, 1000)),
    # words alone: sizes unknown
    (400, {"error": {"message": "Request exceeds the context window of this deployment"}}, (None, None, None)),
]


@pytest.mark.parametrize("status, body, sizes", REFUSALS)
def test_each_servers_refusal_gives_its_sizes(status, body, sizes):
    raw = json.dumps(body).encode()
    got = read_overflow(status, raw, error_message(raw))
    assert got is not None
    assert (got.prompt_tokens, got.limit, got.answer_tokens) == sizes
    assert "{" not in got.said  # the server's words, not its JSON


@pytest.mark.parametrize("status, text", [
    (400, "Unsupported value: 'logprobs' does not support this model"),
    (422, "Field required: messages"),
    (404, "The model `m` does not exist: its maximum context length is unknown"),  # not a refusal of the size
    (500, "This model's maximum context length is 2048 tokens."),  # a 5xx is retried, never read as a size
])
def test_other_refusals_are_not_read_as_a_size(status, text):
    raw = json.dumps({"error": {"message": text}}).encode()
    assert read_overflow(status, raw, error_message(raw)) is None


def test_the_sizes_in_words():
    raw = json.dumps(REFUSALS[0][1]).encode()
    assert read_overflow(400, raw, error_message(raw)).sizes() == \
        "a prompt of 634 tokens where the model takes at most 512 tokens, prompt and answer"
    raw = json.dumps(REFUSALS[-1][1]).encode()
    assert read_overflow(400, raw, error_message(raw)).sizes() == \
        "a prompt longer than the model's context (the server gave no limit)"


def test_model_limit_from_a_model_list():
    vllm = {"object": "list", "data": [{"id": "a", "max_model_len": 4096}, {"id": "m", "max_model_len": 2048}]}
    assert model_limit(vllm, "m") == 2048
    assert model_limit({"data": [{"id": "other", "max_model_len": 1024}]}, "m") == 1024  # the one model served
    assert model_limit({"data": [{"id": "m"}]}, "m") is None
    assert model_limit({"data": [{"id": "m", "max_model_len": True}]}, "m") is None
    assert model_limit(None, "m") is None


def _too_long(request):
    """A 512-token server: a prompt mentioning 'long' is refused as transformers serve does."""
    if "long" in request.prompt_text:
        return Reply(400, json={"detail": "The prompt has 634 tokens, but the model takes at most 512, prompt and "
                                          "answer (`--max-model-len`)."})
    return "fine"


def test_the_first_prompt_too_long_ends_the_sending():
    """A serial client: the answered prompt before it keeps its answer; the refusal is one
    call (no retry); the prompts after it are not sent at all."""
    with OpenAIStub(_too_long) as stub:
        client = OpenAIClient(stub.url, "m", concurrency=1, backoff=0.01)
        got = client.chat([[{"role": "user", "content": t}] for t in ("short", "long", "short again", "long")])
        stub.drain()
        assert [r.text for r in got] == ["fine", None, None, None]
        assert got[1].error.startswith("HTTP 400: The prompt has 634 tokens") and got[1].attempts == 1
        assert [r.error for r in got[2:]] == [NOT_SENT_TOO_LONG] * 2 and got[2].attempts == 0
        assert len(stub.requests) == 2
        assert (client.too_long.prompt_tokens, client.too_long.limit) == (634, 512)


def test_a_limit_the_refusal_does_not_name_is_read_from_the_model_list():
    """vLLM lists max_model_len in /v1/models: the one line can name it even where the
    refusal's text does not."""
    refusal = Reply(400, json={"error": {"message": "prompt exceeds the context window"}})
    with OpenAIStub([refusal], models=Reply(200, json={"object": "list",
                                                       "data": [{"id": "m", "max_model_len": 2048}]})) as stub:
        client = OpenAIClient(stub.url, "m", concurrency=1)
        (got,) = client.chat([[{"role": "user", "content": "x"}]])
        assert got.error is not None and client.too_long.limit == 2048 and client.too_long.prompt_tokens is None
        assert len(stub.gets) == 1
