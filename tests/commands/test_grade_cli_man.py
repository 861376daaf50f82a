"""The exam-grade man page: complete sections, every prompt and option documented, and
the prompt list identical to the prompts helper's fragment."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from exam_eval.commands.grade import cli
from exam_eval.grading.prompts import REGISTRY

MAN = Path(__file__).resolve().parents[2] / "man"
PAGE = MAN / "exam-grade.1"


def test_sections():
    text = PAGE.read_text()
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "FILES AND FORMATS", "EXIT STATUS",
                    "EXAMPLES", "SEE ALSO", "SCALING OUT", "PROMPTS"):
        assert re.search(rf"^\.SH \"?{section}\"?$", text, re.M), section


def test_every_option_and_prompt_is_documented():
    text = PAGE.read_text().replace("\\-", "-")
    for param in cli.params:
        for opt in param.opts:
            if opt.startswith("--") and opt != "--help":
                assert opt in text, opt
    for pid in REGISTRY:
        if not pid.startswith("file:"):
            assert pid in text, pid


def test_prompt_list_is_the_fragment_verbatim():
    fragment = MAN / "prompts.fragment.roff"
    if not fragment.exists():
        pytest.skip("no prompts fragment")
    body = "".join(line for line in fragment.read_text().splitlines(True) if not line.startswith('.\\"'))
    page = PAGE.read_text()
    start = page.index("\n", page.index('.\\" BEGIN man/prompts.fragment.roff')) + 1
    end = page.index('.\\" END man/prompts.fragment.roff')
    assert page[start:end] == body, "man/exam-grade.1 is out of date with man/prompts.fragment.roff"


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff not installed")
def test_groff_renders_without_warnings():
    r = subprocess.run(["groff", "-man", "-ww", "-z", str(PAGE)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == ""
