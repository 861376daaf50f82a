"""exam-grade --batch-out / --batch-in: the requests of the endpoint back end written for
the OpenAI Batch API or vLLM's run_batch, and their answers read back as the endpoint back
end reads a server's.

The answers come from one function of the request body, served live by a stand-in server
and written into a results file as a batch service writes it (some lines missing, some
errors, in reverse order): the grades read from the file must be the live ones."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from inproc import run
from openai_stub import OpenAIStub, chat_body
from refusals import one_line_refusal

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
RUNS = [DEMO / f"{name}.run" for name in ("good", "mediocre", "poor", "random")]
# what a grade line says of its pair and its judge: all must match between the two paths
FIELDS = ("grade", "probs", "answer", "parse_ok", "label_mass", "fallback", "reasoning", "served_model", "model",
          "prompt", "prompt_hash", "input_hash", "item_hash", "grader_hash", "kind")


def _n(body: dict) -> int:
    text = json.dumps(body["messages"], sort_keys=True)
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def answer(body: dict) -> dict:
    """The judge: a reply body decided by the request alone (the same live and in batch)."""
    n = _n(body)
    if "logprobs" in body:  # question self-rating, scored: most answers are labels with mass
        g = n % 6
        if n % 5 == 0:  # a chatty one: the labels hold little of the first token, read from the text
            return chat_body(f"- {g}: as the scale says", [{"-": math.log(0.8), str(g): math.log(0.1)}], model="m")
        return chat_body(str(g), [{str(g): math.log(0.85), str((g + 1) % 6): math.log(0.1)}], model="m")
    if n % 7 == 0:
        return chat_body("I cannot say.", model="m")  # unparsed
    return chat_body(f"##final score: {n % 4}", model="m")


def _setup(tmp_path, prompt):
    if prompt == "umbrela":
        return ["--prompt", "umbrela", "--topics", DEMO / "topics.tsv", "--passages", DEMO / "passages.jsonl",
                *RUNS]
    bank = tmp_path / "bank.jsonl"
    bank.write_text("".join(x + "\n" for x in (DEMO / "questions.jsonl").read_text().splitlines()
                            if json.loads(x)["query_id"] in ("101", "102")))
    return ["--prompt", "question-selfrating", "--bank", bank, "--passages", DEMO / "passages.jsonl", *RUNS]


def grade(*args):
    res = run("exam-grade", "--backend", "endpoint", "--model", "m", "--no-cache", *args)
    assert res.escaped is None, res.escaped
    return res


def lines(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def by_pair(rows):
    return {(g["query_id"], g["doc_id"], g.get("item_id")): {f: g.get(f) for f in FIELDS} for g in rows}


def service(requests, *, drop=(), errors=()):
    """The results file a batch service writes for ``requests`` (request lines)."""
    out = []
    for i, req in enumerate(requests):
        if i in drop:
            continue
        line = {"id": f"batch_req_{i}", "custom_id": req["custom_id"], "response": None, "error": None}
        if i in errors:
            if i % 2:
                line["error"] = {"code": "server_error", "message": f"boom {i}"}
            else:
                line["response"] = {"status_code": 500, "request_id": f"r{i}",
                                    "body": {"error": {"message": f"overloaded {i}"}}}
        else:
            line["response"] = {"status_code": 200, "request_id": f"r{i}", "body": answer(req["body"])}
        out.append(line)
    return out


def write_jsonl(path, rows):
    Path(path).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("prompt", ["umbrela", "question-selfrating"])
def test_answers_read_from_a_results_file_are_the_endpoint_back_ends_grades(tmp_path, prompt):
    args = _setup(tmp_path, prompt)
    with OpenAIStub(lambda req: answer(req.json)) as stub:
        live = grade("--base-url", stub.url, *args, "-o", tmp_path / "live.jsonl")
        sent = [r.json for r in stub.requests if r.is_chat]
    assert live.code in (0, None), live.stderr
    expected = by_pair(lines(tmp_path / "live.jsonl"))
    assert len(sent) >= 20 and len(expected) >= len(sent)
    if prompt == "question-selfrating":  # the judge rules were exercised: some grades read from the text
        assert any(g["fallback"] == "label mass below 0.5" for g in expected.values())
        assert any(g["probs"] for g in expected.values())
    else:
        assert any(not g["parse_ok"] for g in expected.values())

    out = tmp_path / "batch.jsonl"
    first = grade(*args, "-o", out, "--batch-out", tmp_path / "req.jsonl")
    assert first.code in (0, None), first.stderr
    assert not out.exists() or out.read_text() == ""  # nothing graded, nothing recorded
    requests = lines(tmp_path / "req.jsonl")
    # the bodies the endpoint back end sends, logprobs included for the scored prompt
    canon = sorted(json.dumps(b, sort_keys=True) for b in sent)
    assert sorted(json.dumps(r["body"], sort_keys=True) for r in requests) == canon
    assert all(r["method"] == "POST" and r["url"] == "/v1/chat/completions" for r in requests)
    ids = [r["custom_id"] for r in requests]
    assert len(set(ids)) == len(ids) and all(i.startswith("exam_eval:1:") for i in ids)
    assert len({i.split(":")[2] for i in ids}) == 1  # one grader

    dropped, failed = {1, 4, 9}, {2, 7}
    results = service(requests, drop=dropped, errors=failed)[::-1]
    write_jsonl(tmp_path / "results.jsonl", results)
    second = grade(*args, "-o", out, "--batch-in", tmp_path / "results.jsonl")
    assert second.code == 3, second.stderr
    # the error lines are named by file and line, the missing ones by custom_id
    where = {r["custom_id"]: n for n, r in enumerate(results, 1)}
    for i in failed:
        assert f"results.jsonl line {where[ids[i]]}: {ids[i]}:" in second.stderr
    for i in dropped:
        assert f"no answer for {ids[i]}" in second.stderr
    assert ("5 pairs have no answer in the results files (none, or an error) and were not recorded; a new "
            "--batch-out asks for them") in second.stderr
    assert ", 5 without an answer, " in second.stderr and "failed" not in second.stderr  # nothing was called
    got = by_pair(lines(out))
    left = {k for k in expected if k not in got}
    assert got == {k: v for k, v in expected.items() if k in got}
    assert len(got) == len(expected) - len(left) and left  # the five requests' pairs are missing

    third = grade(*args, "-o", out, "--batch-out", tmp_path / "req2.jsonl")
    assert third.code in (0, None), third.stderr
    again = lines(tmp_path / "req2.jsonl")
    assert sorted(r["custom_id"] for r in again) == sorted(ids[i] for i in dropped | failed)
    write_jsonl(tmp_path / "results2.jsonl", service(again))
    last = grade(*args, "-o", out, "--batch-in", tmp_path / "results2.jsonl")
    assert last.code in (0, None), last.stderr
    assert by_pair(lines(out)) == expected


def test_a_results_file_of_another_grader_is_refused_in_one_line(tmp_path):
    args = _setup(tmp_path, "umbrela")
    assert grade(*args, "--batch-out", tmp_path / "req.jsonl").code in (0, None)
    write_jsonl(tmp_path / "results.jsonl", service(lines(tmp_path / "req.jsonl")))
    out = tmp_path / "g.jsonl"
    # another token limit: other requests, another grader
    res = grade(*args, "--max-tokens", "32", "-o", out, "--batch-in", tmp_path / "results.jsonl")
    line = one_line_refusal(res)
    assert "results.jsonl:1:" in line and "another grader" in line
    assert not out.exists() or out.read_text() == ""
    # another prompt over the same pairs
    res = grade("--prompt", "sun", *args[2:], "-o", out,
                "--batch-in", tmp_path / "results.jsonl")
    assert res.code == 2 and "another grader" in res.stderr, res.stderr


def test_lines_that_are_not_results_are_refused_by_file_and_line(tmp_path):
    args = _setup(tmp_path, "umbrela")
    assert grade(*args, "--batch-out", tmp_path / "req.jsonl").code in (0, None)
    good = service(lines(tmp_path / "req.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(good[0]) + "\n{not json\n")
    res = grade(*args, "-o", tmp_path / "g.jsonl", "--batch-in", bad)
    assert "bad.jsonl:2:" in one_line_refusal(res)
    assert not (tmp_path / "g.jsonl").exists() or (tmp_path / "g.jsonl").read_text() == ""
    write_jsonl(bad, [good[0], dict(good[1], custom_id="request-1")])
    res = grade(*args, "-o", tmp_path / "g.jsonl", "--batch-in", bad)
    assert res.code == 2 and "bad.jsonl:2:" in res.stderr and "--batch-out" in res.stderr


def test_files_are_split_at_the_batch_apis_limits(tmp_path, monkeypatch):
    from exam_eval.backends import batch_files

    args = _setup(tmp_path, "umbrela")
    assert grade(*args, "--batch-out", tmp_path / "whole.jsonl").code in (0, None)
    whole = (tmp_path / "whole.jsonl").read_text().splitlines(keepends=True)
    monkeypatch.setattr(batch_files, "MAX_REQUESTS", 7)
    assert grade(*args, "--batch-out", tmp_path / "req.jsonl").code in (0, None)
    parts = [tmp_path / "req.jsonl"] + [tmp_path / f"req-{i}.jsonl" for i in range(2, -(-len(whole) // 7) + 1)]
    got = [p.read_text().splitlines(keepends=True) for p in parts]
    assert all(len(g) == 7 for g in got[:-1]) and 1 <= len(got[-1]) <= 7
    assert sum(got, []) == whole
    monkeypatch.setattr(batch_files, "MAX_REQUESTS", 50_000)
    limit = max(len(x.encode()) for x in whole) * 3
    monkeypatch.setattr(batch_files, "MAX_BYTES", limit)
    assert grade(*args, "--batch-out", tmp_path / "b.jsonl").code in (0, None)
    sizes = [p.stat().st_size for p in sorted(tmp_path.glob("b*.jsonl"))]
    assert len(sizes) >= len(whole) // 3 and max(sizes) <= limit
    assert sum(sizes) == sum(len(x.encode()) for x in whole)


def test_shards_split_the_requests(tmp_path):
    args = _setup(tmp_path, "umbrela")
    assert grade(*args, "--batch-out", tmp_path / "all.jsonl").code in (0, None)
    ids = {r["custom_id"] for r in lines(tmp_path / "all.jsonl")}
    shards = []
    for i in (1, 2):
        assert grade(*args, "--shard", f"{i}/2", "--batch-out", tmp_path / f"s{i}.jsonl").code in (0, None)
        shards.append({r["custom_id"] for r in lines(tmp_path / f"s{i}.jsonl")})
    assert shards[0] | shards[1] == ids and not shards[0] & shards[1] and all(shards)


@pytest.mark.parametrize("extra, said", [
    (["--backend", "scripted"], "--backend endpoint"),
    (["--batch-in", "x.jsonl"], "give one"),
    (["--dry-run"], "--dry-run"),
])
def test_batch_flags_refused_where_they_cannot_work(tmp_path, extra, said):
    args = _setup(tmp_path, "umbrela")
    res = run("exam-grade", "--model", "m", "--no-cache", *args, "--batch-out", tmp_path / "req.jsonl",
              *(["--backend", "endpoint"] if "--backend" not in extra else []), *extra)
    assert said in one_line_refusal(res, code=1)
    assert not (tmp_path / "req.jsonl").exists()


def test_batch_out_refuses_llm_verification(tmp_path):
    """--verify llm asks a second call after each answer, which a batch file cannot hold."""
    args = [a if a != "question-selfrating" else "question-extraction" for a in _setup(tmp_path, "question-selfrating")]
    res = run("exam-grade", "--backend", "endpoint", "--model", "m", "--no-cache", *args, "--verify", "llm",
              "--batch-out", tmp_path / "req.jsonl")
    assert "--verify llm asks a second call after each answer" in one_line_refusal(res, code=1)
    assert not (tmp_path / "req.jsonl").exists()


def test_answers_for_requests_this_run_does_not_ask_are_named_and_not_used(tmp_path):
    """The results of the whole pool, read by one shard: the other shard's answers are left."""
    args = _setup(tmp_path, "umbrela")
    assert grade(*args, "--batch-out", tmp_path / "all.jsonl").code in (0, None)
    everything = lines(tmp_path / "all.jsonl")
    assert grade(*args, "--shard", "1/2", "--batch-out", tmp_path / "s1.jsonl").code in (0, None)
    ours = {r["custom_id"] for r in lines(tmp_path / "s1.jsonl")}
    write_jsonl(tmp_path / "results.jsonl", service(everything))
    out = tmp_path / "g.jsonl"
    res = grade(*args, "--shard", "1/2", "-o", out, "--batch-in", tmp_path / "results.jsonl")
    assert res.code in (0, None), res.stderr
    left = len(everything) - len(ours)
    assert 0 < left < len(everything)
    assert (f"{left:,} answers in the results files are for requests this run does not ask "
            "(pairs already graded, or of another --shard or pool): not used") in res.stderr
    assert len(lines(out)) >= len(ours)
