"""Hostile inputs of a fifth sweep (2026-11-26): numbers trec_eval reads with atof/atol
without a word ("abc" is 0, "1.5" is 1) in the judgment formats beside the qrels
(qrels_jg labels, preference levels, -Z means and stddevs), which exam-qrels read the same
silent way. Each refusal: one line naming file and line, exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from inproc import run

RUN = "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq1 Q0 d3 3 1.0 r\n"


def _one_line(res, code: int = 2) -> str:
    assert res.escaped is None, res.escaped
    assert "Traceback" not in res.stderr
    assert res.code == code, (res.code, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("exam-qrels: "), res.stderr
    return lines[0]


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    p = tmp_path / "r.run"
    p.write_text(RUN)
    return p


@pytest.mark.parametrize("label, why", [
    ("abc", "'abc' is not an integer"),
    ("1.5", "'1.5' is not an integer"),
    ("1_0", "'1_0' is not an integer"),
    ("2000000000", "out of range"),
])
def test_a_qrels_jg_label_that_is_not_a_small_integer_is_refused(tmp_path, run_file, label, why):
    qrels = tmp_path / "jg.txt"
    qrels.write_text(f"q1 0 d1 1\nq1 0 d2 {label}\n")
    msg = _one_line(run("qrels", "-R", "qrels_jg", "-m", "qrels_jg", qrels, run_file))
    assert f"{qrels}:2:" in msg and why in msg


@pytest.mark.parametrize("level, why", [("high", "'high' is not a number"), ("nan", "not a number")])
def test_a_preference_level_that_is_not_a_number_is_refused(tmp_path, run_file, level, why):
    prefs = tmp_path / "prefs.txt"
    prefs.write_text(f"q1 a 0 d1 2\nq1 a 0 d2 {level}\n")
    msg = _one_line(run("qrels", "-R", "prefs", "-m", "prefs_simp", prefs, run_file))
    assert f"{prefs}:2:" in msg and why in msg


@pytest.mark.parametrize("mean, stddev, bad", [("abc", "0.1", "mean 'abc'"), ("0.5", "0.1e", "stddev '0.1e'"),
                                               ("0.5", "١", "stddev '١'")])
def test_a_zscore_that_is_not_a_number_is_refused(tmp_path, run_file, mean, stddev, bad):
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    z = tmp_path / "z.txt"
    z.write_text(f"q1 P_5 0.3 0.1\nq1 map {mean} {stddev}\n")
    msg = _one_line(run("qrels", "-Z", z, "-m", "map", "-m", "P.5", qrels, run_file))
    assert f"{z}:2:" in msg and f"{bad} is not a number" in msg


def test_zscores_keep_the_nan_and_inf_that_trec_eval_prints(tmp_path, run_file):
    """trec_eval's own test suite feeds -Z a file of its output, "nan" included."""
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    z = tmp_path / "z.txt"
    z.write_text("q1 map -nan nan\nq1 P_5 0.1 inf\n")
    res = run("qrels", "-q", "-Z", z, "-m", "map", "-m", "P.5", qrels, run_file)
    assert res.code == 0, res.stderr
    rows = {tuple(line.split()[:2]): line.split()[2] for line in res.stdout.splitlines()}
    assert rows[("Zmap", "q1")] in ("nan", "-nan")
    assert rows[("ZP_5", "q1")] == "0.0000"  # (0.2 - 0.1) / inf
