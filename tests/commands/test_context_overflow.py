"""A prompt longer than the model's context, in each command that talks to a server: one
line naming the prompt's size, the model's limit and the command's own flag; one refused
call, nothing more sent; what was answered kept; the run resumes once the flag is changed.
(A stand-in server words the refusal as transformers serve does; the real server's:
tests/servers/test_real_server_protocol.py.)"""

from __future__ import annotations

import json
import threading

from openai_stub import OpenAIStub, Reply

from exam_eval.demo import demo_data_dir

REFUSAL = Reply(400, json={"detail": "The prompt has 634 tokens, but the model takes at most 512, prompt and answer "
                                     "(`--max-model-len`)."})
SIZES = "a prompt of 634 tokens where the model takes at most 512 tokens, prompt and answer: the server refused it"


class Answers:
    """The first ``fit`` requests are answered with ``text``, then every one is refused."""

    def __init__(self, text: str, fit: int = 0):
        self.text, self.fit, self.lock = text, fit, threading.Lock()

    def __call__(self, request):
        with self.lock:
            self.fit -= 1
            return self.text if self.fit >= 0 else REFUSAL


def _one_line(stderr: str) -> str:
    said = [line for line in stderr.splitlines() if "takes at most" in line]
    assert len(said) == 1, stderr
    assert "Traceback" not in stderr and "(the server said: The prompt has 634 tokens" in said[0]
    return said[0]


def _grade_inputs(tmp_path):
    data = demo_data_dir()
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join([x + "\n" for x in (data / "questions.jsonl").read_text().splitlines()
                             if json.loads(x)["query_id"] == "101"][:3]))
    run = tmp_path / "r.run"
    run.write_text("".join([x + "\n" for x in (data / "good.run").read_text().splitlines()
                            if x.startswith("101 ")][:4]))
    return ["--bank", bank, "--passages", data / "passages.jsonl", "--topics", data / "topics.tsv", run]


def test_exam_grade_stops_at_the_first_prompt_too_long_and_resumes_with_the_flag(tmp_path, run_cli):
    out = tmp_path / "grades.jsonl"
    grade = ["exam-grade", "--backend", "endpoint", "--model", "m", "--prompt", "question-selfrating",
             "--concurrency", "1", "--no-cache", "-o", out, *_grade_inputs(tmp_path)]
    with OpenAIStub(Answers("4", fit=5)) as stub:
        res = run_cli(*grade, "--base-url", stub.url, env={"EXAM_EVAL_PROGRESS": "0"})
        stub.drain()
        sent = len(stub.requests)
    assert res.returncode == 3, res.stderr
    line = _one_line(res.stderr)
    assert line.startswith("exam-grade: 7 model calls failed and were not recorded: " + SIZES), line
    assert "run again with --max-input-tokens N (the passage is cut to fit N tokens" in line
    assert "a smaller --max-tokens" not in line  # the prompt alone was too long: the answer's share is no fix
    assert "the grades written to -o are kept (a rerun with the same flags resumes there" in line
    assert sent == 6  # 5 answered, 1 refused, 6 never sent
    written = out.read_bytes()
    assert len(written.splitlines()) == 5
    # the same flags: the 7 pairs left are asked (here the server takes them), into the same -o
    again = tmp_path / "again.jsonl"
    again.write_bytes(written)
    with OpenAIStub(Answers("4", fit=100)) as stub:
        res = run_cli(*[again if x == out else x for x in grade], "--base-url", stub.url,
                      env={"EXAM_EVAL_PROGRESS": "0"})
        stub.drain()
        assert len(stub.requests) == 7, res.stderr
    assert res.returncode == 0 and len(again.read_text().splitlines()) == 12, res.stderr
    # the flag changed: other settings, which go to a new -o; the first one stays as it was
    new = tmp_path / "cut.jsonl"
    with OpenAIStub(Answers("4", fit=100)) as stub:
        res = run_cli(*[new if x == out else x for x in grade], "--base-url", stub.url, "--max-input-tokens", "200",
                      env={"EXAM_EVAL_PROGRESS": "0"})
    assert res.returncode == 0, res.stderr
    assert len({(g["doc_id"], g["item_id"]) for g in map(json.loads, new.read_text().splitlines())}) == 12
    assert out.read_bytes() == written


def test_exam_genq_generate_names_the_answers_share(tmp_path, run_cli):
    topics = tmp_path / "topics.tsv"
    topics.write_text("".join((demo_data_dir() / "topics.tsv").read_text().splitlines(keepends=True)[:3]))
    with OpenAIStub(Answers('["q?"]')) as stub:
        res = run_cli("exam-genq", "generate", topics, "--base-url", stub.url, "--model", "m", "--concurrency", "1",
                      "--max-tokens", "300", "--no-cache", "-o", tmp_path / "bank.jsonl",
                      env={"EXAM_EVAL_PROGRESS": "0"})
        stub.drain()
        assert len(stub.requests) == 1
    assert res.returncode == 3
    line = _one_line(res.stderr)
    assert line.startswith("exam-genq: 3 queries failed and have no items: " + SIZES), line
    assert "run again with a smaller --max-tokens (the answer's share; now 300)" in line
    assert "nothing was kept (--no-cache)" in line
    assert not (tmp_path / "bank.jsonl").exists()


def test_exam_nuggets_assign_names_its_window(tmp_path, run_cli):
    data = demo_data_dir()
    reports = tmp_path / "reports.jsonl"
    reports.write_text("".join(json.dumps({"metadata": {"run_id": f"r{i}", "topic_id": "101", "team_id": "t"},
                                           "responses": [{"text": f"Bees make honey {i}.", "citations": []}],
                                           "references": []}) + "\n" for i in range(3)))
    bank = tmp_path / "nuggets.jsonl"
    bank.write_text("".join(x + "\n" for x in (data / "nuggets.jsonl").read_text().splitlines()
                            if json.loads(x)["query_id"] == "101"))
    cmd = ["exam-nuggets", "assign", "--reports", reports, "--bank", bank, "--topics", data / "topics.tsv",
           "--model", "m", "--concurrency", "1", "--retries", "0", "--cache", tmp_path / "cache.sqlite",
           "-o", tmp_path / "assigned.jsonl"]
    labels = repr(["support"] * 10)
    with OpenAIStub(Answers(labels, fit=1)) as stub:
        res = run_cli(*cmd, "--base-url", stub.url, env={"EXAM_EVAL_PROGRESS": "0"})
        stub.drain()
        assert len(stub.requests) == 2
        port = stub.port_in_use
    assert res.returncode == 3
    line = _one_line(res.stderr)
    assert line.startswith("exam-nuggets: 2 windows have no answer; their nuggets are not written: " + SIZES), line
    assert "run again with a smaller --window (nuggets per call; now 10)" in line
    assert "the answers received are cached" in line
    # the answered window is in the cache: the rerun (the server restarted with a longer context) asks the others
    with OpenAIStub(Answers(labels, fit=100), port=port) as stub:
        res = run_cli(*cmd, "--base-url", stub.url, env={"EXAM_EVAL_PROGRESS": "0"})
        stub.drain()
        assert len(stub.requests) == 2
    assert res.returncode == 0, res.stderr
