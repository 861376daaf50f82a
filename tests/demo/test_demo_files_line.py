"""The demo's closing "files:" line names every file the demo left in its folder, and no
other (it once left verdict.txt out): the list is what the folder holds. The scripted back
end grades (pseudo-grades from a hash, no model), so the demo's steps take seconds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow   # two demo runs, some seconds


def _files_line(stdout: str, out: Path) -> list[str]:
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith("files: ")]
    m = re.fullmatch(rf"files: {re.escape(str(out))}/ \((.*)\); \d+ s", line)
    assert m, line
    return m.group(1).split(", ")


def test_the_files_line_is_what_the_folder_holds(tmp_path):
    out = tmp_path / "demo-out"
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", EXAM_EVAL_PROGRESS="0")
    for _ in range(2):   # a rerun too: its cache carried over is in the folder again
        res = subprocess.run([sys.executable, "-m", "exam_eval.demo", "--out", str(out), "--backend", "scripted"],
                             capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
        named = _files_line(res.stdout, out)
        assert sorted(named) == sorted(os.listdir(out)), (named, os.listdir(out))
        assert "verdict.txt" in named and "commands.sh" in named
