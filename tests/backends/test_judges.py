"""The judges people run today, through exam-grade's endpoint back end against stand-in
servers that answer as they do (tests/openai_stub.py): a chatty chat model, a reasoning
model with and without a reasoning parser, one cut off while reasoning, a server that
serves one request at a time. Every grade must be the judge's own answer or unparsed.
(The real servers: tests/servers/test_real_server_protocol.py.)"""

from __future__ import annotations

import json
import math

import pytest

from exam_eval.backends import get_backend
from exam_eval.grading.types import GradeRequest
from exam_eval.grading.prompts import get_prompt
from openai_stub import OpenAIStub, chat_body
from test_backends_endpoint import DEMO, _grade, _query_101
from tiny_models import tiny_t5  # noqa: F401

RATE = get_prompt("question-selfrating")
UMBRELA = get_prompt("umbrela")
ECHO = "- 5: The answer is highly relevant, complete, and accurate."


def body(content, logprobs=None, *, reasoning=None, finish="stop", usage=(100, 5, 0), model="m"):
    out = chat_body(content, logprobs=logprobs, model=model, finish_reason=finish)
    if reasoning is not None:
        out["choices"][0]["message"]["reasoning_content"] = reasoning
    p, c, r = usage
    out["usage"] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c,
                    "completion_tokens_details": {"reasoning_tokens": r}}
    return out


def grade_one(answer, prompt=RATE, **kw):
    with OpenAIStub([answer]) as stub:
        b = get_backend("endpoint", model="m", base_url=stub.url, backoff=0.01, **kw)
        b.load()
        return b.grade([GradeRequest(prompt, "q", "what is it?", "a passage")])[0], stub


def test_a_judge_that_writes_a_label_first_is_scored():
    res, _ = grade_one(body("4", [{"4": math.log(0.9), "3": math.log(0.05), "x": math.log(0.05)}]))
    assert (res.grade, res.detail.fallback) == (4, None) and res.probs["4"] == pytest.approx(0.9 / 0.95)
    assert res.detail.label_mass == pytest.approx(0.95)


def test_a_chatty_judge_is_read_from_what_it_wrote():
    """SmolLM2 through llama.cpp: "- 5: ..." with digits among the first token's
    alternatives; the labels' argmax (1) contradicted the 5 the judge wrote."""
    alts = [{"-": math.log(0.7), "1": math.log(0.08), "5": math.log(0.03), "3": math.log(0.02)}]
    res, _ = grade_one(body(ECHO, alts))
    assert (res.grade, res.parse_ok, res.probs) == (5, True, None)
    assert res.detail.fallback == "label mass below 0.5" and res.detail.label_mass == pytest.approx(0.13)


def test_labels_with_enough_mass_but_not_the_top_token_are_not_scored():
    alts = [{"-": math.log(0.4), "1": math.log(0.3), "5": math.log(0.25)}]
    res, _ = grade_one(body(ECHO, alts))
    assert (res.grade, res.detail.fallback) == (5, "first token not a label")


def test_an_answer_stating_another_grade_wins_over_the_labels():
    res, _ = grade_one(body("3: partly answered", [{"4": math.log(0.6), "3": math.log(0.35)}]))
    assert (res.grade, res.probs, res.detail.fallback) == (3, None, "the answer states another grade")


def test_unreadable_text_after_unsure_labels_is_unparsed_not_a_grade():
    res, _ = grade_one(body("The passage is about bees.", [{"The": math.log(0.9), "4": math.log(1e-4)}]))
    assert (res.grade, res.parse_ok, res.detail.fallback) == (None, False, "label mass below 0.5")


def test_min_label_mass_zero_reads_the_labels_whatever_was_written():
    alts = [{"-": math.log(0.7), "1": math.log(0.08), "5": math.log(0.03)}]
    res, _ = grade_one(body(ECHO, alts), min_label_mass=0)
    assert (res.grade, res.detail.fallback) == (1, None) and res.probs is not None


def test_a_reasoning_judge_without_a_parser():
    """``<think>`` in the content; score mode's first token is the reasoning's, with a
    digit far down its alternatives (e^-9): read after the reasoning, which is kept."""
    text = "<think>The passage names the hive. I would say 2... no, it answers fully.</think>\n\n4"
    res, _ = grade_one(body(text, [{"<think>": math.log(0.99), "2": -9.0}]))
    assert (res.grade, res.answer, res.detail.fallback) == (4, "4", "reasoning judge")
    assert res.detail.reasoning.startswith("The passage names the hive")


def test_a_reasoning_judge_behind_a_reasoning_parser():
    """vLLM's reasoning_content: the logprobs begin with the reasoning's tokens."""
    res, _ = grade_one(body("4", [{"Okay": math.log(0.9), "4": -8.0}], reasoning="Okay, the passage says..."))
    assert (res.grade, res.detail.reasoning, res.detail.fallback) == (4, "Okay, the passage says...", "reasoning judge")


@pytest.mark.parametrize("content,reasoning", [("<think>Let me weigh the passage against", None),
                                               ("", "Let me weigh the passage against")])
def test_an_answer_cut_off_while_reasoning_is_unparsed_and_said(content, reasoning):
    res, _ = grade_one(body(content, None, reasoning=reasoning, finish="length"), prompt=UMBRELA)
    assert (res.grade, res.parse_ok, res.detail.fallback) == (None, False, "cut off while reasoning")
    assert res.detail.reasoning == "Let me weigh the passage against"


def test_a_generate_prompt_reads_the_answer_after_the_reasoning():
    """UMBRELA's pattern is searched anywhere: a score the judge considered while thinking
    is not its answer."""
    res, _ = grade_one(body("<think>At first ##final score: 3, but no.</think>\n##final score: 1"), prompt=UMBRELA)
    assert (res.grade, res.parse_ok) == (1, True) and "final score: 3" in res.detail.reasoning


def test_reasoning_options_are_sent_and_part_of_the_identity():
    res, stub = grade_one(body("##final score: 2"), prompt=UMBRELA, reasoning_effort="low",
                          chat_template_kwargs='{"enable_thinking": false}')
    sent = stub.requests[0].json
    assert sent["reasoning_effort"] == "low" and sent["chat_template_kwargs"] == {"enable_thinking": False}
    plain = get_backend("endpoint", model="m", base_url="http://127.0.0.1:9/v1")
    thinking = get_backend("endpoint", model="m", base_url="http://127.0.0.1:9/v1", reasoning_effort="low")
    assert plain.cache_identity != thinking.cache_identity
    with pytest.raises(Exception, match="JSON object"):
        get_backend("endpoint", model="m", base_url="http://127.0.0.1:9/v1", chat_template_kwargs="enable_thinking")


def _args(tmp_path, *extra):
    bank, run, out = _query_101(tmp_path)
    return ["--backend", "endpoint", "--prompt", "question-selfrating", "--bank", bank,
            "--passages", DEMO / "passages.jsonl", run, "--no-cache", "-o", out, *extra], out


def test_exam_grade_says_what_it_read_from_the_text_and_the_tokens(tmp_path):
    args, out = _args(tmp_path, "--model", "m")
    chatty = body(ECHO, [{"-": math.log(0.8), "1": math.log(0.1)}], usage=(120, 14, 0))
    with OpenAIStub(lambda r: chatty) as stub:
        r = _grade("--base-url", stub.url, *args)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 60 and all(g["grade"] == 5 and g["probs"] is None for g in rows)
    assert all(g["fallback"] == "label mass below 0.5" and g["label_mass"] == 0.1 for g in rows)
    assert "60 of 60 scored pairs were read from the answer's text, as generate mode reads it " \
           "(label mass below 0.5: 60)" in r.stderr
    assert "tokens: 7,200 prompt, 840 completion over 60 replies" in r.stderr


def test_exam_grade_says_to_raise_the_limit_when_reasoning_is_cut_off(tmp_path):
    args, out = _args(tmp_path, "--model", "m")
    cut = body("", None, reasoning="Hmm, the passage", finish="length", usage=(100, 64, 64))
    with OpenAIStub(lambda r: cut) as stub:
        r = _grade("--base-url", stub.url, *args)
    assert r.returncode == 0, r.stderr
    assert "60 answers were cut off while reasoning (unparsed): raise --max-tokens" in r.stderr
    assert "(64 reasoning)" not in r.stderr and "3,840 completion (3,840 reasoning)" in r.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(g["parse_ok"] is False and g["reasoning"] == "Hmm, the passage" for g in rows)


def test_a_server_that_serves_one_request_at_a_time_computes_each_pair_once(tmp_path):
    """60 pairs, the defaults (64 in flight at most): all graded, no pair computed twice."""
    args, out = _args(tmp_path, "--model", "m")
    with OpenAIStub(lambda r: body("4", [{"4": 0.0}]), serial=True, service_time=0.05) as stub:
        r = _grade("--base-url", stub.url, *args)
        prompts = [q.prompt_text for q in stub.requests]
    assert r.returncode == 0, r.stderr
    assert len(prompts) == 60 and len(set(prompts)) == 60
    assert len(out.read_text().splitlines()) == 60


def test_a_model_the_server_does_not_serve_is_refused(tmp_path):
    """llama.cpp's server answers any name: --model gpt-4o graded a 135M model and wrote
    "gpt-4o" into every grade line."""
    args, out = _args(tmp_path, "--model", "gpt-4o")
    with OpenAIStub(lambda r: body("4"), models=["SmolLM2-135M-Instruct"]) as stub:
        url = stub.url
        r = _grade("--base-url", url, *args)
        assert stub.requests == []
    assert r.returncode in (1, 2) and not out.exists()
    assert r.stderr.strip().splitlines()[-1].endswith(
        "--model 'gpt-4o': the server at " + url + " serves SmolLM2-135M-Instruct; give one of them")


def test_the_model_the_server_reports_is_recorded_where_it_differs(tmp_path):
    args, out = _args(tmp_path, "--model", "gpt-4o")
    with OpenAIStub(lambda r: body("4", [{"4": 0.0}], model="gpt-4o-2024-08-06"), models=["gpt-4o"]) as stub:
        r = _grade("--base-url", stub.url, *args)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(g["model"] == "gpt-4o" and g["served_model"] == "gpt-4o-2024-08-06" for g in rows)


def test_dry_run_counts_the_prompt_tokens_with_the_models_tokenizer(tmp_path, tiny_t5):
    from transformers import AutoTokenizer

    args, _ = _args(tmp_path, "--model", tiny_t5, "--dry-run")
    args[args.index("endpoint")] = "hf-seq2seq"
    r = _grade(*args)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("prompt tokens to send"))
    tok = AutoTokenizer.from_pretrained(tiny_t5)
    bank = [json.loads(x) for x in args[args.index("--bank") + 1].read_text().splitlines()]
    passages = {json.loads(x)["doc_id"]: json.loads(x)["text"] for x in (DEMO / "passages.jsonl").read_text().splitlines()}
    docs = [x.split()[2] for x in args[args.index("--passages") + 2].read_text().splitlines()]
    want = sum(len(tok(RATE.render(query="", item=q["text"], context=passages[d], answer=None, correct_answer=None),
                       add_special_tokens=False)["input_ids"]) for q in bank for d in docs)
    assert line == f"prompt tokens to send (counted with the model's tokenizer)\t{want}"
    # no tokenizer at hand (a server's model name): an estimate, said to be one
    args, _ = _args(tmp_path, "--model", "m", "--dry-run", "--base-url", "http://127.0.0.1:9/v1")
    r = _grade(*args)
    assert "prompt tokens to send (estimated at 4 characters a token: no tokenizer here)" in r.stdout
