"""What a model actually receives: through the scripted back end (the same render path as
every LLM back end), each published prompt is exactly its golden paper text
(tests/golden/prompts, typed from the papers and checked against them in test_prompts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exam_eval.grading.types import GradeRequest
from exam_eval.backends.scripted import ScriptedBackend
from exam_eval.grading.prompts import REGISTRY, get_prompt

GOLDEN = Path(__file__).parents[1] / "golden" / "prompts"
# the values the golden files were rendered with (see tests/grading/test_prompts.py)
QUERY = "how do vaccines train the immune system"
QUESTION = "What do vaccines contain?"
NUGGET = "weakened or inactivated pathogens"
CONTEXT = "Vaccines contain weakened or inactivated forms of a pathogen, which train the immune system."
ANSWER = "inactivated pathogens"
CORRECT = "weakened or killed germs"

IDS = sorted(p.stem for p in GOLDEN.glob("*.txt") if p.stem in REGISTRY) if GOLDEN.is_dir() else []


@pytest.mark.parametrize("prompt_id", IDS)
def test_scripted_backend_sees_the_golden_text(prompt_id):
    prompt = get_prompt(prompt_id)
    item = {"question": QUESTION, "nugget": NUGGET, "direct": None}[prompt.target]
    backend = ScriptedBackend(score=True)
    backend.grade([GradeRequest(prompt, QUERY, item, CONTEXT, None, ANSWER, CORRECT)])
    golden = (GOLDEN / f"{prompt_id}.txt").read_text(encoding="utf-8")[:-1]
    assert backend.seen == [golden]
    # chat back ends get the same text, split into turns
    chat = backend.messages(GradeRequest(prompt, QUERY, item, CONTEXT, None, ANSWER, CORRECT))
    assert chat[-1]["role"] == "user" and chat[-1]["content"] in golden


def test_every_published_prompt_has_a_golden_file():
    assert len(IDS) >= 14
