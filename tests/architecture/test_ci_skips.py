"""scripts/ci_skips.py, on junit reports that pytest itself writes: a test skipped in one
run and run in another is not a CI skip; one skipped everywhere is listed under its reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TESTS = '''
import os
import pytest

def test_needs_a_browser():
    pytest.skip("chromium is not installed")

def test_needs_a_server():
    if not os.environ.get("SERVER"):
        pytest.skip("no server")

def test_plain():
    assert True
'''


def _pytest(folder: Path, report: str, *args: str, **env: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           f"--junitxml={report}", "-o", "addopts=", *args, "test_fake.py"],
                          cwd=folder, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_skip_is_ci_s_only_where_no_run_ran_the_test(tmp_path):
    (tmp_path / "test_fake.py").write_text(TESTS)
    _pytest(tmp_path, "first.xml")
    _pytest(tmp_path, "second.xml", "-k", "server", SERVER="1")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "ci_skips.py"), "first.xml", "second.xml"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "tests CI did not run: 1"
    assert lines[1].split(None, 1) == ["1", "chromium is not installed"]
    assert lines[2].strip() == "test_fake::test_needs_a_browser"
    assert len(lines) == 3

    alone = subprocess.run([sys.executable, str(ROOT / "scripts" / "ci_skips.py"), "first.xml"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert alone.stdout.splitlines()[0] == "tests CI did not run: 2"
    assert "no server" in alone.stdout


def test_a_report_it_cannot_read_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "broken.xml").write_text("<testsuites><testsuite>")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "ci_skips.py"), "broken.xml", "missing.xml"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("ci_skips.py: broken.xml: not a junit report")
    assert "Traceback" not in done.stderr
