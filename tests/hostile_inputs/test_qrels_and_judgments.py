"""Hostile judgments: qrels files, and the formats trec_eval reads beside them (qrels_jg
labels, preference levels, -Z means and standard deviations); with the measure parameters,
levels and depths exam-qrels scores them with, held to trec_eval 9.0.8 where it can be
built (the trec_eval_binary fixture).

Every refusal here: one line naming the file and line, exit 2, no traceback, nothing
written. Values trec_eval reads with atof/atol without a word ("abc" is 0, "1.5" is 1)
and labels no trec file holds are refused; where trec_eval's result is well defined (a
cutoff or depth past a C long, a level below 0, a gain list), exam-qrels prints its
bytes."""

from __future__ import annotations

import json
import subprocess

import pytest

from inproc import run
from refusals import one_line_refusal
from tests.hostile_inputs._worlds import (DEMO, GOOD_QRELS, grade_json, refused, refused_located, run_file,  # noqa: F401 (a fixture)
                                          write)


# ---- qrels ----------------------------------------------------------------------------------

QRELS_CASES = [
    ("qrels 3 fields", "exam-qrels", "qrels", GOOD_QRELS + "2 0 d\n", ":4:", "expected 4 fields"),
    ("qrels 5 fields", "exam-qrels", "qrels", "1 0 a 1 x\n", ":1:", "expected 4 fields"),
    ("qrels float label", "exam-qrels", "qrels", GOOD_QRELS + "3 0 e 1.5\n", ":4:", "not an integer"),
    ("qrels word label", "exam-qrels", "qrels", "1 0 a rel\n", ":1:", "not an integer"),
    ("qrels duplicate", "exam-qrels", "qrels", GOOD_QRELS + "1 0 a 0\n", ":4:", "first on line 1"),
    ("qrels empty", "exam-qrels", "qrels", "", None, "empty"),
    ("qrels blank line", "exam-qrels", "qrels", GOOD_QRELS + "\n", ":4:", "blank line"),
]


@pytest.mark.parametrize("case", QRELS_CASES, ids=[c[0] for c in QRELS_CASES])
def test_a_bad_qrels_file_is_refused_naming_its_line(tmp_path, run_cli, case):
    """The qrels among a good run: one line naming it (and its line)."""
    refused_located(tmp_path, run_cli, case)


def test_labels_and_scores_no_trec_file_holds(tmp_path):
    """A label of 2*10^9 took pytrec_eval 15 GB, one of 10^6 minutes of nDCG; 10^20
    overflowed its C int. Python alone reads 1_0 as 10 and Arabic-Indic digits."""
    for i, label in enumerate(["99999999999999999999", "2000000000", "10001", "-10001"]):
        q = write(tmp_path / f"q{i}.txt", ["101 0 p064 1", f"101 0 p092 {label}"])
        refused(run("qrels", "-m", "ndcg", q, DEMO / "good.run"), q, 2, "out of range")
    q = write(tmp_path / "ok.txt", ["101 0 p064 10000", "101 0 p092 -10000"])
    assert run("qrels", "-m", "ndcg", q, DEMO / "good.run").code == 0
    for i, label in enumerate(["1_0", "\u0661"]):
        q = write(tmp_path / f"u{i}.txt", ["101 0 p064 1", f"101 0 p092 {json.loads(chr(34) + label + chr(34))}"])
        refused(run("qrels", "-m", "map", q, DEMO / "good.run"), q, 2, "is not an integer")
    r = write(tmp_path / "r.run", ["101 Q0 p064 1 2_0 t"])
    refused(run("qrels", "-m", "map", DEMO / "qrels.txt", r), r, 1, "is not a number")
    g = write(tmp_path / "g.jsonl", [grade_json(prompt="file:custom", grade=2_000_000_000)])
    refused(run("qrels", g), g, 1, "out of range")


def test_verify_refuses_qrels_without_a_query_of_the_grades(tmp_path):
    grades = tmp_path / "g.jsonl"
    grades.write_text(json.dumps({"query_id": "101", "doc_id": "d1", "item_id": "101/a", "kind": "question",
                                  "grade": 5, "parse_ok": True, "model": "m", "prompt": "question-selfrating"}) + "\n")
    qrels = tmp_path / "other.qrels"
    qrels.write_text("999 0 d1 2\n")
    for sub in ("spurious", "uncovered"):
        res = run("verify", sub, grades, qrels)
        assert res.escaped is None and res.code == 2
        assert res.last_line.startswith(f"exam-verify: {qrels}: no query in common with the grades of {grades}")


# ---- qrels_jg labels, preference levels, -Z files ---------------------------------------------

@pytest.mark.parametrize("label, why", [
    ("abc", "'abc' is not an integer"),
    ("1.5", "'1.5' is not an integer"),
    ("1_0", "'1_0' is not an integer"),
    ("2000000000", "out of range"),
])
def test_a_qrels_jg_label_that_is_not_a_small_integer_is_refused(tmp_path, run_file, label, why):
    qrels = tmp_path / "jg.txt"
    qrels.write_text(f"q1 0 d1 1\nq1 0 d2 {label}\n")
    msg = one_line_refusal(run("qrels", "-R", "qrels_jg", "-m", "qrels_jg", qrels, run_file), "exam-qrels")
    assert f"{qrels}:2:" in msg and why in msg


@pytest.mark.parametrize("level, why", [("high", "'high' is not a number"), ("nan", "not a number")])
def test_a_preference_level_that_is_not_a_number_is_refused(tmp_path, run_file, level, why):
    prefs = tmp_path / "prefs.txt"
    prefs.write_text(f"q1 a 0 d1 2\nq1 a 0 d2 {level}\n")
    msg = one_line_refusal(run("qrels", "-R", "prefs", "-m", "prefs_simp", prefs, run_file), "exam-qrels")
    assert f"{prefs}:2:" in msg and why in msg


@pytest.mark.parametrize("mean, stddev, bad", [("abc", "0.1", "mean 'abc'"), ("0.5", "0.1e", "stddev '0.1e'"),
                                               ("0.5", "١", "stddev '١'")])
def test_a_zscore_that_is_not_a_number_is_refused(tmp_path, run_file, mean, stddev, bad):
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    z = tmp_path / "z.txt"
    z.write_text(f"q1 P_5 0.3 0.1\nq1 map {mean} {stddev}\n")
    msg = one_line_refusal(run("qrels", "-Z", z, "-m", "map", "-m", "P.5", qrels, run_file), "exam-qrels")
    assert f"{z}:2:" in msg and f"{bad} is not a number" in msg


def test_zscores_keep_the_nan_and_inf_that_trec_eval_prints(tmp_path, run_file):
    """trec_eval's own test suite feeds -Z a file of its output, "nan" included."""
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    z = tmp_path / "z.txt"
    z.write_text("q1 map -nan nan\nq1 P_5 0.1 inf\n")
    res = run("qrels", "-q", "-Z", z, "-m", "map", "-m", "P.5", qrels, run_file)
    assert res.code == 0, res.stderr
    rows = {tuple(line.split()[:2]): line.split()[2] for line in res.stdout.splitlines()}
    assert rows[("Zmap", "q1")] in ("nan", "-nan")
    assert rows[("ZP_5", "q1")] == "0.0000"  # (0.2 - 0.1) / inf


# ---- measure parameters, levels and depths, held to trec_eval ----------------------------------

RUNS = [DEMO / "good.run", DEMO / "poor.run"]


@pytest.mark.parametrize("gains", ["ndcg.1=3,2=9", "ndcg_rel.1=x", "ndcg.1="])
def test_gain_measures_on_a_leaderboard(gains, run_cli, trec_eval_binary):
    """trec_eval parses a gain list in place on every evaluation; pytrec_eval evaluating a
    second run with the same evaluator crashed (SIGSEGV). Every run's value must be
    trec_eval's."""
    res = run_cli("exam-qrels", "-m", gains, "-m", "map", DEMO / "qrels.txt", *RUNS)
    assert res.returncode == 0, (res.returncode, res.stderr)
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert rows[0][0] == "run" and len(rows) == 3
    for row, run_path in zip(rows[1:], RUNS):
        te = subprocess.run([str(trec_eval_binary), "-m", gains, "-m", "map", str(DEMO / "qrels.txt"),
                             str(run_path)], capture_output=True, text=True, check=True)
        expected = {line.split("\t")[0].strip(): line.split("\t")[2] for line in te.stdout.splitlines()}
        assert dict(zip(rows[0][1:], row[1:])) == expected


@pytest.mark.parametrize("runs", [RUNS[:1], RUNS], ids=["one-run", "leaderboard"])
def test_depth_beyond_a_c_long_is_no_limit(runs, trec_eval_binary):
    """-M 99999999999999999999: trec_eval's atol makes it LONG_MAX (no limit); numpy raised
    OverflowError comparing ranks with it."""
    huge = run("qrels", "-M", "99999999999999999999", "-m", "map", DEMO / "qrels.txt", *runs)
    plain = run("qrels", "-m", "map", DEMO / "qrels.txt", *runs)
    assert huge.escaped is None and huge.code == 0, (huge.escaped, huge.stderr)
    assert huge.stdout == plain.stdout
    te = subprocess.run([str(trec_eval_binary), "-M", "99999999999999999999", "-m", "map", str(DEMO / "qrels.txt"),
                         str(runs[0])], capture_output=True, text=True, check=True)
    assert te.stdout.split()[2] in huge.stdout


@pytest.mark.parametrize("runs", [RUNS[:1], RUNS], ids=["one-run", "leaderboard"])
@pytest.mark.parametrize("digits", [23, 5000], ids=["past-a-long", "past-int-limit"])
def test_cutoff_beyond_a_c_long_is_clamped_as_atol_does(runs, digits, trec_eval_binary):
    """-m P.99999999999999999999999: trec_eval's atol clamps the cutoff to LONG_MAX and
    prints P_9223372036854775807; we raised OverflowError converting it to a C long (and
    ValueError past int()'s 4300 digits)."""
    measure = "P." + "9" * digits
    res = run("qrels", "-m", measure, DEMO / "qrels.txt", *runs)
    assert res.escaped is None and res.code == 0, (res.escaped, res.stderr)
    te = subprocess.run([str(trec_eval_binary), "-m", measure, str(DEMO / "qrels.txt"),
                         str(runs[0])], capture_output=True, text=True, check=True)
    name, _, value = te.stdout.split()
    assert name == "P_9223372036854775807"
    if len(runs) == 1:
        assert res.stdout == te.stdout
    else:
        assert res.stdout.splitlines()[:2] == [f"run\t{name}", f"good\t{value}"]


def test_a_relevance_level_below_0_is_scored_as_trec_eval_scores_it(tmp_path):
    """trec_eval counts a retrieved document the qrels do not judge as relevant there
    (m_map.c compares each ranked label, -1 for such a document, with the level), but not
    in num_rel: map 1.0 here where level 0 gives 0.25. It was refused; trec_eval's output
    is well defined, so exam-qrels now gives it (tests/trec_eval/test_trec_eval_departures.py holds
    it to the binary)."""
    qrels, run_file = tmp_path / "q", tmp_path / "r"
    qrels.write_text("1 0 a 1\n1 0 b 0\n")
    run_file.write_text("1 Q0 z 1 2 t\n1 Q0 a 2 1 t\n")
    for level in ("-1", "-5"):
        res = run("qrels", "-l", level, "-m", "map", "-m", "num_rel", qrels, run_file)
        assert res.code == 0 and res.stdout == "num_rel               \tall\t2\nmap                   \tall\t1.0000\n"
    res = run("qrels", "-l", "0", "-m", "map", qrels, run_file)
    assert res.code == 0 and res.stdout == "map                   \tall\t0.2500\n"


# Each case: exam-qrels' own output checked on what it must say, and, where trec_eval can
# be built, its bytes held to the binary's.
DIFF_CASES = {
    # -Z of gm_map past exp's range: a traceback (OverflowError); C's exp gives inf
    "gm_map_zscore_overflow": ("1 0 d1 1\n", "1 Q0 d1 1 1 r\n", ["-m", "gm_map", "-Z", "{z}"],
                               "1 gm_map -1000 1\n", "Zgm_map                \tall\t   inf\n"),
    # -l past a C int, on measures pytrec_eval computes: a traceback (TypeError)
    "level_past_int_infAP": ("1 0 d1 1\n1 0 d2 0\n", "1 Q0 d1 1 1 r\n1 Q0 d2 1 0.5 r\n",
                             ["-l", "2147483648", "-m", "infAP"], None, "infAP                 \tall\t0.0000\n"),
    "level_past_int_ndcg": ("1 0 d1 1\n1 0 d2 0\n", "1 Q0 d1 1 1 r\n1 Q0 d2 1 0.5 r\n",
                            ["-l", "99999999999999999999", "-m", "ndcg"], None, "ndcg                  \tall\t1.0000\n"),
    # trec_eval's append_float keeps 8 characters of "%3.2f"
    "float_name_truncated": ("1 0 d1 1\n", "1 Q0 d1 1 1 r\n", ["-m", "iprec_at_recall.123456"], None,
                             "iprec_at_recall_123456.0\tall\t0.0000\n"),
    "float_name_negative": ("1 0 d1 1\n", "1 Q0 d1 1 1 r\n", ["-m", "Rprec_mult.-12345"], None,
                            "Rprec_mult_-12345.0   \tall\t0.0000\n"),
    # G's NaN: "-nan" as trec_eval prints it (pytrec_eval's is positive)
    "G_negative_nan": ("1 0 d1 1\n", "1 Q0 x 1 1 r\n", ["-q", "-m", "G.-1=5"], None,
                       "G_-1=5                \t1\t  -nan\nG_-1=5                \tall\t  -nan\n"),
    # a later parameter for a measure that has one is ignored unchecked, as trec_eval does
    "later_bad_cutoff_ignored": ("1 0 d1 1\n", "1 Q0 d1 1 1 r\n", ["-m", "P.5", "-m", "P.0"], None,
                                 "P_5                   \tall\t0.2000\n"),
    "later_gains_ignored": ("1 0 d1 1\n", "1 Q0 d1 1 1 r\n", ["-m", "success.1", "-m", "success.1,1"], None,
                            "success_1             \tall\t1.0000\n"),
    # a cutoff of nan: numpy's RuntimeWarning reached stderr
    "iprec_nan_cutoff_quiet": ("1 0 d1 1\n", "1 Q0 d1 1 1 r\n", ["-m", "iprec_at_recall.nan"], None,
                               "iprec_at_recall_nan   \tall\t1.0000\n"),
}


@pytest.mark.parametrize("case", sorted(DIFF_CASES))
def test_exam_qrels_prints_trec_eval_bytes_where_it_failed_or_differed(tmp_path, case, request):
    qrels_text, run_text, flags, z_text, expected = DIFF_CASES[case]
    qrels, runf, z = tmp_path / "q", tmp_path / "r", tmp_path / "z"
    qrels.write_text(qrels_text)
    runf.write_text(run_text)
    if z_text is not None:
        z.write_text(z_text)
    flags = [f.format(z=z) for f in flags]
    res = run("qrels", *flags, qrels, runf)
    assert res.escaped is None and res.code == 0, (res.escaped, res.stderr)
    assert res.stdout == expected
    warned = case.startswith("later_")
    assert (res.stderr != "") == warned, res.stderr
    try:
        binary = request.getfixturevalue("trec_eval_binary")
    except pytest.skip.Exception:
        return
    import subprocess

    te = subprocess.run([str(binary), *flags, str(qrels), str(runf)], capture_output=True, text=True, timeout=60)
    assert te.returncode == 0 and te.stdout == res.stdout, te.stdout
