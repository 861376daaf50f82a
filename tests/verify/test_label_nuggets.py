"""exam-verify label in nugget mode: reports and nuggets on the page, the labels out in the
nuggetizer's assignment format, scored by exam-nuggets score as the nuggetizer scores them."""

from __future__ import annotations

import json
import random

import pytest

from label_serving import serving
from refusals import one_line_refusal
from test_label_page import Page, browser  # noqa: F401 (the fixture)

from exam_eval.io.bank_items import make_item_id
from exam_eval.verify.label_design import read_design


def _rag(d):
    """Three runs' reports on four topics (run c skips t3), a bank of 2-3 nuggets a topic."""
    rng = random.Random(5)
    (d / "runs").mkdir()
    for run in "abc":
        with open(d / "runs" / f"{run}.jsonl", "w") as f:
            for t in ("t1", "t2", "t3", "t4"):
                if run == "c" and t == "t3":
                    continue
                sents = [{"text": f"{run} says {t} fact {k}.", "citations": []} for k in range(rng.randint(1, 3))]
                f.write(json.dumps({"metadata": {"run_id": run, "topic_id": t, "team_id": "team"},
                                    "responses": sents, "references": []}) + "\n")
    items = []
    for t in ("t1", "t2", "t3", "t4", "t5"):   # t5: nuggets, no report
        for k in range(2 + (t == "t2")):
            text = f"nugget {k} of {t}"
            items.append({"query_id": t, "item_id": make_item_id(t, text), "kind": "nugget", "text": text,
                          "importance": "vital" if k == 0 else "okay"})
    (d / "bank.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    (d / "topics.tsv").write_text("".join(f"t{i}\tquestion {i}?\n" for i in range(1, 6)))
    return items


def test_nugget_labels_through_the_page_score_as_the_nuggetizer_scores(browser, tmp_path, run_cli):  # noqa: F811
    from nuggetizer.core import metrics

    items = _rag(tmp_path)
    folder = tmp_path / "s"
    with serving(str(folder), "--reports", str(tmp_path / "runs"), "--bank", str(tmp_path / "bank.jsonl"),
                 "-n", "2", "--seed", "1", "--topics", str(tmp_path / "topics.tsv"), "--assessor", "ann") as server:
        design = read_design(str(folder))
        assert design.mode == "nugget" and design.shared_queries == 3   # t1, t2, t4: every run reports on them
        assert set(design.queries) <= {"t1", "t2", "t4"}
        pairs = design.pair_list()
        per_topic = {t: sum(i["query_id"] == t for i in items) for t in design.queries}
        assert len(pairs) == 3 * sum(per_topic.values())
        tab = Page(browser, server.url)
        assert tab.page.locator("#scale button").count() == 3
        labels = {}
        for i, (q, key) in enumerate(pairs):
            run, item_id = key.split("\t")
            nugget = next(x for x in items if x["item_id"] == item_id)
            assert tab.text("#run") == run and tab.text("#nugget") == nugget["text"]
            assert tab.text("#query") == f"question {q[1:]}?"
            assert tab.text("#report").splitlines()[0] == f"{run} says {q} fact 0."
            assert tab.page.locator("#passage-view").is_hidden()
            labels[(q, run, nugget["text"])] = g = (i * 5) % 3
            tab.press(str(g), i + 1)
        code, err = server.stop()
        assert code == 0, err
    notes = (folder / "qrels" / "ann.notes.tsv").read_text().splitlines()
    assert notes == ["qid\trun_id\titem_id\tlabel\tnote"]   # none given
    out = folder / "qrels" / "ann.assignments.jsonl"
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 3 * len(design.queries)
    names = ("not_support", "partial_support", "support")
    for rec in lines:
        assert {n["text"]: n["assignment"] for n in rec["nuggets"]} == {
            t: names[g] for (q, r, t), g in labels.items() if q == rec["qid"] and r == rec["run_id"]}
    res = run_cli("exam-nuggets", "score", "--reports", str(tmp_path / "runs"), "--bank", str(tmp_path / "bank.jsonl"),
                  str(out))
    assert res.returncode == 0, res.stderr
    rows = {}
    for ln in res.stdout.splitlines():
        run, measure, topic, value = ln.split()
        rows[(run, measure, topic)] = float(value)
    for rec in lines:
        ref = metrics.calculate_nugget_scores(rec["qid"], rec["nuggets"])
        for ours, theirs in (("nugget_all", "all_score"), ("nugget_all_strict", "strict_all_score"),
                             ("nugget_vital", "vital_score"), ("nugget_vital_strict", "strict_vital_score")):
            assert rows[(rec["run_id"], ours, rec["qid"])] == pytest.approx(getattr(ref, theirs), abs=1e-4)


def test_nugget_mode_refuses_what_it_cannot_use(tmp_path, run_cli):
    _rag(tmp_path)
    base = ["exam-verify", "label", str(tmp_path / "s"), "--reports", str(tmp_path / "runs"), "--bank",
            str(tmp_path / "bank.jsonl"), "-n", "2", "--no-serve"]
    line = one_line_refusal(run_cli(*base, "--scale", "0-3"), "exam-verify", 1)
    assert "--scale 0-3: not in nugget mode" in line
    line = one_line_refusal(run_cli(*base, "-k", "5"), "exam-verify", 1)
    assert "-k: not in nugget mode" in line
    line = one_line_refusal(run_cli("exam-verify", "label", str(tmp_path / "s"), "--reports", str(tmp_path / "runs"),
                                    "-n", "2"), "exam-verify", 1)
    assert "needs both --reports and --bank" in line
    assert run_cli(*base).returncode == 0
    line = one_line_refusal(run_cli("exam-verify", "label", str(tmp_path / "s"), str(tmp_path / "bank.jsonl"),
                                    "--no-serve"), "exam-verify", 1)
    assert "in nugget mode" in line and "new FOLDER" in line
    # the sample extends by the next topic of the same draw
    before = read_design(str(tmp_path / "s")).queries
    assert run_cli("exam-verify", "label", str(tmp_path / "s"), "-n", "3", "--no-serve").returncode == 0
    assert read_design(str(tmp_path / "s")).queries[:2] == before
    line = one_line_refusal(run_cli("exam-verify", "label", str(tmp_path / "s"), "--show-llm"), "exam-verify", 1)
    assert "nugget mode has no LLM labels" in line
