"""Reproducing published grades (issue 13, point 3): the self-rating reading rules
(strict, EXAM++'s "no number is 1", the reference workbench's reader), generate-then-parse
self-rating, and UMBRELA's published decoding settings.

The reference is the workbench's own DL19 graded file: its raw FLAN-T5 answers and the
self-ratings it derived from them."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from exam_eval.backends import get_backend
from exam_eval.grading.types import GradeRequest
from exam_eval.errors import UsageError
from exam_eval.grading.parsing import parse_rating, parse_rating_exam_pp, parse_rating_workbench
from exam_eval.grading.prompts import get_prompt
from exam_eval.grading.grade_files import iter_grades
from openai_stub import OpenAIStub, chat_body
from tiny_models import tiny_llama, tiny_t5  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[2]
RATE = get_prompt("question-selfrating")
GRADED = "dl19/graded-flan-t5-large.jsonl.gz"


@pytest.fixture(scope="module")
def reference(shared_data):
    """(raw answer, reference self-rating) for every DL19 reference grade."""
    return [(g.answer, g.grade) for _, g in iter_grades(shared_data / GRADED)]


def test_workbench_rule_reproduces_the_reference_self_ratings(reference):
    assert len(reference) == 92600
    same = sum(parse_rating_workbench(RATE, a).grade == ref for a, ref in reference)
    # required: at least 99.9 %; reached: every one of them
    assert same / len(reference) >= 0.999
    assert same == len(reference)


def test_exam_pp_rule_is_the_papers_text_not_the_workbench(reference):
    # EXAM++ 4.2.2: an answer without a number is rating 1. The reference rated 451 such
    # answers 0 (and 17 bare choice letters 1): the paper's rule cannot reproduce it.
    got = Counter()
    for answer, ref in reference:
        strict = parse_rating(RATE, answer)
        tolerant = parse_rating_exam_pp(RATE, answer)
        if strict.parse_ok:
            assert tolerant == strict
        elif strict.note == "no rating found":
            assert (tolerant.grade, tolerant.parse_ok) == (1, True)
        got[tolerant.grade == ref] += 1
    assert got[True] == 92148 and got[False] == 452


@pytest.mark.parametrize("text,grade", [
    ("4", 4), (" 3.", 3), ("(2)", 2), ("5!", 5),  # a lone digit on the scale
    ("4/5", 0), ("Rating: 4", 0), ("6", 0), ("12", 0), ("synapse", 0), ("2: The answer has limited", 0),
    ("A", 1), ("d.", 1), ("(iii)", 1), ("unanswerable", 1), ("", 1),  # the workbench's swapped branch
])
def test_workbench_rule_cases(text, grade):
    p = parse_rating_workbench(RATE, text)
    assert (p.grade, p.parse_ok) == (grade, True)


def test_variants_have_their_own_id_and_hash():
    gen = RATE.variant(generate=True)
    wb = RATE.variant(rule="workbench")
    both = RATE.variant(generate=True, rule="workbench")
    assert RATE.variant() is RATE
    assert (gen.id, gen.mode, gen.parser) == ("question-selfrating/generate", "generate", "rating")
    assert (wb.id, wb.mode, wb.parser) == ("question-selfrating/workbench", "score", "rating-workbench")
    assert both.id == "question-selfrating/generate/workbench"
    assert len({RATE.hash, gen.hash, wb.hash, both.hash}) == 4
    assert wb.template == RATE.template
    with pytest.raises(UsageError):
        get_prompt("sun").variant(rule="exam-pp")  # a direct prompt has no self-rating
    with pytest.raises(UsageError):
        get_prompt("question-extraction").variant(generate=True)


# -- end to end: the raw answers replayed through exam-grade ----------------------------------

def _reference_slice(shared_data, tmp_path, n_paragraphs=40):
    """The DL19 passages whose answers the workbench read most oddly: their bank items,
    passages, a run, a scripted back end that answers with the reference's raw text, and the
    reference self-ratings per (doc, item)."""
    bank = {}
    with gzip.open(shared_data / "dl19/banks/questions-genq-oldformat.jsonl.gz", "rt") as fh:
        for line in fh:
            obj = json.loads(line)
            for q in obj["questions"]:
                bank[q["question_id"]] = (obj["query_id"], q["question_text"])
    def oddness(p):  # answers without a lone digit; those the reference rated 1 first
        answers = [a[1].strip() for b in p.get("exam_grades", []) for a in b.get("answers", [])]
        ones = {r["question_id"] for b in p.get("exam_grades", []) for r in b["self_ratings"] if r["self_rating"] == 1}
        odd = [a for a in answers if not a.isdigit()]
        return 100 * sum(1 for b in p["exam_grades"] for i, a in b["answers"] if i in ones and not a.strip().isdigit()) \
            + len(odd)

    scored = []
    with gzip.open(shared_data / GRADED, "rt") as fh:
        for line in fh:
            qid, paras = json.loads(line)
            scored += [(oddness(p), qid, p) for p in paras]
    scored.sort(key=lambda x: -x[0])
    chosen = [(qid, p) for _, qid, p in scored[:n_paragraphs]]
    rules, expected, passages, run = [], {}, [], []
    for rank, (qid, p) in enumerate(chosen, 1):
        passages.append({"doc_id": p["paragraph_id"], "text": p["text"]})
        run.append(f"{qid} Q0 {p['paragraph_id']} {rank} {1000 - rank} ref")
        (block,) = p["exam_grades"]
        ratings = {r["question_id"]: r["self_rating"] for r in block["self_ratings"]}
        for item_id, raw in block["answers"]:
            rules.append({"item": bank[item_id][1], "context": p["text"], "output": raw})
            expected[(p["paragraph_id"], item_id)] = ratings[item_id]
    items = {i for _, i in expected}
    bank_lines = [{"query_id": bank[i][0], "item_id": i, "kind": "question", "text": bank[i][1]} for i in sorted(items)]
    files = {}
    for name, rows in (("bank.jsonl", bank_lines), ("passages.jsonl", passages), ("script.jsonl", rules)):
        files[name] = tmp_path / name
        files[name].write_text("".join(json.dumps(r) + "\n" for r in rows))
    files["run"] = tmp_path / "ref.run"
    files["run"].write_text("\n".join(run) + "\n")
    return files, expected


def test_exam_grade_reproduces_reference_grades_from_raw_answers(shared_data, tmp_path):
    files, expected = _reference_slice(shared_data, tmp_path)
    assert set(expected.values()) >= {0, 1}
    out = tmp_path / "grades.jsonl"
    env = dict(os.environ, PYTHONPATH=str(ROOT), EXAM_EVAL_PROGRESS="0")
    cmd = [sys.executable, "-c", "import exam_eval.commands.grade as m; m.main()",
           "--backend", "scripted", "-O", f"script={files['script.jsonl']}", "--prompt", "question-selfrating",
           "--generate-ratings", "--rating-rule", "workbench", "--bank", str(files["bank.jsonl"]),
           "--passages", str(files["passages.jsonl"]), str(files["run"]), "--no-cache", "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == len(expected)
    assert {x["prompt"] for x in rows} == {"question-selfrating/generate/workbench"}
    assert all(x["parse_ok"] for x in rows)
    assert {(x["doc_id"], x["item_id"]): x["grade"] for x in rows} == expected
    # the default (strict) refuses the answers without a rating instead of guessing
    strict = tmp_path / "strict.jsonl"
    cmd = [c for c in cmd if c not in ("--rating-rule", "workbench")]
    cmd[cmd.index(str(out))] = str(strict)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    refused = [x for x in map(json.loads, strict.read_text().splitlines()) if not x["parse_ok"]]
    assert refused and all(x["grade"] is None for x in refused)


def test_rating_rule_on_a_direct_prompt_is_a_usage_error(run_cli, tmp_path):
    r = run_cli("exam-grade", "--backend", "scripted", "--prompt", "sun", "--rating-rule", "exam-pp",
                "--topics", tmp_path / "t.tsv", tmp_path / "x.run")
    assert r.returncode == 1 and "not a self-rating prompt" in r.stderr


# -- UMBRELA's published decoding ----------------------------------------------------------

UMBRELA = get_prompt("umbrela")


def test_umbrela_decoding_is_sent_by_the_endpoint():
    with OpenAIStub(lambda r: chat_body("##final score: 2")) as stub:
        b = get_backend("endpoint", model="m", base_url=stub.url, backoff=0.01)
        b.load()
        got = b.grade([GradeRequest(UMBRELA, "q", None, "p"), GradeRequest(get_prompt("sun"), "q", None, "p")])
        sent = {("final score" in r.prompt_text): r.json for r in stub.requests}
    assert got[0].grade == 2
    umbrela = sent[True]
    assert (umbrela["temperature"], umbrela["top_p"], umbrela["frequency_penalty"], umbrela["presence_penalty"]) \
        == (0.0, 1.0, 0.5, 0.0)
    assert "frequency_penalty" not in sent[False] and sent[False]["temperature"] == 0.0


def test_umbrela_hash_covers_its_decoding():
    import dataclasses

    assert dataclasses.replace(UMBRELA, decoding=()).hash != UMBRELA.hash
    assert RATE.hash == "c6e32850bda802f3"  # prompts without decoding keep their hashes (and caches)


def test_hf_causal_applies_the_penalties_like_openai(tiny_llama):
    torch = pytest.importorskip("torch")
    b = get_backend("hf-causal", model=str(tiny_llama), device="cpu", max_new_tokens=12)
    b.load()
    reqs = [GradeRequest(UMBRELA, "capital of france", None, c)
            for c in ("Paris is the capital of France.", "The water table will rise during very wet times.")]
    got = [r.answer for r in b.grade(reqs)]
    differs = 0
    for req, text in zip(reqs, got):
        ids = b.tokenizer(b._full_text(req, b.fit_context(req)), return_tensors="pt",
                          add_special_tokens=False)["input_ids"]
        generated: list[int] = []
        with torch.inference_mode():
            for _ in range(12):  # greedy, logit -= 0.5 * count (frequency) + 0 * seen (presence)
                logits = b.model(torch.tensor([ids[0].tolist() + generated])).logits[0, -1].double()
                for t, n in Counter(generated).items():
                    logits[t] -= 0.5 * n
                nxt = int(torch.argmax(logits))
                generated.append(nxt)
                if nxt == b.tokenizer.eos_token_id:
                    break
            plain = b.model.generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=b.tokenizer.pad_token_id)
        assert text == b.tokenizer.decode(generated, skip_special_tokens=True)
        differs += text != b.tokenizer.decode(plain[0, ids.shape[1]:], skip_special_tokens=True)
    assert differs  # the penalties did change what a random model repeats


def test_generate_ratings_makes_a_scoring_model_generate(tiny_t5):
    b = get_backend("hf-seq2seq", model=str(tiny_t5), device="cpu", max_new_tokens=4, min_label_mass=0)
    b.load()
    req = GradeRequest(RATE.variant(generate=True, rule="workbench"), "q", "what is the capital of France?",
                       "Paris is the capital of France.")
    scored = b.grade([GradeRequest(RATE, "q", req.item_text, req.context)])[0]
    (res,) = b.grade([req])
    assert scored.probs is not None and res.probs is None  # generated, then read
    assert res.parse_ok and res.grade == parse_rating_workbench(RATE, res.answer).grade
