"""LLM-verified extractive QA (issue 13, point 6): hf-qa extracts the answer, a separate
verifier model (``--verifier-model``) judges it against the answer key with EXAM++'s
answer-verification prompt, the paper's "LLM-verified Manual-EXAM-Squad2".

Tiny random-weight models; the verifier's verdicts are recomputed with plain
transformers calls (one forward pass of T5, "yes" against "no" at the first decoder
position)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from inproc import command

torch = pytest.importorskip("torch")

from exam_eval.backends import get_backend  # noqa: E402
from exam_eval.grading.types import GradeRequest  # noqa: E402
from exam_eval.grading.prompts import get_prompt  # noqa: E402
from tiny_models import tiny_qa, tiny_t5  # noqa: E402,F401

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
EXTRACT = get_prompt("question-extraction")
VERIFY = get_prompt("answer-verification")
QUESTION = "what is the capital of France?"


def t5_says_yes(model_dir: Path, question: str, answer: str, key: str) -> bool:
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    text = VERIFY.render(query="", item=question, context="", answer=answer, correct_answer=key)
    enc = tok(text, return_tensors="pt")
    start = torch.tensor([[model.config.decoder_start_token_id]])
    with torch.inference_mode():
        logits = model(**enc, decoder_input_ids=start).logits[0, -1]
    yes, no = (tok(w, add_special_tokens=False)["input_ids"][0] for w in ("yes", "no"))
    return bool(logits[yes] > logits[no])


def test_qa_answers_are_judged_by_the_verifier_model(tiny_qa, tiny_t5, monkeypatch):
    qa = get_backend("hf-qa", model=str(tiny_qa), device="cpu")
    qa.load()
    # t5_says_yes compares the two words' logits, whatever else a random model would write first
    verifier = get_backend("hf-seq2seq", model=str(tiny_t5), device="cpu", min_label_mass=0)
    verifier.load()
    qa.verifier, qa.verifier_backend = VERIFY, verifier
    extracted = ["Paris", "", "Lyon", "Paris"]
    monkeypatch.setattr(qa, "answer", lambda qs, cs: list(extracted))
    keys = [("Paris", "the city of Paris"), ("Paris",), ("Paris",), None]
    reqs = [GradeRequest(EXTRACT, "q", QUESTION, "c", k) for k in keys]
    got = qa.grade(reqs)
    expected = [int(any(t5_says_yes(tiny_t5, QUESTION, "Paris", k) for k in keys[0])),
                0,  # unanswerable: nothing to verify
                int(t5_says_yes(tiny_t5, QUESTION, "Lyon", "Paris")),
                1]  # no key: an answer counts as given
    assert [(r.grade, r.parse_ok) for r in got] == [(e, True) for e in expected]
    assert [r.answer for r in got] == extracted
    # the verifier is part of the grader's identity: the cache never mixes them up
    plain = get_backend("hf-qa", model=str(tiny_qa), device="cpu")
    assert qa.cache_identity != plain.cache_identity and str(tiny_t5) in qa.cache_identity


def grade(*args):
    return command("grade", *args, env={"EXAM_EVAL_PROGRESS": "0"})


@pytest.mark.slow
def test_exam_grade_llm_verified_squad2(tiny_qa, tiny_t5, tmp_path):
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join(x + "\n" for x in (DEMO / "questions.jsonl").read_text().splitlines()[:3]))
    run = tmp_path / "r.run"
    run.write_text("".join(x + "\n" for x in (DEMO / "good.run").read_text().splitlines()[:4]))
    common = ["--backend", "hf-qa", "--model", tiny_qa, "--device", "cpu", "--prompt", "question-extraction",
              "--bank", bank, "--passages", DEMO / "passages.jsonl", run, "--cache", tmp_path / "c.sqlite"]
    out = tmp_path / "g.jsonl"
    r = grade(*common, "--verify", "llm", "--verifier-model", tiny_t5, "--min-label-mass", "0", "-o", out)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 12 and all(x["parse_ok"] and x["grade"] in (0, 1) for x in rows)
    bank_keys = {json.loads(x)["item_id"]: json.loads(x)["answers"] for x in bank.read_text().splitlines()}
    question = {json.loads(x)["item_id"]: json.loads(x)["text"] for x in bank.read_text().splitlines()}
    assert sum(1 for x in rows if x["answer"]) >= 3  # spans were extracted and verified
    for x in rows:
        if x["answer"]:  # an extracted span: the verifier's verdict on any key
            want = any(t5_says_yes(tiny_t5, question[x["item_id"]], x["answer"], k) for k in bank_keys[x["item_id"]])
            assert x["grade"] == int(want), x
        else:
            assert x["grade"] == 0
    # lexical verification is another grader: nothing comes from the LLM-verified cache
    r = grade(*common, "-o", tmp_path / "lexical.jsonl")
    assert r.returncode == 0 and "0 from cache" in r.stderr


def test_verifier_options_are_checked(tiny_qa, tiny_t5, tmp_path):
    base = ["--backend", "hf-qa", "--model", tiny_qa, "--prompt", "question-extraction", "--bank",
            DEMO / "questions.jsonl", DEMO / "good.run"]
    r = grade(*base, "--verify", "llm")
    assert r.returncode == 1 and "--verifier-model" in r.stderr
    r = grade(*base, "--verifier-model", tiny_t5)
    assert r.returncode == 1 and "needs --verify llm" in r.stderr
    r = grade(*base, "--verify", "llm", "--verifier-model", tiny_t5, "--verifier-backend", "embedding")
    assert r.returncode == 1 and "LLM back end" in r.stderr
