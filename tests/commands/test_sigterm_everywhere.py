"""SIGTERM (make, kill, a batch system's time limit) interrupts every command as Ctrl-C
does: exit 130 with one line, and no temp file or empty output left behind, in the
moments a sweep caught it killing the process outright (exit 143, nothing said, the temp
file of exam-qrels -o left in the folder, exam-grade's new empty output kept).

The signal is sent by the process to itself at a chosen point (a patched library call),
so each case is deterministic rather than a race against a timer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"

DRIVER = textwrap.dedent("""
    import os, signal, sys
    target, attr, command = sys.argv[1], sys.argv[2], sys.argv[3]
    import importlib
    owner = importlib.import_module(target)
    real = getattr(owner, attr)

    def patched(*a, **k):
        out = real(*a, **k)
        os.kill(os.getpid(), signal.SIGTERM)
        return out

    setattr(owner, attr, patched)
    from exam_eval.launch import run
    run(command, sys.argv[4:])
""")


def _drive(tmp_path: Path, target: str, attr: str, command: str, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EXAM_EVAL_PROGRESS": "0"}
    return subprocess.run([sys.executable, "-c", DRIVER, target, attr, command, *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def _grades(tmp_path: Path) -> Path:
    path = tmp_path / "grades.jsonl"
    bank = [json.loads(x) for x in (DEMO / "questions.jsonl").read_text().splitlines()]
    lines = []
    for item in bank[:20]:
        for d in range(30):
            lines.append(json.dumps({"query_id": item["query_id"], "doc_id": f"d{d}", "item_id": item["item_id"],
                                     "kind": "question", "grade": d % 6, "probs": None, "answer": str(d % 6),
                                     "parse_ok": True, "model": "m", "prompt": "question-selfrating"}))
    path.write_text("\n".join(lines) + "\n")
    return path


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("target, attr", [
    ("os", "fsync"),  # while exam-qrels writes its -o (the temp file complete, not yet renamed)
    ("tempfile", "mkstemp"),  # between a temp file's creation and its registration: the signal waits
])
def test_sigterm_while_exam_qrels_writes_its_output(tmp_path, target, attr):
    grades = _grades(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    r = _drive(tmp_path, target, attr, "qrels", grades, "-o", out_dir / "exam.qrels")
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert r.stderr.strip() == "exam-qrels: interrupted", r.stderr
    assert list(out_dir.iterdir()) == []


def test_sigterm_while_exam_grade_plans_leaves_no_empty_output(tmp_path):
    out = tmp_path / "g.jsonl"
    r = _drive(tmp_path, "exam_eval.grading.engine", "plan_work", "grade", "--backend", "scripted",
               "--prompt", "question-selfrating", "--bank", DEMO / "questions.jsonl",
               "--passages", DEMO / "passages.jsonl", "--no-cache", "-o", out, DEMO / "good.run")
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.strip().splitlines()[-1].startswith("exam-grade: interrupted")
    assert not out.exists() and _leftovers(tmp_path) == []


def test_sigterm_while_a_command_module_imports(tmp_path):
    """Before the command's own handling exists: still one line and 130."""
    r = _drive(tmp_path, "importlib", "import_module", "cover", "--help")
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert r.stderr.strip() == "exam-cover: interrupted", r.stderr
