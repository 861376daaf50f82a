"""bench/studies/device_batches.py's measuring process, on a CPU with a tiny T5: every pair of the
pool graded in each pass, each batch recorded with the width the variant pads to, and the
variants really change what they name. (The device figures themselves need a GPU.)"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "bench" / "studies")]
sys.path.insert(0, str(Path(__file__).parents[1]))
from tiny_models import tiny_t5  # noqa: E402,F401

DEMO = ROOT / "exam_eval" / "demo_data"


def pool(work: Path) -> int:
    """pool.json and bank.jsonl (what common.engine_run reads) from the demo data:
    query 101, its first four passages of good.run; the number of pairs."""
    bank = [line for line in (DEMO / "questions.jsonl").read_text().splitlines() if '"query_id": "101"' in line][:3]
    (work / "bank.jsonl").write_text("".join(b + "\n" for b in bank))
    docs = [line.split()[2] for line in (DEMO / "good.run").read_text().splitlines() if line.startswith("101 ")][:4]
    texts = {}
    for line in (DEMO / "passages.jsonl").read_text().splitlines():
        obj = json.loads(line)
        if obj["doc_id"] in docs:
            texts[obj["doc_id"]] = obj["text"]
    (work / "pool.json").write_text(json.dumps({"chosen": {"101": docs}, "texts": texts}))
    return len(bank) * len(docs)


@pytest.mark.parametrize("variant, multiple", [("default", 1), ("pad32", 32)])
def test_a_variant_grades_the_pool_twice_and_records_each_batch(tmp_path, tiny_t5, variant, multiple):
    import device_batches

    pairs = pool(tmp_path)
    args = argparse.Namespace(child=variant, device="cpu", model_dir=tiny_t5, work=tmp_path, passes=2, bare_batch=2)
    res = device_batches.child(args)
    assert res["pad_multiple_used"] == multiple
    for name in ("pass1", "pass2"):
        p = res[name]
        assert p["pairs"] == pairs and sum(b["units"] for b in p["per_batch"]) == pairs
        assert all(b["width"] % multiple == 0 and b["syncs"] == 0 for b in p["per_batch"])
        assert p["padded_tokens"] >= p["tokens"] > 0
        assert p["shapes"] == len({(b["units"], b["width"]) for b in p["per_batch"]})
    assert ("bare" in res) == (variant == "default")
    if variant == "default":
        assert res["bare"]["unpadded"]["width"] == res["bare"]["padded"]["width"] == 222
    # the lines device_run.sh prints from the JSON
    line = device_batches.line(res)
    assert line.startswith(variant) and "pass2" in line


def test_exam_grade_rows_grade_every_pair_again_in_a_kept_work_folder(tmp_path, tiny_t5):
    """bench_pipeline --keep (device_run.sh's large step, whose folder device_batches.py
    reuses) keeps the last run's grades and cache: a second run must time grading, not a
    start that finds every pair done."""
    import common

    bank = [line for line in (DEMO / "questions.jsonl").read_text().splitlines() if '"query_id": "101"' in line][:2]
    (tmp_path / "bank.jsonl").write_text("".join(b + "\n" for b in bank))
    run = [line for line in (DEMO / "good.run").read_text().splitlines() if line.startswith("101 ")][:3]
    (tmp_path / "pool.run").write_text("".join(r + "\n" for r in run))
    docs = {r.split()[2] for r in run}
    (tmp_path / "passages.jsonl").write_text("".join(
        line + "\n" for line in (DEMO / "passages.jsonl").read_text().splitlines() if json.loads(line)["doc_id"] in docs))
    for _ in range(2):
        r = common.exam_grade("tiny", tiny_t5, tmp_path, "cpu", [], "again")
        assert r["pairs"] == r["graded"] == 6 and r["from_cache"] == 0


def test_the_oom_variant_on_a_cpu_caps_nothing_and_says_so(tmp_path, tiny_t5):
    import device_batches

    pairs = pool(tmp_path)
    args = argparse.Namespace(child="oom", device="cpu", model_dir=tiny_t5, work=tmp_path, passes=1, bare_batch=2)
    res = device_batches.child(args)
    assert res["memory_cap"] == {"skipped": "no CUDA: nothing to cap"}
    assert res["pass1"]["pairs"] == pairs and res["pass1"]["failed_starts"] == 0
    assert res["pass1"]["device_memory"] is None
    assert "no CUDA: nothing to cap; 0 starts out of memory: no split" in device_batches.line(res)


def test_a_start_that_runs_out_of_memory_is_counted_not_timed(tmp_path, tiny_t5):
    """The timeline drops a batch whose start failed (the engine grades it in halves) and
    counts it; the halves are recorded as batches."""
    import device_batches
    import torch
    from common import engine_run

    from exam_eval.backends.hf_seq2seq import Seq2SeqBackend

    pairs = pool(tmp_path)
    backend = Seq2SeqBackend(model=str(tiny_t5), device="cpu", engine="torch")
    backend.load()
    real = backend.submit

    def cramped(requests):
        if len(requests) > 4:
            raise torch.OutOfMemoryError("CUDA out of memory")
        return real(requests)

    backend.submit = cramped
    backend.__class__ = type("Overlapping", (Seq2SeqBackend,), {"overlaps": True})
    timeline = device_batches.Timeline(backend, "cpu")
    stats, n, secs = engine_run(backend, tmp_path, tmp_path / "g.jsonl")
    summary = timeline.summary(secs, n)
    assert n == pairs == 12 and stats.graded == pairs
    # batches of 8 (the CPU's batch size): the first fails and runs as 4 + 4, the last 4 fit
    assert timeline.failed_starts == 1
    assert sum(b["units"] for b in summary["per_batch"]) == pairs and max(b["units"] for b in summary["per_batch"]) <= 4
    widest = max(b["width"] for b in summary["per_batch"])
    assert f"ran out of memory at a batch of {8 * widest} padded prompt tokens" in stats.device_memory
