"""examples/Makefile: the whole pipeline as pattern rules. Editing one bank item and
rerunning make rebuilds exactly what is downstream of the bank -- read from make's own
echoed commands -- and exam-grade regrades only the changed item's pairs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from exam_eval.io.banks import read_bank, write_bank
from exam_eval.io.bank_items import make_item_id
from exam_eval.trec_eval.trec_files import ranked, read_run

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = ROOT / "examples" / "Makefile"
DEMO = ROOT / "exam_eval" / "demo_data"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


def make(cwd, *args):
    # the console scripts of this interpreter's environment come first on PATH
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
               PYTHONPATH=str(ROOT))
    r = subprocess.run(["make", "-f", str(MAKEFILE), *args], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=900, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def commands(stdout: str) -> list[tuple[str, str]]:
    """(command, target) for every exam-* command make echoed (target = the -o file)."""
    out = []
    for line in stdout.replace("\\\n", " ").splitlines():
        words = line.split()
        # the Makefile calls them by path where the checkout's .venv/bin has them
        prog = os.path.basename(words[0]) if words else ""
        if prog.startswith("exam-"):
            target = words[words.index("-o") + 1] if "-o" in words else ""
            out.append((prog, target))
    return out


def test_bank_edit_rebuilds_only_downstream(tmp_path):
    first = make(tmp_path)
    built = {t for _, t in commands(first.stdout)}
    names = ["out/questions.grades.part.jsonl", "out/official.tsv", "out/questions.exam.qrels",
             "out/questions.qrels.leaderboard.tsv", "out/questions.cover.leaderboard.tsv",
             "out/questions.qrels.correlation.tsv", "out/questions.cover.correlation.tsv",
             "out/questions.spurious.tsv", "out/questions.uncovered.tsv", "out/questions.report.html"]
    assert built == set(names)
    for n in names[1:]:
        assert (tmp_path / n).stat().st_size > 0
    assert (tmp_path / "out" / "questions.grades.jsonl").exists()

    # nothing changed: nothing to do
    again = make(tmp_path)
    assert commands(again.stdout) == [] and "Nothing to be done" in again.stdout

    # a human rewords one question of query 104
    bank_path = tmp_path / "banks" / "questions.jsonl"
    items = read_bank(bank_path)
    item = next(i for i in items if i.query_id == "104")
    item.text = item.text.rstrip("?") + ", according to the passage?"
    item.item_id = make_item_id(item.query_id, item.text)
    write_bank(items, bank_path)

    dry = make(tmp_path, "-n")
    second = make(tmp_path)
    rebuilt = commands(second.stdout)
    assert commands(dry.stdout) == rebuilt  # make -n announced exactly what make then did
    assert {t for _, t in rebuilt} == set(names) - {"out/official.tsv"}
    assert [c for c, t in rebuilt if t == "out/questions.grades.part.jsonl"] == ["exam-grade"]

    # only the reworded item's pairs were graded again: one per pooled passage of query 104
    pooled = set()
    for run in sorted(DEMO.glob("*.run")):
        pooled |= set(ranked(read_run(run).get("104", {}))[:20])
    m = re.search(r"(\d+) pairs: (\d+) graded, (\d+) from cache", second.stderr)
    assert m, second.stderr
    assert int(m.group(2)) == len(pooled) > 0
    assert int(m.group(1)) == int(m.group(2)) + int(m.group(3))
    grades = (tmp_path / "out" / "questions.grades.jsonl").read_text()
    assert item.item_id in grades
    assert make(tmp_path, "-n").stdout.count("exam-") == 0


def test_dl19_target_from_reference_grades(shared_data, tmp_path):
    r = make(tmp_path, "dl19")
    out = tmp_path / "out-dl19"
    ran = {c for c, _ in commands(r.stdout)}
    assert "exam-grade" not in ran  # the reference grades, no model
    assert ran == {"exam-qrels", "exam-cover", "exam-correlate", "exam-verify"}
    corr = dict(line.split("\t") for line in
                (out / "questions-genq-oldformat.cover.correlation.tsv").read_text().splitlines())
    report = (out / "questions-genq-oldformat.report.html").read_text()
    # the report and exam-correlate agree on the cover leaderboard's correlation
    row = report.split("<td>EXAM-Cover@20</td>", 1)[1].split("</tr>", 1)[0]
    assert corr["kendall_tau_b"] in row and corr["spearman"] in row
    assert len((out / "questions-genq-oldformat.uncovered.tsv").read_text().splitlines()) > 100


def test_what_file_times_do_not_show_is_rebuilt_too(tmp_path):
    """A sweep of the Makefile found make saying "Nothing to be done" after a passage
    text changed, a run file was removed, or a setting changed on the command line, and
    `make clean` taking the grade cache with it."""
    data = tmp_path / "data"
    data.mkdir()
    for f in [*DEMO.glob("*.run"), *(DEMO / n for n in ("qrels.txt", "passages.jsonl", "topics.tsv",
                                                         "questions.jsonl"))]:
        shutil.copy(f, data / f.name)
    make(tmp_path, "DATA=data")

    def rebuilt(*args):
        dry = {c for c, _ in commands(make(tmp_path, "-n", "DATA=data", *args).stdout)}
        real = {c for c, _ in commands(make(tmp_path, "DATA=data", *args).stdout)}
        assert dry == real  # make -n announces what make does
        return real

    rows = (data / "passages.jsonl").read_text().splitlines()
    (data / "passages.jsonl").write_text("\n".join([rows[0].replace("Printing", "PRINTING"), *rows[1:]]) + "\n")
    assert "exam-grade" in rebuilt()
    (data / "random.run").unlink()
    assert "exam-grade" in rebuilt()
    assert "random" not in (tmp_path / "out" / "questions.qrels.leaderboard.tsv").read_text()
    changed = rebuilt("TAU=3")
    assert "exam-grade" not in changed and {"exam-qrels", "exam-cover", "exam-correlate"} <= changed
    assert rebuilt("TAU=3") == set()
    assert "exam-grade" in rebuilt("TAU=3", "DEPTH=10")
    make(tmp_path, "DATA=data", "clean")
    assert (tmp_path / "cache" / "grades.sqlite").exists() and not (tmp_path / "out").exists()
