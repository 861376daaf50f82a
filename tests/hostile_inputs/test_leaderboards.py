"""Hostile leaderboards and what exam-correlate and exam-verify compute from them: a first
line nested without end, a TSV without its header, too few systems in common, a
labelled-queries list that says something else than it seems, constant or near-constant
scores, runs whose normalized cover is undefined.

Every refusal here: one line naming the file (and the line), exit 2, no traceback,
nothing written. A statistic that is undefined is NaN or left out, never a number, and
never a Python warning on stderr."""

from __future__ import annotations

import json

import pytest

from exam_eval.verify.report import ReportOptions, compute, render
from inproc import run
from refusals import one_line_refusal
from tests.hostile_inputs._worlds import (DEMO, grade_obj, run_file,  # noqa: F401 (a fixture)
                                          scripted_grading_args, write_jsonl)


# ---- leaderboard files --------------------------------------------------------------------

@pytest.mark.parametrize("nest", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000],
                         ids=["array", "object"])
def test_deep_first_line_of_a_leaderboard(nest, tmp_path):
    """The assignment-file sniff read the first line with json.loads: nested 10^5 deep it
    was a RecursionError traceback (found by test_fuzz.py with FUZZ_SEED=5)."""
    board = tmp_path / "board.tsv"
    board.write_text(nest + "\nrun\tmap\na\t0.5\n")
    line = one_line_refusal(run("correlate", "leaderboard", board, board), "exam-correlate", 2)
    assert line.startswith(f"exam-correlate: {board}: cannot tell the leaderboard's shape")


def test_a_tsv_leaderboard_without_its_header_is_refused_not_read_as_trec_eval(tmp_path):
    truth = tmp_path / "truth.tsv"
    truth.write_text("run\tP_5\tndcg_cut_10\n" + "".join(f"r{i}\t0.{i}1\t0.{i}5\n" for i in range(5)))
    headless = tmp_path / "pred.tsv"
    headless.write_text(truth.read_text().split("\n", 1)[1])
    for extra in ([], ["--truth-column", "ndcg_cut_10", "--pred-column", "ndcg_cut_10"]):
        msg = one_line_refusal(run("correlate", "leaderboard", truth, headless, *extra), "exam-correlate")
        assert msg.startswith(f"exam-correlate: {headless}:1: every line is a name and then numbers"), msg
    out = tmp_path / "report.html"
    grades = tmp_path / "grades.jsonl"
    assert run("grade", *scripted_grading_args(tmp_path), "-o", grades).code == 0
    run_file = tmp_path / "r.run"
    res = run("verify", "report", grades, run_file, "--qrels", DEMO / "qrels.txt", "--official", headless, "-o", out)
    msg = one_line_refusal(res, "exam-verify")
    assert msg.startswith(f"exam-verify: {headless}:1: the first line holds numbers where the header's column"), msg
    assert not out.exists()


def test_leaderboards_with_too_few_systems_in_common_are_refused_in_one_line(tmp_path):
    truth = tmp_path / "truth.tsv"
    truth.write_text("run\tP_5\n" + "".join(f"r{i}\t0.{i}1\n" for i in range(5)))
    pred = tmp_path / "pred.tsv"
    pred.write_text("run\tP_5\n" + "".join(f"s{i}\t0.{i}1\n" for i in range(4)) + "r1\t0.3\n")
    res = run("correlate", "leaderboard", truth, pred)
    assert "only 1 system(s) in common" in one_line_refusal(res)


def test_a_near_constant_leaderboard_leaves_no_python_warning_on_stderr(tmp_path, run_cli):
    """Means of 0.1 and 0.5 (0.30000000000000004) against 0.3: scipy's
    NearConstantInputWarning went to stderr, a raw Python line among ours."""
    truth, pred = tmp_path / "t.tot", tmp_path / "p.tot"
    truth.write_text("a m 1 0.1\na m 2 0.5\nb m 1 0.2\nb m 2 0.4\nc m 1 0.3\nc m 2 0.3\n")
    pred.write_text("a m 1 0.3\na m 2 0.1\nb m 1 0.2\nb m 2 0.3\nc m 1 0.1\nc m 2 0.2\n")
    res = run_cli("correlate", "leaderboard", truth, pred)
    assert res.returncode == 0, res.stderr
    assert "Warning" not in res.stderr
    assert all(line.startswith("exam-correlate: ") for line in res.stderr.splitlines()), res.stderr


# ---- exam-correlate interval ----------------------------------------------------------------

def test_interval_refusals_are_one_line_on_a_real_stderr(tmp_path, run_cli):
    """rich's own bar, entered before the inputs were read, left a blank line on a stderr
    that is no terminal; the bar is now the shared one, entered after them."""
    bad = tmp_path / "llm.qrels"
    data = (DEMO / "qrels.txt").read_bytes()
    bad.write_bytes(data[:50] + b"\0" + data[50:])
    res = run_cli("correlate", "interval", DEMO / "qrels.txt", bad, DEMO / "good.run", env={"EXAM_EVAL_PROGRESS": "1"})
    assert one_line_refusal(res) == f"exam-correlate: {bad}:4: NUL byte in the line (binary data, not text)"


@pytest.mark.parametrize("content, expect", [
    ("101 102\n", ":1: expected one query id per line, got 2 fields"),
    ("101\n102\n101\n", ":3: query 101 is listed again (first on line 1)"),
    ("101\n", ": 1 labelled query (101): the intervals need at least 2"),
])
def test_a_labelled_file_that_says_something_else_than_it_seems_is_refused(tmp_path, content, expect):
    """"101 102" was one labelled query (then every method failed, one line each)."""
    labelled = tmp_path / "labelled.txt"
    labelled.write_text(content)
    out = tmp_path / "int.tsv"
    res = run("correlate", "interval", DEMO / "qrels.txt", DEMO / "qrels.txt", DEMO / "good.run",
              "--labelled", labelled, "-o", out)
    assert one_line_refusal(res, "exam-correlate").startswith(f"exam-correlate: {labelled}{expect}")
    assert not out.exists()


def test_a_method_named_twice_gives_one_interval_row(tmp_path, run_file):
    qrels = tmp_path / "q.txt"
    qrels.write_text("".join(f"q{k} 0 d{i} {(i + k) % 2}\n" for k in range(1, 5) for i in range(1, 4)))
    runs = tmp_path / "r.run"
    runs.write_text("".join(f"q{k} Q0 d{i} {i} {4 - i} r\n" for k in range(1, 5) for i in range(1, 4)))
    once = run("correlate", "interval", qrels, qrels, runs, "--methods", "bootstrap", "--samples", "100")
    twice = run("correlate", "interval", qrels, qrels, runs, "--methods", "bootstrap,bootstrap", "--samples", "100")
    assert once.code == twice.code == 0, (once.stderr, twice.stderr)
    assert twice.stdout == once.stdout and len(once.stdout.splitlines()) == 2  # header and the one row


# ---- statistics where a side never varies -----------------------------------------------------

def test_rank_correlations_of_a_constant_side_are_nan():
    """tau_ap and tau_gap were +1 or -1 after the systems' names alone."""
    import math

    from exam_eval.stats.correlation import correlate

    truth = {"A": 0.5, "B": 0.4, "C": 0.3, "D": 0.1}
    flat = {s: 0.5 for s in truth}
    for t, p in ((truth, flat), (flat, truth)):
        got = correlate(t, p)
        assert math.isnan(got["tau_ap"]) and math.isnan(got["tau_gap"]), got
    assert correlate(truth, truth)["tau_ap"] == 1.0


def test_no_numpy_warning_on_scores_near_the_float_limit():
    import warnings

    from exam_eval.stats.correlation import correlate

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = correlate({"A": 1e308, "B": -1e308, "C": 0.0, "D": 1.0}, {"A": 1.0, "B": 0.0, "C": 0.5, "D": 0.2})
    assert got["tau_gap"] == got["tau_gap"]  # not NaN


def test_the_labelled_queries_crc_needs_are_solved_not_counted():
    """--alpha 1e-9 counted up to 10^9 (two minutes) before any work."""
    import time

    from exam_eval.stats import crc

    def counted(alpha, correction):
        m = 1
        while crc.threshold(alpha, m, correction) <= crc.TINY:
            m += 1
        return m

    for correction in crc.CORRECTIONS:
        for alpha in (0.5, 0.2, 0.1, 0.05, 0.01, 0.001, 0.3333, 0.9):
            assert crc.min_labelled_per_query(alpha, correction) == counted(alpha, correction)
    start = time.perf_counter()
    assert crc.min_labelled_per_query(1e-9, "paper") > 10**8
    assert time.perf_counter() - start < 1


def test_crc_takes_a_value_equal_up_to_rounding_as_no_miss():
    """A judge whose labels are the human ones: nDCG computed through other sums differs
    in the last bit, and every batch counted as a miss."""
    import numpy as np

    from exam_eval.stats import crc

    truth = np.array([0.1 + 0.2, 0.7, 0.1 + 0.2, 0.4] * 5)
    same = np.array([0.3, 0.7, 0.3, 0.4] * 5)           # 0.3 < 0.1 + 0.2 in floats
    batches = crc.bootstrap_batches(len(truth), 200, np.random.default_rng(0))
    lo, hi = crc.calibrate(lambda lam: same, truth, batches, alpha=0.1)
    assert lo <= hi


def test_agreement_per_topic_kappa_is_undefined_where_a_side_never_varies(tmp_path):
    import math

    from exam_eval.stats.agreement import agreement

    human = {"1": {"d1": 1, "d2": 0, "d3": 2}, "2": {"d1": 1, "d2": 0}}
    llm = {"1": {"d1": 1, "d2": 1, "d3": 0}, "2": {"d1": 0, "d2": 1}}
    a = agreement(human, llm, human_min=1, llm_min=99)  # the LLM side is constant
    assert a.n_topics_undefined == 2 and math.isnan(a.mean_topic_kappa)
    b = agreement(human, llm, human_min=1, llm_min=1)
    assert b.n_topics_undefined == 0


# ---- an undefined normalized cover -------------------------------------------------------------

def test_an_undefined_normalized_cover_is_left_out_not_zero(tmp_path):
    """No query with an answerable item: n_exam_cover printed 0.0000, as if the run scored 0."""
    grades = tmp_path / "g.jsonl"
    grades.write_text(json.dumps({"query_id": "101", "doc_id": "p1", "item_id": "101/a", "kind": "question",
                                  "grade": 1, "parse_ok": True, "model": "m", "prompt": "question-selfrating"}) + "\n")
    runs = []
    for name in ("a", "b"):
        runs.append(tmp_path / f"{name}.run")
        runs[-1].write_text("101 Q0 p1 1 1.0 r\n")
    one = run("cover", grades, runs[0])
    assert one.code in (0, None), one.stderr
    assert [x.split()[0] for x in one.stdout.splitlines()] == ["num_q", "exam_cover", "exam_cover_stderr"]
    assert "n_exam_cover is undefined for a" in one.stderr
    board = run("cover", grades, *runs)
    assert board.stdout.splitlines()[1:] == ["a\t0.0000\t0.0000\t\t", "b\t0.0000\t0.0000\t\t"]


def test_the_report_leaves_an_undefined_normalized_cover_out(tmp_path):
    """runB's only query has no item any passage answers: exam-cover leaves its
    n_exam_cover out; the report showed 0.0000 and counted it in the correlation."""
    grades = write_jsonl(tmp_path / "g.jsonl", [grade_obj("1", "a", "1/x", 5), grade_obj("1", "b", "1/x", 1),
                                                grade_obj("2", "c", "2/y", 1)])
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 a 1\n1 0 b 0\n2 0 c 1\n")
    run_a, run_b = tmp_path / "runA.run", tmp_path / "runB.run"
    run_a.write_text("1 Q0 a 1 2 A\n1 Q0 b 2 1 A\n")
    run_b.write_text("2 Q0 c 1 1 B\n")
    cover = run("cover", grades, run_a, run_b)
    assert cover.code == 0 and cover.stdout.splitlines()[2].split("\t")[3:] == ["", ""], cover.stdout
    data = compute(str(grades), str(qrels), [str(run_a), str(run_b)], opts=ReportOptions(relevant_min=1))
    rows = {r.run: r for r in data.rows}
    assert rows["runA"].ncover_mean == 1.0 and rows["runB"].ncover_mean is None and rows["runB"].ncover_se is None
    assert data.correlations["EXAM-Cover@20 normalized"]["n"] == 1
    assert data.correlations["EXAM-Cover@20"]["n"] == 2
    html = render(data)
    assert "&ndash; &plusmn;" not in html and "runB" in html
