"""The cache keys the server: two servers serving "m" (another may serve other weights under
the same name) never share grades or answers; --cache-any-server shares them, for hosts of
one model; --shard's split does not move with the server."""

from __future__ import annotations

import json

import pytest
from openai_stub import OpenAIStub

from exam_eval.demo import demo_data_dir

ENV = {"EXAM_EVAL_PROGRESS": "0"}


def _grade(run_cli, tmp_path, url, out, *extra):
    data = demo_data_dir()
    run = tmp_path / "r.run"
    run.write_text("".join([x + "\n" for x in (data / "good.run").read_text().splitlines() if x.startswith("101 ")][:4]))
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join([x + "\n" for x in (data / "questions.jsonl").read_text().splitlines()
                             if json.loads(x)["query_id"] == "101"][:5]))
    res = run_cli("exam-grade", "--backend", "endpoint", "--base-url", url, "--model", "m", "--prompt",
                  "question-selfrating", "--generate-ratings", "--bank", bank, "--passages", data / "passages.jsonl",
                  "--cache", tmp_path / "cache.sqlite", "-o", out, run, *extra, env=ENV)
    assert res.returncode == 0, res.stderr
    return res, [json.loads(x) for x in out.read_text().splitlines()]


def test_exam_grade_two_servers_serving_m_never_share_grades(tmp_path, run_cli):
    with OpenAIStub(lambda req: "5") as five, OpenAIStub(lambda req: "4") as four:
        res, first = _grade(run_cli, tmp_path, five.url, tmp_path / "a.jsonl")
        assert "20 graded, 0 from cache" in res.stderr and {g["grade"] for g in first} == {5}
        res, second = _grade(run_cli, tmp_path, four.url, tmp_path / "b.jsonl")
        assert "20 graded, 0 from cache" in res.stderr, res.stderr  # was: 0 graded, 20 from cache (grades of 5)
        assert {g["grade"] for g in second} == {4} and len(four.requests) == 20
        # the first server again: its own grades, from the cache
        res, again = _grade(run_cli, tmp_path, five.url, tmp_path / "c.jsonl")
        assert "0 graded, 20 from cache" in res.stderr and {g["grade"] for g in again} == {5}
        assert len(five.requests) == 20
        # shared on purpose: hosts of one model
        res, shared = _grade(run_cli, tmp_path, four.url, tmp_path / "d.jsonl", "--cache-any-server")
        assert "20 graded, 0 from cache" in res.stderr  # nothing shared was cached yet
        res, shared = _grade(run_cli, tmp_path, five.url, tmp_path / "e.jsonl", "--cache-any-server")
        assert "0 graded, 20 from cache" in res.stderr and {g["grade"] for g in shared} == {4}


def test_the_server_is_not_part_of_the_graders_settings_or_the_shards(tmp_path, run_cli):
    """A run resumed against a server on another host (a new SLURM job) goes on in its -o,
    and --shard I/N splits the pairs the same way whatever the server."""
    with OpenAIStub(lambda req: "3") as a, OpenAIStub(lambda req: "3") as b:
        _, one = _grade(run_cli, tmp_path, a.url, tmp_path / "s1.jsonl", "--shard", "1/2")
        _, two = _grade(run_cli, tmp_path, b.url, tmp_path / "s2.jsonl", "--shard", "1/2")
        assert [(g["doc_id"], g["item_id"]) for g in one] == [(g["doc_id"], g["item_id"]) for g in two]
        assert 0 < len(one) < 20
        res, rest = _grade(run_cli, tmp_path, b.url, tmp_path / "s1.jsonl")
        assert len(rest) == 20 and f"{len(one)} already in output" in res.stderr


@pytest.mark.parametrize("share", [False, True])
def test_exam_genq_answers_are_the_servers_own(tmp_path, run_cli, share):
    topics = tmp_path / "t.tsv"
    topics.write_text("q1\twhat is a bee\n")
    flag = ["--cache-any-server"] if share else []

    def gen(url, out):
        res = run_cli("exam-genq", "generate", topics, "--model", "m", "--base-url", url, "--cache",
                      tmp_path / "c.sqlite", "-o", out, *flag, env=ENV)
        assert res.returncode == 0, res.stderr
        return [json.loads(x)["text"] for x in out.read_text().splitlines()]

    with OpenAIStub(lambda req: '{"questions": ["From A?"]}') as a, \
            OpenAIStub(lambda req: '{"questions": ["From B?"]}') as b:
        assert gen(a.url, tmp_path / "a.jsonl") == ["From A?"]
        assert gen(b.url, tmp_path / "b.jsonl") == (["From A?"] if share else ["From B?"])
        assert len(b.requests) == (0 if share else 1)


def test_a_local_back_end_does_not_take_the_flag(tmp_path, run_cli):
    res = run_cli("exam-grade", "--backend", "embedding", "--cache-any-server", "--prompt", "question-selfrating",
                  "--bank", tmp_path / "b.jsonl", tmp_path / "r.run", env=ENV)
    assert res.returncode == 1 and "back end 'embedding' does not take --cache-any-server" in res.stderr, res.stderr
