"""Shared fixtures. Tests that need the real TREC data use ``shared_data`` and skip
cleanly on a machine without ``../shared/data`` (a user's checkout)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


@pytest.fixture
def run_cli():
    """Run a console command as a user would: a real subprocess, our exit codes."""

    def _run(prog: str, *args: str, input: str | None = None, cwd: str | os.PathLike | None = None,
             env: dict | None = None, timeout: float = 600):
        module = "exam_eval.commands." + prog.removeprefix("exam-")
        cmd = [sys.executable, "-c", f"import {module} as m; m.main()", *map(str, args)]
        full_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
        return subprocess.run(cmd, input=input, capture_output=True, text=True, cwd=cwd,
                              env=full_env, timeout=timeout)

    return _run
