"""What was tested is what installs: the lock (lock/requirements.lock, written by make lock)
pins every package make install puts into .venv, for every Python the README promises and
the platforms torch has wheels for, within pyproject's ranges; and .venv holds nothing else
(scripts/lock_check.py, which fails where it should)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "lock" / "requirements.lock"
CHECK = ROOT / "scripts" / "lock_check.py"

# the Pythons the README promises and the platforms the lock is resolved for
PYTHONS = ["3.11.7", "3.12.1", "3.13.0"]
PLATFORMS = [("linux", "Linux", "x86_64"), ("linux", "Linux", "aarch64"), ("darwin", "Darwin", "arm64"),
             ("win32", "Windows", "AMD64")]


def _env(python: str, platform: tuple[str, str, str]) -> dict[str, str]:
    sys_platform, system, machine = platform
    return {"python_version": ".".join(python.split(".")[:2]), "python_full_version": python,
            "sys_platform": sys_platform, "platform_system": system, "platform_machine": machine,
            "os_name": "nt" if system == "Windows" else "posix", "implementation_name": "cpython", "platform_python_implementation": "CPython"}


def _pins(env: dict[str, str]) -> dict[str, list[Version]]:
    pins: dict[str, list[Version]] = {}
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        line = line.split("  #", 1)[0].strip()
        if line and not line.startswith("#"):
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate(env):
                (spec,) = req.specifier
                pins.setdefault(canonicalize_name(req.name), []).append(Version(spec.version))
    return pins


def _pyproject_requirements() -> list[Requirement]:
    """pyproject's dependencies and extras."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for listed in project["optional-dependencies"].values():
        reqs += [Requirement(r) for r in listed if not r.startswith("exam_eval[")]
    return reqs


def _direct_requirements() -> list[Requirement]:
    """pyproject's, and what make install adds beside them."""
    reqs = _pyproject_requirements()
    for name in ("serving.in", "no-deps.in"):
        reqs += [Requirement(x) for x in (ROOT / "lock" / name).read_text().splitlines() if x and x[0] != "#"]
    return reqs


@pytest.mark.parametrize("python", PYTHONS)
def test_every_direct_requirement_has_one_pin_within_its_range_on_each_python_and_platform(python):
    for platform in PLATFORMS:
        env = _env(python, platform)
        pins = _pins(env)
        assert all(len(v) == 1 for v in pins.values()), {k: v for k, v in pins.items() if len(v) > 1}
        for req in _direct_requirements():
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            got = pins.get(canonicalize_name(req.name))
            assert got, f"{req.name} has no pin for Python {python} on {platform}"
            assert req.specifier.contains(got[0], prereleases=True), (python, platform, req, got[0])


def test_each_lower_bound_is_a_locked_version():
    """pyproject's ranges start at a version the suite passed on: one the lock pins for
    some Python (the oldest there)."""
    locked: dict[str, set[Version]] = {}
    for python in PYTHONS:
        for platform in PLATFORMS:
            for name, versions in _pins(_env(python, platform)).items():
                locked.setdefault(name, set()).update(versions)
    for req in _pyproject_requirements():
        lows = [Version(s.version) for s in req.specifier if s.operator == ">="]
        assert len(lows) == 1, f"{req}: no lower bound"
        assert lows[0] == min(locked[canonicalize_name(req.name)]), (req, sorted(locked[canonicalize_name(req.name)]))


def test_torchs_pin_is_constraints_txts():
    """The lock holds the torch version the README names (constraints.txt, an input of make
    lock); its build stays TORCH_INDEX's choice."""
    (pin,) = re.findall(r"^torch==(\S+)$", (ROOT / "constraints.txt").read_text(), re.M)
    for python in PYTHONS:
        assert _pins(_env(python, PLATFORMS[0]))["torch"] == [Version(pin)]


def test_the_venv_the_suite_runs_in_holds_only_what_the_lock_pins():
    """make install's .venv: every line of pip freeze is pinned at its version. Elsewhere
    (make test-latest's venv of newer releases, a user's own environment) it is not meant to."""
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip(f"the suite runs in {sys.prefix}, not the checkout's .venv that make install fills from the lock")
    res = subprocess.run([sys.executable, str(CHECK)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("every package in ")


def test_the_check_fails_for_a_package_the_lock_lacks_or_pins_at_another_version(tmp_path):
    """The same check against a lock that misses one package this environment holds and pins
    another at a version it does not have: both are named, exit 1."""
    frozen = subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True,
                            check=True, timeout=120).stdout.splitlines()
    pins = [x for x in frozen if "==" in x and not x.startswith(("#", "-e "))]
    names = {canonicalize_name(x.split("==")[0]): x for x in pins}
    assert "click" in names and "rich" in names
    lock = tmp_path / "requirements.lock"
    lock.write_text("".join(x.split("+")[0] + "\n" for k, x in names.items() if k not in ("click", "rich"))
                    + "rich==0.0.1  # via exam-eval\n")
    res = subprocess.run([sys.executable, str(CHECK), str(lock)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1, res
    rows = {line.split()[0]: line.split()[1:] for line in res.stderr.splitlines()[2:]}
    assert set(rows) == {"click", "rich"}, res.stderr
    assert rows["click"][:4] == ["(not", "in", "the", "lock)"] and rows["rich"][0] == "0.0.1"


def test_make_install_and_the_canary_read_what_they_should():
    if shutil.which("make") is None:
        pytest.skip("GNU make is not installed")

    def pip_lines(target: str) -> list[str]:
        r = subprocess.run(["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return [x for x in r.stdout.splitlines() if "pip install" in x]

    install = pip_lines("install")
    assert len(install) == 2 and all("-c lock/requirements.lock" in x for x in install), install
    assert "-r lock/serving.in" in install[0] and "--no-deps" in install[1] and "-r lock/no-deps.in" in install[1]
    latest = pip_lines("test-latest")
    assert len(latest) == 2 and all("-c constraints.txt" in x and "lock/requirements.lock" not in x for x in latest)
    # CI runs the README's test command, then the llama.cpp server tests (issue 60)
    steps = [line.strip().split()[:2] for line in (ROOT / ".ci" / "run").read_text().splitlines()
             if line.strip().startswith("make ")]
    assert steps == [["make", "system-deps"], ["make", "test"], ["make", "test-servers"]], steps
