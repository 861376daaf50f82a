"""exam-genq with local Hugging Face models through the grading back ends: the text the
generator returns is what transformers itself generates for the same prompt."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_models import make_tiny_llama, make_tiny_t5

from exam_eval.backends.chat import LocalChat
from exam_eval.genq.prompts import get_prompt

pytestmark = pytest.mark.timeout(300)

PROMPTS = [get_prompt("workbench", "dl", "question").render(query_text="how do birds fly", query_title="x"),
           get_prompt("workbench", "dl", "nugget").render(query_text="what is the water table", query_title="x")]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return make_tiny_llama(tmp_path_factory.mktemp("genq-llama"), extra_text=PROMPTS)


@pytest.fixture(scope="module")
def t5(tmp_path_factory):
    return make_tiny_t5(tmp_path_factory.mktemp("genq-t5"), extra_text=PROMPTS)


def _direct_causal(path, prompt, n):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
    enc = tok(text, return_tensors="pt", add_special_tokens=False)
    with torch.inference_mode():
        out = model.generate(**enc, max_new_tokens=n, do_sample=False, pad_token_id=tok.pad_token_id)
    return tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)


def _direct_seq2seq(path, prompt, n):
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSeq2SeqLM.from_pretrained(path).eval()
    enc = tok(prompt, return_tensors="pt", truncation=True, max_length=10_000)
    with torch.inference_mode():
        out = model.generate(**enc, max_new_tokens=n, do_sample=False)
    return tok.decode(out[0], skip_special_tokens=True)


def test_hf_causal_generates_what_transformers_generates(llama):
    gen = LocalChat(role="complete", name="hf-causal", model=str(llama), max_tokens=12, device="cpu", batch_size=1)
    results = gen.generate(PROMPTS, [("q1", None), ("q2", None)])
    assert all(r.error is None for r in results)
    assert [r.text for r in results] == [_direct_causal(llama, p, 12) for p in PROMPTS]
    assert any(r.text.strip() for r in results)


def test_hf_seq2seq_generates_what_transformers_generates(t5):
    gen = LocalChat(role="complete", name="hf-seq2seq", model=str(t5), max_tokens=10, device="cpu", batch_size=1,
                    backend_options={"max_input_tokens": 512})
    results = gen.generate(PROMPTS, [("q1", None), ("q2", None)])
    assert all(r.error is None for r in results)
    assert [r.text for r in results] == [_direct_seq2seq(t5, p, 10) for p in PROMPTS]


@pytest.mark.parametrize("backend, model", [("hf-causal", "llama"), ("hf-seq2seq", "t5")])
def test_cli_hf_runs_end_to_end(backend, model, tmp_path, run_cli, request):
    """Through the command and the one factory (make_client tells LocalChat its back end)."""
    topics = tmp_path / "t.tsv"
    topics.write_text("1\thow do birds fly\n2\twhat is the water table\n")
    r = run_cli("exam-genq", "--backend", backend, "--model", str(request.getfixturevalue(model)), "--device", "cpu",
                "--max-tokens", "8", "--retries", "0", str(topics), env={"EXAM_EVAL_PROGRESS": "0"})
    # a random-weight model rarely answers with a list: partial (3) is the expected outcome,
    # and whatever was parsed must be a well-formed bank
    assert r.returncode in (0, 3), r.stderr
    assert f"generating questions for 2 queries with {backend}" in r.stderr
    for line in r.stdout.splitlines():
        item = json.loads(line)
        assert item["query_id"] in ("1", "2") and item["text"].strip()
    if r.returncode == 3:
        assert "no list of questions in the answer" in r.stderr
