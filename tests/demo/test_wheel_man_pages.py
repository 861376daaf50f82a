"""The man pages travel in the wheel: installed into a fresh venv, they lie in its
share/man beside bin/, where man finds them (not only in a checkout's man/)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "man").glob("*.1")) + sorted((ROOT / "man").glob("*.7"))

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    # built from a copy: setuptools writes build/ and *.egg-info into the tree it builds
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("exam_eval", "man"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "txt"))
    wheels = tmp_path_factory.mktemp("wheels")
    offline = dict(os.environ, PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "-w", str(wheels), str(src)], capture_output=True, text=True, env=offline, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    (wheel,) = wheels.glob("exam_eval-*.whl")
    env_dir = tmp_path_factory.mktemp("venv") / "v"
    venv.create(env_dir, with_pip=False)  # pip of this interpreter installs into it: no ensurepip
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install", "-q",
                        "--no-deps", str(wheel)], capture_output=True, text=True, env=offline, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return env_dir


def test_every_man_page_is_installed_as_in_the_checkout(installed):
    assert len(PAGES) == 8
    for page in PAGES:
        there = installed / "share" / "man" / f"man{page.suffix[1:]}" / page.name
        assert there.read_bytes() == page.read_bytes(), there


@pytest.mark.skipif(shutil.which("man") is None, reason="no man command on this machine")
def test_man_finds_and_renders_the_installed_page(installed):
    page = installed / "share" / "man" / "man1" / "exam-qrels.1"
    env = dict(os.environ, MANPATH=str(installed / "share" / "man"), MANWIDTH="80", MANPAGER="cat", PAGER="cat")
    r = subprocess.run(["man", "-w", "exam-qrels"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and Path(r.stdout.strip()) == page, (r.stdout, r.stderr)
    # a user does not set MANPATH: man looks in share/man beside each bin/ on PATH
    env = dict(os.environ, PATH=f"{installed / 'bin'}{os.pathsep}{os.environ['PATH']}")
    env.pop("MANPATH", None)
    r = subprocess.run(["man", "-w", "exam-qrels"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and Path(r.stdout.strip()) == page, (r.stdout, r.stderr)
    r = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True, env=dict(env, MANWIDTH="80",
                       MANPAGER="cat", PAGER="cat"), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "exam-qrels" in r.stdout and "DIFFERENCES FROM TREC_EVAL" in r.stdout
