"""stderr carries our own progress bar and messages only (issue 12 item 5): no
transformers "Loading weights" bar or other tqdm bars, and no empty 0/0 bar when every
grade comes from the cache. Run with a tiny random-weight T5 through the real
transformers loading path (no download)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

from tiny_models import tiny_t5  # noqa: E402,F401

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
TQDM_BAR = re.compile(r"\d+%\||\d+/\d+ \[\d\d:\d\d")  # "100%|####| 103/103 [00:00<00:00, ...]"
EMPTY_BAR = re.compile(r"(?<![\d/])0/0(?![\d/])")
SUMMARY = re.compile(r"^exam-grade: 12 pairs: (\d+) graded, (\d+) from cache")


def grade(*args, **env):
    full_env = {k: v for k, v in os.environ.items() if k not in ("EXAM_EVAL_PROGRESS", "HF_HUB_DISABLE_PROGRESS_BARS")}
    full_env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", **env)
    return subprocess.run([sys.executable, "-c", "import exam_eval.commands.grade as m; m.main()", *map(str, args)],
                          capture_output=True, text=True, env=full_env, timeout=600)


@pytest.fixture
def common(tiny_t5, tmp_path):
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join(x + "\n" for x in (DEMO / "questions.jsonl").read_text().splitlines()[:3]))
    run = tmp_path / "r.run"
    run.write_text("".join(x + "\n" for x in (DEMO / "good.run").read_text().splitlines()[:4]))
    return ["--backend", "hf-seq2seq", "--model", tiny_t5, "--device", "cpu", "--prompt", "question-selfrating",
            "--bank", bank, "--passages", DEMO / "passages.jsonl", run, "--cache", tmp_path / "cache.sqlite",
            # scored grades (the random model would fall back to generating: tests/backends/test_judges.py, test_grade_cli_hf.py)
            "--min-label-mass", "0"]


@pytest.mark.parametrize("engine", ["torch", "ctranslate2"])
def test_only_our_bar_then_no_bar_when_all_comes_from_the_cache(common, tmp_path, engine):
    if engine == "ctranslate2":
        pytest.importorskip("ctranslate2")
    common = [*common, "--engine", engine]
    first = grade(*common, "-o", tmp_path / "a.jsonl")
    assert first.returncode == 0, first.stderr
    assert "Loading weights" not in first.stderr and not TQDM_BAR.search(first.stderr), first.stderr
    assert re.search(r"^grading\b.*\b12/12\b", first.stderr, re.M), first.stderr  # our bar is still there
    lines = first.stderr.splitlines()
    # CTranslate2's int8 may add one line after the summary: how many close calls it regraded
    if re.fullmatch(r"exam-grade: \d+ of 12 scored model calls .* regraded in float32", lines[-1]):
        assert engine == "ctranslate2"
        lines = lines[:-1]
    assert SUMMARY.search(lines[-1]).groups() == ("12", "0")

    second = grade(*common, "-o", tmp_path / "b.jsonl")  # a fresh output: all 12 from the cache
    assert second.returncode == 0, second.stderr
    assert not EMPTY_BAR.search(second.stderr), second.stderr
    lines = second.stderr.splitlines()
    assert len(lines) == 1 and SUMMARY.search(lines[0]).groups() == ("0", "12"), second.stderr


def test_a_user_who_asks_for_the_library_bars_gets_them(common, tmp_path):
    """HF_HUB_DISABLE_PROGRESS_BARS=0 (to watch a first download) is respected; this is
    also what shows that the silencing above is not an accident of the tiny model."""
    # the torch engine: its model comes through transformers' own loading bar
    r = grade(*common, "--engine", "torch", "-o", tmp_path / "a.jsonl", HF_HUB_DISABLE_PROGRESS_BARS="0")
    assert r.returncode == 0, r.stderr
    assert "Loading weights" in r.stderr
