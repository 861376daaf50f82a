"""The suite's guard of the machine (tests/machine_guard.py) does what it says: a test file
that turns the guarded null device into a regular file fails, named, and the device is put
back. Run on a node of its own (made with mknod, so as root only), never the real one."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node (mknod) needs root")
def test_a_test_file_that_replaces_the_null_device_fails_named_and_it_is_put_back(tmp_path):
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n"
                                          "from machine_guard import null_device_intact  # noqa\n")
    (tmp_path / "test_a_fine_one.py").write_text("def test_fine():\n    pass\n")
    (tmp_path / "test_writes_over_it.py").write_text(
        "import os\n\ndef test_first():\n    pass\n\n"
        "def test_replaces():\n    path = os.environ['EXAM_EVAL_GUARDED_NULL']\n"
        "    with open(path + '.tmp', 'w') as f:\n        f.write('118 KB of requests')\n"
        "    os.replace(path + '.tmp', path)\n")
    (tmp_path / "test_z_later.py").write_text("def test_later():\n    pass\n")
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "-p", "no:randomly", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "EXAM_EVAL_GUARDED_NULL": str(null)}, timeout=120)
    out = res.stdout
    assert res.returncode == 1, out
    assert "ERROR at teardown of test_replaces" in out, out
    assert (f"{null} is no longer a character device (mode -rw-r--r--, 18 bytes) after the tests of "
            "test_writes_over_it.py: one of them wrote over the machine's null device (it is put back)") in out, out
    assert "4 passed, 1 error" in out, out  # the files before and after stay green: only the culprit is named
    assert stat.S_ISCHR(os.lstat(null).st_mode) and os.lstat(null).st_rdev == os.makedev(1, 3)
