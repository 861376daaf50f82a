"""exam-genq generate: a real HTTP endpoint on 127.0.0.1, the scripted back end, merging
with edited banks, and bad input. Runs the command as a subprocess, as a user would."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import threading
from pathlib import Path

import pytest
from openai_stub import OpenAIStub, Reply, interrupt_when_asked
from refusals import one_line_refusal

pytestmark = pytest.mark.timeout(120)

ENV = {"EXAM_EVAL_PROGRESS": "0"}


def md5(s: str) -> str:
    return hashlib.md5(s.strip().encode()).hexdigest()


def bank_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# Canned model answers, per query: what each call returns, in order.
CANNED = {
    "q1": [f'```json\n{{"questions": ["What is {x}?", "Where is {x}?"]}}\n```' for x in ["alpha"]],
    "q2": [Reply(429, retry_after=0), '{"questions": ["Who made beta?", "Who made beta?", "Why beta?"]}'],
    "q3": [Reply(500), Reply(502), "1. How does gamma start?\n2. When does gamma end?"],
    "q4": [Reply(200, text='{"questions": ["never seen"]}', delay=4.0), "['Is delta big?', 'Is delta old?']"],
    "q5": [Reply(200, body=b'{"choices": [{"message": {"content": "trunc')] * 10,
    "q6": ["I cannot answer that, sorry."] * 10,
}
GOOD = {  # the only texts that may appear in the bank
    "q1": ["What is alpha?", "Where is alpha?"],
    "q2": ["Who made beta?", "Why beta?"],
    "q3": ["How does gamma start?", "When does gamma end?"],
    "q4": ["Is delta big?", "Is delta old?"],
}
TOPICS = "".join(f"{q}\tquery about {q}\n" for q in CANNED)


def scripted_responder():
    calls: dict[str, int] = {}
    lock = threading.Lock()

    def respond(req):
        qid = re.search(r"query about (q\d)", req.prompt_text).group(1)
        with lock:
            i = calls.get(qid, 0)
            calls[qid] = i + 1
        script = CANNED[qid]
        return script[min(i, len(script) - 1)]

    return respond, calls


def test_endpoint_with_429_500_timeout_malformed(tmp_path, run_cli):
    topics = write(tmp_path / "topics.tsv", TOPICS)
    out = tmp_path / "bank.jsonl"
    respond, calls = scripted_responder()
    with OpenAIStub(respond) as stub:
        r = run_cli("exam-genq", "--model", "stub-model", "--base-url", stub.url, "--timeout", "1.5",
                    "--max-retries", "2", "--retries", "2", "--concurrency", "4", str(topics), "-o", str(out),
                    env={**ENV, "OPENAI_API_KEY": "sk-test"})
    assert r.returncode == 3, r.stderr
    items = bank_lines(out)
    got: dict[str, list[str]] = {}
    for it in items:
        got.setdefault(it["query_id"], []).append(it["text"])
        assert it["kind"] == "question"
        assert it["item_id"] == f"{it['query_id']}/{md5(it['text'])}"
    assert got == GOOD  # complete for parseable queries, nothing invented, duplicates dropped
    # failures are counted and named
    assert "2 queries failed" in r.stderr
    assert re.search(r"q5: malformed JSON.*3 attempts", r.stderr)
    assert re.search(r"q6: no list of questions in the answer.*after 3 calls", r.stderr)
    # q5 was one call retried by the client; q6 was asked three times (retries=2)
    assert calls["q5"] == 3 and calls["q6"] == 3 and calls["q2"] == 2 and calls["q3"] == 3
    assert all(req.headers.get("Authorization") == "Bearer sk-test" for req in stub.requests)
    assert {req.json["model"] for req in stub.requests} == {"stub-model"}
    assert all(req.json["messages"][0]["role"] == "user" for req in stub.requests)


def _script(path: Path, rows: list[dict]) -> Path:
    return write(path, "".join(json.dumps(r) + "\n" for r in rows))


def test_scripted_reask_and_car_facets(tmp_path, run_cli):
    topics = write(tmp_path / "car.jsonl", json.dumps({
        "query_id": "tqa:L1", "text": "The Skin",
        "subtopics": [{"facet_id": "T1", "text": "Dermis"}, {"facet_id": "T2", "text": "Epidermis"}]}) + "\n")
    script = _script(tmp_path / "s.jsonl", [
        {"query_id": "tqa:L1", "facet_id": "T1", "response": "Certainly, here are nuggets."},
        {"query_id": "tqa:L1", "facet_id": "T1", "response": '{"nuggets": ["Collagen fibres", "Blood vessels"]}'},
        {"query_id": "tqa:L1", "facet_id": "T2", "response": '{"nuggets": ["Keratin layer"]}'},
    ])
    r = run_cli("exam-genq", "--style", "car", "--kind", "nugget", "--backend", "scripted", "--script", str(script),
                str(topics), env=ENV)
    assert r.returncode == 0, r.stderr
    items = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(i["facet_id"], i["text"]) for i in items] == [("T1", "Collagen fibres"), ("T1", "Blood vessels"),
                                                          ("T2", "Keratin layer")]
    for i in items:
        assert i["kind"] == "nugget"
        assert i["item_id"] == f"tqa:L1/{i['facet_id']}/{md5(i['text'])}"
    assert "3 calls" in r.stderr


def test_dry_run_prompts_calls_tokens(tmp_path, run_cli):
    topics = write(tmp_path / "t.tsv", "1\tdo cats purr\n2\twhy is the sky blue\n")
    r = run_cli("exam-genq", "--dry-run", "--kind", "nugget", "--n", "7", str(topics), env=ENV)
    assert r.returncode == 0, r.stderr
    blocks = re.findall(r"^### (\S+)  \((\d+) tokens\)\n(.*?)\n\n", r.stdout, re.DOTALL | re.MULTILINE)
    assert [b[0] for b in blocks] == ["1", "2"]
    assert blocks[1][2].startswith("Break the query 'why is the sky blue' into concise nuggets that must be "
                                   "mentioned. Generate 7 concise insightful nuggets")
    total = sum(int(b[1]) for b in blocks)
    assert f"# 2 calls (0 queries/facets already in the merged bank), {total} input tokens" in r.stdout
    # a whitespace split undercounts (punctuation is separate), but is the right order of magnitude
    words = sum(len(b[2].split()) for b in blocks)
    assert words < total < 2 * words


EDITED = (
    # a human's edits: reordered keys, spacing, unicode escapes, an edited text, a hand-added item
    '{"query_id": "q1", "item_id": "q1/' + md5("What is alpha?") + '", "kind": "question", "text": "What is alpha?"}\n'
    '{"text":"What is ALPHA, really?",  "kind":"question","query_id":"q1","item_id":"q1/' + md5("Where is alpha?") + '"}\n'
    '{"query_id": "q1", "item_id": "q1/custom-1", "kind": "question", "text": "Caf\\u00e9 or caf\u00e9?", "note": "added by hand"}\n'
    '{"query_id": "q2", "item_id": "q2/' + md5("Why beta?") + '", "kind": "question", "text": "Why beta?"}'  # no final newline
)


def test_merge_keeps_edited_lines_byte_identical(tmp_path, run_cli):
    topics = write(tmp_path / "t.tsv", "q1\tone\nq2\ttwo\nq3\tthree\n")
    bank = tmp_path / "bank.jsonl"
    bank.write_bytes(EDITED.encode("utf-8"))
    script = _script(tmp_path / "s.jsonl", [
        {"query_id": "q1", "response": '["MUST NOT APPEAR 1"]'},
        {"query_id": "q2", "response": '["MUST NOT APPEAR 2"]'},
        {"query_id": "q3", "response": '{"questions": ["Three?", "Thrice?"]}'},
    ])
    r = run_cli("exam-genq", "--backend", "scripted", "--script", str(script), "--merge-with", str(bank),
                "-o", str(bank), str(topics), env=ENV)
    assert r.returncode == 1 and "--force" in r.stderr  # the output exists
    assert bank.read_bytes() == EDITED.encode("utf-8")
    r = run_cli("exam-genq", "--backend", "scripted", "--script", str(script), "--merge-with", str(bank),
                "-o", str(bank), "--force", str(topics), env=ENV)
    assert r.returncode == 0, r.stderr
    data = bank.read_bytes()
    assert data.startswith(EDITED.encode("utf-8") + b"\n")
    old_lines = EDITED.encode("utf-8").split(b"\n")
    new_lines = data.split(b"\n")
    assert new_lines[:len(old_lines)] == old_lines
    added = [json.loads(x) for x in new_lines[len(old_lines):] if x]
    assert [(a["query_id"], a["text"]) for a in added] == [("q3", "Three?"), ("q3", "Thrice?")]
    assert b"MUST NOT APPEAR" not in data
    assert "1 calls" in r.stderr or "(1 calls)" in r.stderr


def test_merge_with_gzipped_workbench_bank(tmp_path, run_cli):
    line = json.dumps({"query_id": "q1", "query_text": "one", "items": [
        {"query_id": "q1", "question_id": "q1/abc", "question_text": "Kept?"}]}) + "\n"
    gz = tmp_path / "wb.jsonl.gz"
    gz.write_bytes(gzip.compress(line.encode()))
    topics = write(tmp_path / "t.tsv", "q1\tone\nq2\ttwo\n")
    script = _script(tmp_path / "s.jsonl", [{"query_id": "q2", "response": "- Two?"}])
    out = tmp_path / "merged.jsonl.gz"
    r = run_cli("exam-genq", "--backend", "scripted", "--script", str(script), "--merge-with", str(gz),
                "-o", str(out), str(topics), env=ENV)
    assert r.returncode == 0, r.stderr
    text = gzip.decompress(out.read_bytes()).decode()
    assert text.startswith(line)
    assert json.loads(text.splitlines()[1])["text"] == "Two?"


def test_merge_nothing_missing_makes_no_call(tmp_path, run_cli):
    bank = write(tmp_path / "b.jsonl", '{"query_id": "q1", "item_id": "q1/x", "kind": "question", "text": "A?"}\n')
    topics = write(tmp_path / "t.tsv", "q1\tone\n")
    r = run_cli("exam-genq", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--merge-with", str(bank),
                str(topics), env=ENV)
    assert r.returncode == 0, r.stderr
    assert r.stdout == bank.read_text()
    # nuggets are a different kind: the question bank does not cover them
    r = run_cli("exam-genq", "--dry-run", "--kind", "nugget", "--merge-with", str(bank), str(topics), env=ENV)
    assert "# 1 calls (0 queries/facets already in the merged bank)" in r.stdout
    r = run_cli("exam-genq", "--dry-run", "--merge-with", str(bank), str(topics), env=ENV)
    assert "# 0 calls (1 queries/facets already in the merged bank)" in r.stdout


def test_merge_in_the_dl_style_counts_a_querys_faceted_items(tmp_path, run_cli):
    """A query whose questions are all under a facet has questions: the dl style (one call
    a query) asks nothing for it; the car style still asks for its facets without any."""
    bank = write(tmp_path / "b.jsonl", '{"query_id": "q1", "facet_id": "f1", "kind": "question", "text": "A?"}\n')
    topics = write(tmp_path / "t.tsv", "q1\tone\nq2\ttwo\n")
    r = run_cli("exam-genq", "--dry-run", "--merge-with", str(bank), str(topics), env=ENV)
    assert "# 1 calls (1 queries/facets already in the merged bank)" in r.stdout and "### q2" in r.stdout
    car = write(tmp_path / "car.jsonl", json.dumps({"query_id": "q1", "text": "one", "subtopics": [
        {"facet_id": "f1", "text": "A"}, {"facet_id": "f2", "text": "B"}]}) + "\n")
    r = run_cli("exam-genq", "--dry-run", "--style", "car", "--merge-with", str(bank), str(car), env=ENV)
    assert "# 1 calls (1 queries/facets already in the merged bank)" in r.stdout, r.stdout


@pytest.mark.parametrize("content,where", [
    ('{"query_id": "1", "text": "ok"}\n{"query_id": "2", "text": \n', ":2:"),
    ('{"query_id": "1", "text": "ok"}\n{"query_id": "2"}\n', ":2:"),
    ("1\tone\n2 two\n", ":2:"),
    ("1\tone\n1\tagain\n", ":2:"),
    ("", "empty"),
    ("\n\n", "empty"),
])
def test_bad_topics_exit_2_located_and_no_output(tmp_path, run_cli, content, where):
    topics = write(tmp_path / "topics.x", content)
    script = _script(tmp_path / "s.jsonl", [{"query_id": "1", "response": "- A?"}])
    out = tmp_path / "out.jsonl"
    r = run_cli("exam-genq", "--backend", "scripted", "--script", str(script), str(topics), "-o", str(out), env=ENV)
    line = one_line_refusal(r, "exam-genq")
    assert str(topics) in line and where in line
    assert not out.exists()


def test_car_topics_with_a_repeated_facet_id(tmp_path, run_cli):
    topics = write(tmp_path / "car.jsonl", json.dumps({"query_id": "L1", "text": "Skin", "subtopics": [
        {"facet_id": "T1", "text": "Dermis"}, {"facet_id": "T1", "text": "Epidermis"}]}) + "\n")
    r = run_cli("exam-genq", "--dry-run", "--style", "car", str(topics), env=ENV)
    assert r.returncode == 2 and "query L1 has facet id T1 twice" in r.stderr


def test_unknown_style_and_bad_merge_bank(tmp_path, run_cli):
    topics = write(tmp_path / "t.tsv", "1\tone\n")
    r = run_cli("exam-genq", "--style", "trec-rag", str(topics), env=ENV)
    assert r.returncode == 1 and "--style: unknown style 'trec-rag'" in r.stderr  # a bad option value: usage
    bank = write(tmp_path / "b.jsonl", '{"query_id": "1", "item_id": "1/x", "kind": "question", "text": "A?"}\n{oops\n')
    out = tmp_path / "o.jsonl"
    r = run_cli("exam-genq", "--dry-run", "--merge-with", str(bank), str(topics), "-o", str(out), env=ENV)
    assert r.returncode == 2 and f"{bank}:2:" in r.stderr
    assert not out.exists()
    script = write(tmp_path / "s.jsonl", '{"query_id": "1"}\n')
    r = run_cli("exam-genq", "--backend", "scripted", "--script", str(script), str(topics), env=ENV)
    assert r.returncode == 2 and f"{script}:1:" in r.stderr


def test_no_key_on_the_command_line(run_cli):
    r = run_cli("exam-genq", "generate", "--help", env=ENV)
    assert r.returncode == 0
    assert "--api-key-env" in r.stdout and "--api-key " not in r.stdout
    assert "Examples" in r.stdout


def test_exam_prompt_python_list_and_cut_off_answer(tmp_path, run_cli):
    from openai_stub import chat_body

    topics = write(tmp_path / "t.tsv", "a\tfirst query\nb\tsecond query\n")

    def respond(req):
        if "first query" in req.prompt_text:
            assert req.prompt_text.endswith("Keep the questions short and in a Python list format.")
            return "```python\nquestions = ['Is it first?', 'Why first?']\n```"
        return chat_body('{"questions": ["Is it sec', finish_reason="length")

    with OpenAIStub(respond) as stub:
        r = run_cli("exam-genq", "--prompt", "exam", "--model", "m", "--base-url", stub.url, "--retries", "0",
                    str(topics), env=ENV)
    assert r.returncode == 3
    assert [json.loads(x)["text"] for x in r.stdout.splitlines()] == ["Is it first?", "Why first?"]
    assert "b: no list of questions in the answer (cut off at --max-tokens)" in r.stderr
    r = run_cli("exam-genq", "--prompt", "exam", "--kind", "nugget", str(topics), env=ENV)
    assert r.returncode == 1 and "no generation prompt for family 'exam'" in r.stderr


def test_answers_are_cached_and_a_rerun_asks_nothing(tmp_path, run_cli):
    """Answers that parse are kept in the grade cache: the same command again makes no
    call and writes the same bank; --no-cache asks again; the nugget prompt (another
    prompt, other keys) takes none of the questions' answers."""
    topics = write(tmp_path / "t.tsv", "q1\tabout one\nq2\tabout two\n")
    script = _script(tmp_path / "s.jsonl", [
        {"query_id": "q1", "response": '{"questions": ["Is one odd?"]}'},
        {"query_id": "q2", "response": "No list here."},
        {"query_id": "q2", "response": '{"questions": ["Is two even?"]}'},
    ])
    cache, first, again = tmp_path / "c.sqlite", tmp_path / "b1.jsonl", tmp_path / "b2.jsonl"
    args = ["--backend", "scripted", "--script", str(script), "--cache", str(cache), str(topics)]
    r = run_cli("exam-genq", *args, "-o", first, env=ENV)
    assert r.returncode == 0 and "(3 calls, 0 from cache)" in r.stderr, r.stderr
    r = run_cli("exam-genq", *args, "-o", again, env=ENV)
    assert r.returncode == 0 and "(0 calls, 2 from cache)" in r.stderr, r.stderr
    assert again.read_bytes() == first.read_bytes() and len(bank_lines(first)) == 2
    r = run_cli("exam-genq", *args[:-3], "--no-cache", str(topics), env=ENV)
    assert r.returncode == 0 and "(3 calls, 0 from cache)" in r.stderr, r.stderr
    r = run_cli("exam-genq", *args, "--kind", "nugget", env=ENV)  # the nugget prompt: other prompts, other keys
    assert "from cache)" in r.stderr and "0 from cache" in r.stderr, r.stderr


def test_an_interrupt_keeps_the_answers_that_came(tmp_path):
    """Ctrl-C (here SIGTERM) while one query's call hangs: the others' answers are cached,
    the command says so (status 130, no bank written), and the rerun asks only the one."""
    import os
    import subprocess
    import sys

    topics = write(tmp_path / "t.tsv", "".join(f"q{i}\tquery about q{i}\n" for i in range(1, 5)))
    cache, out = tmp_path / "c.sqlite", tmp_path / "bank.jsonl"

    def answer(req, hang=True):
        qid = re.search(r"query about (q\d)", req.prompt_text).group(1)
        if qid == "q3" and hang:
            return Reply(delay=1000)
        return f'{{"questions": ["What is {qid}?"]}}'

    def argv(url):
        return [sys.executable, "-c", "import exam_eval.commands.genq as m; m.main()", "--model", "m", "--base-url",
                url, "--concurrency", "4", "--cache", str(cache), str(topics), "-o", str(out)]

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]), **ENV)
    with OpenAIStub(answer) as stub:
        code, err = interrupt_when_asked(argv(stub.url), env, stub, 4)  # the three answers read, q3 hanging
        port = stub.port_in_use
    assert code == 130, err
    assert err.splitlines()[-1] == ("exam-genq: interrupted; the answers that came are cached: run the same "
                                    "command again to go on") and "Traceback" not in err, err
    assert not out.exists()
    with OpenAIStub(lambda req: answer(req, hang=False), port=port) as stub:  # the same server, restarted
        done = subprocess.run(argv(stub.url), capture_output=True, text=True, env=env, timeout=120)
        asked = [re.search(r"query about (q\d)", req.prompt_text).group(1) for req in stub.requests]
    assert done.returncode == 0, done.stderr
    assert asked == ["q3"] and "(1 calls, 3 from cache)" in done.stderr, done.stderr
    assert [i["text"] for i in bank_lines(out)] == [f"What is q{i}?" for i in range(1, 5)]
