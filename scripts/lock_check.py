"""The venv this Python runs in against lock/requirements.lock: what ``pip freeze`` lists
that the lock does not pin, or pins at another version.

    .venv/bin/python scripts/lock_check.py [LOCK]            exit 1 when anything differs
    .venv-latest/bin/python scripts/lock_check.py --newer    the canary's table (exit 0)

A lock that is not pins (a line without ==, a range, a URL, a package pinned twice where
both lines could hold, a binary file, a folder, no file) is one line naming file and
line, exit 2.

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
from typing import Iterator

from packaging.markers import UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "exam-eval"


class BadLock(Exception):
    """A lock that cannot be read as pins: said in one line naming file and line, exit 2
    (bad input, as every command of the suite), where 1 means the venv differs."""


def lock_lines(lock: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of the lock, each line decoded alone so that a binary or
    non-UTF-8 file is named at the line that shows it."""
    if lock.is_dir():
        raise BadLock(f"{lock}: is a folder, not a lock file")
    try:
        data = lock.read_bytes()
    except FileNotFoundError:
        raise BadLock(f"{lock}: no such file") from None
    except OSError as exc:
        raise BadLock(f"{lock}: cannot read ({exc.strerror})") from None
    for n, raw in enumerate(data.splitlines(), 1):
        if b"\0" in raw:
            raise BadLock(f"{lock}:{n}: NUL byte: a binary file, not a lock (make lock writes text)")
        try:
            yield n, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadLock(f"{lock}:{n}: not UTF-8 text ({exc.reason} at byte {exc.start + 1} of the line)") from None


def pin_of(line: str, where: str) -> tuple[Requirement, Version]:
    """NAME==VERSION [; marker]: anything looser (no version, a range, a URL, a wildcard)
    would make the check compare against a version the lock does not name."""
    try:
        req = Requirement(line)
    except InvalidRequirement as exc:   # packaging's message draws a caret under the line: its first line
        raise BadLock(f"{where}: not a requirement ({str(exc).splitlines()[0]}): {line}") from None
    specs = list(req.specifier)
    if req.url or len(specs) != 1 or specs[0].operator != "==" or specs[0].version.endswith("*"):
        raise BadLock(f"{where}: not a pin NAME==VERSION: {line}")
    return req, Version(specs[0].version)


def holds(req: Requirement, where: str) -> bool:
    try:
        return req.marker is None or req.marker.evaluate()
    except (UndefinedComparison, UndefinedEnvironmentName) as exc:
        raise BadLock(f"{where}: its marker cannot be evaluated ({exc})") from None


def locked(lock: Path) -> dict[str, Version]:
    """The lock's pins that apply to this Python and platform: name -> version.

    make lock writes one line per Python (or platform) where the versions differ, each
    under its marker; a second line for a package is an error where it could hold beside
    the first: no marker on one of them, the same marker, or both holding here."""
    pins: dict[str, Version] = {}
    seen: dict[str, list[tuple[int, Requirement, bool]]] = {}
    for n, raw in lock_lines(lock):
        line = raw.split("  #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        where = f"{lock}:{n}"
        req, version = pin_of(line, where)
        key = canonicalize_name(req.name)
        here = holds(req, where)
        for first, other, other_here in seen.get(key, []):
            if req.marker is None or other.marker is None:
                why = "one of them with no marker, which holds everywhere"
            elif str(req.marker) == str(other.marker):
                why = "under the same marker"
            elif here and other_here:
                why = "both markers hold for this Python and platform"
            else:
                continue
            raise BadLock(f"{where}: {req.name} pinned twice (also on line {first}), {why}")
        seen.setdefault(key, []).append((n, req, here))
        if here:
            pins[key] = version
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
    try:
        rows = differences(args.lock)
    except BadLock as exc:
        print(f"lock_check.py: {exc}", file=sys.stderr)
        return 2
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
