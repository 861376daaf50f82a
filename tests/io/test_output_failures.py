"""Outputs that cannot be written, inputs that cannot be read, and closed pipes, in every
command (issue 12 item 4): one line ``prog: FILE: reason`` on stderr, exit 2, no
traceback, no temp file (``.NAME.*.tmp``) left, no partial output; a closed stdout ends
the command silently by SIGPIPE, as it ends trec_eval.

Each case runs the real command in a subprocess. Permission cases run unprivileged: as a
normal user through the file mode, as root through ``setpriv`` without CAP_DAC_OVERRIDE
(skipped where neither works); disk-full cases use /dev/full, RLIMIT_FSIZE (works
everywhere) and a small tmpfs (root only, skipped elsewhere).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from child_env import ChildEnv
from refusals import one_line_refusal

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
ENV = ChildEnv(PYTHONPATH=str(ROOT), EXAM_EVAL_PROGRESS="0", HF_HUB_OFFLINE="1")
RUNS = [DEMO / f"{name}.run" for name in ("good", "mediocre", "poor", "random")]
SCRIPTED = ["--backend", "scripted", "--prompt", "question-selfrating", "--bank", str(DEMO / "questions.jsonl"),
            "--passages", str(DEMO / "passages.jsonl"), "--no-cache"]


def command(prog: str) -> list[str]:
    if prog == "demo":
        return [sys.executable, "-m", "exam_eval.demo"]
    module = "exam_eval.commands." + prog.removeprefix("exam-")
    return [sys.executable, "-c", f"import {module} as m; m.main()"]


def run(prog: str, *args, prefix: list[str] | None = None, env=None, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("stdout", subprocess.PIPE)
    return subprocess.run([*(prefix or []), *command(prog), *map(str, args)], stderr=subprocess.PIPE, text=True,
                          env=env or ENV, timeout=300, **kw)


def _unmeasured() -> dict:
    """The environment without coverage.py's measuring (make coverage): a child whose files
    are capped at a few hundred bytes could not write coverage's data file at its exit."""
    return {k: v for k, v in ENV.items() if k != "COVERAGE_PROCESS_CONFIG"}


def one_line_failure(r: subprocess.CompletedProcess, prog: str, *parts: str, code: int = 2) -> str:
    """A refusal in one line (refusals.one_line_refusal), no "Exception ignored" either,
    the line holding each of PARTS."""
    line = one_line_refusal(r, prog, code)
    assert "Exception ignored" not in r.stderr, r.stderr
    for part in parts:
        assert part in line, (part, line)
    return line


def temp_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp"))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    """Real inputs for every command: the demo collection, its grades by the scripted
    back end, two leaderboards and a bank; plus a qrels/run pair large enough that its
    per-query output overflows a pipe."""
    tmp = tmp_path_factory.mktemp("inputs")
    grades = tmp / "grades.jsonl"
    r = run("exam-grade", *SCRIPTED, *RUNS, "-o", grades)
    assert r.returncode == 0, r.stderr
    lb_human, lb_exam = tmp / "human.tsv", tmp / "exam.tsv"
    for qrels, lb in ((DEMO / "qrels.txt", lb_human), (grades, lb_exam)):
        r = run("exam-qrels", "-c", "-m", "ndcg_cut.10", "-m", "P.5", qrels, *RUNS, "-o", lb)
        assert r.returncode == 0, r.stderr
    # the human judgments of the graded passages only: no "left out" note on stderr
    graded = {(g["query_id"], g["doc_id"]) for g in map(json.loads, grades.read_text().splitlines())}
    judged = tmp / "judged.qrels"
    judged.write_text("".join(line + "\n" for line in (DEMO / "qrels.txt").read_text().splitlines()
                              if tuple(line.split()[0:3:2]) in graded))
    big_qrels, big_run = tmp / "big.qrels", tmp / "big.run"
    with big_qrels.open("w") as q, big_run.open("w") as rn:
        for qid in range(300):
            for d in range(40):
                q.write(f"{qid} 0 d{d} {(qid + d) % 4}\n")
                rn.write(f"{qid} Q0 d{d} {d + 1} {100 - d} big\n")
    return {"grades": grades, "human": lb_human, "exam": lb_exam, "bank": DEMO / "questions.jsonl",
            "qrels": DEMO / "qrels.txt", "judged": judged, "run": RUNS[0], "big_qrels": big_qrels, "big_run": big_run}


# Every command with an output, as a user runs it; -o is added by the tests.
COMMANDS = {
    "exam-qrels": lambda d: ["-q", d["qrels"], d["run"]],
    "exam-cover": lambda d: ["-q", "--min-grade", "3", d["grades"], d["run"]],
    "exam-correlate": lambda d: ["agreement", d["judged"], d["grades"], "--human-min", "2", "--llm-min", "4",
                                 "--per-topic"],
    "exam-verify": lambda d: ["spurious", d["grades"], d["qrels"], "--relevant-min", "2"],
    "exam-genq": lambda d: ["import", "--force", d["bank"]],
    "exam-grade": lambda d: [*SCRIPTED, *RUNS],
}
PROGS = list(COMMANDS)


# --------------------------------------------------------------------------- -o failures

@pytest.mark.parametrize("prog", PROGS)
def test_missing_output_folder(prog, data, tmp_path):
    out = tmp_path / "no-such-dir" / "out.txt"
    r = run(prog, *COMMANDS[prog](data), "-o", out)
    one_line_failure(r, prog, f"{out}: cannot write: no such directory: {out.parent}")
    assert not out.parent.exists()
    assert r.stdout == ""


@pytest.mark.parametrize("prog", PROGS)
def test_output_under_a_regular_file(prog, data, tmp_path):
    blocker = tmp_path / "results"
    blocker.write_text("a file, not a folder\n")
    out = blocker / "out.txt"
    r = run(prog, *COMMANDS[prog](data), "-o", out)
    one_line_failure(r, prog, f"{out}: cannot write: {blocker} is a file, not a directory")
    assert blocker.read_text() == "a file, not a folder\n"


@pytest.mark.parametrize("prog", PROGS)
def test_output_is_a_directory(prog, data, tmp_path):
    r = run(prog, *COMMANDS[prog](data), "-o", tmp_path)
    one_line_failure(r, prog, f"{tmp_path}: cannot write: is a directory")
    assert list(tmp_path.iterdir()) == []


def _unprivileged() -> list[str]:
    """A command prefix under which file permissions apply (root ignores them)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"] if setpriv else None
    if prefix is None or subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("running as root without a working setpriv: permissions cannot be tested")
    return prefix


@pytest.mark.parametrize("prog", PROGS)
def test_output_folder_not_writable(prog, data, tmp_path):
    prefix = _unprivileged()
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        out = locked / "out.txt"
        r = run(prog, *COMMANDS[prog](data), "-o", out, prefix=prefix)
        one_line_failure(r, prog, f"{out}: cannot write: permission denied (directory {locked})")
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


# --------------------------------------------------------------------------- disk full

def _dev_full() -> Path:
    path = Path("/dev/full")
    if not (path.exists() and stat.S_ISCHR(path.stat().st_mode)):
        pytest.skip("no /dev/full")
    return path


@pytest.mark.parametrize("prog", [*PROGS, "demo"])
def test_stdout_on_a_full_disk(prog, data, tmp_path):
    args = ["--out", tmp_path / "demo"] if prog == "demo" else COMMANDS[prog](data)
    with _dev_full().open("w") as full:
        r = run(prog, *args, stdout=full)
    one_line_failure(r, prog, "<stdout>: cannot write: No space left on device")


def _fsize_limit(limit: int):
    def apply():
        # SIG_IGN survives exec: the write then fails with EFBIG instead of killing the child
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.parametrize("prog", [p for p in PROGS if p != "exam-grade"])
def test_file_size_limit_keeps_the_previous_output(prog, data, tmp_path):
    """The write fails mid-file (EFBIG, as ENOSPC would): the previous output survives
    intact and no temp file is left."""
    out = tmp_path / "out.txt"
    out.write_text("the previous output\n")
    full = run(prog, *COMMANDS[prog](data))
    assert full.returncode == 0 and len(full.stdout) > 600, full.stderr
    r = run(prog, *COMMANDS[prog](data), "-o", out, preexec_fn=_fsize_limit(512), env=_unmeasured())
    one_line_failure(r, prog, f"{out}: cannot write: File too large")
    assert out.read_text() == "the previous output\n"
    assert temp_files(tmp_path) == []


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str):
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a small tmpfs needs root")
    path.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.mark.parametrize("name", ["out.qrels", "out.qrels.gz"])
def test_no_space_left_on_device(name, data, tmp_path):
    with small_tmpfs(tmp_path / "small", "16k") as small:
        out = small / name
        r = run("exam-qrels", "-q", data["big_qrels"], data["big_run"], "-o", out)
        one_line_failure(r, "exam-qrels", f"{out}: cannot write: No space left on device")
        assert list(small.iterdir()) == []


def _keyed(path: Path) -> dict:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {(g["query_id"], g["doc_id"], g["item_id"]): (g["grade"], g["answer"]) for g in rows}


def test_grading_on_a_full_disk_keeps_whole_batches_and_resumes(data, tmp_path):
    """exam-grade appends: the batch that does not fit is cut off (no torn line), the
    message says how many grades are kept, and rerunning completes the same grades."""
    out = tmp_path / "grades.jsonl"
    r = run("exam-grade", *COMMANDS["exam-grade"](data), "-o", out, preexec_fn=_fsize_limit(20_000),
            env=_unmeasured())
    line = one_line_failure(r, "exam-grade", f"{out}: cannot write: File too large; the ")
    kept = int(line.split("; the ")[1].split()[0])
    lines = out.read_text().splitlines()
    assert 0 < kept == len(lines) and out.stat().st_size <= 20_000
    assert all(json.loads(x)["query_id"] for x in lines)  # every line whole
    r = run("exam-grade", *COMMANDS["exam-grade"](data), "-o", out)
    assert r.returncode == 0, r.stderr
    assert f"{kept} already in output" in r.stderr
    assert _keyed(out) == _keyed(data["grades"])
    assert len(out.read_text().splitlines()) == len(data["grades"].read_text().splitlines())


# --------------------------------------------------------------------------- closed pipe

@pytest.mark.parametrize("prog", [*PROGS, "demo"])
def test_closed_pipe_ends_quietly_by_sigpipe(prog, data, tmp_path):
    """The reader is gone before the first byte: the command dies of SIGPIPE like
    trec_eval, with nothing on stderr (no traceback, no "Exception ignored")."""
    args = ["--out", tmp_path / "demo"] if prog == "demo" else COMMANDS[prog](data)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = run(prog, *args, stdout=write_end)
    finally:
        os.close(write_end)
    assert r.returncode == -signal.SIGPIPE, (r.returncode, r.stderr)
    assert r.stderr == ""


def test_head_closes_the_pipe_midway(data):
    """`exam-qrels -q ... | head -1`: the first line arrives, the rest is dropped silently."""
    proc = subprocess.Popen([*command("exam-qrels"), "-q", str(data["big_qrels"]), str(data["big_run"])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert len(first.rstrip(b"\n").split(b"\t")) == 3, first
    assert proc.returncode == -signal.SIGPIPE and err == b""


# --------------------------------------------------------------------------- inputs

# (command, its arguments with INPUT where a file is read)
READERS = {
    "exam-qrels": ["INPUT", str(RUNS[0])],
    "exam-cover": ["INPUT", str(RUNS[0])],
    # (leaderboard reads a directory of per-run files, so a directory is no failure there)
    "exam-correlate": ["agreement", "INPUT", str(DEMO / "qrels.txt")],
    "exam-verify": ["spurious", "INPUT", str(DEMO / "qrels.txt")],
    "exam-genq": ["import", "INPUT"],
    "exam-grade": [*SCRIPTED[:4], "--bank", "INPUT", "--passages", str(DEMO / "passages.jsonl"), str(RUNS[0])],
}


def _with_input(prog: str, path: Path) -> list[str]:
    return [str(path) if a == "INPUT" else a for a in READERS[prog]]


@pytest.mark.parametrize("prog", PROGS)
def test_input_under_a_regular_file(prog, tmp_path):
    blocker = tmp_path / "inputs"
    blocker.write_text("x\n")
    r = run(prog, *_with_input(prog, blocker / "file.txt"))
    line = one_line_failure(r, prog, f"{blocker / 'file.txt'}: ")
    assert any(x in line for x in ("is a file, not a directory", "not an existing file", "no such file")), line


@pytest.mark.parametrize("prog", PROGS)
def test_input_is_a_directory(prog, tmp_path):
    r = run(prog, *_with_input(prog, tmp_path))
    one_line_failure(r, prog, f"{tmp_path}: is a directory")


def test_leaderboard_directory_without_leaderboards(tmp_path):
    r = run("exam-correlate", "leaderboard", str(tmp_path), str(RUNS[0]))
    one_line_failure(r, "exam-correlate", f"{tmp_path}: directory has no leaderboard files")


@pytest.mark.parametrize("prog", PROGS)
def test_input_permission_denied(prog, tmp_path):
    prefix = _unprivileged()
    secret = tmp_path / "secret.txt"
    secret.write_text("1 0 a 1\n")
    secret.chmod(0)
    r = run(prog, *_with_input(prog, secret), prefix=prefix)
    one_line_failure(r, prog, f"{secret}: ", "permission denied")


def test_run_path_under_a_file_is_one_line(data, tmp_path):
    """The issue's example: a run path under a regular file (NotADirectoryError)."""
    r = run("exam-qrels", data["qrels"], data["run"] / "x.run")
    one_line_failure(r, "exam-qrels", f"{data['run'] / 'x.run'}: no such file: {data['run']} is a file, not a directory")


# --------------------------------------------------------------------------- what -o writes

def test_fifo_output_is_written_in_place(data, tmp_path):
    """A named pipe (or /dev/stdout) given as -o is written, never replaced by a file."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    # a daemon: were the FIFO replaced by a file, the reader would wait forever
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    r = run("exam-qrels", "-q", data["qrels"], data["run"], "-o", fifo)
    reader.join(timeout=60)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert got and got[0].decode() == run("exam-qrels", "-q", data["qrels"], data["run"]).stdout
    assert temp_files(tmp_path) == []


def test_symlink_output_is_written_through(data, tmp_path):
    target = tmp_path / "real.qrels"
    target.write_text("old\n")
    link = tmp_path / "latest.qrels"
    link.symlink_to(target.name)
    r = run("exam-qrels", data["grades"], "-o", link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_text() == run("exam-qrels", data["grades"]).stdout
    assert temp_files(tmp_path) == []


def test_gzip_output_is_byte_identical_across_runs(data, tmp_path):
    """No temp-file name and no timestamp in the gzip header: a rerun gives the same bytes."""
    a, b = tmp_path / "a.qrels.gz", tmp_path / "b" / "a.qrels.gz"
    b.parent.mkdir()
    for out in (a, b):
        r = run("exam-qrels", data["grades"], "-o", out)
        assert r.returncode == 0, r.stderr
    raw = a.read_bytes()
    assert raw == b.read_bytes()
    assert raw[3] & 0x08 == 0 and raw[4:8] == b"\0\0\0\0"  # FLG.FNAME unset, MTIME 0 (RFC 1952)
    assert gzip.decompress(raw).decode() == run("exam-qrels", data["grades"]).stdout


def test_output_mode_follows_the_umask(data, tmp_path):
    out = tmp_path / "x.qrels"
    r = run("exam-qrels", data["qrels"], "-o", out, preexec_fn=lambda: os.umask(0o027))
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o640


# --------------------------------------------------------------------------- the demo

def test_demo_output_folder_failures(tmp_path):
    blocker = tmp_path / "demo-out"
    blocker.write_text("x\n")
    r = run("demo", "--out", blocker)
    one_line_failure(r, "demo", f"{blocker}: cannot create the folder: a file of that name exists")
    r = run("demo", "--out", blocker / "sub")
    one_line_failure(r, "demo", f"{blocker / 'sub'}: cannot write: {blocker} is a file, not a directory")
