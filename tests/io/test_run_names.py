"""A run's leaderboard name: TREC's own run files, ``input.TAG`` (NIST's results area
serves them as ``input.TAG.gz``), are named by their tag, as TREC's official leaderboards
name them; any other file by its name without extensions, as before. With the DL19 runs
saved under NIST's names, exam-qrels' leaderboard and the official one name the same 37
runs (checked on ../shared/data, skipped without it)."""

from __future__ import annotations

import gzip
import re
from fnmatch import fnmatch
from pathlib import Path

import pytest

from exam_eval.io.leaderboard import run_name

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path, name", [
    ("runs/input.idst_bert_p1.gz", "idst_bert_p1"),   # NIST's results area
    ("input.idst_bert_p1", "idst_bert_p1"),           # TREC's submission name, unzipped
    ("runs/input.my.tag.gz", "my.tag"),               # a tag with dots keeps them
    ("input.TUW19-p1-f.run", "TUW19-p1-f"),
    ("runs/idst_bert_p1.run", "idst_bert_p1"),        # a plain file: as before
    ("runs/myrun.run.gz", "myrun"),
    ("runs/bm25", "bm25"),
    ("runs/input.gz", "input"),                       # no tag after input.: the file's name
    ("runs/input", "input"),
    ("runs/my.input.x.gz", "my.input.x"),             # input. only as the prefix
    ("runs/inputs.x.gz", "inputs.x"),
])
def test_run_name(path, name):
    assert run_name(path) == name


def test_two_files_of_one_tag_are_refused(tmp_path, run_cli):
    (tmp_path / "input.r1.gz").write_bytes(gzip.compress(b"q1 Q0 d1 1 2.0 r1\n"))
    (tmp_path / "r1.run").write_text("q1 Q0 d1 1 2.0 r1\n")
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\n")
    res = run_cli("exam-qrels", "-m", "P.5", qrels, tmp_path / "input.r1.gz", tmp_path / "r1.run")
    assert res.returncode == 1
    assert "two runs would share the leaderboard name 'r1'" in res.stderr


@pytest.mark.shared
def test_nist_named_dl19_runs_match_the_official_leaderboard(shared_data, tmp_path, run_cli):
    dl19 = shared_data / "dl19"
    runs = tmp_path / "runs"
    runs.mkdir()
    for f in sorted((dl19 / "runs").glob("*.run")):  # as the README's tour saves them
        (runs / f"input.{f.stem}.gz").write_bytes(gzip.compress(f.read_bytes()))
    res = run_cli("exam-qrels", "-c", "-m", "ndcg_cut.10", dl19 / "qrels.txt", *sorted(runs.iterdir()))
    assert res.returncode == 0, res.stderr
    ours = {row.split("\t")[0]: float(row.split("\t")[1]) for row in res.stdout.splitlines()[1:]}
    official_rows = [row.split("\t") for row in (dl19 / "official.tsv").read_text().splitlines()]
    column = official_rows[0].index("ndcg_cut_10")
    official = {row[0]: float(row[column]) for row in official_rows[1:]}
    assert len(ours) == 37 and set(ours) == set(official)
    # the same runs, not only the same names: each its official nDCG@10 (NIST's, within 5e-5)
    assert all(abs(ours[r] - official[r]) <= 5e-5 for r in ours), \
        {r: (ours[r], official[r]) for r in ours if abs(ours[r] - official[r]) > 5e-5}
    board = tmp_path / "exam-ndcg.tsv"
    board.write_text(res.stdout)
    # the README's step 4: the leaderboard against the official one, all 37 runs paired
    corr = run_cli("exam-correlate", "leaderboard", dl19 / "official.tsv", board, "--truth-column", "ndcg_cut_10")
    assert corr.returncode == 0, corr.stderr
    values = dict(line.split("\t") for line in corr.stdout.splitlines())
    assert values["n"] == "37" and float(values["kendall_tau_b"]) > 0.99


def readme_blocks() -> list[str]:
    """The code blocks of the README sections that take runs from the tour's runs/ folder."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = []
    for heading in ("## Five-minute tour", "## The rest of the pipeline", "### On a TREC collection, with a real model"):
        start = text.index(heading)
        end = text.index("\n## ", start + 1) if heading.startswith("## ") else text.index("\n#", start + 1)
        blocks += re.findall(r"^```(?:sh)?\n(.*?)^```", text[start:end], re.S | re.M)
    return blocks


def test_readme_blocks_use_the_run_files_the_tour_saves():
    """The tour saves NIST's runs as runs/input.TAG.gz; every block that names runs/ must
    find them (runs/*.run found none: "no such file")."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    tour = text[text.index("## Five-minute tour"):]
    assert "runs/input.*.gz" in tour[:tour.index("\n## ", 1)]  # where the tour says it saves them
    names = [m for b in readme_blocks() for m in re.findall(r"\bruns/[^\s)`'\";,]*", b) if not m.endswith("/")]
    assert names, "no runs/ in the README's blocks"
    saved = "runs/input.idst_bert_p1.gz"  # one of them, the one the tour scores
    assert all(fnmatch(saved, n) for n in names), [n for n in names if not fnmatch(saved, n)]
