"""exam-grade --prompt nuggetizer-assign over an endpoint asks one call per (report, nugget)
pair, where the AutoNuggetizer (and exam-nuggets assign) asks a window of up to ten nuggets
per call: the command says so, with both counts, before it spends the calls."""

from __future__ import annotations

import json

from inproc import run
from openai_stub import OpenAIStub

# 3 reports; topic t1 has 12 nuggets (two windows of the nuggetizer's ten), t2 has 3
NUGGETS = {"t1": [f"fact {i} of one" for i in range(12)], "t2": ["fact a of two", "fact b of two", "fact c of two"]}
REPORTS = [("r1", "t1"), ("r2", "t1"), ("r1", "t2")]


def _inputs(tmp_path):
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join(json.dumps({"query_id": q, "item_id": f"{q}-{i}", "kind": "nugget", "text": t}) + "\n"
                            for q, texts in NUGGETS.items() for i, t in enumerate(texts)))
    runs = tmp_path / "reports"
    runs.mkdir()
    for run_id, topic in REPORTS:
        with open(runs / f"{run_id}.jsonl", "a") as fh:
            fh.write(json.dumps({"metadata": {"run_id": run_id, "topic_id": topic, "team_id": "x"},
                                 "responses": [{"text": f"A report of {run_id} on {topic}.", "citations": []}],
                                 "references": []}) + "\n")
    (tmp_path / "topics.tsv").write_text("t1\tfirst topic\nt2\tsecond topic\n")
    return bank, runs


def test_per_nugget_calls_are_counted_and_the_listwise_path_named(tmp_path):
    bank, runs = _inputs(tmp_path)
    pairs = sum(len(NUGGETS[t]) for _, t in REPORTS)  # 12 + 12 + 3
    windows = sum(-(-len(NUGGETS[t]) // 10) for _, t in REPORTS)  # 2 + 2 + 1
    with OpenAIStub(lambda req: "['support']") as stub:
        res = run("exam-grade", "--backend", "endpoint", "--base-url", stub.url, "--model", "m",
                  "--reports", runs, "--bank", bank, "--topics", tmp_path / "topics.tsv",
                  "--prompt", "nuggetizer-assign", "--no-cache", "-o", tmp_path / "g.jsonl")
        calls = len(stub.requests)
    assert res.code in (0, None), res.stderr + (res.escaped or "")
    assert calls == pairs == 27
    notes = [line for line in res.stderr.splitlines() if "one model call per (report, nugget) pair" in line]
    assert len(notes) == 1, res.stderr
    assert f"{pairs} calls here" in notes[0] and f"about {windows} calls" in notes[0]
    assert "exam-nuggets assign" in notes[0]
    # resumed with nothing left to ask: nothing to say
    again = run("exam-grade", "--backend", "endpoint", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                "--reports", runs, "--bank", bank, "--topics", tmp_path / "topics.tsv",
                "--prompt", "nuggetizer-assign", "--no-cache", "-o", tmp_path / "g.jsonl")
    assert again.code in (0, None) and "one model call per" not in again.stderr, again.stderr
