"""The flags of the four commands that talk to a model: the same names and, where the
meaning is the same, the same defaults (issue 47's table); exam-grade's renamed
--max-new-tokens still taken with one notice; -O no longer carries what a flag says."""

from __future__ import annotations

import json
import re

import click
import pytest
from openai_stub import OpenAIStub

from exam_eval.demo import demo_data_dir

SHARED = ("--backend", "--model", "--base-url", "--api-key-env", "--concurrency", "--timeout", "--max-retries",
          "--max-tokens", "--retries", "--temperature", "--cache", "--no-cache", "--cache-any-server", "--batch-out",
          "--batch-in", "-O")
GRADE, ASSIGN, GENERATE, NUGGETIZE = "exam-grade", "exam-nuggets assign", "exam-genq generate", "exam-genq nuggetize"
ALL = (GRADE, ASSIGN, GENERATE, NUGGETIZE)
REFUSED = "refused"

#: issue 47's table: each shared flag's default as --help shows it (None: no default shown;
#: "refused": declared, and refused in one line). Where a row differs, the meaning does: a
#: grade is one label (64 tokens, the back end's) where the chat commands' answers are lists
#: (2048); exam-grade asks each pair once at its prompt's decoding (no --retries, no
#: --temperature), the AutoNuggetizer's prompts are asked at temperature 0 as published;
#: exam-grade's reference back end is local (FLAN-T5), the chat commands' a server.
DEFAULTS = {
    "--backend": {GRADE: "hf-seq2seq", ASSIGN: "endpoint", GENERATE: "endpoint", NUGGETIZE: "endpoint"},
    "--max-tokens": {GRADE: None, ASSIGN: "2048", GENERATE: "2048", NUGGETIZE: "2048"},
    "--retries": {GRADE: REFUSED, ASSIGN: "5", GENERATE: "5", NUGGETIZE: "5"},
    "--temperature": {GRADE: REFUSED, ASSIGN: REFUSED, GENERATE: "0.0", NUGGETIZE: REFUSED},
} | {flag: dict.fromkeys(ALL, default) for flag, default in (
    ("--model", None), ("--base-url", None), ("--api-key-env", "OPENAI_API_KEY"), ("--concurrency", "64"),
    ("--timeout", "600.0"), ("--max-retries", "5"), ("--cache", None), ("--no-cache", None),
    ("--cache-any-server", None), ("--batch-out", None), ("--batch-in", None), ("-O", None))}
#: one declaration: the same help text word for word in all four
SAME_HELP = ("--base-url", "--api-key-env", "--concurrency", "--timeout", "--max-retries", "--cache", "--no-cache",
             "--cache-any-server")


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


def _help_table() -> dict[str, dict[str, tuple[str | None, str]]]:
    """flag -> command -> (the default its --help shows, or "refused"; its help text)."""
    table: dict[str, dict] = {}
    for name, cmd in _commands().items():
        ctx = click.Context(cmd, info_name=name)
        for flag in SHARED:
            _, text = _options(cmd)[flag].get_help_record(ctx)
            text = " ".join(text.split())
            shown = re.search(r"\[default: ([^;\]]+)", text)
            default = REFUSED if text.startswith("Not taken here:") else shown and shown.group(1)
            table.setdefault(flag, {})[name] = (default, re.sub(r"\s*\[default: [^\]]*\]$", "", text))
    return table


def test_the_help_shows_one_table_of_flags_and_defaults():
    table = _help_table()
    assert {flag: {name: d for name, (d, _) in row.items()} for flag, row in table.items()} == DEFAULTS
    assert {flag: len({h for _, h in table[flag].values()}) for flag in SAME_HELP} == dict.fromkeys(SAME_HELP, 1)
    # where the chat commands all honour a flag, one help text says what it does
    for flag in ("--retries", "--max-tokens"):
        assert len({table[flag][name][1] for name in (ASSIGN, GENERATE, NUGGETIZE)}) == 1, flag


def test_exam_grade_leaves_the_server_defaults_to_the_back_end(monkeypatch):
    """exam-grade shows the endpoint's defaults and hands them on only where given (a local
    back end refuses a server flag given, not one left alone): the back end's are the same."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    from exam_eval.backends.endpoint import EndpointBackend

    backend = EndpointBackend(model="m", base_url="http://127.0.0.1:9/v1")
    assert (backend.timeout, backend.max_retries, backend.concurrency, backend.api_key_env) == \
        (600.0, 5, 64, "OPENAI_API_KEY")
    assert all(_options(c)["--base-url"].envvar == "OPENAI_BASE_URL" for c in _commands().values())


@pytest.mark.parametrize("argv, flag", [
    (["exam-grade", "--retries", "2"], "--retries"), (["exam-grade", "--temperature", "0.7"], "--temperature"),
    (["exam-nuggets", "assign", "--temperature", "0.7"], "--temperature"),
    (["exam-genq", "nuggetize", "--temperature", "0"], "--temperature"),
    (["exam-nuggets", "support", "--retries", "1"], "--retries")])
def test_a_flag_a_command_cannot_honour_is_refused_in_one_line(run_cli, argv, flag):
    res = run_cli(*argv)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1, res.stderr
    assert lines[0].startswith(f"{argv[0]}: {flag} is not taken by {' '.join(argv[:-2])}: "), lines[0]


def test_a_local_back_end_is_not_refused_the_server_flags_it_was_not_given(tmp_path, run_cli):
    local = _grade(run_cli, tmp_path, "--dry-run", backend=("--backend", "scripted"))
    assert local.returncode == 0 and "does not take" not in local.stderr, local.stderr
    given = _grade(run_cli, tmp_path, "--dry-run", "--timeout", "600", backend=("--backend", "scripted"))
    assert given.returncode == 1 and "back end 'scripted' does not take --timeout" in given.stderr, given.stderr


def _grade(run_cli, tmp_path, *flags, backend=("--backend", "endpoint", "--model", "m", "--generate-ratings")):
    data = demo_data_dir()
    run = tmp_path / "r.run"
    run.write_text("".join([x + "\n" for x in (data / "good.run").read_text().splitlines()][:2]))
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join([x + "\n" for x in (data / "questions.jsonl").read_text().splitlines()
                             if json.loads(x)["query_id"] == "101"][:2]))
    return run_cli("exam-grade", *backend, "--prompt", "question-selfrating",
                   "--bank", bank, "--passages", data / "passages.jsonl", "--no-cache", run,
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


def test_a_refusal_names_the_flag_as_the_command_line_gives_it(tmp_path, run_cli):
    """exam-grade's --max-tokens is the keyword max_new_tokens; the refusal said --max-new-tokens."""
    res = run_cli("exam-grade", "--backend", "embedding", "--max-tokens", "5", "--prompt", "question-selfrating",
                  "--bank", tmp_path / "b.jsonl", tmp_path / "r.run")
    assert res.returncode == 1 and res.stderr.strip().splitlines()[-1] == \
        "exam-grade: back end 'embedding' does not take --max-tokens", res.stderr


def test_genq_generate_sends_nowhere_it_was_not_told(tmp_path, run_cli, monkeypatch):
    """It sent to api.openai.com by default, where the other three refuse: one default now."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    topics = tmp_path / "t.tsv"
    topics.write_text("1\twhat is a bee\n")
    res = run_cli("exam-genq", "generate", topics, "--model", "m")
    assert res.returncode == 1 and "needs --base-url (or $OPENAI_BASE_URL)" in res.stderr, res.stderr


@pytest.mark.parametrize("argv", [
    ["exam-grade", "--backend", "scripted", "--prompt", "question-selfrating", "--dry-run"],
    ["exam-genq", "generate", "--backend", "scripted", "--script", "x.jsonl", "--dry-run"],
])
def test_openai_base_url_in_the_environment_is_no_flag_given_to_a_local_back_end(tmp_path, run_cli, argv):
    """$OPENAI_BASE_URL is --base-url's default for the endpoint back end; exam-grade took it
    as the flag given and refused every local back end ("does not take --base-url")."""
    data = demo_data_dir()
    inputs = (["--bank", data / "questions.jsonl", "--passages", data / "passages.jsonl", "--no-cache",
               data / "good.run"] if argv[0] == "exam-grade" else [data / "topics.tsv"])
    env = {"EXAM_EVAL_PROGRESS": "0", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    res = run_cli(*argv, *inputs, env=env, cwd=tmp_path)
    assert res.returncode == 0 and "does not take" not in res.stderr, res.stderr
    given = run_cli(*argv, "--base-url", "http://127.0.0.1:9/v1", *inputs, env=env, cwd=tmp_path)
    assert given.returncode == 1 and "back end 'scripted' does not take --base-url" in given.stderr, given.stderr
