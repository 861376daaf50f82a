"""Every command: --help with examples, a man page that groff renders without warnings."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


@pytest.mark.parametrize("prog", sorted(SCRIPTS))
def test_help_has_examples_and_exit_0(prog, run_cli):
    res = run_cli(prog, "--help")
    assert res.returncode == 0, res.stderr
    assert "Usage:" in res.stdout and "Example" in res.stdout


@pytest.mark.parametrize("prog", sorted(SCRIPTS))
def test_man_page_exists_and_renders_cleanly(prog):
    page = ROOT / "man" / f"{prog}.1"
    assert page.is_file(), f"missing man page {page}"
    text = page.read_text()
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "EXAMPLES"):
        assert f".SH {section}" in text or f'.SH "{section}"' in text, (prog, section)
    if shutil.which("groff"):
        res = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(page)], capture_output=True, text=True)
        assert res.stderr == "", res.stderr


@pytest.mark.parametrize("prog", ["exam-qrels", "exam-cover", "exam-correlate", "exam-verify"])
def test_light_commands_start_without_torch(prog):
    module = "exam_eval.commands." + prog.removeprefix("exam-")
    code = (f"import sys, {module} as m\n"
            "try:\n    m.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('HEAVY', [x for x in ('torch', 'transformers') if x in sys.modules])")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "HEAVY []" in res.stdout, res.stdout + res.stderr


def test_bin_launchers_work_without_install():
    for prog in SCRIPTS:
        launcher = ROOT / "bin" / prog
        assert launcher.is_file(), launcher
    res = subprocess.run([sys.executable, str(ROOT / "bin" / "exam-qrels"), "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "exam-qrels" in res.stdout
