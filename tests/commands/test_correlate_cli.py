"""exam-correlate as a user runs it: outputs, exit codes, located error messages."""

from __future__ import annotations

import json

import numpy as np
import pytest
import pytrec_eval
from scipy import stats

OFFICIAL = "run\tofficial_rank\tndcg_cut_10\nA\t1\t0.70\nB\t2\t0.65\nC\t3\t0.60\nD\t\t0.50\nE\t4\t0.40\n"
PRED = "run\tscore\nA\t0.9\nB\t0.5\nC\t0.7\nE\t0.1\nX\t0.3\n"


def _lines(text):
    return dict(line.split("\t") for line in text.strip().splitlines())


@pytest.fixture
def boards(tmp_path):
    t, p = tmp_path / "official.tsv", tmp_path / "pred.tsv"
    t.write_text(OFFICIAL)
    p.write_text(PRED)
    return t, p


def test_leaderboard_rank_column_and_missing_systems(run_cli, boards):
    t, p = boards
    r = run_cli("exam-correlate", "leaderboard", t, p)
    assert r.returncode == 0, r.stderr
    out = _lines(r.stdout)
    assert list(out) == ["spearman", "kendall_tau_b", "kendall_tau_a", "tau_ap", "tau_ap_b", "tau_gap", "pearson",
                         "kendall@10", "n"]
    # A, B, C, E in common (D unranked, X only in pred); ranks negated: higher = better
    truth, pred = [-1, -2, -3, -4], [0.9, 0.5, 0.7, 0.1]
    assert out["n"] == "4"
    assert float(out["spearman"]) == pytest.approx(stats.spearmanr(truth, pred).statistic, abs=5e-5)
    assert float(out["kendall_tau_b"]) == pytest.approx(stats.kendalltau(truth, pred).statistic, abs=5e-5)
    assert "official_rank" in r.stderr and "X" in r.stderr and "D" in r.stderr


def test_leaderboard_columns_strict_and_plot(run_cli, boards, tmp_path):
    t, p = boards
    r = run_cli("exam-correlate", "leaderboard", t, p, "--truth-column", "ndcg_cut_10")
    assert r.returncode == 0 and "column ndcg_cut_10" in r.stderr
    r = run_cli("exam-correlate", "leaderboard", t, p, "--strict")
    assert r.returncode == 2 and "X" in r.stderr and r.stderr.count("\n") >= 1
    r = run_cli("exam-correlate", "leaderboard", t, p, "--pred-column", "nope")
    assert r.returncode == 1 and "no column 'nope'" in r.stderr
    png = tmp_path / "s.png"
    r = run_cli("exam-correlate", "leaderboard", t, p, "--plot", png)
    assert r.returncode == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_leaderboard_malformed_input_is_located(run_cli, boards, tmp_path):
    t, _ = boards
    bad = tmp_path / "bad.tsv"
    bad.write_text("run\tscore\nA\t0.9\nB\tzero\n")
    out = tmp_path / "out.txt"
    r = run_cli("exam-correlate", "leaderboard", t, bad, "-o", out)
    assert r.returncode == 2
    assert f"{bad}:3:" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()
    few = tmp_path / "few.tsv"
    few.write_text("run\tscore\nA\t0.9\nB\t0.1\n")
    r = run_cli("exam-correlate", "leaderboard", t, few)
    assert r.returncode == 2 and "at least 3" in r.stderr


# ----------------------------------------------------------------------------- agreement

HUMAN = "1 0 a 0\n1 0 b 1\n1 0 c 2\n1 0 d 3\n2 0 a 2\n2 0 b 0\n2 0 c 3\n2 0 z 1\n"
LLM = "1 0 a 0\n1 0 b 4\n1 0 c 5\n1 0 d 1\n2 0 a 4\n2 0 b 0\n2 0 c 5\n2 0 extra 5\n"


def _grades_file(path):
    rows = []
    for line in LLM.splitlines():
        qid, _, doc, label = line.split()
        # two items per passage; the max of their grades is the qrels label
        for item, grade in ((f"{qid}/i1", int(label)), (f"{qid}/i2", max(int(label) - 1, 0))):
            rows.append({"query_id": qid, "doc_id": doc, "item_id": item, "kind": "question", "grade": grade,
                         "probs": None, "answer": str(grade), "parse_ok": True, "model": "m", "prompt": "p"})
    rows.append({"query_id": "1", "doc_id": "a", "item_id": "1/i3", "kind": "question", "grade": None,
                 "probs": None, "answer": "??", "parse_ok": False, "model": "m", "prompt": "p"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_agreement_qrels_and_grades_give_the_same_numbers(run_cli, tmp_path):
    h, q, g = tmp_path / "h.qrels", tmp_path / "llm.qrels", tmp_path / "grades.jsonl"
    h.write_text(HUMAN)
    q.write_text(LLM)
    _grades_file(g)
    r1 = run_cli("exam-correlate", "agreement", h, q, "--human-min", "2", "--llm-min", "4")
    r2 = run_cli("exam-correlate", "agreement", h, g, "--human-min", "2", "--llm-min", "4")
    assert r1.returncode == 0 and r2.returncode == 0, r1.stderr + r2.stderr
    assert r1.stdout == r2.stdout
    head = dict(line.split("\t") for line in r1.stdout.split("\n\n")[0].splitlines())
    assert head["pairs"] == "7" and head["human_judged_without_llm_label"] == "1"
    assert head["llm_labelled_not_judged"] == "1"
    # 2x2: tp=3 (1c, 2a, 2c), fp=1 (1b), fn=1 (1d), tn=2 (1a, 2b): kappa from the definition
    po, pe = 5 / 7, (4 / 7) * (4 / 7) + (3 / 7) * (3 / 7)
    assert float(head["kappa"]) == pytest.approx((po - pe) / (1 - pe), abs=5e-5)
    assert "1 judged pair(s)" in r1.stderr


def test_agreement_bad_inputs(run_cli, tmp_path):
    h, q = tmp_path / "h.qrels", tmp_path / "llm.qrels"
    h.write_text(HUMAN)
    q.write_text("1 0 a 0\n1 0 b x\n")
    r = run_cli("exam-correlate", "agreement", h, q)
    assert r.returncode == 2 and f"{q}:2:" in r.stderr and "Traceback" not in r.stderr
    other = tmp_path / "other.qrels"
    other.write_text("9 0 zz 1\n")
    r = run_cli("exam-correlate", "agreement", h, other)
    assert r.returncode == 2 and "no judged pair" in r.stderr
    g = tmp_path / "g.jsonl"
    g.write_text('{"query_id": "1", "doc_id": "a"}\n')
    r = run_cli("exam-correlate", "agreement", h, g)
    assert r.returncode == 2 and f"{g}:1:" in r.stderr


# ----------------------------------------------------------------------------- interval

def _synthetic(tmp_path, nq=40, seed=0):
    """Human qrels 0-3, LLM qrels 0-5 loosely tied to them, one run of 15 passages per query."""
    rng = np.random.default_rng(seed)
    hq, lq, run = [], [], []
    for q in range(nq):
        for d in range(15):
            h = int(rng.integers(0, 4))
            l_ = int(np.clip(h + rng.integers(-1, 3), 0, 5))
            hq.append(f"q{q} 0 d{d} {h}")
            lq.append(f"q{q} 0 d{d} {l_}")
            run.append(f"q{q} Q0 d{d} {d + 1} {15 - d + rng.normal() * 3:.3f} r")
    paths = tmp_path / "h.qrels", tmp_path / "l.qrels", tmp_path / "sys.run"
    for p, rows in zip(paths, (hq, lq, run)):
        p.write_text("\n".join(rows) + "\n")
    return paths


def test_interval_output_and_bootstrap_estimate(run_cli, tmp_path):
    h, l_, run = _synthetic(tmp_path)
    r = run_cli("exam-correlate", "interval", h, l_, run, "--n-labelled", "25", "--seed", "3",
                "--samples", "2000", "-m", "ndcg@10")
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.strip().splitlines()]
    assert rows[0] == ["run", "metric", "method", "lower", "estimate", "upper", "width", "llm_mean"]
    by = {row[2]: list(map(float, row[3:7])) for row in rows[1:]}
    assert set(by) == {"bootstrap", "ppi", "ppi_tuned", "crc"}
    for lo, est, hi, w in by.values():
        assert lo <= hi and w == pytest.approx(hi - lo, abs=2e-4)
    # the bootstrap estimate is the labelled queries' mean nDCG@10, checked with pytrec_eval
    import random
    queries = sorted(f"q{i}" for i in range(40))
    labelled = sorted(random.Random(3).sample(queries, 25))
    qrels, runs = {}, {}
    for line in h.read_text().splitlines():
        q, _, d, lab = line.split()
        qrels.setdefault(q, {})[d] = int(lab)
    for line in run.read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        runs.setdefault(q, {})[d] = float(s)
    res = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(runs)
    assert by["bootstrap"][1] == pytest.approx(np.mean([res[q]["ndcg_cut_10"] for q in labelled]), abs=5e-5)
    # same seed, same numbers
    again = run_cli("exam-correlate", "interval", h, l_, run, "--n-labelled", "25", "--seed", "3",
                    "--samples", "2000", "-m", "ndcg@10")
    assert again.stdout == r.stdout


def test_interval_per_query_and_labelled_file(run_cli, tmp_path):
    h, l_, run = _synthetic(tmp_path)
    lab = tmp_path / "labelled.txt"
    lab.write_text("".join(f"q{i}\n" for i in range(25)))
    r = run_cli("exam-correlate", "interval", h, l_, run, "--labelled", lab, "-q")
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.strip().splitlines()]
    assert rows[0][:3] == ["run", "query", "labelled"] and len(rows) == 41
    assert sum(row[2] == "1" for row in rows[1:]) == 25
    for row in rows[1:]:
        assert float(row[4]) <= float(row[6])


def test_interval_refusals_and_bad_input(run_cli, tmp_path):
    h, l_, run = _synthetic(tmp_path)
    out = tmp_path / "out.tsv"
    r = run_cli("exam-correlate", "interval", h, l_, run, "--n-labelled", "10", "-q", "-o", out)
    assert r.returncode == 2 and "needs at least 20 labelled" in r.stderr and not out.exists()
    lab = tmp_path / "labelled.txt"
    lab.write_text("q1\nq2\nnot-a-query\n")
    r = run_cli("exam-correlate", "interval", h, l_, run, "--labelled", lab)
    assert r.returncode == 2 and f"{lab}:3:" in r.stderr
    bad_run = tmp_path / "bad.run"
    bad_run.write_text("q1 Q0 d1 1 0.5 r\nq1 Q0 d2 2 nan r\n")
    r = run_cli("exam-correlate", "interval", h, l_, bad_run)
    assert r.returncode == 2 and f"{bad_run}:2:" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("exam-correlate", "interval", h, l_, run, "-m", "map")
    assert r.returncode == 1 and "unknown metric" in r.stderr
    r = run_cli("exam-correlate", "interval", h, l_, run, "--alpha", "1.5")
    assert r.returncode == 1


def test_help_does_not_import_heavy_libraries(run_cli):
    import subprocess
    import sys
    code = ("import sys, exam_eval.commands.correlate as m\n"
            "try:\n    m.main(['interval', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(k for k in ('torch', 'transformers', 'matplotlib') if k in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip().endswith("[]"), r.stdout + r.stderr


def test_dl19_leaderboard_sanity(run_cli, shared_data, tmp_path):
    d = shared_data / "dl19"
    runs = sorted((d / "runs").glob("*.run"))
    qrels = {}
    for line in (d / "qrels.txt").read_text().splitlines():
        q, _, doc, lab = line.split()
        qrels.setdefault(q, {})[doc] = int(lab)
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})
    board = tmp_path / "lb.tsv"
    rows = ["run\tndcg_cut_10"]
    for p in runs:
        run = {}
        for line in p.read_text().splitlines():
            q, _, doc, _, s, _ = line.split()
            run.setdefault(q, {})[doc] = float(s)
        res = ev.evaluate(run)
        rows.append(f"{p.stem}\t{sum(res[q]['ndcg_cut_10'] for q in res) / len(qrels):.4f}")
    board.write_text("\n".join(rows) + "\n")
    r = run_cli("exam-correlate", "leaderboard", d / "official.tsv", board, "--truth-column", "ndcg_cut_10")
    assert r.returncode == 0, r.stderr
    out = _lines(r.stdout)
    assert float(out["spearman"]) > 0.999 and float(out["kendall_tau_b"]) > 0.99


def test_dl19_interval_runs(run_cli, shared_data):
    d = shared_data / "dl19"
    r = run_cli("exam-correlate", "interval", d / "qrels.txt",
                d / "llm-qrels" / "QuestionSelfRatedUnanswerablePromptWithChoices.qrels",
                d / "runs" / "p_bert.run", d / "runs" / "bm25base_p.run", "--n-labelled", "30", "--seed", "1",
                "--samples", "2000")
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.strip().splitlines()[1:]]
    assert len(rows) == 8
    for row in rows:
        lo, est, hi = map(float, row[3:6])
        assert 0 <= lo <= hi


def test_interval_exam_cover_from_grades(run_cli, tmp_path):
    from exam_eval.grading.grade_files import read_grades
    from exam_eval.trec_eval.trec_files import read_run
    from exam_eval.measures.exam_cover import build_index, exam_cover

    rng = np.random.default_rng(5)
    human_rows, llm_rows, run_rows = [], [], []
    for q in range(30):
        for d in range(12):
            run_rows.append(f"q{q} Q0 d{d} {d + 1} {12 - d} r")
            for i in range(4):
                h = int(rng.integers(0, 6))
                p = np.full(6, 0.04)
                p[min(5, max(0, h + int(rng.integers(-1, 2))))] += 0.76
                p /= p.sum()
                base = {"query_id": f"q{q}", "doc_id": f"d{d}", "item_id": f"q{q}/i{i}", "kind": "question",
                        "answer": "", "parse_ok": True, "prompt": "selfrating"}
                human_rows.append(dict(base, grade=h, probs=None, model="human"))
                llm_rows.append(dict(base, grade=int(np.argmax(p)), model="flan",
                                     probs={str(j): float(v) for j, v in enumerate(p)}))
    hp, lp, rp = tmp_path / "human.jsonl", tmp_path / "llm.jsonl", tmp_path / "sys.run"
    hp.write_text("".join(json.dumps(r) + "\n" for r in human_rows))
    lp.write_text("".join(json.dumps(r) + "\n" for r in llm_rows))
    rp.write_text("\n".join(run_rows) + "\n")
    r = run_cli("exam-correlate", "interval", hp, lp, rp, "-m", "exam-cover@5", "--min-grade", "4",
                "--n-labelled", "20", "--seed", "2", "--samples", "1000")
    assert r.returncode == 0, r.stderr
    rows = {row.split("\t")[2]: row.split("\t") for row in r.stdout.strip().splitlines()[1:]}
    assert set(rows) == {"bootstrap", "ppi", "ppi_tuned", "crc"} and rows["crc"][1] == "exam-cover@5"
    import random
    labelled = sorted(random.Random(2).sample(sorted(f"q{q}" for q in range(30)), 20))
    per_q = exam_cover(build_index(read_grades(hp), 4), read_run(rp), 5, complete=True).per_query
    assert float(rows["bootstrap"][4]) == pytest.approx(np.mean([per_q[q][0] for q in labelled]), abs=5e-5)
    for row in rows.values():
        assert 0 <= float(row[3]) <= float(row[5]) <= 1
    qrels = tmp_path / "h.qrels"
    qrels.write_text("q1 0 d1 1\n")
    r = run_cli("exam-correlate", "interval", qrels, lp, rp, "-m", "exam-cover")
    assert r.returncode == 1 and "needs grades on both sides" in r.stderr


def test_interval_names_the_line_of_a_custom_prompts_word_label(run_cli, tmp_path):
    """A custom prompt's grades may carry probs over its own word labels (their grades are
    not in the file), which the interval code cannot read as grades: the one line names
    the file and the line of the grade, as every other bad input does."""
    h, _, run = _synthetic(tmp_path, nq=25)
    g = tmp_path / "custom.jsonl"
    rows = []
    for line in h.read_text().splitlines():
        q, _, d, _ = line.split()
        rows.append({"query_id": q, "doc_id": d, "item_id": f"{q}/i", "kind": "question", "grade": 1, "answer": "1",
                     "parse_ok": True, "model": "m", "prompt": "file:mine.txt", "probs": {"0": 0.25, "1": 0.75}})
    rows[7]["probs"] = {"unsure": 0.4, "sure": 0.6}
    rows.append(dict(rows[7]))  # the same grade again: the last line for a key is the one read
    rows[-1]["probs"] = {"unsure": 0.5, "sure": 0.5}
    g.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = run_cli("exam-correlate", "interval", h, g, run, "--n-labelled", "20")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert f"{g}:{len(rows)}:" in r.stderr and "'unsure'" in r.stderr, r.stderr
    # EXAM-Cover's intervals read the same grades another way (per item), with both mappings
    human = tmp_path / "human.jsonl"
    human.write_text("".join(json.dumps({**row, "probs": None, "model": "human", "prompt": "question-selfrating"})
                             + "\n" for row in rows[:-1]))
    for mapping in ("identity", "calibrated"):
        r = run_cli("exam-correlate", "interval", human, g, run, "-m", "exam-cover@5", "--n-labelled", "20",
                    "--mapping", mapping)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert f"{g}:{len(rows)}:" in r.stderr and "'unsure'" in r.stderr, r.stderr
