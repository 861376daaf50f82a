"""--batch-out replaces nothing a user made, in each of the four commands that write batch
files: not a bank or grades file that is there already, not -o, not an input; only an
earlier request file of the same run (the next round, run again). And the rounds of
exam-genq run as the hint says, the last one writing the bank, without --force."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from refusals import last_line_refusal, one_line_refusal

from exam_eval.demo import demo_data_dir

ENV = {"EXAM_EVAL_PROGRESS": "0", "OPENAI_API_KEY": "sk-test"}
HAND_MADE = b'{"query_id": "101", "item_id": "101/x", "kind": "question", "text": "What is edited by hand?"}\n' * 3


def _command(name: str, tmp_path: Path) -> list:
    """The command line of ``name``, without --batch-out and -o."""
    data = demo_data_dir()
    if name == "exam-grade":
        run = tmp_path / "r.run"
        run.write_text("".join(x + "\n" for x in (data / "good.run").read_text().splitlines()[:2]))
        return ["exam-grade", "--backend", "endpoint", "--model", "m", "--prompt", "question-selfrating", "--bank",
                data / "questions.jsonl", "--passages", data / "passages.jsonl", "--no-cache", run]
    if name == "exam-nuggets assign":
        from tests.backends.test_batch_chat import _assign_inputs

        _assign_inputs(tmp_path)
        return ["exam-nuggets", "assign", "--reports", tmp_path / "runs.jsonl", "--bank", tmp_path / "bank.jsonl",
                "--topics", tmp_path / "topics.tsv", "--model", "m", "--no-cache"]
    topics = tmp_path / "t.tsv"
    topics.write_text("101\thow do honey bees make honey\n")
    if name == "exam-genq generate":
        return ["exam-genq", "generate", topics, "--model", "m", "--no-cache"]
    return ["exam-genq", "nuggetize", topics, "--qrels", data / "qrels.txt", "--passages", data / "passages.jsonl",
            "--model", "m", "--no-cache"]


COMMANDS = ["exam-grade", "exam-nuggets assign", "exam-genq generate", "exam-genq nuggetize"]


@pytest.mark.parametrize("name", COMMANDS)
def test_a_file_that_is_not_this_runs_request_file_is_not_replaced(tmp_path, run_cli, name):
    cmd = _command(name, tmp_path)
    target = tmp_path / "bank.jsonl.keep"
    target.write_bytes(HAND_MADE)
    res = run_cli(*cmd, "--batch-out", target, "-o", tmp_path / "out.jsonl", env=ENV)
    said = last_line_refusal(res, code=1)  # exam-grade's notices on its pool come first
    assert said.endswith(f"--batch-out {target} exists and is not a request file of {name}: it is not replaced; "
                         "remove it or give another file name"), said
    assert target.read_bytes() == HAND_MADE and not (tmp_path / "out.jsonl").exists()
    # the same command's own request file, written by an earlier round: replaced by this one
    requests = tmp_path / "requests.jsonl"
    first = run_cli(*cmd, "--batch-out", requests, "-o", tmp_path / "out.jsonl", env=ENV)
    assert first.returncode == 0 and requests.stat().st_size > 0, first.stderr
    mine = requests.read_bytes()
    requests.write_bytes(mine.replace(b'"temperature"', b'"temperature" ', 1))  # to see it written anew
    assert requests.read_bytes() != mine
    again = run_cli(*cmd, "--batch-out", requests, "-o", tmp_path / "out.jsonl", env=ENV)
    assert again.returncode == 0, again.stderr
    assert requests.read_bytes() == mine
    # another run's request file (another model): not replaced either
    before = requests.read_bytes()
    other = [("m2" if x == "m" else x) for x in cmd]
    res = run_cli(*other, "--batch-out", requests, "-o", tmp_path / "out2.jsonl", env=ENV)
    assert "holds the requests of another run (another command, model, prompt or options)" in \
        last_line_refusal(res, code=1)
    assert requests.read_bytes() == before


@pytest.mark.parametrize("name", COMMANDS)
def test_batch_out_never_names_the_output(tmp_path, run_cli, name):
    same = tmp_path / "x.jsonl"
    res = run_cli(*_command(name, tmp_path), "--batch-out", same, "-o", same, env=ENV)
    assert " name the same file: " in one_line_refusal(res, code=1) and not same.exists()


def test_batch_out_never_names_an_input(tmp_path, run_cli):
    cmd = _command("exam-genq generate", tmp_path)
    topics = cmd[2]
    before = topics.read_bytes()
    res = run_cli(*cmd, "--batch-out", topics, env=ENV)
    assert "names a file the command reads" in one_line_refusal(res, code=1)
    assert topics.read_bytes() == before


def test_generate_rounds_end_in_the_bank_without_force(tmp_path, run_cli):
    """Round 2 answers some queries and asks the others again: it writes no bank (it would
    stop round 3: "bank.jsonl exists; pass --force"); the round that has every answer does."""
    from tests.backends.test_batch_chat import _gen_respond, _rounds

    topics = tmp_path / "t.tsv"
    topics.write_text("".join(f"{q}\tquery about {q}\n" for q in ("q1", "q2", "q3", "q5", "q6")))
    bank = tmp_path / "bank.jsonl"
    seen = []

    def run_round(*a):
        res = run_cli("exam-genq", "generate", "--model", "m", "--no-cache", "--retries", "2", topics, "-o", bank,
                      *a, env=ENV)
        seen.append((res.returncode, bank.exists()))
        return SimpleNamespace(returncode=res.returncode, stderr=res.stderr)

    last, rounds, _ = _rounds(run_round, tmp_path, _gen_respond)
    assert rounds >= 3 and all(code == 0 for code, _ in seen), last.stderr
    assert [exists for _, exists in seen] == [False] * (len(seen) - 1) + [True]
    items = [json.loads(x) for x in bank.read_text().splitlines()]
    assert {i["query_id"] for i in items} == {"q1", "q2", "q3", "q5", "q6"}


@pytest.mark.parametrize("name", COMMANDS)
def test_an_unreachable_server_is_one_line_with_a_count(tmp_path, run_cli, name):
    """One cause, one line, in every command that talks to a server (exam-genq named it
    once per topic); the line says how many it failed."""
    import re

    cmd = _command(name, tmp_path)
    if name.startswith("exam-genq"):  # three topics, so that one line stands for several
        topics = cmd[2]
        topics.write_text("101\thow do honey bees make honey\n102\tcauses of the french revolution\n"
                          "103\twhat is photosynthesis\n")
    res = run_cli(*cmd, "--base-url", "http://127.0.0.1:9/v1", "-o", tmp_path / "out.jsonl", env=ENV)
    assert res.returncode == 3, res.stderr
    said = [line for line in res.stderr.splitlines() if "cannot connect to http://127.0.0.1:9/v1" in line]
    assert len(said) == 1, res.stderr
    count = re.search(r"\((\d+)x\): |: (\d+) (?:queries|topics) failed", said[0].split("cannot connect")[0] + ": ")
    assert count and int(count.group(1) or count.group(2)) >= (3 if name.startswith("exam-genq") else 2), said


def test_a_batch_in_run_counts_answers_not_calls_and_a_missing_one_is_no_failure(tmp_path, run_cli):
    """From results files nothing is called: the bar's rate is answers a second, and a query
    the files do not answer "has no items" (no answer in the results files), not "failed
    after 1 call"."""
    from tests.backends.test_batch_chat import _gen_respond, _service

    cmd = _command("exam-genq generate", tmp_path)
    cmd[2].write_text("q1\tquery about q1\nq3\tquery about q3\n")
    res = run_cli(*cmd, "--batch-out", tmp_path / "r.jsonl", env=ENV)
    assert res.returncode == 0, res.stderr
    _service(tmp_path / "r.jsonl", tmp_path / "x.jsonl", _gen_respond, lose={1})
    import exam_eval.backends.chat as generators

    units = []
    real = generators.progress_bar

    def seen(total, description, unit="items"):
        units.append(unit)
        return real(total, description, unit)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(generators, "progress_bar", seen)
        res = run_cli(*cmd, "--batch-in", tmp_path / "x.jsonl", "-o", tmp_path / "bank.jsonl", env=ENV)
    assert res.returncode == 3, res.stderr
    assert units == ["answers"], units  # the bar's rate: answers/s, not calls/s
    assert "(1 answers read, 0 from cache)" in res.stderr
    assert "1 queries have no items:" in res.stderr and "failed" not in res.stderr, res.stderr
    assert "q3: no answer in the results files\n" in res.stderr


@pytest.mark.parametrize("name", COMMANDS)
def test_a_users_file_whose_first_line_is_blank_is_not_replaced(tmp_path, run_cli, name):
    """The check read a blank first line as an empty file, and replaced notes.txt (exit 0)."""
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"\nmy notes: what the batch service billed\n")
    res = run_cli(*_command(name, tmp_path), "--batch-out", notes, "-o", tmp_path / "out.jsonl", env=ENV)
    said = last_line_refusal(res, code=1)
    assert said.endswith(f"--batch-out {notes} exists and is not a request file of {name}: it is not replaced; "
                         "remove it or give another file name"), said
    assert notes.read_bytes() == b"\nmy notes: what the batch service billed\n"


@pytest.mark.parametrize("name", COMMANDS)
def test_an_earlier_rounds_parts_past_this_rounds_are_removed_and_named(tmp_path, run_cli, name, monkeypatch):
    """A round split in more parts than the next one: its FILE-N.jsonl past the new ones
    would lie beside them, unmentioned, and be sent again. They are this run's own (their
    custom_ids carry its grader tag): removed with the round, and named."""
    from exam_eval.backends import batch_files

    cmd = _command(name, tmp_path)
    if name.startswith("exam-genq"):  # three topics: three requests at least
        cmd[2].write_text("".join((demo_data_dir() / "topics.tsv").read_text().splitlines(keepends=True)[:3]))
    requests = tmp_path / "requests.jsonl"
    monkeypatch.setattr(batch_files, "MAX_REQUESTS", 1)  # a part per request
    first = run_cli(*cmd, "--batch-out", requests, "-o", tmp_path / "out.jsonl", env=ENV)
    assert first.returncode == 0, first.stderr
    n = len(list(tmp_path.glob("requests*.jsonl")))
    assert n >= 3, first.stderr
    assert {p.name for p in tmp_path.glob("requests*.jsonl")} == \
        {"requests.jsonl"} | {f"requests-{k}.jsonl" for k in range(2, n + 1)}
    monkeypatch.setattr(batch_files, "MAX_REQUESTS", 1_000)  # now all in one
    again = run_cli(*cmd, "--batch-out", requests, "-o", tmp_path / "out.jsonl", env=ENV)
    assert again.returncode == 0, again.stderr
    assert [p.name for p in tmp_path.glob("requests*.jsonl")] == ["requests.jsonl"]
    gone = [str(tmp_path / f"requests-{k}.jsonl") for k in range(2, n + 1)]
    named = ", ".join(gone) if len(gone) <= 3 else f"{gone[0]} ... {gone[-1]} ({len(gone)} files)"
    assert f"an earlier round's {named} removed" in again.stderr, again.stderr
    assert len(requests.read_text().splitlines()) == n


def test_a_part_that_is_not_the_runs_own_is_neither_replaced_nor_removed(tmp_path, run_cli, monkeypatch):
    from exam_eval.backends import batch_files

    cmd = _command("exam-genq generate", tmp_path)
    cmd[2].write_text("101\thow do honey bees make honey\n102\tcauses of the french revolution\n")
    requests = tmp_path / "requests.jsonl"
    stray = tmp_path / "requests-3.jsonl"
    monkeypatch.setattr(batch_files, "MAX_REQUESTS", 1)
    assert run_cli(*cmd, "--batch-out", requests, env=ENV).returncode == 0
    stray.write_bytes(HAND_MADE)  # FILE-3.jsonl, made by hand beside the run's two parts
    res = run_cli(*cmd, "--batch-out", requests, env=ENV)
    assert last_line_refusal(res, code=1).endswith(f"--batch-out {stray} exists and is not a request file of "
                                                   "exam-genq generate: it is not replaced; remove it or give "
                                                   "another file name")
    assert stray.read_bytes() == HAND_MADE


@pytest.mark.parametrize("name", COMMANDS)
def test_two_different_answers_to_one_request_are_refused_naming_both_lines(tmp_path, run_cli, name):
    """The first was used silently (grade 1 where the other answer says 4)."""
    from tests.backends.test_batch_chat import _service

    cmd = _command(name, tmp_path)
    requests, results = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    assert run_cli(*cmd, "--batch-out", requests, "-o", tmp_path / "out.jsonl", env=ENV).returncode == 0
    _service(requests, results, lambda req: "1")
    lines = results.read_text().splitlines()
    again = json.loads(lines[0])
    again["response"]["body"]["choices"][0]["message"]["content"] = "4"
    results.write_text("\n".join(lines + [json.dumps(again)]) + "\n")
    res = run_cli(*cmd, "--batch-in", results, "-o", tmp_path / "out.jsonl", env=ENV)
    said = last_line_refusal(res, code=2)
    assert said.endswith(f"{results}:{len(lines) + 1}: a second answer to the request "
                         f"{again['custom_id'][:100]!r}, unlike the first ({results} line 1): which one holds "
                         "cannot be told; keep one of them"), said
    assert not (tmp_path / "out.jsonl").exists()
    # the same answer twice (the file given twice) is one answer
    results.write_text("\n".join(lines + [lines[0]]) + "\n")
    res = run_cli(*cmd, "--batch-in", results, "-o", tmp_path / "out.jsonl", env=ENV)
    assert "a second answer" not in res.stderr, res.stderr
