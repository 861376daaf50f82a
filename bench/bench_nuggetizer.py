#!/usr/bin/env python
"""The AutoNuggetizer pipeline's cost: the nuggetizer package against exam_eval, and
endpoint throughput by requests in flight.

    .venv/bin/python bench/bench_nuggetizer.py [--json FILE] [--latency 0.15]

1. **Calls and prompt tokens** for 1 topic x 20 reports (5 sentences each) x 30 nuggets,
   counted at a deterministic stand-in server (tests/nuggetizer_stub.py: the same answer
   for the same prompt; tokens = words and punctuation marks of every message):
   creation from 20 documents, importance, then assignment of every report, by the
   installed ``nuggetizer`` package's own ``Nuggetizer`` and by exam_eval
   (``genq.nuggetize``, ``grading.listwise``), plus exam-grade's one-nugget-per-call
   ``nuggetizer-assign`` on whole reports for comparison (the sentence unit would be
   5x that). Both must produce the same nuggets and assignments; the script says so.
2. **Throughput**: 512 chat calls through exam_eval's HTTP client against the stand-in
   answering after ``--latency`` seconds, at 8, 64 and 256 in flight.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]
import common  # noqa: E402

QUERY = "how do vaccines train the immune system"


def _docs(n: int) -> list[str]:
    words = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
             "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()
    return [f"doc{i} " + " ".join(words[(i * 5 + k) % 26] for k in range(6)) + ".\n"
            f"part{i} " + " ".join(words[(i * 3 + k) % 26] for k in range(6)) + "." for i in range(n)]


def _reports(nuggets: list[str]):
    from exam_eval.io.reports import Report, ReportSentence, sentence_id

    out = []
    for k in range(20):
        sents = [" ".join(nuggets[(k + j * 7) % len(nuggets)].split()[:3]) + f" and more {j}." for j in range(5)]
        out.append(Report(f"run{k:02d}", "q1", None,
                          tuple(ReportSentence(sentence_id(f"run{k:02d}", "q1", j + 1, t), j + 1, t)
                                for j, t in enumerate(sents))))
    return out


class _Patch:
    """What tests get from pytest's monkeypatch, for the nuggetizer stand-in helper."""

    def setattr(self, obj, name, value):
        setattr(obj, name, value)

    def setenv(self, key, value):
        os.environ[key] = value

    def chdir(self, path):
        os.chdir(path)


def counts() -> dict:
    from nuggetizer.core.types import Document, Query, Request
    from nuggetizer_stub import CountingModel, nuggetizer_against

    from exam_eval.backends.chat import EndpointChat
    from exam_eval.genq import nuggetize as nz
    from exam_eval.grading.asking import Asker, parse_python_list
    from exam_eval.grading.listwise import assign_reports, parse_labels
    from exam_eval.io.bank_items import make_item_id

    docs = _docs(20)
    out: dict = {}
    with CountingModel() as model:
        with nuggetizer_against(model.url, _Patch()) as nugg:
            scored = nugg.create(Request(Query("q1", QUERY), [Document(f"d{i}", t) for i, t in enumerate(docs)]))
            out["nuggetizer_create"] = (model.calls, model.prompt_tokens)
            reports = _reports([n.text for n in scored])
            theirs = [nugg.assign(QUERY, r.text, scored) for r in reports]
            out["nuggetizer_assign"] = (model.calls - out["nuggetizer_create"][0],
                                        model.prompt_tokens - out["nuggetizer_create"][1])
    with CountingModel() as model:
        chat = EndpointChat(model="stub", base_url=model.url, concurrency=16, max_retries=0)
        result = nz.nuggetize([nz.TopicNuggets("q1", QUERY, docs)], lambda: Asker(chat, parse_python_list))
        out["exam_eval_create"] = (model.calls, model.prompt_tokens)
        bank = result.bank()
        lines, failed = assign_reports(reports, {"q1": bank}, {"q1": QUERY}, Asker(chat, parse_labels))
        out["exam_eval_assign"] = (model.calls - out["exam_eval_create"][0],
                                   model.prompt_tokens - out["exam_eval_create"][1])
    same_nuggets = [(n.text, n.importance) for n in scored] == [(i.text, i.importance) for i in bank]
    by = {(g.doc_id, g.item_id): g.grade for g in lines}
    labels = {0: "not_support", 1: "partial_support", 2: "support"}
    # a failed call leaves its window's nuggets without a line: not the same assignments
    same_assign = all(labels.get(by.get((r.doc_id, make_item_id("q1", a.text)))) == a.assignment
                      for r, assigned in zip(reports, theirs) for a in assigned)
    out["same_nuggets"], out["same_assignments"] = same_nuggets, same_assign
    out["exam_eval_assign_failed_windows"] = failed
    out["nuggets"] = len(bank)

    # exam-grade's one-nugget-per-call prompt on whole reports, through the grading engine
    from exam_eval.backends.endpoint import EndpointBackend
    from exam_eval.grading.engine import Pair, Unit, execute, plan_work
    from exam_eval.grading.cache import NullCache, unit_key
    from exam_eval.grading.prompts import get_prompt
    from exam_eval.grading.types import GradeRequest

    prompt = get_prompt("nuggetizer-assign")
    with CountingModel() as model:
        backend = EndpointBackend(model="stub", base_url=model.url, concurrency=16, max_retries=0)
        units = {}
        for r in reports:
            for item in bank:
                key = unit_key("x", prompt.hash, QUERY, item.text, r.text, None)
                units[key] = Unit(key, GradeRequest(prompt, QUERY, item.text, r.text), [Pair("q1", r.doc_id, item)])

        class _Sink:
            lines = 0

            def write_batch(self, lines):
                return 0

            def close(self):
                pass

        execute(plan_work(units, len(units), set(), NullCache(), "stub", prompt), backend, prompt, _Sink())
        out["exam_grade_per_nugget"] = (model.calls, model.prompt_tokens)
    return out


def throughput(latency: float, n: int = 512) -> dict:
    from openai_stub import OpenAIStub, Reply

    from exam_eval.backends.http_client import OpenAIClient

    rates = {}
    with OpenAIStub(lambda req: Reply(text="['support']", delay=latency)) as stub:
        for conc in (8, 64, 256):
            client = OpenAIClient(stub.url, "stub", concurrency=conc, max_retries=0)
            convs = [[{"role": "user", "content": f"call {i}"}] for i in range(n)]
            start = time.perf_counter()
            res = client.chat(convs, max_tokens=8)
            secs = time.perf_counter() - start
            assert all(r.ok for r in res)
            rates[conc] = n / secs
    return rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    ap.add_argument("--latency", type=float, default=0.15, help="Stand-in latency per call (seconds).")
    args = ap.parse_args()
    os.environ.setdefault("EXAM_EVAL_PROGRESS", "0")
    machine = common.machine()
    print(common.machine_line(machine))
    c = counts()
    print("1 topic x 20 reports (5 sentences) x 30 nuggets, 20 documents: calls / prompt tokens")
    for label, key in (("nuggetizer: creation + importance", "nuggetizer_create"),
                       ("exam_eval:  creation + importance", "exam_eval_create"),
                       ("nuggetizer: assignment", "nuggetizer_assign"),
                       ("exam_eval:  assignment (exam-nuggets assign)", "exam_eval_assign"),
                       ("exam_eval:  exam-grade nuggetizer-assign, 1 nugget/call", "exam_grade_per_nugget")):
        calls, tokens = c[key]
        print(f"  {label:<58} {calls:>5} calls {tokens:>9} tokens")
    print(f"  same nuggets and importance: {c['same_nuggets']}; same assignments: {c['same_assignments']}"
          + (f" ({c['exam_eval_assign_failed_windows']} windows' calls failed)"
             if c["exam_eval_assign_failed_windows"] else ""))
    rates = throughput(args.latency)
    print(f"throughput, stand-in with {args.latency * 1000:.0f} ms per call, 512 calls: "
          + ", ".join(f"{k} in flight {v:.0f}/s" for k, v in rates.items()))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"counts": c, "throughput": rates, "machine": machine}, indent=1))
    return 0 if c["same_nuggets"] and c["same_assignments"] else 1


if __name__ == "__main__":
    sys.exit(main())
