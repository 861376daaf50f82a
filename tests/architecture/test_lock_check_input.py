"""scripts/lock_check.py on a lock it cannot read as pins: one line on stderr naming the
file (and the line, where there is one), exit 2 (bad input, as every command here), no
traceback; the check itself (exit 0 or 1) is tests/architecture/test_lock.py's."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "lock_check.py"
GOOD = "click==8.1.7  # via exam-eval\nrich==13.7.1\n"


def _check(lock: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), *args, str(lock)], capture_output=True, text=True,
                          timeout=120)


def _refusal(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert res.stdout == "", res.stdout
    return lines[0]


@pytest.mark.parametrize("line", [
    "numpy",                                          # no version at all
    "numpy>=1,<2",                                    # a range
    "numpy>=1.26",                                    # one bound, not a pin
    "numpy @ https://example.org/numpy-2.0-py3-none-any.whl",   # a URL
    "numpy==1.*",                                     # a wildcard is no version
    "numpy===2.0",                                    # arbitrary equality: pip's, not a pin here
    "numpy!!2",                                       # no requirement at all
])
def test_a_line_that_is_no_pin_names_file_and_line(tmp_path, line):
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"# a comment\n{GOOD}{line}  # via exam-eval\n")
    msg = _refusal(_check(lock))
    assert f"{lock}:4: " in msg and "numpy" in msg, msg


def test_the_canarys_newer_table_refuses_it_the_same_way(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"{GOOD}numpy\n")
    assert f"{lock}:3: " in _refusal(_check(lock, "--newer"))


def test_a_binary_file_a_folder_and_a_missing_file(tmp_path):
    gz = tmp_path / "requirements.lock.gz"   # the lock compressed: NUL bytes on line 1
    gz.write_bytes(gzip.compress(GOOD.encode(), mtime=0))
    assert f"{gz}:1: " in _refusal(_check(gz))
    latin = tmp_path / "latin.lock"          # text, but not UTF-8, on its second line
    latin.write_bytes(b"click==8.1.7\nr\xe9sum\xe9==1.0\n")
    assert f"{latin}:2: " in _refusal(_check(latin))
    assert str(tmp_path) in _refusal(_check(tmp_path))
    missing = tmp_path / "nowhere.lock"
    assert str(missing) in _refusal(_check(missing))


@pytest.mark.parametrize("first,second", [
    ("numpy==1.26.4", "numpy==2.0.0"),                                       # no marker on either
    ("numpy==1.26.4", "NumPy==1.26.4"),                                      # the same name, spelled otherwise
    ("numpy==1.26.4 ; python_version < '3.12'", "numpy==2.0.0 ; python_version < '3.12'"),   # the same marker
    ("numpy==1.26.4", "numpy==2.0.0 ; sys_platform == 'win32'"),             # no marker: everywhere
    ("numpy==1.26.4 ; python_version >= '3'", "numpy==2.0.0 ; python_version >= '3.1'"),  # both hold here
])
def test_a_package_pinned_twice_names_both_lines(tmp_path, first, second):
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"{first}  # via a\n{GOOD}{second}  # via b\n")
    msg = _refusal(_check(lock))
    assert f"{lock}:4: " in msg and "line 1" in msg and "numpy" in msg.lower(), msg


def test_one_pin_per_python_under_different_markers_is_a_lock_as_make_lock_writes_it(tmp_path):
    """contourpy's two lines in lock/requirements.lock: read, and the check goes on (it
    differs from this venv: exit 1, the table, not a refusal)."""
    lock = tmp_path / "requirements.lock"
    lock.write_text("contourpy==1.3.3 ; python_full_version < '3.12'  # via matplotlib\n"
                    "contourpy==1.4.0 ; python_full_version >= '3.12'  # via matplotlib\n")
    res = _check(lock)
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr and "twice" not in res.stderr
    assert "are not at their version in" in res.stderr.splitlines()[0]
