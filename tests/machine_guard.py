"""The suite guards the machine it runs on.

Run as root (CI, containers), one output renamed over /dev/null once made it a regular
file for every program on the machine, and later tests failed far from the cause. So after
each test file /dev/null must still be a character device; the file that broke it is named
(its last test errors at teardown) and, where we may (root), the device is put back:
a fresh node renamed over it, atomically, so that no other process misses it.
``EXAM_EVAL_GUARDED_NULL`` names another node to guard (tests/architecture/test_machine_guard.py
guards one of its own, so that it can break it).
"""

from __future__ import annotations

import contextlib
import os
import stat

import pytest

NULL_DEVICE = os.environ.get("EXAM_EVAL_GUARDED_NULL") or os.devnull


def _null_device_problem() -> str | None:
    try:
        st = os.lstat(NULL_DEVICE)
    except OSError as exc:
        return f"cannot be looked at ({exc.strerror})"
    if stat.S_ISCHR(st.st_mode):
        return None
    return f"is no longer a character device (mode {stat.filemode(st.st_mode)}, {st.st_size} bytes)"


def _put_back_null_device() -> bool:
    if os.geteuid() != 0 or not hasattr(os, "mknod"):
        return False
    fresh = f"{NULL_DEVICE}.exam-eval-tests.{os.getpid()}"
    try:
        os.mknod(fresh, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        os.chmod(fresh, 0o666)
        os.replace(fresh, NULL_DEVICE)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(fresh)
        return False
    return True


@pytest.fixture(scope="module", autouse=True)
def null_device_intact(request):
    before = _null_device_problem()
    yield
    if before is None and (problem := _null_device_problem()) is not None:
        fix = ("it is put back" if _put_back_null_device() else
               f"put it back by hand, as root: rm {NULL_DEVICE}; mknod -m 666 {NULL_DEVICE} c 1 3")
        pytest.fail(f"{NULL_DEVICE} {problem} after the tests of {request.node.nodeid}: one of them wrote over "
                    f"the machine's null device ({fix})", pytrace=False)
