"""What the chat commands write and ask again (issue 41, items 8, 9, 11): exam-nuggets
assign writes only what was answered, in the grades and in --assignments alike (unparsed
pairs "failed", as the nuggetizer writes them); an answer that gives no labels is neither
final nor cached; a failed call does not advance the progress bar; exam-genq generate
re-asks at temperature 0.2."""

from __future__ import annotations

import ast
import json
import re

import pytest

pytest.importorskip("nuggetizer")

from nuggetizer_stub import answer  # noqa: E402
from openai_stub import OpenAIStub, Reply  # noqa: E402

from exam_eval.io.bank_items import BankItem, make_item_id  # noqa: E402
from exam_eval.io.banks import write_bank  # noqa: E402

pytestmark = pytest.mark.timeout(180)

QUERY = "how do vaccines train the immune system"
WORDS = ("vaccines contain weakened pathogens antigens trigger antibodies memory cells immune response "
         "booster doses adjuvants strengthen protection herd immunity mrna instructions spike protein").split()
NUGGETS = [(" ".join(WORDS[(i * 3 + k) % len(WORDS)] for k in range(2 + i % 3)) + f" n{i}",
            "vital" if i % 3 else "okay") for i in range(12)]
LAST = NUGGETS[-1][0]  # in the second window (nuggets 10 and 11) only
ENV = {"EXAM_EVAL_PROGRESS": "0"}


def _inputs(tmp_path, markers):
    """bank.jsonl (12 nuggets: two windows), topics.tsv, runs.jsonl (one report per marker)."""
    bank = [BankItem("q1", make_item_id("q1", t), "nugget", t, importance=imp) for t, imp in NUGGETS]
    write_bank(bank, str(tmp_path / "bank.jsonl"))
    (tmp_path / "topics.tsv").write_text(f"q1\t{QUERY}\n")
    with (tmp_path / "runs.jsonl").open("w") as fh:
        for k, marker in enumerate(markers):
            sents = [" ".join(WORDS[(k * 5 + j * 4 + m) % len(WORDS)] for m in range(6)) + "." for j in range(4)]
            sents[-1] += f" {marker}."
            fh.write(json.dumps({"metadata": {"run_id": f"run{k}", "topic_id": "q1", "team_id": "t"},
                                 "responses": [{"text": s, "citations": []} for s in sents]}) + "\n")
    return bank


def _messages(req):
    msgs = req.json["messages"]
    return msgs[0]["content"], msgs[1]["content"]


def responder(req):
    """The stand-in model, and: DOWN fails every call, HALF the second window's, ECHO
    answers the nugget texts back (a list, but of no labels)."""
    system, user = _messages(req)
    if "DOWN" in user or ("HALF" in user and LAST in user):
        return Reply(500, json={"error": {"message": "server down"}})
    if "ECHO" in user:
        return repr(ast.literal_eval(re.search(r"\nNugget List: (\[.*\])\n", user).group(1)))
    return answer(system, user, req.json.get("temperature", 0))


def _assign(run_cli, tmp_path, url, *extra, env=ENV):
    return run_cli("exam-nuggets", "assign", "--reports", tmp_path / "runs.jsonl", "--bank", tmp_path / "bank.jsonl",
                   "--topics", tmp_path / "topics.tsv", "--model", "stub", "--base-url", url, "--max-retries", "0",
                   "--retries", "1", *extra, env=env)


def _score(run_cli, tmp_path, grades):
    res = run_cli("exam-nuggets", "score", "--reports", tmp_path / "runs.jsonl", "--bank", tmp_path / "bank.jsonl",
                  grades)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_assignments_hold_only_what_was_answered(tmp_path, run_cli):
    """run0 answered, run1's server down, run2 never parses, run3 half answered."""
    bank = _inputs(tmp_path, ["fine", "DOWN", "BROKEN", "HALF"])
    with OpenAIStub(responder) as stub:
        res = _assign(run_cli, tmp_path, stub.url, "--no-cache", "-o", tmp_path / "g.jsonl",
                      "--assignments", tmp_path / "a.jsonl")
    assert res.returncode == 3, res.stderr
    assert "their nuggets are not written" in res.stderr
    assert "3 of 4 reports written to" in res.stderr
    grades = [json.loads(x) for x in (tmp_path / "g.jsonl").read_text().splitlines()]
    runs = {}
    for g in grades:
        runs.setdefault(g["doc_id"].split("/")[0], []).append(g)
    assert sorted(runs) == ["run0", "run2", "run3"] and len(runs["run3"]) == 10
    assigned = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [a["run_id"] for a in assigned] == ["run0", "run2", "run3"]
    by_run = {a["run_id"]: a for a in assigned}
    # the unparsed pairs as the nuggetizer writes a window that never parsed
    assert [n["assignment"] for n in by_run["run2"]["nuggets"]] == ["failed"] * 12
    assert [n["text"] for n in by_run["run3"]["nuggets"]] == [t for t, _ in NUGGETS[:10]]
    labels = {0: "not_support", 1: "partial_support", 2: "support"}
    grade_of = {(g["doc_id"].split("/")[0], g["item_id"]): g for g in grades}
    for a in assigned:
        for n in a["nuggets"]:
            g = grade_of[(a["run_id"], make_item_id("q1", n["text"]))]
            assert n["assignment"] == (labels[g["grade"]] if g["parse_ok"] else "failed")
    assert {n["assignment"] for n in by_run["run0"]["nuggets"]} <= set(labels.values())
    # the scores read from the assignments file are the scores read from the grades
    from_grades, from_assignments = _score(run_cli, tmp_path, tmp_path / "g.jsonl"), \
        _score(run_cli, tmp_path, tmp_path / "a.jsonl")
    assert from_grades == from_assignments
    rows = {(r.split("\t")[0], r.split("\t")[1], r.split("\t")[2]): float(r.split("\t")[3])
            for r in from_grades.splitlines()}
    assert rows[("run2", "nugget_all", "q1")] == 0.0 and rows[("run1", "nugget_all", "q1")] == 0.0
    assert rows[("run0", "nugget_all", "q1")] > 0
    assert len(bank) == 12


def test_a_list_of_non_labels_is_not_cached_and_a_rerun_asks_again(tmp_path, run_cli):
    _inputs(tmp_path, ["fine", "ECHO"])
    cache = tmp_path / "c.sqlite"
    with OpenAIStub(responder) as stub:
        res = _assign(run_cli, tmp_path, stub.url, "--cache", cache, "-o", tmp_path / "g.jsonl")
        assert res.returncode == 0, res.stderr
        echo = [r for r in stub.requests if "ECHO" in _messages(r)[1]]
        # each of ECHO's two windows: the first ask at 0, one re-ask at 0.2
        assert len(stub.requests) == 2 + 4 and len(echo) == 4
        assert sorted(r.json["temperature"] for r in echo) == [0, 0, 0.2, 0.2]
        port = stub.port_in_use
    grades = [json.loads(x) for x in (tmp_path / "g.jsonl").read_text().splitlines()]
    echoed = [g for g in grades if g["doc_id"].startswith("run1/")]
    assert len(echoed) == 12 and not any(g["parse_ok"] for g in echoed)
    assert "12 (report, nugget) pairs have no label after the re-asks" in res.stderr
    with OpenAIStub(responder, port=port) as stub:  # the rerun asks ECHO's windows again, run0's from the cache
        res = _assign(run_cli, tmp_path, stub.url, "--cache", cache, "-o", tmp_path / "g2.jsonl")
        assert res.returncode == 0, res.stderr
        assert len(stub.requests) == 4 and all("ECHO" in _messages(r)[1] for r in stub.requests)
    assert (tmp_path / "g2.jsonl").read_bytes() == (tmp_path / "g.jsonl").read_bytes()


def test_failed_calls_do_not_advance_the_progress_bar(tmp_path, run_cli):
    _inputs(tmp_path, ["fine", "DOWN", "DOWN"])
    with OpenAIStub(responder) as stub:
        res = _assign(run_cli, tmp_path, stub.url, "--no-cache", "-o", tmp_path / "g.jsonl",
                      env={"EXAM_EVAL_PROGRESS": "1", "COLUMNS": "200"})
    assert res.returncode == 3, res.stderr
    bar = [line for line in res.stderr.splitlines() if "assigning nuggets" in line]
    assert bar and "2/6" in bar[-1] and "33%" in bar[-1], res.stderr
    assert "6/6" not in res.stderr and "100%" not in res.stderr


def test_parse_labels_takes_only_labels():
    from exam_eval.grading.listwise import parse_labels, window_parser

    assert parse_labels("['Support', 'not_support']") == ["support", "not_support"]
    for text in ("['weakened pathogens', 'memory cells']", "[]", "['support', 'supported']", "support"):
        assert parse_labels(text) is None
    assert window_parser(3)("['support', 'support']") is None  # a label short
    assert window_parser(2)("['support', 'support', 'not_support']") == ["support", "support", "not_support"]


def test_genq_generate_reasks_at_temperature_0_2(tmp_path, run_cli):
    topics = tmp_path / "t.tsv"
    topics.write_text("q1\tabout one\n")

    def respond(req):
        if req.json.get("temperature"):
            return '{"questions": ["Is one odd?"]}'
        return "No list here."

    with OpenAIStub(respond) as stub:
        res = run_cli("exam-genq", "generate", "--model", "m", "--base-url", stub.url, "--no-cache", str(topics),
                      env=ENV)
        assert res.returncode == 0, res.stderr
        assert [r.json["temperature"] for r in stub.requests] == [0, 0.2]
    assert [json.loads(x)["text"] for x in res.stdout.splitlines()] == ["Is one odd?"]
    with OpenAIStub(lambda req: "No list here.") as stub:  # --temperature above 0.2: re-asks keep it
        res = run_cli("exam-genq", "generate", "--model", "m", "--base-url", stub.url, "--no-cache",
                      "--temperature", "0.7", "--retries", "1", str(topics), env=ENV)
        assert res.returncode == 3
        assert [r.json["temperature"] for r in stub.requests] == [0.7, 0.7]
