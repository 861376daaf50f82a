"""The flags of the four commands that talk to a model: the same names and, where the
meaning is the same, the same defaults (issue 47's table); exam-grade's renamed
--max-new-tokens still taken with one notice; -O no longer carries what a flag says."""

from __future__ import annotations

import json

import click
import pytest
from openai_stub import OpenAIStub

from exam_eval.demo import demo_data_dir

SHARED = ("--backend", "--model", "--base-url", "--api-key-env", "--concurrency", "--timeout", "--max-retries",
          "--max-tokens", "--cache", "--no-cache", "--cache-any-server", "--batch-out", "--batch-in", "-O")


def _commands() -> dict[str, click.Command]:
    from exam_eval.commands import genq, grade, nuggets

    return {"exam-grade": grade.cli, "exam-nuggets assign": nuggets.cli.commands["assign"],
            "exam-genq generate": genq.cli.commands["generate"], "exam-genq nuggetize": genq.cli.commands["nuggetize"]}


def _options(cmd: click.Command) -> dict[str, click.Option]:
    return {name: p for p in cmd.params if isinstance(p, click.Option) for name in p.opts}


@pytest.mark.parametrize("name", list(_commands()))
def test_every_model_command_has_the_shared_flags(name):
    opts = _options(_commands()[name])
    assert [f for f in SHARED if f not in opts] == []


def test_the_shared_defaults_are_one(monkeypatch):
    """timeout 600, HTTP retries 5, 64 in flight, no base URL (none is sent anywhere it was
    not told): exam-grade leaves them to the endpoint back end, whose defaults these are."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    from exam_eval.backends.endpoint import EndpointBackend

    backend = EndpointBackend(model="m", base_url="http://127.0.0.1:9/v1")
    effective = {"exam-grade": {"--timeout": backend.timeout, "--max-retries": backend.max_retries,
                                "--concurrency": backend.concurrency, "--base-url": None}}
    for name, cmd in _commands().items():
        if name == "exam-grade":
            opts = _options(cmd)
            assert all(opts[f].default is None for f in ("--timeout", "--max-retries", "--concurrency", "--base-url"))
            continue
        opts = _options(cmd)
        effective[name] = {f: opts[f].default for f in ("--timeout", "--max-retries", "--concurrency", "--base-url")}
    assert all(v == effective["exam-grade"] for v in effective.values()), effective
    assert effective["exam-grade"] == {"--timeout": 600.0, "--max-retries": 5, "--concurrency": 64, "--base-url": None}
    assert all(_options(c)["--base-url"].envvar == "OPENAI_BASE_URL" for c in _commands().values())


def _grade(run_cli, tmp_path, *flags):
    data = demo_data_dir()
    run = tmp_path / "r.run"
    run.write_text("".join([x + "\n" for x in (data / "good.run").read_text().splitlines()][:2]))
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join([x + "\n" for x in (data / "questions.jsonl").read_text().splitlines()
                             if json.loads(x)["query_id"] == "101"][:2]))
    return run_cli("exam-grade", "--backend", "endpoint", "--model", "m", "--prompt", "question-selfrating",
                   "--generate-ratings", "--bank", bank, "--passages", data / "passages.jsonl", "--no-cache", run,
                   *flags, env={"EXAM_EVAL_PROGRESS": "0"})


def test_the_old_name_of_max_tokens_is_taken_with_one_notice(tmp_path, run_cli):
    with OpenAIStub(lambda req: f"{req.json['max_tokens']}") as stub:
        new = _grade(run_cli, tmp_path, "--base-url", stub.url, "--max-tokens", "3", "-o", tmp_path / "a.jsonl")
        old = _grade(run_cli, tmp_path, "--base-url", stub.url, "--max-new-tokens", "3", "-o", tmp_path / "b.jsonl")
        assert all(r.json["max_tokens"] == 3 for r in stub.requests)
    assert new.returncode == old.returncode == 0, old.stderr
    notices = [x for x in old.stderr.splitlines() if "--max-new-tokens is now --max-tokens" in x]
    assert len(notices) == 1 and "--max-new-tokens" not in new.stderr
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()
    both = _grade(run_cli, tmp_path, "--base-url", "http://127.0.0.1:9/v1", "--max-tokens", "3", "--max-new-tokens", "4")
    assert both.returncode == 1 and "--max-tokens and --max-new-tokens name one limit" in both.stderr


@pytest.mark.parametrize("pair, flag", [("timeout=5", "--timeout"), ("max_retries=0", "--max-retries"),
                                        ("max_new_tokens=8", "--max-tokens")])
def test_O_does_not_carry_what_a_flag_says(tmp_path, run_cli, pair, flag):
    res = _grade(run_cli, tmp_path, "--base-url", "http://127.0.0.1:9/v1", "-O", pair)
    assert res.returncode == 1 and f"-O {pair.split('=')[0]}= is the flag {flag}" in res.stderr, res.stderr


def test_a_local_back_end_refuses_the_http_flags(tmp_path, run_cli):
    res = run_cli("exam-grade", "--backend", "embedding", "--timeout", "5", "--prompt", "question-selfrating",
                  "--bank", tmp_path / "b.jsonl", tmp_path / "r.run")
    assert res.returncode == 1 and "back end 'embedding' does not take --timeout" in res.stderr, res.stderr


def test_genq_generate_sends_nowhere_it_was_not_told(tmp_path, run_cli, monkeypatch):
    """It sent to api.openai.com by default, where the other three refuse: one default now."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    topics = tmp_path / "t.tsv"
    topics.write_text("1\twhat is a bee\n")
    res = run_cli("exam-genq", "generate", topics, "--model", "m")
    assert res.returncode == 1 and "needs --base-url (or $OPENAI_BASE_URL)" in res.stderr, res.stderr
