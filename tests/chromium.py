"""Debian's chromium for the tests that render a page (make system-deps installs it, as
root with apt-get); a test without it skips and says so."""

from __future__ import annotations

import shutil

import pytest

#: what every headless run is given: no sandbox (root in a container), and no traffic of
#: chromium's own (updates, sync, QUIC probes) beside the page's
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed (make system-deps installs it, as root with apt-get)")
    return exe
