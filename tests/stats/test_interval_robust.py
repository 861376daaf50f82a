"""exam-correlate interval (issue 13 point 4, issue 11 item 5): one failing method does not
discard the others, intervals stay inside the metric's range, CRC's estimate lies inside
its interval with the raw LLM mean in its own column; ir_datasets IDs for HUMAN (point 5).

Expected numbers come from pytrec_eval, scipy and hand-written formulas, not from the
command itself."""

from __future__ import annotations

import math
import random
import shutil

import numpy as np
import pytest
import pytrec_eval
from scipy import stats

from exam_eval.stats.intervals import compute_intervals
from exam_eval.stats.metrics import parse_metric, value_range
from tests.commands.test_correlate_cli import _synthetic

HEADER = ["run", "metric", "method", "lower", "estimate", "upper", "width", "llm_mean"]


def table(stdout: str) -> dict[str, list[str]]:
    lines = [line.split("\t") for line in stdout.strip().splitlines()]
    assert lines[0] == HEADER
    return {row[2]: row for row in lines[1:]}


def read_trec(path, run=False):
    out: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        f = line.split()
        if run:
            out.setdefault(f[0], {})[f[2]] = float(f[4])
        else:
            out.setdefault(f[0], {})[f[2]] = int(f[3])
    return out


def test_a_failing_crc_keeps_the_other_methods(run_cli, tmp_path):
    # hard LLM labels with --mapping identity: one-hot distributions that the degree shift
    # cannot move, and an LLM that overrates: CRC cannot be calibrated
    h, l_, run = _synthetic(tmp_path)
    args = ["exam-correlate", "interval", h, l_, run, "--n-labelled", "25", "--mapping", "identity",
            "--samples", "500", "-m", "ndcg@10", "--seed", "4"]
    out = tmp_path / "out.tsv"
    r = run_cli(*args, "-o", out)
    assert r.returncode == 3, r.stderr
    rows = table(out.read_text())
    assert set(rows) == {"bootstrap", "ppi", "ppi_tuned"}
    assert "crc failed: CRC cannot reach" in r.stderr and "partial results" in r.stderr
    # the printed rows are exactly those of a run without CRC (each method has its own seed)
    alone = run_cli(*args[:-2], "--methods", "bootstrap,ppi,ppi_tuned", "-m", "ndcg@10", "--seed", "4")
    assert alone.returncode == 0, alone.stderr
    assert table(alone.stdout) == rows
    # the bootstrap estimate is the labelled queries' mean nDCG@10 (pytrec_eval)
    qrels, runs = read_trec(h), read_trec(run, run=True)
    res = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(runs)
    labelled = sorted(random.Random(4).sample(sorted(qrels), 25))
    assert float(rows["bootstrap"][4]) == pytest.approx(np.mean([res[q]["ndcg_cut_10"] for q in labelled]), abs=5e-5)
    # llm_mean: with identity mapping and hard labels, nDCG@10 with the LLM qrels as qrels
    llm = pytrec_eval.RelevanceEvaluator(read_trec(l_), {"ndcg_cut.10"}).evaluate(runs)
    assert float(rows["ppi"][7]) == pytest.approx(np.mean([v["ndcg_cut_10"] for v in llm.values()]), abs=5e-5)


def test_every_method_failing_is_exit_2_without_output(run_cli, tmp_path):
    h, l_, run = _synthetic(tmp_path)
    out = tmp_path / "out.tsv"
    r = run_cli("exam-correlate", "interval", h, l_, run, "--n-labelled", "25", "--mapping", "identity",
                "--samples", "500", "--methods", "crc", "-o", out)
    assert r.returncode == 2 and "every method failed" in r.stderr and not out.exists()


def test_crc_estimate_lies_inside_its_interval(run_cli, tmp_path):
    h, l_, run = _synthetic(tmp_path, seed=1)
    outside_llm = 0
    for seed in range(6):
        r = run_cli("exam-correlate", "interval", h, l_, run, "--n-labelled", "12", "--samples", "1000",
                    "-m", "ndcg@10", "--seed", str(seed))
        assert r.returncode == 0, r.stderr
        for row in table(r.stdout).values():
            lo, est, hi, _, llm_mean = map(float, row[3:8])
            assert lo <= est <= hi, row
        crc = table(r.stdout)["crc"]
        lo, hi, llm_mean = float(crc[3]), float(crc[5]), float(crc[7])
        outside_llm += not lo <= llm_mean <= hi
    assert outside_llm > 0  # the raw LLM mean is not always inside: it is not the estimate


def _ppi_by_hand(truth, pred_l, pred_u, alpha):
    est = pred_u.mean() + (truth - pred_l).mean()
    var = np.var(pred_u, ddof=1) / len(pred_u) + np.var(truth - pred_l, ddof=1) / len(truth)
    half = stats.norm.ppf(1 - alpha / 2) * math.sqrt(var)
    return est - half, est, est + half


def test_intervals_are_clipped_to_the_metric_range():
    # a metric near its top with one poorly predicted query: PPI's normal interval passes 1
    truth = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.55, 1.0])
    pred = np.concatenate([np.array([0.97, 0.99, 0.98, 0.99, 0.97, 0.98, 0.98, 0.99]), np.full(30, 0.985)])
    pred[8:] += np.linspace(-0.01, 0.01, 30)
    lo, est, hi = _ppi_by_hand(truth, pred[:8], pred[8:], 0.05)
    assert hi > 1.0  # what was printed before the clip
    rows = compute_intervals(lambda lam: pred, np.arange(8), truth, 0.05, 1000, 0, ["ppi"], bounds=(0.0, 1.0))
    (r,) = rows
    assert r.upper == 1.0 and r.lower == pytest.approx(lo) and r.estimate == pytest.approx(est)
    unclipped = compute_intervals(lambda lam: pred, np.arange(8), truth, 0.05, 1000, 0, ["ppi"])
    assert unclipped[0].upper == pytest.approx(hi)


def test_metric_ranges():
    discount = sum(1 / math.log2(i + 1) for i in range(1, 11))
    assert value_range(parse_metric("dcg@10"), 3) == pytest.approx((0.0, 3 * discount))
    assert value_range(parse_metric("dcg@5"), 2) == pytest.approx((0.0, 2 * sum(1 / math.log2(i + 1) for i in range(1, 6))))
    assert value_range(parse_metric("ndcg@10"), 3) == (0.0, 1.0)
    assert value_range(parse_metric("p@10"), 3) == pytest.approx((0.0, 1.0))


def test_dcg_interval_is_clipped_at_the_top_dcg(run_cli, tmp_path):
    # nearly every top-10 passage carries the top label: DCG@10 sits at its maximum
    rng = np.random.default_rng(2)
    hq, lq, run = [], [], []
    for q in range(30):
        for d in range(12):
            h = 3 if (d < 10 and not (q == 3 and d < 6)) else int(rng.integers(0, 2))
            hq.append(f"q{q} 0 d{d} {h}")
            lq.append(f"q{q} 0 d{d} {3 if d < 10 else 0}")
            run.append(f"q{q} Q0 d{d} {d + 1} {12 - d} r")
    paths = [tmp_path / n for n in ("h.qrels", "l.qrels", "s.run")]
    for p, rows in zip(paths, (hq, lq, run)):
        p.write_text("\n".join(rows) + "\n")
    r = run_cli("exam-correlate", "interval", *paths, "--labelled", _labelled(tmp_path, 8), "-m", "dcg@10",
                "--mapping", "identity", "--methods", "bootstrap,ppi,ppi_tuned")
    assert r.returncode == 0, r.stderr
    top = 3 * sum(1 / math.log2(i + 1) for i in range(1, 11))
    for row in table(r.stdout).values():
        assert 0 <= float(row[3]) <= float(row[5]) <= round(top, 4) + 1e-9
    assert float(table(r.stdout)["ppi"][5]) == pytest.approx(top, abs=1e-4)  # clipped, not above


def _labelled(tmp_path, n):
    p = tmp_path / "lab.txt"
    p.write_text("".join(f"q{i}\n" for i in range(n)))
    return p


# -- ir_datasets IDs for HUMAN (pre-placed files: no network) --------------------------------

DL19_ID = "msmarco-passage/trec-dl-2019/judged"


@pytest.fixture
def irds_home(shared_data, tmp_path):
    home = tmp_path / "irds"
    target = home / "msmarco-passage" / "trec-dl-2019" / "qrels"
    target.parent.mkdir(parents=True)
    shutil.copy(shared_data / "dl19" / "qrels.txt", target)
    return {"IR_DATASETS_HOME": str(home)}


def test_agreement_and_interval_take_an_ir_datasets_id(run_cli, shared_data, irds_home):
    d = shared_data / "dl19"
    llm = d / "llm-qrels" / "QuestionSelfRatedUnanswerablePromptWithChoices.qrels"
    by_file = run_cli("exam-correlate", "agreement", d / "qrels.txt", llm, "--human-min", "2", "--llm-min", "4")
    by_id = run_cli("exam-correlate", "agreement", DL19_ID, llm, "--human-min", "2", "--llm-min", "4", env=irds_home)
    assert by_id.returncode == 0, by_id.stderr
    assert by_id.stdout == by_file.stdout and "kappa" in by_id.stdout
    args = [llm, d / "runs" / "p_bert.run", "--n-labelled", "10", "--seed", "2", "--samples", "500", "-m", "ndcg@10"]
    by_file = run_cli("exam-correlate", "interval", d / "qrels.txt", *args)
    by_id = run_cli("exam-correlate", "interval", DL19_ID, *args, env=irds_home)
    assert by_id.returncode == by_file.returncode == 0, by_id.stderr
    assert by_id.stdout == by_file.stdout


def test_unknown_human_id_is_one_line(run_cli, tmp_path):
    h, l_, run = _synthetic(tmp_path)
    r = run_cli("exam-correlate", "agreement", "no-such/dataset", l_)
    assert r.returncode == 2 and "not a known ir_datasets ID" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("exam-correlate", "interval", "missing-file.qrels", l_, run)
    assert r.returncode == 2 and "no such file" in r.stderr
