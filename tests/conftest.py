"""Shared fixtures. Tests that need the real TREC data use ``shared_data`` and skip
cleanly on a machine without ``../shared/data`` (a user's checkout)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

import inproc

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
SHARED_TOOLS = ROOT.parent / "shared" / "tools"


# Nothing the tests run may write into the user's home: grade caches and CTranslate2
# conversions (~/.cache/exam_eval), Hugging Face's files, matplotlib's font cache, chromium's
# profile (~/.config/chromium). HOME and the XDG folders point into one folder of this
# session, set before any test module is imported (some read them on import) and removed
# when the session ends.
_HOME_VARS = {"HOME": "", "XDG_CACHE_HOME": ".cache", "XDG_CONFIG_HOME": ".config",
              "XDG_DATA_HOME": ".local/share", "XDG_STATE_HOME": ".local/state", "HF_HOME": ".cache/huggingface"}


def pytest_configure(config):
    home = Path(tempfile.mkdtemp(prefix="exam-eval-tests-home-"))
    config._exam_eval_home = home
    for var, sub in _HOME_VARS.items():
        os.environ[var] = str(home / sub)


def pytest_unconfigure(config):
    home = getattr(config, "_exam_eval_home", None)
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(autouse=True)
def _own_default_cache(tmp_path_factory, monkeypatch):
    """Every test's commands keep answers and grades in a cache of their own, never in the
    user's (~/.cache/exam_eval) nor another test's: the default cache's folder is moved
    under a fresh XDG_CACHE_HOME (a test may still set either variable itself)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    monkeypatch.delenv("EXAM_EVAL_CACHE", raising=False)


@pytest.fixture
def sigint_raises():
    """For a test that sends SIGINT to its own process: Ctrl-C raises KeyboardInterrupt for
    the test's duration. A shell starts a background job (`make test &` in a script, nohup,
    cron, some CI runners) with SIGINT ignored, and Python then keeps it ignored, so the
    signal would never arrive; the handler found is put back after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


@pytest.fixture(scope="session")
def trec_eval_binary(tmp_path_factory) -> Path:
    """A real trec_eval 9.0.8: $EXAM_EVAL_TREC_EVAL, or built once per test run from
    ../shared/tools (its source, with trec_eval's own test/ folder beside the binary).
    Skips on a machine without that folder or a C compiler (a user's checkout)."""
    given = os.environ.get("EXAM_EVAL_TREC_EVAL")
    if given:
        assert os.access(given, os.X_OK), f"EXAM_EVAL_TREC_EVAL={given} is not an executable"
        return Path(given)
    script = SHARED_TOOLS / "build-trec-eval"
    if not script.is_file():
        pytest.skip("../shared/tools/build-trec-eval is not present")
    if not (shutil.which("cc") and shutil.which("make")):
        pytest.skip("no C compiler (cc) and make to build trec_eval")
    res = subprocess.run(["sh", str(script), str(tmp_path_factory.mktemp("trec_eval_build"))],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"building trec_eval failed: {res.stderr}"
    return Path(res.stdout.strip())


@pytest.fixture
def run_cli():
    """A command as a user runs it, answered as subprocess.run answers: inproc.command (in
    this process by default, ``process=True`` for a real one)."""
    return inproc.command


# the suite guards the machine it runs on: /dev/null stays a character device (machine_guard.py)
from machine_guard import null_device_intact  # noqa: E402,F401  (an autouse fixture, found by name)
