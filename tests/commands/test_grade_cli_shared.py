"""exam-grade on the real DL19 data against the reference workbench's graded file:
pooling the judged passages with the workbench's question bank must produce exactly the
(query, passage, question) keys the workbench graded, with the same passage texts."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.shared
ROOT = Path(__file__).resolve().parents[2]
QUERIES = ("19335", "1037798")


def test_judged_pool_equals_the_workbench_grading(shared_data, tmp_path):
    dl19 = shared_data / "dl19"
    expected_keys, texts = set(), {}
    with gzip.open(dl19 / "graded-flan-t5-large.jsonl.gz", "rt") as fh:
        for line in fh:
            qid, paras = json.loads(line)
            if qid not in QUERIES:
                continue
            for p in paras:
                texts[p["paragraph_id"]] = p["text"]
                for block in p.get("exam_grades") or []:
                    for r in block["self_ratings"]:
                        expected_keys.add((qid, p["paragraph_id"], r["question_id"]))
    assert expected_keys
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(x for x in (dl19 / "qrels.txt").read_text().splitlines(True)
                             if x.split()[0] in QUERIES))
    out = tmp_path / "g.jsonl"
    env = dict(os.environ, PYTHONPATH=str(ROOT), EXAM_EVAL_PROGRESS="0")
    r = subprocess.run([sys.executable, "-c", "import exam_eval.commands.grade as m; m.main()",
                        "--backend", "scripted", "--prompt", "question-selfrating",
                        "--bank", str(dl19 / "banks" / "questions-genq-oldformat.jsonl.gz"),
                        "--qrels", str(qrels), "--passages", str(dl19 / "passages.jsonl.gz"),
                        "--cache", str(tmp_path / "c.sqlite"), "-o", str(out)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert {(g["query_id"], g["doc_id"], g["item_id"]) for g in rows} == expected_keys
    assert "bank queries have no pooled passages" in r.stderr  # the bank covers all 43 queries
