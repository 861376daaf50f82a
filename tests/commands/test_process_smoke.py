"""One real process per command. The rest of the suite runs the commands in its own process
(tests/inproc.py, through run_cli); here each console script that pip installs (or, where
it is not installed beside this Python, launch.run) does one real job on the demo data,
and its exit status, stdout and output file must be those of the in-process run of the same
arguments. A command without a job here fails the test that lists them."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

import inproc

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
SCRIPTS = sorted(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"])
OUT = "{out}"  # where each run writes its output file, one folder per run


def _jobs(grades: Path) -> dict[str, list]:
    runs = [DEMO / "good.run", DEMO / "poor.run"]
    return {
        "exam-grade": ["--backend", "scripted", "--prompt", "question-selfrating", "--bank", DEMO / "questions.jsonl",
                       "--passages", DEMO / "passages.jsonl", "--topics", DEMO / "topics.tsv", "--depth", "3",
                       "--no-cache", *runs, "-o", OUT],
        "exam-qrels": ["-m", "map", "-m", "ndcg_cut.10", "-l", "4", grades, *runs],
        "exam-cover": ["-k", "5", "--min-grade", "4", "--bank", DEMO / "questions.jsonl", grades, *runs, "-o", OUT],
        "exam-correlate": ["agreement", DEMO / "qrels.txt", grades, "--human-min", "2", "--llm-min", "4"],
        "exam-verify": ["spurious", grades, DEMO / "qrels.txt", "--relevant-min", "2", "--top", "3"],
        "exam-genq": ["import", DEMO / "questions.jsonl", "-o", OUT],
        "exam-nuggets": ["bank", DEMO / "nuggets.jsonl", "--to", "nuggetizer", "-o", OUT],
    }


@pytest.fixture(scope="module")
def grades(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("smoke") / "grades.jsonl"
    res = inproc.run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--bank",
                     DEMO / "questions.jsonl", "--passages", DEMO / "passages.jsonl", "--topics", DEMO / "topics.tsv",
                     "--depth", "10", "--no-cache", DEMO / "good.run", DEMO / "poor.run", "-o", path)
    assert res.returncode == 0 and path.stat().st_size > 0, res
    return path


def test_every_command_has_a_job():
    assert sorted(_jobs(Path("g"))) == SCRIPTS


def _process(prog: str, args: list[str]) -> subprocess.CompletedProcess:
    script = Path(sysconfig.get_path("scripts")) / prog
    cmd = ([str(script)] if script.exists()
           else [sys.executable, "-c", f"from exam_eval.launch import run; run({prog.removeprefix('exam-')!r})"])
    env = dict(os.environ, PYTHONPATH=str(ROOT), EXAM_EVAL_PROGRESS="0")
    return subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("prog", SCRIPTS)
def test_the_command_as_a_process_does_what_it_does_in_process(prog, grades, tmp_path):
    job = _jobs(grades)[prog]

    def argv(where: str) -> tuple[list[str], Path]:
        folder = tmp_path / where
        folder.mkdir()
        out = folder / "out"
        return [str(out) if a == OUT else str(a) for a in job], out

    args, out = argv("process")
    real = _process(prog, args)
    args_in, out_in = argv("inproc")
    here = inproc.run(prog, *args_in, env={"EXAM_EVAL_PROGRESS": "0"})
    assert real.returncode == 0 == here.returncode, (real, here)
    assert real.stdout == here.stdout.replace(str(tmp_path / "inproc"), str(tmp_path / "process"))
    assert "Traceback" not in real.stderr
    if OUT in job:
        assert out.read_bytes() == out_in.read_bytes() and out.stat().st_size > 0
    else:
        assert real.stdout.strip(), real
