"""Issue 11's check on real data: DL19 runs as RAG reports, graded offline with the
embedding back end, report-level leaderboards against the official nDCG@10.

A subset keeps it under a minute (all 37 runs, the first 10 topics, the question bank);
scripts/dl19_reports.py without options runs the whole check (README, "Evaluating RAG
reports", has the figures)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import stats

from exam_eval.io.reports import sentence_id

ROOT = Path(__file__).resolve().parents[2]


def _tsv(path):
    lines = Path(path).read_text().splitlines()
    header = lines[0].split("\t")
    return {c[0]: dict(zip(header[1:], c[1:])) for c in (x.split("\t") for x in lines[1:])}


@pytest.mark.shared
@pytest.mark.slow
def test_dl19_report_cover_correlates_with_official_ndcg(shared_data, tmp_path):
    data = shared_data / "dl19"
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "dl19_reports.py"), "--data", str(data), "--out",
                        str(out), "--topics", "10", "--banks", "questions"], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr + r.stdout
    board = _tsv(out / "leaderboard.questions.tsv")
    assert len(board) == 37

    # EXAM-Cover of every report recomputed from the grades: the fraction of the topic's
    # bank questions some sentence rates >= 4, averaged over the run's topics
    bank: dict[str, set[str]] = {}
    with gzip.open(data / "banks" / "questions.jsonl.gz", "rt") as fh:
        for line in fh:
            o = json.loads(line)
            bank.setdefault(o["query_id"], set()).update(i["question_id"] for i in o["items"])
    answered: dict[str, set[str]] = {}
    for line in (out / "grades.questions.jsonl").read_text().splitlines():
        g = json.loads(line)
        if g["parse_ok"] and g["grade"] >= 4:
            answered.setdefault(g["doc_id"], set()).add(g["item_id"])
    for f in sorted((out / "reports").glob("*.jsonl")):
        covers = []
        for line in f.read_text().splitlines():
            o = json.loads(line)
            run, topic = o["metadata"]["run_id"], o["metadata"]["topic_id"]
            got = set().union(*(answered.get(sentence_id(run, topic, n, s["text"]), set())
                                for n, s in enumerate(o["responses"], 1)))
            covers.append(len(got & bank[topic]) / len(bank[topic]))
        assert float(board[f.stem]["exam_cover"]) == pytest.approx(sum(covers) / len(covers), abs=5.1e-5), f.stem

    # the correlations the script reports, recomputed with scipy from the two leaderboards
    official = _tsv(data / "official.tsv")
    runs = sorted(set(board) & set(official))
    truth = [float(official[x]["ndcg_cut_10"]) for x in runs]
    pred = [float(board[x]["exam_cover"]) for x in runs]
    tau_b = stats.kendalltau(truth, pred, variant="b").statistic
    rho = stats.spearmanr(truth, pred).statistic
    reported = {(c["bank"], c["measure"]): c for c in
                (dict(zip(["bank", "measure", "kendall_tau_b", "spearman", "tau_ap", "n"], x.split("\t")))
                 for x in (out / "correlations.tsv").read_text().splitlines()[1:])}
    row = reported[("questions", "exam_cover")]
    assert float(row["kendall_tau_b"]) == pytest.approx(tau_b, abs=5.1e-5)
    assert float(row["spearman"]) == pytest.approx(rho, abs=5.1e-5)
    assert int(row["n"]) == 37
    # report-level cover ranks DL19's runs like nDCG@10 does (0.59 on this subset, 0.67 on all 43 topics)
    assert tau_b > 0.45 and rho > 0.65
