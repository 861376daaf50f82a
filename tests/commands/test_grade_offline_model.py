"""exam-grade with its default model (google/flan-t5-large) where the Hugging Face hub
cannot be reached and the model is not in the local cache: one line saying how to get the
model, in seconds, not huggingface_hub's five retries per file (12 lines over 50 s).

The hub is made unreachable on any machine: HF_ENDPOINT at a closed local port, an empty
HF_HOME (and hub cache), offline switches off. Each case runs in a process of its own,
since huggingface_hub reads these variables when first imported."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[2] / "exam_eval" / "demo_data"


def no_hub(tmp_path, **more) -> dict:
    home = tmp_path / "hf"
    return {"HF_ENDPOINT": "http://127.0.0.1:1", "HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"),
            "HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0", **more}


def grade(run_cli, tmp_path, *extra, env):
    out = tmp_path / "g.jsonl"
    started = time.monotonic()
    res = run_cli("exam-grade", "--prompt", "question-selfrating", "--bank", DEMO / "questions.jsonl",
                  "--passages", DEMO / "passages.jsonl", DEMO / "good.run", "--no-cache", "-o", out, *extra,
                  env=env, process=True, timeout=120)
    return res, time.monotonic() - started, out


@pytest.mark.parametrize("engine", [(), ("--engine", "torch")], ids=["default-engine", "torch"])
def test_unreachable_hub_is_one_line_in_seconds(tmp_path, run_cli, engine):
    res, took, out = grade(run_cli, tmp_path, *engine, env=no_hub(tmp_path))
    assert res.returncode == 2, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr  # no retry lines before it
    line = lines[0]
    assert line.startswith("exam-grade: google/flan-t5-large: "), line
    assert "http://127.0.0.1:1" in line and "cannot be reached" in line  # what was tried
    assert "hf download google/flan-t5-large" in line  # how to get it
    assert took < 20, took  # a hang check: huggingface_hub's retries took about 50 s
    assert not out.exists()


def test_offline_mode_without_the_model_says_how_to_get_it(tmp_path, run_cli):
    res, took, out = grade(run_cli, tmp_path, env=no_hub(tmp_path, HF_HUB_OFFLINE="1"))
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.splitlines()
    assert line.startswith("exam-grade: google/flan-t5-large: ") and "HF_HUB_OFFLINE" in line, line
    assert "hf download google/flan-t5-large" in line
    assert took < 20, took


def test_a_model_in_the_cache_is_not_refused_offline(tmp_path):
    """The check asks the hub only about a model the cache lacks: with flan-t5-large's
    config in the cache (as `hf download` leaves it), an unreachable hub is no refusal."""
    snapshot = tmp_path / "hf" / "hub" / "models--google--flan-t5-large" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text('{"model_type": "t5"}')
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    code = ("from exam_eval.backends.hf_common import require_hub_model\n"
            "require_hub_model('google/flan-t5-large', 'google/flan-t5-large')\n"
            "require_hub_model('google/flan-t5-base', 'google/flan-t5-base')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, **no_hub(tmp_path)})
    # the cached one passes; the next, not cached, is the refusal (an InputError naming it)
    assert "InputError" in res.stderr and "google/flan-t5-base" in res.stderr, res.stderr
    assert "flan-t5-large" not in res.stderr.split("InputError", 1)[1], res.stderr
