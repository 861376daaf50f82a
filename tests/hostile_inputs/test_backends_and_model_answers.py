"""Hostile back-end settings and model output. Settings: -O values out of range or not a
switch, scripted back ends' scripts of the wrong types or nested without end, prompt files
with a label twice or a scale past the labels' range, flags a back end does not take, a
device torch does not know, timeouts and temperatures off the API's range, a rating rule
where nothing generated is read. Output: answers with two ratings or digits of other
scripts, rambling answers, JSON nested without end, lone surrogates, lists under another
key, blank nuggets, servers that fail every call.

Every refusal here: one line naming the option or the file (and its line), exit 1 for a
usage error and 2 for a file's content, no traceback, nothing written. An unusable answer
is recorded as unparsed (or asked again, then the query fails with exit 3), never a
traceback that stops the grading, and a failed run leaves its output as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exam_eval.grading.prompts import get_prompt
from inproc import run
from refusals import one_line_refusal
from tests.hostile_inputs._worlds import (DEEP, DEMO, DEMO_GRADE, grade_args_without_run, grade_json,
                                          item_json, refused, report_json, report_line, run_file,  # noqa: F401 (a fixture)
                                          scripted_grading_args, write, write_jsonl)
from tiny_models import tiny_llama, tiny_t5  # noqa: F401 (fixtures)


# ---- -O values and scripted back ends' scripts -------------------------------------------------

@pytest.mark.parametrize("option, shown", [
    ("batch_size=x", "batch_size: expected a whole number >= 0, got 'x'"),
    ("batch_size=nan", "batch_size: expected a whole number >= 0, got nan"),
    ("window=1e999", "window: expected a whole number >= 0, got inf"),
    ("delay=-1", "delay: expected a finite number >= 0, got -1"),
    ("delay=nan", "delay: expected a finite number >= 0, got nan"),
])
def test_backend_option_numbers_are_checked_before_work(option, shown, tmp_path):
    """-O values went to the back end unchecked: int('x'), int(nan) or time.sleep(-1) raised
    a traceback, some of them mid-grading with the output open."""
    out = tmp_path / "grades.jsonl"
    line = one_line_refusal(run(*DEMO_GRADE, "-O", option, "-o", out), "exam-grade", 1)
    assert line == f"exam-grade: --backend-option {shown}"
    assert not out.exists()


def test_backend_option_numbers_still_work():
    plain = run(*DEMO_GRADE)
    res = run(*DEMO_GRADE, "-O", "batch_size=2", "-O", "delay=0", "-O", "window=400")
    assert res.escaped is None and res.code == 0, res.stderr
    assert len(res.stdout.splitlines()) == 100  # the top passage of 10 queries, 10 questions each

    def grades(out):  # the grader_hash names the window, which is another grader's setting
        return sorted(json.dumps({k: v for k, v in json.loads(x).items() if k != "grader_hash"})
                      for x in out.splitlines())

    assert grades(res.stdout) == grades(plain.stdout)


@pytest.mark.parametrize("backend, option, why", [
    ("endpoint", "concurrency=0", "-O concurrency= must be an integer at least 1"),
    ("endpoint", "batch_size=0", "-O batch_size= must be an integer at least 1"),
    ("endpoint", "max_new_tokens=0", "-O max_new_tokens= is the flag --max-tokens"),
    ("endpoint", "logprobs=maybe", "-O logprobs= must be true or false"),
    ("endpoint", "logprobs=ture", "-O logprobs= must be true or false"),
    ("scripted", "score=maybe", "-O score= must be true or false"),
])
def test_backend_option_values_out_of_range_or_not_a_switch_are_refused(tmp_path, run_file, backend, option, why):
    """0 became the default (64, 256, 64) through ``int(x or default)``, and a switch that
    was not "true" was false: scoring turned off by a typo. Both with exit 0."""
    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"query_id": "q1", "item_id": "q1/i1", "kind": "question", "text": "What?"}\n')
    passages = tmp_path / "p.jsonl"
    passages.write_text('{"doc_id": "d1", "text": "Bees."}\n')
    where = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"] if backend == "endpoint" else []
    out = tmp_path / "g.jsonl"
    res = run("grade", "--backend", backend, *where, "-O", option, "--prompt", "question-selfrating",
              "--bank", bank, "--passages", passages, "--no-cache", run_file, "-o", out)
    msg = one_line_refusal(res, "exam-grade", code=1)
    assert why in msg
    assert not out.exists()


@pytest.mark.parametrize("rule, reason", [
    ({"item": 5, "output": "3"}, "'item' must be a string (a substring to match)"),
    ({"context": ["Bee"], "output": "3"}, "'context' must be a string (a substring to match)"),
    ({"probs": {"0": "x", "5": 1}}, "'probs' must be an object of label weights (finite numbers >= 0)"),
    ({"probs": [0.5, 0.5]}, "'probs' must be an object of label weights (finite numbers >= 0)"),
])
def test_script_rules_of_the_wrong_type_name_their_line(rule, reason, tmp_path):
    """A rule's values were used as they came: 5 in a passage's text raised TypeError, a
    weight "x" ValueError, both mid-grading."""
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"output": "4"}) + "\n" + json.dumps(rule) + "\n")
    out = tmp_path / "grades.jsonl"
    line = one_line_refusal(run(*DEMO_GRADE, "-O", f"script={script}", "-o", out), "exam-grade", 2)
    assert line == f"exam-grade: {script}:2: {reason}"
    assert not out.exists()


def test_deep_model_output_and_scripted_rules(tmp_path):
    from exam_eval.genq.parse import _load

    assert _load(DEEP) is None or isinstance(_load(DEEP), list)  # no RecursionError
    rules = write(tmp_path / "rules.json", None, DEEP.encode())
    (tmp_path / "runs").mkdir()
    r = write(tmp_path / "runs" / "r.jsonl", [report_json()])
    res = run("grade", "--backend", "scripted", "-O", f"script={rules}", "--prompt", "nugget-selfrating",
              "--no-cache", "--bank", write(tmp_path / "b.jsonl", [item_json()]), "--reports", r,
              "-o", tmp_path / "g.jsonl")
    refused(res, rules, None, "nested deeper than")


# ---- prompt files ----------------------------------------------------------------------------

@pytest.mark.parametrize("scale", ["0 " + "9" * 5000, "0 99999999999", "-20000 3"])
def test_custom_prompt_scale_is_bounded(scale, tmp_path):
    """'# scale: 0 <5000 digits>' was a ValueError traceback; a scale past 10000 wrote
    grades that the grades reader then refuses (io.trec_rules.LABEL_MAX)."""
    from exam_eval.io.trec_rules import LABEL_MAX

    prompt = tmp_path / "prompt.txt"
    prompt.write_text(f"# scale: {scale}\n{{context}} {{question}}\n")
    line = one_line_refusal(run(*DEMO_GRADE[:3], "--prompt", prompt, *DEMO_GRADE[5:]), "exam-grade", 2)
    assert line.startswith(f"exam-grade: {prompt}:1: scale must be 'MIN MAX' within -{LABEL_MAX}..{LABEL_MAX}, not ")


def test_a_prompt_file_with_a_label_twice_is_refused(tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("# target: question\n# mode: score\n# labels: 1 1\n# scale: 0 1\nQ: {question}\nP: {context}\n")
    res = run("grade", "--backend", "scripted", "--prompt", prompt, "--no-cache", "-k", "1",
              "--bank", DEMO / "questions.jsonl", "--passages", DEMO / "passages.jsonl", DEMO / "good.run",
              "-o", tmp_path / "g.jsonl")
    assert one_line_refusal(res, "exam-grade", 2) == (f"exam-grade: {prompt}:3: label '1' is given twice: each grade "
                                                      "needs its own label (their probabilities are compared)")
    assert not (tmp_path / "g.jsonl").exists()


# ---- flags and settings a back end does not take ------------------------------------------------

@pytest.mark.parametrize("argv, flag", [
    (["genq", "generate", "--backend", "scripted", "--script", "x.jsonl", "--temperature", "0.5"], "--temperature"),
    (["genq", "generate", "--backend", "scripted", "--script", "x.jsonl", "--concurrency", "3"], "--concurrency"),
    (["genq", "generate", "--model", "m", "--device", "cuda"], "--device"),
    (["genq", "generate", "--model", "m", "-O", "foo=bar"], "--backend-option"),
    (["genq", "generate", "--model", "m", "--script", "x.jsonl"], "--script"),
])
def test_exam_genq_refuses_flags_its_back_end_does_not_take(argv, flag):
    """exam-grade said so ("back end 'scripted' does not take --base-url"); exam-genq ran
    with them ignored, exit 0."""
    prog, *rest = argv
    msg = one_line_refusal(run(prog, *rest, DEMO / "topics.tsv", "--dry-run"), "exam-genq", code=1)
    assert msg.startswith(f"exam-genq: back end '{rest[rest.index('--backend') + 1] if '--backend' in rest else 'endpoint'}'"
                          f" does not take {flag}"), msg


def test_exam_nuggets_assign_refuses_flags_its_chat_back_end_does_not_take(tmp_path):
    reports = tmp_path / "reports.jsonl"
    reports.write_text('{"metadata": {"run_id": "r", "topic_id": "101", "team_id": "t"}, '
                       '"responses": [{"text": "Bees make honey.", "citations": []}], "references": []}\n')
    out = tmp_path / "a.jsonl"
    msg = one_line_refusal(run("nuggets", "assign", "--backend", "scripted", "--script", DEMO / "assign-script.jsonl",
                               "--timeout", "5", "--reports", reports, "--bank", DEMO / "nuggetized.jsonl",
                               "--topics", DEMO / "topics.tsv", "--no-cache", "-o", out), "exam-nuggets", code=1)
    assert msg == "exam-nuggets: back end 'scripted' does not take --timeout"
    assert not out.exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_timeout_that_is_no_finite_number_is_a_usage_error(tmp_path, value):
    """A socket timeout of nan or inf was a traceback (ValueError, OverflowError)."""
    topics = DEMO / "topics.tsv"
    endpoint = ["--backend", "endpoint", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--timeout", value]
    for args in (["genq", topics, *endpoint, "-o", tmp_path / "x.jsonl"],
                 ["genq", "nuggetize", topics, "--qrels", DEMO / "qrels.txt", "--passages", DEMO / "passages.jsonl",
                  *endpoint, "--no-cache", "-o", tmp_path / "x.jsonl"]):
        msg = one_line_refusal(run(*args), "exam-genq", code=1)
        assert "'--timeout'" in msg and ("not a finite number" in msg or "range" in msg), msg
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize("value", ["-1", "99", "nan"])
def test_a_temperature_off_the_apis_range_is_a_usage_error(value):
    msg = one_line_refusal(run("genq", "--dry-run", DEMO / "topics.tsv", "--temperature", value), "exam-genq", code=1)
    assert "'--temperature'" in msg


@pytest.mark.parametrize("backend, why", [
    (["scripted", "-O", "score=true"], "scores the labels' probabilities: add --generate-ratings"),
    (["embedding"], "generates no text"),
])
def test_a_rating_rule_where_nothing_generated_is_read_is_refused(tmp_path, run_file, backend, why):
    """The grades were scored, the rule never applied, and yet the lines said
    question-selfrating/exam-pp and were cached apart, exit 0."""
    world = grade_args_without_run(tmp_path)
    world[1:2] = backend
    out = tmp_path / "g.jsonl"
    msg = one_line_refusal(run("grade", *world, "--rating-rule", "exam-pp", run_file, "-o", out), "exam-grade", code=1)
    assert msg == f"exam-grade: --rating-rule exam-pp reads generated ratings, and back end '{backend[0]}' {why}"
    assert not out.exists()


@pytest.mark.parametrize("backend, model", [("hf-seq2seq", "tiny_t5"), ("hf-causal", "tiny_llama")])
def test_a_rating_rule_on_a_local_model_that_scores_is_refused(tmp_path, request, backend, model):
    """The check asked the back end before its tokenizer had loaded, which then said "does
    not score": the grades were scored, the rule never applied, the lines said
    question-selfrating/workbench, exit 0."""
    bank = write_jsonl(tmp_path / "bank.jsonl", [{"query_id": "q1", "item_id": "q1/i1", "kind": "question", "text": "What?"}])
    passages = write_jsonl(tmp_path / "p.jsonl", [{"doc_id": "d1", "text": "Bees."}])
    run_file = tmp_path / "r.run"
    run_file.write_text("q1 Q0 d1 1 1.0 r\n")
    out = tmp_path / "g.jsonl"
    args = ["--backend", backend, "--model", request.getfixturevalue(model), "--device", "cpu", "--prompt",
            "question-selfrating", "--bank", bank, "--passages", passages, "--no-cache", run_file, "-o", out]
    msg = one_line_refusal(run("grade", *args, "--rating-rule", "workbench"), "exam-grade", code=1)
    assert msg == (f"exam-grade: --rating-rule workbench reads generated ratings, and back end '{backend}' scores the "
                   "labels' probabilities: add --generate-ratings")
    assert not out.exists()
    ok = run("grade", *args, "--rating-rule", "workbench", "--generate-ratings")
    assert ok.code == 0, ok.stderr
    assert {json.loads(x)["prompt"] for x in out.read_text().splitlines()} == {
        "question-selfrating/generate/workbench"}


@pytest.mark.parametrize("backend", ["hf-seq2seq", "embedding"])
def test_a_device_torch_does_not_know_is_one_line(tmp_path, request, backend):
    """--device bogus reached torch's parser at the model load: a RuntimeError traceback."""
    bank = write_jsonl(tmp_path / "bank.jsonl", [{"query_id": "q1", "item_id": "q1/i1", "kind": "question", "text": "What?"}])
    passages = write_jsonl(tmp_path / "p.jsonl", [{"doc_id": "d1", "text": "Bees."}])
    run_file = tmp_path / "r.run"
    run_file.write_text("q1 Q0 d1 1 1.0 r\n")
    out = tmp_path / "g.jsonl"
    model = ["--model", request.getfixturevalue("tiny_t5"), "--engine", "torch"] if backend == "hf-seq2seq" else []
    res = run("grade", "--backend", backend, *model, "--device", "bogus", "--prompt", "question-selfrating",
              "--bank", bank, "--passages", passages, "--no-cache", run_file, "-o", out)
    msg = one_line_refusal(res, "exam-grade", code=1)
    assert msg.startswith("exam-grade: --device bogus: not a device torch knows (")
    assert not out.exists()


# ---- what a model answers -----------------------------------------------------------------------

@pytest.mark.parametrize("answer", ["2/5 3/5", "Rating: 4 out of 5. I'd say 3/5 though", "3/5 or 4/5",
                                    "\uff14", "Grade: \u0664", "\U0001d7d3"])
def test_an_answer_with_two_ratings_or_other_digits_is_unparsed_not_a_grade(tmp_path, answer):
    prompt = get_prompt("question-selfrating")
    assert not prompt.parse(answer).parse_ok
    out = tmp_path / "g.jsonl"
    res = run("grade", *scripted_grading_args(tmp_path, answer), "-o", out)
    assert res.code == 0, res.stderr
    [line] = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["grade"] is None and line["parse_ok"] is False and line["answer"] == answer


@pytest.mark.parametrize("answer, grade", [("4/5", 4), ("04/5 - good. Score 4/5", 4), ("0/5", 0),
                                           ("2: partially 2/5", 2)])
def test_a_rating_repeated_alike_is_still_read(answer, grade):
    parsed = get_prompt("question-selfrating").parse(answer)
    assert parsed.parse_ok and parsed.grade == grade


@pytest.mark.parametrize("prompt, answer, expect", [
    ("question-selfrating", "4" * 10000, {(None, False)}),   # int() refuses 4300 digits
    ("umbrela", "##final score: " + "2" * 5000, {(None, False)}),
    # nltk's edit_distance refuses 2000 characters: no answer key matches (0), items
    # without keys count any answer (1)
    ("question-extraction", "nectar " * 2000, {(0, True), (1, True)}),
])
def test_rambling_model_answers_are_recorded_not_fatal(prompt, answer, expect, tmp_path):
    """A model stuck repeating itself is model output like any other: recorded (unparsed
    when it is no grade), never a traceback that stops the grading."""
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"output": answer}) + "\n")
    argv = ["grade", "--backend", "scripted", "--no-cache", "-O", f"script={script}", "--prompt", prompt,
            "--bank", DEMO / "questions.jsonl", "--topics", DEMO / "topics.tsv", "--passages",
            DEMO / "passages.jsonl", "-k", "1", DEMO / "good.run"]
    res = run(*argv)
    assert res.escaped is None and res.code == 0, (res.escaped, res.stderr)
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert lines and {(g["grade"], g["parse_ok"]) for g in lines} == expect
    assert all(g["answer"] == answer for g in lines)


def test_long_answer_keys_still_match_by_edit_distance():
    """Past nltk's 2000-character guard the EXAM rule still holds: 'x'*3000 against
    'x'*2900 is 100 deletions, under 20% of 3000; 'y'*2900 is 2900 substitutions plus 100."""
    from exam_eval.grading.answer_check import matches

    assert matches("x" * 3000, ["x" * 2900])
    assert not matches("x" * 3000, ["y" * 2900])
    assert not matches("nectar " * 2000, ["nectar"])  # 500 times the key's length


def test_lone_surrogates_in_model_answers_are_written_readably(tmp_path):
    """A model's JSON reply may escape a lone surrogate: the grade line records U+FFFD,
    so the grades file stays UTF-8 and readable."""
    from exam_eval.grading.grade_files import read_grades
    from exam_eval.io.jsonl import dumps

    line = dumps(json.loads(grade_json()) | {"answer": json.loads('"4 \\ud800"')})
    assert "\ud800" not in line and "4 \ufffd" in line
    path = tmp_path / "g.jsonl"
    path.write_bytes((line + "\n").encode("utf-8"))
    assert read_grades(path)[0].answer == "4 \ufffd"


def test_generated_item_with_a_lone_surrogate_is_not_read(tmp_path):
    """A model's JSON answer may hold half of an escaped emoji ("\\ud83d"): the item went on
    to md5 and the writer, a UnicodeEncodeError traceback. It is not read; the others are,
    and a query left with nothing is a failed query (exit 3), as for any unusable answer."""
    topics = tmp_path / "topics.tsv"
    topics.write_text("101\thow do honey bees make honey\n102\tcauses of the french revolution\n")
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"query_id": "101", "response": '{"questions": ["Why? \\ud83d", "What is nectar?"]}'})
                      + "\n" + json.dumps({"query_id": "102", "response": '{"questions": ["\\ud83d"]}'}) + "\n")
    out = tmp_path / "bank.jsonl"
    res = run("genq", "generate", "--backend", "scripted", "--script", script, "--retries", "0", topics, "-o", out)
    assert res.escaped is None and res.code == 3, (res.escaped, res.stderr)
    assert [json.loads(line)["text"] for line in out.read_text().splitlines()] == ["What is nectar?"]


def test_nuggetizer_answer_with_a_lone_surrogate_is_asked_again(tmp_path):
    """ast.literal_eval("['\\ud83d']") gives a lone surrogate: the nugget reached the next
    prompt's hashing, a UnicodeEncodeError traceback. The answer is unparsed (asked again,
    then the topic fails: exit 3), like any unusable answer."""
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"match": ["You are NuggetizeLLM,"], "output": "['Bees \\ud83d make honey']"}) + "\n"
                      + json.dumps({"match": ["NuggetizeScoreLLM"], "output": "['vital']"}) + "\n")
    out = tmp_path / "nuggets.jsonl"
    res = run("genq", "nuggetize", "--backend", "scripted", "--script", script, "--qrels", DEMO / "qrels.txt",
              "--passages", DEMO / "passages.jsonl", DEMO / "topics.tsv", "--no-cache", "--retries", "1", "-o", out)
    assert res.escaped is None and res.code == 3, (res.escaped, res.stderr)
    assert "did not parse" in res.last_line


@pytest.mark.parametrize("answer,field", [('{"error": "I cannot help.", "codes": ["E42"]}', "questions"),
                                          ('{"answer": "Many causes.", "confidence": ["high"]}', "questions"),
                                          ('{"questions": ["What is nectar?"]}', "nuggets")])
def test_a_list_under_another_key_is_no_list_of_items(answer, field):
    from exam_eval.genq.parse import parse_items

    assert parse_items(answer, field) is None


def test_a_list_under_a_container_key_still_is():
    from exam_eval.genq.parse import parse_items

    assert parse_items('{"items": ["What is A?", "Why B?"]}', "questions") == ["What is A?", "Why B?"]
    assert parse_items('{"nugget_list": ["A fact."]}', "nuggets") == ["A fact."]


def test_blank_nuggets_of_a_model_are_not_written():
    from exam_eval.genq.nuggetize import NuggetizeResult, TopicNuggets

    t = TopicNuggets("101", "honey", [], nuggets=["", "Real nugget.", " \t"], importance=["okay", "vital", "okay"])
    assert [(i.text, i.importance) for i in NuggetizeResult([t], None, None).bank()] == [("Real nugget.", "vital")]


# ---- servers that fail, interrupts of the chat commands ----------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("status", [200, 500])
def test_server_answering_json_nested_without_end(status):
    """json.loads of an HTTP body nested 10^5 deep raised RecursionError out of the client
    (a traceback); it is a malformed answer like any other: retried, then the call fails."""
    from openai_stub import OpenAIStub, Reply

    from exam_eval.backends.http_client import OpenAIClient

    deep = b"[" * 100_000 + b"]" * 100_000
    with OpenAIStub([Reply(status, body=deep)] * 2) as stub:
        [res] = OpenAIClient(stub.url, "m", backoff=0.01, timeout=5.0, max_retries=1).chat(
            [[{"role": "user", "content": "hi"}]])
    assert res.text is None and res.attempts == 2 and "2 attempts" in res.error


@pytest.mark.parametrize("existing", [None, "a grades file of an earlier run\n"])
def test_assign_and_nuggetize_leave_the_output_alone_when_every_call_fails(tmp_path, existing):
    """Every call failing (HTTP 500 after the retries) replaced -o with an empty file."""
    from openai_stub import OpenAIStub, Reply

    reports = tmp_path / "reports.jsonl"
    reports.write_text(report_line("r1", [{"text": "Bees make honey.", "citations": []}]))
    out = tmp_path / "out.jsonl"
    if existing is not None:
        out.write_text(existing)
    with OpenAIStub(lambda req: Reply(500, text="down")) as stub:
        common = ["--model", "m", "--base-url", stub.url, "--max-retries", "0", "--no-cache", "-o", out]
        res = run("nuggets", "assign", "--reports", reports, "--bank", DEMO / "nuggetized.jsonl",
                  "--topics", DEMO / "topics.tsv", *common)
        assert res.code == 3 and "(nothing written)" in res.stderr, res.stderr
        assert (out.read_text() if out.exists() else None) == existing
        res = run("genq", "nuggetize", DEMO / "topics.tsv", "--run", DEMO / "good.run", "--depth", "2",
                  "--passages", DEMO / "passages.jsonl", *common, "--force")
        assert res.code == 3 and "(nothing written)" in res.stderr, res.stderr
        assert (out.read_text() if out.exists() else None) == existing


def test_a_bank_is_neither_written_nor_replaced_when_every_query_fails(tmp_path):
    topics = tmp_path / "topics.tsv"
    topics.write_text("101\thoney bees\n")
    script = tmp_path / "script.jsonl"
    script.write_text('{"query_id": "101", "fail": "boom"}\n')
    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"query_id": "101", "item_id": "101/x", "kind": "question", "text": "Old question?"}\n')
    res = run("genq", "--backend", "scripted", "--script", script, topics, "-o", bank, "--force")
    assert res.escaped is None and res.code == 3, res.stderr
    assert "no items: nothing is written" in res.stderr
    assert bank.read_text() == '{"query_id": "101", "item_id": "101/x", "kind": "question", "text": "Old question?"}\n'
    new = tmp_path / "new.jsonl"
    res = run("genq", "--backend", "scripted", "--script", script, topics, "-o", new)
    assert res.code == 3 and not new.exists()


def test_sigterm_stops_assign_as_ctrl_c_does_and_keeps_the_answers_that_came(tmp_path):
    """SIGTERM killed exam-nuggets assign outright (no message, nothing committed), and a
    Ctrl-C threw away the answers of the 256-window chunk in flight: the rerun asked every
    window again. Now it stops with status 130 and the five answers that came are cached:
    the rerun asks the other seven only."""
    import json
    import os
    import subprocess
    import sys

    from openai_stub import OpenAIStub, Reply, interrupt_when_asked

    reports = tmp_path / "reports.jsonl"
    reports.write_text("".join(json.dumps({"metadata": {"run_id": f"r{i}", "topic_id": "101", "team_id": "t"},
                                           "responses": [{"text": f"Bees make honey, report {i}.", "citations": []}],
                                           "references": []}) + "\n" for i in range(12)))
    five = "['support', 'support', 'not_support', 'support', 'partial_support']"
    cache, out = tmp_path / "c.sqlite", tmp_path / "a.jsonl"
    turn = {"n": 0}

    def five_then_hang(req):
        turn["n"] += 1
        return Reply(text=five) if turn["n"] <= 5 else Reply(delay=1000)

    def argv(url):
        return [sys.executable, "-c", "import exam_eval.commands.nuggets as m; m.main()", "assign", "--reports",
                str(reports), "--bank", str(DEMO / "nuggetized.jsonl"), "--topics", str(DEMO / "topics.tsv"),
                "--backend", "endpoint", "--base-url", url, "--model", "m", "--concurrency", "4",
                "--cache", str(cache), "-o", str(out)]

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]), EXAM_EVAL_PROGRESS="0")
    with OpenAIStub(five_then_hang) as stub:
        # the sixth request is the first that hangs; waiting for 8 (four in flight) failed on a
        # loaded machine, where sub-millisecond replies' jitter shrank the adaptive window to 2
        # (7 requests came); a second is time enough to read the answers already sent
        code, err = interrupt_when_asked(argv(stub.url), env, stub, 6, settle=1.0)
        port = stub.port_in_use
    assert code == 130, err
    assert err.splitlines()[-1] == ("exam-nuggets: interrupted; the answers that came are cached: run the same "
                                    "command again to go on") and "Traceback" not in err, err
    assert not out.exists()
    with OpenAIStub(lambda r: five, port=port) as stub:  # the same server, restarted: the cache answers for it
        done = subprocess.run(argv(stub.url), capture_output=True, text=True, env=env, timeout=120)
        asked = len(stub.requests)
    assert done.returncode == 0, done.stderr
    assert asked == 7
    assert len(out.read_text().splitlines()) == 12 * 5  # a line per (report, nugget)
