"""bench/bench_compare.py, the validation of exam-correlate compare, at a few draws: its
array path for the LLM-predicted values equals exam_eval's own (stats.sources, on the
command's draws), its reference is pytrec_eval's nDCG@10 with scipy's ttest_rel and Holm
by hand, and a draw's PPI row is what `exam-correlate compare --n-labelled N --seed S`
prints for the same pair."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tests.dl19_reference import ndcg10_per_query

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def result(shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_compare.py"), "--draws", "3", "--n", "10,20",
                          "--check", "2", "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr
    return json.loads((out / "compare.json").read_text()), res.stdout


def test_the_bench_checks_its_array_path_and_writes_its_table(result):
    res, stdout = result
    assert res["check"]["draws"] == 2 and res["check"]["max_abs_difference"] < 1e-9
    assert res["inputs"]["runs"] == 37 and res["inputs"]["pairs"] == 666 and res["inputs"]["queries"] == 43
    assert set(res["results"]) == {"10", "20"}
    for by in res["results"].values():
        assert set(by) == {"t", "ppi", "ppi_tuned"}
        for s in by.values():
            assert 0 <= s["coverage_worst_pair"] <= s["coverage_per_pair"] <= 1 and 0 <= s["power"] <= 1
    assert res["machine"]["cores"] >= 1 and "| 20 | ppi_tuned |" in stdout


def test_the_reference_is_pytrec_eval_and_scipy(result, shared_data):
    """269 of 666 pairs differ on all 43 queries by the t-test with Holm: counted here anew."""
    values = ndcg10_per_query(shared_data / "dl19", sorted((shared_data / "dl19" / "runs").glob("*.run")))
    p = [stats.ttest_rel(values[i], values[j]).pvalue for i in range(37) for j in range(i + 1, 37)]
    order = sorted(range(len(p)), key=lambda k: p[k])
    running, called = 0.0, 0
    for rank, k in enumerate(order):  # Holm by hand
        running = max(running, min(1.0, (len(p) - rank) * p[k]))
        called += running < 0.05
    assert result[0]["reference"]["pairs_differ"] == called


def test_a_draw_is_the_commands_draw(result, shared_data, run_cli):
    """Draw 0 at n = 20 labels the queries --n-labelled 20 --seed 0 labels: the command's PPI
    row for a pair equals the bench's array path on that draw."""
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    import bench_compare as bc
    from exam_eval.io.leaderboard import run_name
    from exam_eval.stats.interval_table import choose_labelled, open_source
    from exam_eval.stats.paired import ppi_test
    from exam_eval.trec_eval.trec_files import read_run

    d = shared_data / "dl19"
    paths = [d / "runs" / "p_bert.run", d / "runs" / "TUW19-p1-f.run"]
    r = run_cli("exam-correlate", "compare", d / "qrels.txt", d / "llm-qrels" / bc.LLM, *paths, "--n-labelled", "20",
                "--seed", "0", "--methods", "ppi_tuned")
    assert r.returncode == 0, r.stderr
    row = r.stdout.strip().splitlines()[1].split("\t")
    assert row[:2] == [run_name(p) for p in paths]
    source = open_source(str(d / "qrels.txt"), str(d / "llm-qrels" / bc.LLM), "ndcg@10", 1, 4)
    queries = sorted(source.human_queries)
    runs = [read_run(str(p)) for p in paths]
    human = np.array([source.human_values(run, queries) for run in runs])
    lab = np.array([queries.index(q) for q in choose_labelled(queries, None, 20, 0, "", lambda m: None)])
    unl = np.setdiff1d(np.arange(43), lab)
    pred = bc.Predicted(source, runs, queries)(lab)
    dh, dp = human[0] - human[1], pred[0] - pred[1]
    res = ppi_test(dh[lab], dp[lab], dp[unl], 0.05, tuned=True)
    assert [float(v) for v in row[5:8]] == pytest.approx([res.difference[0], res.lower[0], res.upper[0]], abs=5e-5)
