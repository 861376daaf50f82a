"""No output replaces what it must not. Every output of every command (read from the
commands, output_recipes.output_flags: a new output flag joins by construction, and fails
here until it has a recipe) is pointed at a FIFO, a device node, a link to a user's file,
a socket, a folder and one of the command's own inputs; each is refused (one line, no traceback) or
written in place, never renamed over, and nothing is left beside it.

Found as root: ``exam-grade --batch-out /dev/null`` renamed its temp file over the
machine's /dev/null, which became a regular file for every program on the machine."""

from __future__ import annotations

import os
import socket
import stat
import sys
import threading
import time
from pathlib import Path

import pytest
from output_recipes import (fill, make_label_folder, output_flags, output_kinds, recipe, recipe_env, run_name,
                            written)

from inproc import run

# a command that opens a FIFO to read it (to see what it holds before replacing it) waits
# for a writer for ever: a failure here, not a hung suite
pytestmark = pytest.mark.timeout(60)

OUTPUTS = output_flags()
CASES = [(path, name, flag, kind) for path, name, flag in OUTPUTS for kind in output_kinds(path, name)]
HOSTILE = ["fifo", "device", "socket", "link to a user's file", "directory", "an input"]
NOTES = b"my notes, made by hand\n"
# the folder outputs a directory is the ordinary target of (exam-verify label FOLDER ...)
FOLDER_KINDS = ("dir", "folder", "label-folder")


def _id(case) -> str:
    path, _, flag, kind = case
    return " ".join(path[1:] + (flag,)) + ("" if kind == "file" else f" ({kind})")


def _entries(folder: Path) -> dict[str, str]:
    """Name -> what it is, for each entry of FOLDER: what "nothing left beside it" compares."""
    out = {}
    for p in folder.iterdir():
        st = p.lstat()
        out[p.name] = stat.filemode(st.st_mode)[0] + (os.readlink(p) if p.is_symlink() else "")
    return out


class _Drain(threading.Thread):
    """The other end of a FIFO: opened before the command runs (without blocking, so that a
    command that refuses does not leave us waiting), read until the command has ended."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.data = bytearray()
        self.done = threading.Event()

    def run(self):
        while True:
            ended = self.done.is_set()
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                chunk = None
            if chunk:
                self.data += chunk
            elif ended:
                break
            else:
                time.sleep(0.005)
        os.close(self.fd)

    def finish(self) -> bytes:
        self.done.set()
        self.join(30)
        return bytes(self.data)


def _an_input(argv: list[str], tmp_path: Path) -> Path:
    """The first file of the command line that the command reads (under tmp_path/in)."""
    inside = tmp_path / "in"
    for a in argv:
        p = Path(a)
        if p.is_file() and inside in p.resolve().parents:
            return p
    raise AssertionError(f"no input file under {inside} in {argv}")


def _refused(res, prog: str) -> None:
    assert res.escaped is None, res.escaped
    assert "Traceback" not in res.stderr, res.stderr
    assert res.returncode in (1, 2), (res.returncode, res.stderr)
    assert res.last_line.startswith(prog + ": "), res.stderr


def test_the_outputs_are_found_in_the_commands():
    """The discovery finds what the issue names (and so finds the next one the same way)."""
    found = {(" ".join(p), flag) for p, _, flag in OUTPUTS}
    for expected in [("exam-grade", "--batch-out"), ("exam-grade", "--cache"), ("exam-grade", "--output"),
                     ("exam-correlate leaderboard", "--plot"), ("exam-nuggets assign", "--assignments"),
                     ("exam-nuggets score", "--assignments"), ("exam-genq nuggetize", "--batch-out"),
                     ("exam-genq generate", "--batch-out"), ("exam-nuggets assign", "--batch-out"),
                     ("exam-grade", "--responses-run-out"), ("exam-verify label", "FOLDER"),
                     ("exam-verify label-qrels", "FOLDER"), ("exam-nuggets support", "--cache")]:
        assert expected in found, (expected, sorted(found))
    assert len(OUTPUTS) >= 36


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_the_ordinary_run_writes_only_its_output(case, tmp_path):
    """The baseline the hostile cases are read against: each recipe succeeds and writes
    its output, and nothing else, into the output's folder."""
    path, name, _, kind = case
    argv = recipe(path, name, tmp_path, kind)
    folder = tmp_path / "t"
    folder.mkdir()
    out = folder / ("out.x" if kind == "file" else "out")
    if kind == "label-folder":
        make_label_folder(tmp_path, out)
    res = run(run_name(path), *fill(argv, out), env=recipe_env(path, name))
    assert res.returncode == 0 and res.escaped is None, res.stderr
    assert written(path, name, out, kind).stat().st_size > 0
    assert set(_entries(folder)) == {out.name}


def _hostile_cases():
    """Every output with every target but two that are not hostile: a folder, to an output
    that writes into a folder (its ordinary use: test_the_ordinary_run...), and an input of
    exam-verify label-qrels, which reads nothing but its output folder."""
    for case in CASES:
        path, name = case[0], case[1]
        for target in HOSTILE:
            if target == "directory" and set(output_kinds(path, name)) & set(FOLDER_KINDS):
                continue
            if target == "an input" and path == ("exam-verify", "label-qrels"):
                continue
            yield pytest.param(case, target, id=f"{_id(case)}-{target}")


@pytest.mark.parametrize("case, target", list(_hostile_cases()))
def test_an_output_pointed_at_what_it_must_not_replace(case, target, tmp_path):
    path, name, flag, kind = case
    prog = path[0]
    argv = recipe(path, name, tmp_path, kind, force=True)  # exam-genq -o: the in-place write, not "exists"
    folder = tmp_path / "t"
    folder.mkdir()
    user = tmp_path / "user"
    user.mkdir()
    out = folder / "out.x"
    drain = None
    if target == "fifo":
        os.mkfifo(out)
        drain = _Drain(out)
        drain.start()
    elif target == "device":
        if os.geteuid() != 0:
            pytest.skip("a device node is made with mknod, which needs root (where the harm was found)")
        os.mknod(out, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own
    elif target == "socket":
        listener = socket.socket(socket.AF_UNIX)
        here = os.getcwd()
        os.chdir(folder)  # bound by its relative name: a socket's path has at most 107 bytes
        try:
            listener.bind(out.name)
        finally:
            os.chdir(here)
    elif target == "link to a user's file":
        (user / "notes.txt").write_bytes(NOTES)
        out.symlink_to(user / "notes.txt")
    elif target == "directory":
        out.mkdir()
        (out / "keep.txt").write_bytes(NOTES)
    else:
        out = _an_input(fill(argv, "/nonexistent/{OUT}"), tmp_path)
        folder = out.parent
    before = _entries(folder)
    kept = out.read_bytes() if target == "an input" else None

    res = run(run_name(path), *fill(argv, out), env=recipe_env(path, name))
    got = drain.finish() if drain else None

    if res.returncode != 0:
        _refused(res, prog)
    else:
        assert res.escaped is None, res.escaped
    assert _entries(folder) == before, f"left beside it or renamed over: {_entries(folder)} vs {before}"
    st = os.lstat(out)
    if target == "fifo":
        assert stat.S_ISFIFO(st.st_mode)
        if res.returncode == 0 and kind == "file":
            assert got, "exit 0, yet nothing was written into the FIFO"
    elif target == "device":
        assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    elif target == "socket":  # cannot be opened as a file: refused before any work
        assert res.returncode != 0 and stat.S_ISSOCK(st.st_mode)
        listener.close()
    elif target == "link to a user's file":
        assert stat.S_ISLNK(st.st_mode) and os.readlink(out) == str(user / "notes.txt")
        assert sorted(os.listdir(user)) == ["notes.txt"]  # nothing beside the link's target either
        if res.returncode != 0:
            assert (user / "notes.txt").read_bytes() == NOTES
        else:  # written through the link, as -o writes any file the user names
            assert kind == "file", f"{flag} ({kind}) took a link to a file as its folder"
    elif target == "directory":
        assert res.returncode != 0, f"{flag} took a directory and exited 0"
        assert stat.S_ISDIR(st.st_mode) and os.listdir(out) == ["keep.txt"]
        assert (out / "keep.txt").read_bytes() == NOTES
    else:
        assert res.returncode != 0, f"{flag} named the command's input {out} and exited 0"
        assert out.read_bytes() == kept


# ---- the demos: --out is a folder they fill

DEMOS = ["exam_eval.demo", "exam_eval.demo_rag"]


@pytest.mark.parametrize("target", ["fifo", "device", "link to a user's file"])
@pytest.mark.parametrize("module", DEMOS)
def test_a_demos_out_that_is_no_folder_is_refused_before_any_work(module, target, tmp_path):
    import subprocess

    out = tmp_path / "out"
    if target == "fifo":
        os.mkfifo(out)
    elif target == "device":
        if os.geteuid() != 0:
            pytest.skip("a device node is made with mknod, which needs root")
        os.mknod(out, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    else:
        (tmp_path / "notes.txt").write_bytes(NOTES)
        out.symlink_to(tmp_path / "notes.txt")
    before = _entries(tmp_path)
    res = subprocess.run([sys.executable, "-m", module, "--out", str(out), "--backend", "scripted"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**os.environ, "EXAM_EVAL_PROGRESS": "0"})
    prog = module.rsplit(".", 1)[1].replace("_", "-")
    assert res.returncode == 2, res.stderr
    # named as the demo resolved it (a link by its target)
    assert res.stderr == f"{prog}: {out.resolve()}: cannot create the folder: a file of that name exists\n"
    assert res.stdout == ""
    assert _entries(tmp_path) == before
    if target == "link to a user's file":
        assert (tmp_path / "notes.txt").read_bytes() == NOTES


def test_the_demo_renames_nothing_over_a_device_in_its_folder(tmp_path):
    """The demo moves its files into --out at the end: a FIFO put where one of them goes
    is refused, and the earlier files stay whole."""
    import subprocess

    out = tmp_path / "demo-out"
    out.mkdir()
    os.mkfifo(out / "agreement.txt")
    (out / "exam.qrels").write_bytes(NOTES)
    res = subprocess.run([sys.executable, "-m", "exam_eval.demo", "--out", str(out), "--backend", "scripted"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "EXAM_EVAL_PROGRESS": "0"})
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines()[-1] == (f"demo: {out / 'agreement.txt'}: is a FIFO where the demo writes a file: "
                                           "not replaced; remove it or give another --out")
    assert sorted(os.listdir(out)) == ["agreement.txt", "exam.qrels"]
    assert stat.S_ISFIFO(os.lstat(out / "agreement.txt").st_mode)
    assert (out / "exam.qrels").read_bytes() == NOTES
