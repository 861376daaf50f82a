"""examples/autojudge/exam_judge.py: exam_eval as an AutoJudge judge on the spot-check
data (autojudge-base in a subprocess, see autojudge_env.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from autojudge_env import autojudge_env

from exam_eval.io.reports import read_reports

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "autojudge"


def test_judge_on_the_spot_check_data(shared_data, tmp_path):
    env = autojudge_env(tmp_path)
    sc = shared_data / "autojudge-spot-check"
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(EXAMPLE / "exam_judge.py"), str(sc), "--bank",
                        str(EXAMPLE / "nuggets-28.jsonl"), "--backend", "embedding", "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0 and "autojudge_base" in r.stderr and "Error" in r.stderr.splitlines()[-1]:
        pytest.skip(f"autojudge-base does not import here: {r.stderr.splitlines()[-1]}")
    assert r.returncode == 0, r.stderr
    board = [line.split() for line in (out / "leaderboard.tot").read_text().splitlines()]
    values = {(run, m, t): float(v) for run, m, t, v in board}
    runs = {"my_best_run_01", "my_best_run_02", "my_best_run_02_citations"}
    assert {k[0] for k in values} == runs
    assert {k[1] for k in values} == {"nugget_all", "nugget_vital", "nugget_weighted", "exam_cover"}

    # the same numbers by hand from exam-grade's grades of the same reports
    grades = tmp_path / "g.jsonl"
    g = subprocess.run([sys.executable, "-c", "import exam_eval.commands.grade as m; m.main()", "--backend",
                        "embedding", "--prompt", "nugget-selfrating", "--bank", str(EXAMPLE / "nuggets-28.jsonl"),
                        "--reports", str(sc / "runs"), "--no-cache", "-o", str(grades)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert g.returncode == 0, g.stderr
    rows = [json.loads(x) for x in grades.read_text().splitlines()]
    bank = [json.loads(x) for x in (EXAMPLE / "nuggets-28.jsonl").read_text().splitlines()]
    credit = {}
    for rep in read_reports([str(sc / "runs")]):
        sids = {s.doc_id for s in rep.sentences}
        per_item = []
        for item in bank:
            top = max((x["grade"] for x in rows if x["doc_id"] in sids and x["item_id"] == item["item_id"]),
                      default=0)
            per_item.append((item["importance"], 1.0 if top >= 4 else 0.5 if top >= 2 else 0.0))
        credit[rep.run_id] = per_item
    for run, per_item in credit.items():
        assert values[(run, "nugget_all", "28")] == pytest.approx(sum(c for _, c in per_item) / len(per_item))
        vital = [c for imp, c in per_item if imp == "vital"]
        assert values[(run, "nugget_vital", "all")] == pytest.approx(sum(vital) / len(vital))
        w = [(1.0 if imp == "vital" else 0.5) for imp, _ in per_item]
        assert values[(run, "nugget_weighted", "28")] == pytest.approx(
            sum(a * c for a, (_, c) in zip(w, per_item)) / sum(w))
    assert len({values[(run, "nugget_all", "28")] for run in runs}) > 1  # the runs are told apart

    # qrels from citations: the cited documents 224 and 279, labels 0-2
    qrels = [line.split() for line in (out / "cited.qrels").read_text().splitlines()]
    assert {(q, d) for q, _, d, _ in qrels} == {("28", "224"), ("28", "279")}
    assert all(0 <= int(lab) <= 2 for *_, lab in qrels)


def _example(args, tmp_path, **kw):
    env = {**autojudge_env(tmp_path), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, str(EXAMPLE / "exam_judge.py"), *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=600, **kw)


@pytest.mark.parametrize("case", ["no dataset", "bad report"])
def test_bad_input_is_one_line_and_leaves_nothing(tmp_path, case):
    """As the README writes it, without the data: one line naming the place, exit 2, no
    traceback and no folder left in the temporary directory."""
    from refusals import one_line_refusal

    data = tmp_path / "spot-check-dataset"
    if case == "bad report":
        (data / "runs").mkdir(parents=True)
        (data / "runs" / "a.jsonl").write_text('{"metadata": {"run_id": "a"}}\n')
        (data / "queries.jsonl").write_text('{"request_id": "1", "title": "x"}\n')
    r = _example([data, "--bank", EXAMPLE / "nuggets-28.jsonl", "--backend", "embedding"], tmp_path)
    if "autojudge_base" in r.stderr and "Error" in (r.stderr.splitlines() or [""])[-1]:
        pytest.skip(f"autojudge-base does not import here: {r.stderr.splitlines()[-1]}")
    said = one_line_refusal(r, code=2)
    where = f"{data}: not an AutoJudge dataset" if case == "no dataset" else f"{data / 'runs' / 'a.jsonl'}:1: "
    assert said.startswith(f"exam_judge.py: {where}"), said
    assert list((tmp_path / "tmp").iterdir()) == []


def test_without_out_both_files_are_printed_under_headings_and_nothing_is_written(shared_data, tmp_path):
    r = _example([shared_data / "autojudge-spot-check", "--bank", EXAMPLE / "nuggets-28.jsonl", "--backend",
                  "embedding"], tmp_path)
    if r.returncode != 0 and "autojudge_base" in r.stderr:
        pytest.skip(f"autojudge-base does not import here: {r.stderr.splitlines()[-1]}")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("#")]
    assert [lines[i] for i in heads] == ["# leaderboard.tot (run measure topic value)",
                                        "# cited.qrels (topic 0 doc_id grade)"] and heads[0] == 0
    assert all(len(x.split("\t")) == 4 for x in lines[1:heads[1]]) and heads[1] > 1
    assert all(len(x.split()) == 4 and x.split()[1] == "0" for x in lines[heads[1] + 1:])
    assert not [p for p in (tmp_path / "tmp").iterdir() if not p.name.startswith("torchinductor")]
