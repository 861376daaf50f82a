"""EXAM-Qrels and EXAM-Cover, checked against direct recounts from the raw workbench
JSON (json + gzip here, not exam_eval's readers) and against hand-worked examples."""

from __future__ import annotations

import gzip
import json
import math
import statistics
import subprocess
import sys

import pytest

from exam_eval.io.grades import Grade
from exam_eval.measures.exam_cover import build_index, exam_cover
from exam_eval.measures.exam_qrels import grades_to_qrels


def raw_ratings(path):
    """(qid, doc) -> {question_id: self_rating}, straight from the file."""
    out = {}
    with gzip.open(path, "rt") as fh:
        for line in fh:
            qid, paras = json.loads(line)
            for p in paras:
                for block in p["exam_grades"]:
                    out[(qid, p["paragraph_id"])] = {r["question_id"]: r["self_rating"] for r in block["self_ratings"]}
    return out


def G(q, d, item, grade, ok=True):
    return Grade(q, d, item, "question" if item else None, grade if ok else None, None, None, ok, "m", "p")


def test_label_modes_by_hand():
    grades = [G("1", "a", "i1", 5), G("1", "a", "i2", 4), G("1", "a", "i3", 1),
              G("1", "b", "i1", 2), G("1", "c", "i1", None, ok=False), G("2", "x", None, 3)]
    assert grades_to_qrels(grades) == {"1": {"a": 5, "b": 2}, "2": {"x": 3}}
    assert grades_to_qrels(grades, "count", 4) == {"1": {"a": 2, "b": 0}, "2": {"x": 0}}
    assert grades_to_qrels(grades, "binary", 3) == {"1": {"a": 1, "b": 0}, "2": {"x": 1}}


def test_cover_by_hand():
    grades = [G("1", "a", "i1", 5), G("1", "a", "i2", 1), G("1", "b", "i2", 4), G("1", "b", "i3", 0),
              G("1", "c", "i3", 2), G("2", "z", "j1", 0)]
    index = build_index(grades, min_grade=4)
    run = {"1": {"a": 3.0, "c": 2.0, "b": 1.0}, "2": {"z": 1.0}}
    k1 = exam_cover(index, run, k=1)
    assert k1.per_query["1"] == (1 / 3, 1 / 2)      # a answers i1; i1,i2 answerable at all
    assert k1.per_query["2"] == (0.0, None)          # nothing answers j1
    k3 = exam_cover(index, run, k=3)
    assert k3.per_query["1"] == (2 / 3, 1.0)
    assert k3.mean == pytest.approx((2 / 3 + 0) / 2)
    assert k3.stderr == pytest.approx(statistics.stdev([2 / 3, 0]) / math.sqrt(2))
    assert k3.n_mean == 1.0                          # query 2 has no normalized value
    complete = exam_cover(index, {"1": run["1"]}, k=3, complete=True)
    assert complete.per_query["2"] == (0.0, None) and complete.n_queries == 2


@pytest.mark.shared
def test_dl19_exam_qrels_are_max_self_rating(shared_data, run_cli, tmp_path):
    graded = shared_data / "dl19" / "graded-flan-t5-large.jsonl.gz"
    out = tmp_path / "exam.qrels"
    res = run_cli("exam-qrels", graded, "-o", out)
    assert res.returncode == 0, res.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == 9260
    raw = raw_ratings(graded)
    for line in lines:
        qid, _, doc, label = line.split()
        assert int(label) == max(raw[(qid, doc)].values())
    assert lines == sorted(lines, key=lambda s: (s.split()[0], s.split()[2]))


@pytest.mark.shared
def test_dl19_leaderboards_have_37_rows(shared_data, run_cli):
    d = shared_data / "dl19"
    graded = d / "graded-flan-t5-large.jsonl.gz"
    runs = sorted((d / "runs").glob("*.run"))
    p20 = run_cli("exam-qrels", "-c", "-m", "P.20", "-l", "3", graded, *runs)
    assert p20.returncode == 0, p20.stderr
    rows = [line.split("\t") for line in p20.stdout.splitlines()]
    assert rows[0] == ["run", "P_20"] and len(rows) == 38
    cover = run_cli("exam-cover", "--min-grade", "3", graded, *runs)
    assert cover.returncode == 0, cover.stderr
    crow = [line.split("\t") for line in cover.stdout.splitlines()]
    assert crow[0] == ["run", "exam_cover", "stderr", "n_exam_cover", "n_stderr"] and len(crow) == 38

    # recompute one run's cover directly from the raw file and the raw run lines
    raw = raw_ratings(graded)
    name = crow[5][0]
    ranked = {}
    for line in (d / "runs" / f"{name}.run").read_text().splitlines():
        q, _, doc, _, score, _ = line.split()
        ranked.setdefault(q, []).append((float(score), doc))
    covers, norms = [], []
    for q, docs in ranked.items():
        top = [doc for _, doc in sorted(docs, reverse=True)[:20]]
        items = {i for (qq, _), r in raw.items() if qq == q for i in r}
        answerable = {i for (qq, _), r in raw.items() if qq == q for i, g in r.items() if g >= 3}
        got = {i for doc in top for i, g in raw[(q, doc)].items() if g >= 3}
        covers.append(len(got) / len(items))
        if answerable:
            norms.append(len(got) / len(answerable))
    assert float(crow[5][1]) == pytest.approx(statistics.mean(covers), abs=5e-5)
    assert float(crow[5][2]) == pytest.approx(statistics.stdev(covers) / math.sqrt(len(covers)), abs=5e-5)
    assert float(crow[5][3]) == pytest.approx(statistics.mean(norms), abs=5e-5)


def test_scoring_commands_do_not_import_torch():
    code = ("import sys\n"
            "import exam_eval.commands.qrels, exam_eval.commands.cover\n"
            "from exam_eval.commands import qrels\n"
            "try:\n    qrels.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers', 'matplotlib') if m in sys.modules]\n"
            "print('HEAVY', heavy)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "HEAVY []" in res.stdout
