"""exam-grade end to end with tiny random-weight Hugging Face models (no download):
scoring writes normalised label probabilities, generation writes parsed answers, and
the cached rerun reproduces them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from inproc import command

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

from exam_eval.grading.prompts import get_prompt  # noqa: E402
from exam_eval.grading.grade_files import read_grades  # noqa: E402
from tiny_models import tiny_llama, tiny_t5  # noqa: E402,F401
from child_env import ChildEnv  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
ENV = ChildEnv(PYTHONPATH=str(ROOT), EXAM_EVAL_PROGRESS="0")


def grade(*args):
    return command("grade", *args, env=ENV)


@pytest.fixture(scope="module")
def small_inputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("in")
    bank = tmp / "bank.jsonl"
    bank.write_text("".join(x + "\n" for x in (DEMO / "questions.jsonl").read_text().splitlines()[:3]))
    run = tmp / "r.run"
    run.write_text("".join(x + "\n" for x in (DEMO / "good.run").read_text().splitlines()[:4]))
    return bank, run


@pytest.mark.parametrize("backend,fixture", [("hf-seq2seq", "tiny_t5"), ("hf-causal", "tiny_llama")])
def test_scoring_and_generation_end_to_end(backend, fixture, request, small_inputs, tmp_path):
    model = request.getfixturevalue(fixture)
    bank, run = small_inputs
    common = ["--backend", backend, "--model", model, "--device", "cpu", "--bank", bank,
              "--passages", DEMO / "passages.jsonl", run, "--cache", tmp_path / "c.sqlite"]
    # random weights put a few per cent of the first token's probability on the labels: by
    # default no grade is read from them, every answer is generated and read from its text
    judged = tmp_path / "judged.jsonl"
    r = grade(*common, "--prompt", "question-selfrating", "--max-tokens", "4", "-o", judged)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in judged.read_text().splitlines()]
    assert len(rows) == 3 * 4
    prompt = get_prompt("question-selfrating")
    for row in rows:
        assert row["probs"] is None and row["fallback"] == "label mass below 0.5" and 0 < row["label_mass"] < 0.5
        parsed = prompt.parse(row["answer"])  # the grade is what the generated text says, or none
        assert (row["grade"], row["parse_ok"]) == ((parsed.grade, True) if parsed.parse_ok else (None, False))
    assert "12 of 12 scored pairs were read from the answer's text, as generate mode reads it " \
           "(label mass below 0.5: 12)" in r.stderr
    # --min-label-mass 0: the labels' probabilities whatever the judge would write
    common += ["--min-label-mass", "0"]
    out = tmp_path / "score.jsonl"
    r = grade(*common, "--prompt", "question-selfrating", "-o", out)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 3 * 4
    for row in rows:
        assert row["parse_ok"] and set(row["probs"]) == {"0", "1", "2", "3", "4", "5"}
        assert sum(row["probs"].values()) == pytest.approx(1.0)
        assert row["grade"] == int(max(row["probs"], key=row["probs"].get))
        assert row["model"] == str(model)
    out2 = tmp_path / "gen.jsonl"
    r = grade(*common, "--prompt", "question-extraction", "--max-tokens", "4", "-o", out2)
    assert r.returncode == 0, r.stderr
    gen = read_grades(str(out2))
    assert len(gen) == 12 and all(g.probs is None and g.answer is not None for g in gen)
    # rerun into a new file: everything from the cache, identical lines
    out3 = tmp_path / "again.jsonl"
    r = grade(*common, "--prompt", "question-selfrating", "-o", out3)
    assert "0 graded, 12 from cache" in r.stderr
    assert sorted(out3.read_text().splitlines()) == sorted(out.read_text().splitlines())
