"""An output that names a file the command reads (the same path, a symbolic link, a hard
link) is a usage error before any work: the input stays as it was. Before, ``exam-qrels
grades.jsonl -o grades.jsonl`` replaced the grades with the qrels, exit 0.
exam-genq's ``--merge-with BANK -o BANK --force`` stays allowed: it reads the bank whole
first (tests/genq/test_genq.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from inproc import run

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"


def _refused(res, prog: str) -> str:
    assert res.escaped is None, res.escaped
    assert "Traceback" not in res.stderr
    assert res.code == 1, (res.code, res.stderr)
    assert res.stderr.strip().count("\n") == 0, res.stderr
    return res.last_line


@pytest.mark.parametrize("how", ["same path", "symbolic link", "hard link"])
def test_exam_qrels_output_over_its_qrels(how, tmp_path):
    qrels = tmp_path / "qrels.txt"
    shutil.copy(DEMO / "qrels.txt", qrels)
    before = qrels.read_bytes()
    out = {"same path": qrels, "symbolic link": tmp_path / "link.txt", "hard link": tmp_path / "hard.txt"}[how]
    if how == "symbolic link":
        out.symlink_to(qrels)
    elif how == "hard link":
        os.link(qrels, out)
    line = _refused(run("qrels", "-m", "map", qrels, DEMO / "good.run", "-o", out), "exam-qrels")
    assert line == (f"exam-qrels: --output names a file the command reads (LABELS {qrels}): "
                    "writing it would replace its input; write to another file")
    assert qrels.read_bytes() == before


def test_exam_qrels_output_over_a_run(tmp_path):
    good = tmp_path / "good.run"
    shutil.copy(DEMO / "good.run", good)
    before = good.read_bytes()
    line = _refused(run("qrels", "-m", "map", DEMO / "qrels.txt", DEMO / "poor.run", good, "-o", good), "exam-qrels")
    assert f"(RUN {good})" in line
    assert good.read_bytes() == before


def test_exam_grade_output_over_its_passages(tmp_path):
    passages = tmp_path / "passages.jsonl"
    shutil.copy(DEMO / "passages.jsonl", passages)
    before = passages.read_bytes()
    line = _refused(run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--bank",
                        DEMO / "questions.jsonl", "--passages", passages, "-k", "1", DEMO / "good.run", "--no-cache",
                        "-o", passages), "exam-grade")
    assert line.startswith(f"exam-grade: --output names a file the command reads (--passages {passages})")
    assert passages.read_bytes() == before


def test_a_subcommand_output_over_its_input(tmp_path):
    lb = tmp_path / "lb.tsv"
    lb.write_text("run\tmap\na\t0.5\nb\t0.3\nc\t0.1\n")
    line = _refused(run("correlate", "leaderboard", lb, DEMO / "qrels.txt", "-o", lb), "exam-correlate")
    assert line.startswith("exam-correlate: --output names a file the command reads (") and f" {lb})" in line
    assert lb.read_text() == "run\tmap\na\t0.5\nb\t0.3\nc\t0.1\n"


def test_a_new_output_or_another_file_is_fine(tmp_path):
    out = tmp_path / "out.tsv"
    res = run("qrels", "-m", "map", DEMO / "qrels.txt", DEMO / "good.run", "-o", out)
    assert res.code == 0, res.stderr
    first = out.read_text()
    again = run("qrels", "-m", "map", DEMO / "qrels.txt", DEMO / "good.run", "-o", out)  # replaced: not an input
    assert again.code == 0, again.stderr
    assert out.read_text() == first and "map" in first
