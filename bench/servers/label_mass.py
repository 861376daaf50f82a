#!/usr/bin/env python3
"""How much of a served judge's first-token probability falls on a rating prompt's labels.

    .venv/bin/python bench/servers/label_mass.py --base-url URL --model NAME --out FILE.json

(``bench/servers/llamacpp.py -- .venv/bin/python bench/servers/label_mass.py --out F`` starts
llama.cpp's server with SmolLM2 for it: URL and NAME then come from $OPENAI_BASE_URL and
$OPENAI_MODEL.)

On ~20 (passage, question) pairs of the demo collection (queries 101 and 102; for each a
passage the human judges rated 3 and one they rated 0; the first 5 questions of each query):

1. ``exam-grade --backend endpoint ... --prompt question-selfrating --no-cache`` as a user
   runs it; every grade line is kept (answer, grade, probs and whatever else it writes).
2. One chat request per pair with the messages the endpoint back end sends
   (``EndpointBackend.messages``), ``logprobs: true, top_logprobs: 20, max_tokens: 1,
   temperature: 0``: the first token's alternatives as the server gives them (raw JSON), and
   the label mass = the sum of exp(logprob) over the alternatives whose stripped text is
   one of the prompt's labels ("0".."5"), besides the mass of all 20 alternatives.

A server that gives no logprobs (``transformers serve``) is recorded as such.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

QUERIES = ("101", "102")
QUESTIONS_PER_QUERY = 5


def demo_pairs(data: Path) -> tuple[list[dict], list[str], list[str]]:
    """The chosen pairs, and the bank and run lines that make exam-grade grade exactly them."""
    topics = dict(line.split("\t", 1) for line in (data / "topics.tsv").read_text().splitlines() if line.strip())
    passages = {}
    for line in (data / "passages.jsonl").read_text().splitlines():
        row = json.loads(line)
        passages[row["doc_id"]] = row["text"]
    qrels: dict[str, list[tuple[str, int]]] = {}
    for line in (data / "qrels.txt").read_text().splitlines():
        qid, _, doc, label = line.split()
        qrels.setdefault(qid, []).append((doc, int(label)))
    bank_lines, run_lines, pairs = [], [], []
    for qid in QUERIES:
        questions = [json.loads(line) for line in (data / "questions.jsonl").read_text().splitlines()
                     if json.loads(line)["query_id"] == qid][:QUESTIONS_PER_QUERY]
        bank_lines += [json.dumps(q) for q in questions]
        best = next(doc for doc, label in qrels[qid] if label == 3)
        worst = next(doc for doc, label in qrels[qid] if label == 0)
        for rank, (doc, label) in enumerate(((best, 3), (worst, 0)), 1):
            run_lines.append(f"{qid} Q0 {doc} {rank} {3 - rank} demo")
            for q in questions:
                pairs.append({"query_id": qid, "doc_id": doc, "item_id": q["item_id"], "human_label": label,
                              "query": topics[qid].strip(), "question": q["text"], "passage": passages[doc]})
    return pairs, bank_lines, run_lines


def post(url: str, body: dict, timeout: float = 300) -> tuple[int, object, float]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    took = time.monotonic() - t0
    try:
        return status, json.loads(raw), took
    except ValueError:
        return status, raw.decode("utf-8", "replace"), took


def first_token(base_url: str, model: str, messages: list[dict], labels: tuple[str, ...], top: int) -> dict:
    status, body, took = post(base_url.rstrip("/") + "/chat/completions", {
        "model": model, "messages": messages, "max_tokens": 1, "temperature": 0, "logprobs": True,
        "top_logprobs": top})
    out: dict = {"status": status, "seconds": round(took, 3)}
    if status != 200 or not isinstance(body, dict):
        out["error"] = body if isinstance(body, str) else json.dumps(body)[:500]
        return out
    choice = body["choices"][0]
    out["text"] = choice["message"].get("content")
    out["finish_reason"] = choice.get("finish_reason")
    out["usage"] = body.get("usage")
    lp = choice.get("logprobs")
    if not lp or not lp.get("content"):
        out["logprobs"] = None
        return out
    tok = lp["content"][0]
    alts = [(a["token"], a["logprob"]) for a in tok.get("top_logprobs") or []]
    out["token"], out["token_logprob"] = tok["token"], tok["logprob"]
    out["top"] = [[t, round(v, 5)] for t, v in alts]
    label_set = set(labels)
    per_label: dict[str, float] = {}
    for t, v in alts:
        if t.strip() in label_set and v is not None and math.isfinite(v):
            per_label[t.strip()] = per_label.get(t.strip(), 0.0) + math.exp(v)
    out["label_probs"] = {k: round(v, 6) for k, v in sorted(per_label.items())}
    out["label_mass"] = round(sum(per_label.values()), 6)
    out["top_mass"] = round(sum(math.exp(v) for _, v in alts if v is not None and math.isfinite(v)), 6)
    out["first_is_label"] = tok["token"].strip() in label_set
    return out


def run_exam_grade(base_url: str, model: str, prompt: str, tmp: Path, bank_lines, run_lines, data: Path,
                   extra: list[str]) -> tuple[list[dict], dict]:
    bank, run, out = tmp / "bank.jsonl", tmp / "pairs.run", tmp / "grades.jsonl"
    bank.write_text("\n".join(bank_lines) + "\n")
    run.write_text("\n".join(run_lines) + "\n")
    args = ["--backend", "endpoint", "--base-url", base_url, "--model", model, "--prompt", prompt,
            "--bank", str(bank), "--passages", str(data / "passages.jsonl"), "--topics", str(data / "topics.tsv"),
            "-o", str(out), "--no-cache", *extra, str(run)]
    cmd = [sys.executable, "-c", "from exam_eval.commands.grade import main; main()", *args]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, XDG_CACHE_HOME=str(tmp)))
    took = time.monotonic() - t0
    lines = [json.loads(line) for line in out.read_text().splitlines() if line.strip()] if out.exists() else []
    info = {"command": "exam-grade " + " ".join(args).replace(str(tmp) + "/", "").replace(str(data) + "/", "demo_data/"),
            "exit_code": proc.returncode, "seconds": round(took, 2), "stderr_tail": proc.stderr.strip()[-1500:]}
    return lines, info


def summarize(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"n": len(values), "min": round(min(values), 4), "median": round(statistics.median(values), 4),
            "max": round(max(values), 4), "mean": round(statistics.fmean(values), 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    ap.add_argument("--model", default=os.environ.get("OPENAI_MODEL"))
    ap.add_argument("--prompt", default="question-selfrating")
    ap.add_argument("--top-logprobs", type=int, default=20)
    ap.add_argument("--server", default="", help="what the server is, for the record")
    ap.add_argument("--note", default="", help="anything else for the record (the exam_eval commit ...)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--grade-arg", action="append", default=[], help="further exam-grade argument (repeatable)")
    args = ap.parse_args(argv)
    if not args.base_url or not args.model:
        ap.error("give --base-url and --model (or $OPENAI_BASE_URL and $OPENAI_MODEL)")

    import exam_eval
    from exam_eval.backends.endpoint import EndpointBackend
    from exam_eval.demo import demo_data_dir
    from exam_eval.grading.prompts import get_prompt
    from exam_eval.grading.types import GradeRequest

    data = demo_data_dir()
    prompt = get_prompt(args.prompt)
    pairs, bank_lines, run_lines = demo_pairs(data)
    backend = EndpointBackend(model=args.model, base_url=args.base_url)

    t0 = time.monotonic()
    for p in pairs:
        req = GradeRequest(prompt=prompt, query=p["query"], item_text=p["question"], context=p["passage"])
        p["first_token"] = first_token(args.base_url, args.model, backend.messages(req), prompt.labels,
                                       args.top_logprobs)
    direct_seconds = time.monotonic() - t0

    with tempfile.TemporaryDirectory(prefix="label-mass-") as tmp:
        grades, grade_info = run_exam_grade(args.base_url, args.model, args.prompt, Path(tmp), bank_lines,
                                            run_lines, data, args.grade_arg)
    by_pair = {(g["query_id"], g["doc_id"], g["item_id"]): g for g in grades}
    for p in pairs:
        g = by_pair.get((p["query_id"], p["doc_id"], p["item_id"]))
        p["exam_grade"] = None if g is None else {k: v for k, v in g.items() if k not in (
            "query_id", "doc_id", "item_id", "kind", "model", "prompt", "prompt_hash", "item_hash")}
        del p["passage"]

    firsts = [p["first_token"] for p in pairs]
    with_lp = [f for f in firsts if f.get("logprobs", True) is not None and "label_mass" in f]
    masses = [f["label_mass"] for f in with_lp]
    summary = {
        "pairs": len(pairs),
        "direct_requests_ok": sum(f["status"] == 200 for f in firsts),
        "logprobs_given": len(with_lp),
        "label_mass": summarize(masses),
        "top20_mass": summarize([f["top_mass"] for f in with_lp]),
        "first_token_not_a_label": sum(not f["first_is_label"] for f in with_lp),
        "first_tokens": sorted({f["token"] for f in with_lp}),
        "pairs_with_no_label_in_top": sum(not f["label_probs"] for f in with_lp),
        "direct_seconds_per_request": round(direct_seconds / max(len(pairs), 1), 3),
        "exam_grade_lines": len(grades),
        "exam_grade_parse_ok": sum(bool(g.get("parse_ok")) for g in grades),
        "exam_grade_with_probs": sum(g.get("probs") is not None for g in grades),
        "exam_grade_grades": {str(k): sum(g.get("grade") == k for g in grades)
                              for k in sorted({g.get("grade") for g in grades}, key=lambda x: (x is None, x))},
    }
    record = {
        "what": "first-token label mass of a served judge on the question-selfrating prompt, and exam-grade's "
                "grades of the same pairs (bench/servers/label_mass.py)",
        "server": args.server, "note": args.note, "exam_eval_from": str(Path(exam_eval.__file__).parent),
        "model": args.model, "prompt": args.prompt, "top_logprobs": args.top_logprobs,
        "labels": list(prompt.labels), "exam_grade": grade_info, "summary": summary, "pairs": pairs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(summary, indent=1), file=sys.stderr)
    return 0 if summary["direct_requests_ok"] == len(pairs) else 1


if __name__ == "__main__":
    sys.exit(main())
