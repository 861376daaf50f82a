"""The venv this Python runs in against lock/requirements.lock: what ``pip freeze`` lists
that the lock does not pin, or pins at another version.

    .venv/bin/python scripts/lock_check.py [LOCK]            exit 1 when anything differs
    .venv-latest/bin/python scripts/lock_check.py --newer    the canary's table (exit 0)

A lock line applies where its marker holds (``numpy==2.2.6 ; python_full_version < '3.11'``);
a local version (torch 2.13.0+cpu) satisfies the pin of its release (torch==2.13.0), as pip
itself reads it, because the lock pins torch's version and TORCH_INDEX chooses its build.
``pip freeze`` is asked, not importlib, so the check is what a person running it sees; like
it, pip's own tools (pip, setuptools, wheel as the venv put them there) are left out, and
the project's own editable line is skipped.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "exam-eval"


def locked(lock: Path) -> dict[str, Version]:
    """The lock's pins that apply to this Python and platform: name -> version."""
    pins: dict[str, Version] = {}
    for n, raw in enumerate(lock.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("  #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            sys.exit(f"{lock}:{n}: not a pin ({exc})")
        (spec,) = req.specifier
        if spec.operator != "==":
            sys.exit(f"{lock}:{n}: not a pin: {line}")
        if req.marker is None or req.marker.evaluate():
            pins[canonicalize_name(req.name)] = Version(spec.version)
    return pins


def frozen() -> dict[str, tuple[str, Version]]:
    """``pip freeze`` of this Python's environment: name -> (name as written, version)."""
    out = subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
    found: dict[str, tuple[str, Version]] = {}
    for line in out.splitlines():
        if line.startswith(("#", "-e ")) or "==" not in line:
            continue  # the project's editable install and pip's comment about it
        name, version = line.split("==", 1)
        if canonicalize_name(name) != PROJECT:
            found[canonicalize_name(name)] = (name, Version(version))
    return found


def release(v: Version) -> Version:
    return Version(v.base_version) if v.local else v


def differences(lock: Path) -> list[tuple[str, str, str]]:
    """(name, locked, installed) for each installed package whose version is not the lock's."""
    pins = locked(lock)
    rows = []
    for key, (name, version) in sorted(frozen().items()):
        pin = pins.get(key)
        if pin is None or release(version) != pin:
            rows.append((name, str(pin) if pin else "(not in the lock)", str(version)))
    return rows


def table(rows: list[tuple[str, str, str]], header: tuple[str, str, str]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lock", nargs="?", type=Path, default=ROOT / "lock" / "requirements.lock")
    ap.add_argument("--newer", action="store_true",
                    help="the canary's closing table: the packages whose version differs from the lock (exit 0)")
    args = ap.parse_args(argv)
    rows = differences(args.lock)
    where = sys.prefix
    if args.newer:
        print(f"\n{len(rows)} packages in {where} differ from {args.lock.name}:" if rows
              else f"\nevery package in {where} is at its version in {args.lock.name}")
        if rows:
            print(table(rows, ("package", "locked", "newest")))
        return 0
    if rows:
        print(f"{len(rows)} packages in {where} are not at their version in {args.lock} "
              f"(make install installs from it; make lock resolves it anew):", file=sys.stderr)
        print(table(rows, ("package", "locked", "installed")), file=sys.stderr)
        return 1
    print(f"every package in {where} is pinned in {args.lock} at its version")
    return 0


if __name__ == "__main__":
    sys.exit(main())
