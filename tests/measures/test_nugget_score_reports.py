"""measures.nugget_scores.score_reports is what both exam-nuggets score and
api.nugget_scores run: the same scores, and the same notes (stderr for the command,
warnings or ``log`` for the API)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from exam_eval import api
from exam_eval.errors import UsageError
from exam_eval.io.passages import read_passages
from exam_eval.io.reports import reports_from_run
from exam_eval.trec_eval.trec_files import read_run
from exam_eval.measures import nugget_scores as ns

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Reports of two runs; a bank without one of their topics and without importance;
    grades with one unparsed and some (report, item) pairs never graded."""
    tmp = tmp_path_factory.mktemp("score_reports")
    texts = read_passages(str(DEMO / "passages.jsonl"))
    objs = [o for name in ("good", "poor") for o in
            reports_from_run(name, read_run(str(DEMO / f"{name}.run")), texts, depth=3)]
    reports = tmp / "reports.jsonl"
    reports.write_text("".join(json.dumps(o) + "\n" for o in objs))
    topics = sorted({str(o["metadata"]["topic_id"]) for o in objs})
    dropped = topics[0]
    bank = tmp / "nuggets.jsonl"
    bank.write_text("".join(x + "\n" for x in DEMO.joinpath("nuggets.jsonl").read_text().splitlines()
                            if json.loads(x)["query_id"] != dropped))
    grades = api.grade(objs, bank=str(bank), prompt="nugget-selfrating", backend="scripted")
    lost = grades[-1].item_id  # one item loses every grade: ungraded for all its topic's reports
    kept = [g for g in grades if g.item_id != lost]
    kept[0] = dataclasses.replace(kept[0], grade=None, parse_ok=False)
    gfile = tmp / "grades.jsonl"
    gfile.write_text("".join(json.dumps(g.to_json()) + "\n" for g in kept))
    return objs, reports, bank, kept, gfile, dropped


def _command_notes(reports, bank, gfile) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), EXAM_EVAL_PROGRESS="0")
    cmd = [sys.executable, "-c", "import exam_eval.commands.nuggets as m; m.main()", "score", "--reports",
           str(reports), "--bank", str(bank), "--format", "table", str(gfile)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    prefix = "exam-nuggets: "
    return [line[len(prefix):] for line in r.stderr.splitlines() if line.startswith(prefix)]


def test_api_says_what_the_command_says(inputs):
    objs, reports, bank, grades, gfile, dropped = inputs
    said: list[str] = []
    per, summary = api.nugget_scores(objs, grades, str(bank), log=said.append)
    notes = _command_notes(reports, bank, gfile)
    # the one note that names its source: the file for the command, "grades" for the API
    assert notes[0] == f"{gfile}: 1 unparsed grades (they count as no support)"
    assert said[0] == "grades: 1 unparsed grades (they count as no support)"
    assert said[1:] == notes[1:]
    assert len(notes) == 4
    assert f"(topics {dropped})" in notes[1] and "without nugget items" in notes[1]
    assert "pairs have no parsed grade" in notes[2]
    assert notes[3].endswith("bank items have no importance and count as vital")
    assert per and all(topic != dropped for _, topic in per)
    assert set(summary) == {"good", "poor"}


def test_api_warns_by_default(inputs):
    objs, _, bank, grades, _, _ = inputs
    with pytest.warns(UserWarning, match="pairs have no parsed grade"):
        api.nugget_scores(objs, grades, str(bank))


def test_score_reports_is_what_the_api_returns(inputs):
    objs, _, bank, grades, _, _ = inputs
    items = api.read_bank(str(bank), kind="nugget")
    th = ns.thresholds_of(grades, None, None)
    assert (th.support, th.partial) == (4, 2)  # nugget-selfrating's 0-5 scale
    res = ns.score_reports(api.as_reports(objs), grades, items, th, measures=api.NUGGET_MEASURES)
    per, summary = api.nugget_scores(objs, grades, str(bank), log=lambda msg: None)
    assert res.per == per and res.means == summary
    assert res.measures == list(api.NUGGET_MEASURES)
    with pytest.raises(UsageError, match="unknown measure 'support_recall'"):
        ns.score_reports(api.as_reports(objs), grades, items, th, measures=["support_recall"])


def test_one_threshold_rule_for_both(inputs):
    _, _, _, grades, _, _ = inputs
    other = [dataclasses.replace(grades[1], prompt="nuggetizer-assign")]
    with pytest.raises(UsageError, match="GRADES: grades of 2 prompts; score one prompt's grades at a time"):
        ns.thresholds_of(list(grades) + other, None, None, "GRADES")
    with pytest.raises(UsageError, match="^grades of 0 prompts"):
        ns.thresholds_of([], None, None)
