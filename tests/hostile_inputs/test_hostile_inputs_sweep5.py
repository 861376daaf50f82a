"""Hostile inputs of a fifth sweep (2026-11-26): numbers trec_eval reads with atof/atol
without a word ("abc" is 0, "1.5" is 1) in the judgment formats beside the qrels
(qrels_jg labels, preference levels, -Z means and stddevs), which exam-qrels read the same
silent way. Each refusal: one line naming file and line, exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from inproc import run

RUN = "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq1 Q0 d3 3 1.0 r\n"


def _one_line(res, code: int = 2) -> str:
    assert res.escaped is None, res.escaped
    assert "Traceback" not in res.stderr
    assert res.code == code, (res.code, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("exam-qrels: "), res.stderr
    return lines[0]


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    p = tmp_path / "r.run"
    p.write_text(RUN)
    return p


@pytest.mark.parametrize("label, why", [
    ("abc", "'abc' is not an integer"),
    ("1.5", "'1.5' is not an integer"),
    ("1_0", "'1_0' is not an integer"),
    ("2000000000", "out of range"),
])
def test_a_qrels_jg_label_that_is_not_a_small_integer_is_refused(tmp_path, run_file, label, why):
    qrels = tmp_path / "jg.txt"
    qrels.write_text(f"q1 0 d1 1\nq1 0 d2 {label}\n")
    msg = _one_line(run("qrels", "-R", "qrels_jg", "-m", "qrels_jg", qrels, run_file))
    assert f"{qrels}:2:" in msg and why in msg


@pytest.mark.parametrize("level, why", [("high", "'high' is not a number"), ("nan", "not a number")])
def test_a_preference_level_that_is_not_a_number_is_refused(tmp_path, run_file, level, why):
    prefs = tmp_path / "prefs.txt"
    prefs.write_text(f"q1 a 0 d1 2\nq1 a 0 d2 {level}\n")
    msg = _one_line(run("qrels", "-R", "prefs", "-m", "prefs_simp", prefs, run_file))
    assert f"{prefs}:2:" in msg and why in msg


@pytest.mark.parametrize("mean, stddev, bad", [("abc", "0.1", "mean 'abc'"), ("0.5", "0.1e", "stddev '0.1e'"),
                                               ("0.5", "١", "stddev '١'")])
def test_a_zscore_that_is_not_a_number_is_refused(tmp_path, run_file, mean, stddev, bad):
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    z = tmp_path / "z.txt"
    z.write_text(f"q1 P_5 0.3 0.1\nq1 map {mean} {stddev}\n")
    msg = _one_line(run("qrels", "-Z", z, "-m", "map", "-m", "P.5", qrels, run_file))
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


# ---- options that would change nothing --------------------------------------------------
# Given where they apply to nothing, they were accepted with exit 0: a Makefile whose
# grades file became a qrels file went on scoring another thing without a word.

DEMO = Path(__file__).resolve().parents[2] / "exam_eval" / "demo_data"


def _usage_line(res, prog: str) -> str:
    assert res.escaped is None, res.escaped
    assert res.code == 1, (res.code, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"exam-{prog}: "), res.stderr
    return lines[0]


def _grades_file(tmp_path: Path, parsed: bool = True, item: bool = True) -> Path:
    from exam_eval.io.grades import Grade, grade_line

    p = tmp_path / "grades.jsonl"
    p.write_text("".join(grade_line(Grade(query_id="q1", doc_id=f"d{i}", item_id="q1/i1" if item else None,
                                          kind="question" if item else None, grade=i if parsed else None,
                                          probs=None, answer=str(i), parse_ok=parsed, model="m",
                                          prompt="question-selfrating"))
                         for i in range(1, 4)))
    return p


@pytest.mark.parametrize("args, flag, what", [
    (["--min-grade", "3"], "--min-grade", "is a qrels file"),
    (["--label", "binary"], "--label", "is a qrels file"),
    (["--model", "m"], "--model", "is a qrels file"),
    (["--kind", "nugget"], "--kind", "is a qrels file"),
    (["-R", "qrels_jg", "-m", "qrels_jg", "--prompt", "p"], "--prompt", "is read with -R qrels_jg"),
])
def test_exam_qrels_refuses_grade_options_on_labels_that_are_not_grades(run_file, args, flag, what):
    msg = _usage_line(run("qrels", *args, DEMO / "qrels.txt", run_file), "qrels")
    assert f"{flag} applies to a grades file" in msg and what in msg


def test_min_grade_with_the_maximum_grade_label_is_refused(tmp_path, run_file):
    grades = _grades_file(tmp_path)
    msg = _usage_line(run("qrels", "--min-grade", "3", grades, run_file), "qrels")
    assert "--min-grade is the threshold of --label count|binary" in msg
    counted = run("qrels", "--label", "count", "--min-grade", "3", grades)
    assert counted.code == 0 and counted.stdout.splitlines() == ["q1 0 d1 0", "q1 0 d2 0", "q1 0 d3 1"]


@pytest.mark.parametrize("sub, extra", [("agreement", []), ("qrels", []),
                                        ("interval", [DEMO / "good.run", "--methods", "bootstrap"])])
def test_exam_correlate_refuses_a_grader_option_on_qrels(sub, extra):
    msg = _usage_line(run("correlate", sub, "--model", "m", DEMO / "qrels.txt", DEMO / "qrels.txt", *extra),
                      "correlate")
    assert "--model applies to a grades file" in msg and "qrels.txt is a qrels file" in msg


def test_cache_and_no_cache_together_are_a_usage_error(tmp_path, run_file):
    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"query_id": "q1", "item_id": "q1/i1", "kind": "question", "text": "What?"}\n')
    passages = tmp_path / "p.jsonl"
    passages.write_text('{"doc_id": "d1", "text": "Bees."}\n')
    cache, out = tmp_path / "c.sqlite", tmp_path / "g.jsonl"
    msg = _usage_line(run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--bank", bank, "--passages", passages, "--cache", cache,
                          "--no-cache", run_file, "-o", out), "grade")
    assert "--no-cache" in msg and str(cache) in msg
    assert not cache.exists() and not out.exists()


def test_exam_verify_refuses_a_query_the_grades_lack(tmp_path):
    grades = _grades_file(tmp_path)
    msg = _usage_line(run("verify", "grading", grades, "-q", "nosuch"), "verify")
    assert "-q nosuch" in msg and "its queries: q1" in msg
    assert run("verify", "grading", grades, "-q", "q1").code == 0


def test_a_method_named_twice_gives_one_interval_row(tmp_path, run_file):
    qrels = tmp_path / "q.txt"
    qrels.write_text("".join(f"q{k} 0 d{i} {(i + k) % 2}\n" for k in range(1, 5) for i in range(1, 4)))
    runs = tmp_path / "r.run"
    runs.write_text("".join(f"q{k} Q0 d{i} {i} {4 - i} r\n" for k in range(1, 5) for i in range(1, 4)))
    once = run("correlate", "interval", qrels, qrels, runs, "--methods", "bootstrap", "--samples", "100")
    twice = run("correlate", "interval", qrels, qrels, runs, "--methods", "bootstrap,bootstrap", "--samples", "100")
    assert once.code == twice.code == 0, (once.stderr, twice.stderr)
    assert twice.stdout == once.stdout and len(once.stdout.splitlines()) == 2  # header and the one row


# ---- refusals after notices ------------------------------------------------------------

def test_leaderboards_with_too_few_systems_in_common_are_refused_in_one_line(tmp_path):
    truth = tmp_path / "truth.tsv"
    truth.write_text("run\tP_5\n" + "".join(f"r{i}\t0.{i}1\n" for i in range(5)))
    pred = tmp_path / "pred.tsv"
    pred.write_text("run\tP_5\n" + "".join(f"s{i}\t0.{i}1\n" for i in range(4)) + "r1\t0.3\n")
    res = run("correlate", "leaderboard", truth, pred)
    assert res.code == 2 and res.escaped is None
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "only 1 system(s) in common" in lines[0], res.stderr


def test_exam_cover_refuses_in_one_line_without_notes_first(tmp_path, run_file):
    """Grades without bank items, some unparsed: the unparsed note came before the refusal."""
    grades = tmp_path / "grades.jsonl"
    grades.write_text(_grades_file(tmp_path, item=False).read_text()
                      + _grades_file(tmp_path, parsed=False, item=False).read_text())
    res = run("cover", grades, run_file)
    assert res.code == 2 and res.escaped is None
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "no grades for bank items" in lines[0], res.stderr


# ---- exam-qrels against trec_eval: a differential sweep's finds ------------------------
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


# ---- interrupts of the chat commands ---------------------------------------------------

def test_sigterm_stops_assign_as_ctrl_c_does_and_keeps_the_answers_that_came(tmp_path):
    """SIGTERM killed exam-nuggets assign outright (no message, nothing committed), and a
    Ctrl-C threw away the answers of the 256-window chunk in flight: the rerun asked every
    window again. Now it stops with status 130 and the five answers that came are cached:
    the rerun asks the other seven only."""
    import json
    import os
    import subprocess
    import sys

    from openai_stub import OpenAIStub, Reply, interrupt_when_asked

    reports = tmp_path / "reports.jsonl"
    reports.write_text("".join(json.dumps({"metadata": {"run_id": f"r{i}", "topic_id": "101", "team_id": "t"},
                                           "responses": [{"text": f"Bees make honey, report {i}.", "citations": []}],
                                           "references": []}) + "\n" for i in range(12)))
    five = "['support', 'support', 'not_support', 'support', 'partial_support']"
    cache, out = tmp_path / "c.sqlite", tmp_path / "a.jsonl"
    turn = {"n": 0}

    def five_then_hang(req):
        turn["n"] += 1
        return Reply(text=five) if turn["n"] <= 5 else Reply(delay=1000)

    def argv(url):
        return [sys.executable, "-c", "import exam_eval.commands.nuggets as m; m.main()", "assign", "--reports",
                str(reports), "--bank", str(DEMO / "nuggetized.jsonl"), "--topics", str(DEMO / "topics.tsv"),
                "--backend", "endpoint", "--base-url", url, "--model", "m", "--concurrency", "4",
                "--cache", str(cache), "-o", str(out)]

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]), EXAM_EVAL_PROGRESS="0")
    with OpenAIStub(five_then_hang) as stub:
        code, err = interrupt_when_asked(argv(stub.url), env, stub, 8)
    assert code == 130, err
    assert err.splitlines()[-1] == ("exam-nuggets: interrupted; the answers that came are cached: run the same "
                                    "command again to go on") and "Traceback" not in err, err
    assert not out.exists()
    with OpenAIStub(lambda r: five) as stub:
        done = subprocess.run(argv(stub.url), capture_output=True, text=True, env=env, timeout=120)
        asked = len(stub.requests)
    assert done.returncode == 0, done.stderr
    assert asked == 7
    assert len(out.read_text().splitlines()) == 12 * 5  # a line per (report, nugget)


# ---- -O values -------------------------------------------------------------------------

@pytest.mark.parametrize("backend, option, why", [
    ("endpoint", "concurrency=0", "-O concurrency= must be an integer at least 1"),
    ("endpoint", "batch_size=0", "-O batch_size= must be an integer at least 1"),
    ("endpoint", "max_new_tokens=0", "-O max_new_tokens= must be an integer at least 1"),
    ("endpoint", "logprobs=maybe", "-O logprobs= must be true or false"),
    ("endpoint", "logprobs=ture", "-O logprobs= must be true or false"),
    ("scripted", "score=maybe", "-O score= must be true or false"),
])
def test_backend_option_values_out_of_range_or_not_a_switch_are_refused(tmp_path, run_file, backend, option, why):
    """0 became the default (64, 256, 64) through ``int(x or default)``, and a switch that
    was not "true" was false: scoring turned off by a typo. Both with exit 0."""
    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"query_id": "q1", "item_id": "q1/i1", "kind": "question", "text": "What?"}\n')
    passages = tmp_path / "p.jsonl"
    passages.write_text('{"doc_id": "d1", "text": "Bees."}\n')
    where = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"] if backend == "endpoint" else []
    out = tmp_path / "g.jsonl"
    msg = _usage_line(run("grade", "--backend", backend, *where, "-O", option, "--prompt", "question-selfrating",
                          "--bank", bank, "--passages", passages, "--no-cache", run_file, "-o", out), "grade")
    assert why in msg
    assert not out.exists()


# ---- flags a back end does not take, in the chat and generation commands ------------------

@pytest.mark.parametrize("argv, flag", [
    (["genq", "generate", "--backend", "scripted", "--script", "x.jsonl", "--temperature", "0.5"], "--temperature"),
    (["genq", "generate", "--backend", "scripted", "--script", "x.jsonl", "--concurrency", "3"], "--concurrency"),
    (["genq", "generate", "--model", "m", "--device", "cuda"], "--device"),
    (["genq", "generate", "--model", "m", "-O", "foo=bar"], "--backend-option"),
    (["genq", "generate", "--model", "m", "--script", "x.jsonl"], "--script"),
])
def test_exam_genq_refuses_flags_its_back_end_does_not_take(argv, flag):
    """exam-grade said so ("back end 'scripted' does not take --base-url"); exam-genq ran
    with them ignored, exit 0."""
    prog, *rest = argv
    msg = _usage_line(run(prog, *rest, DEMO / "topics.tsv", "--dry-run"), "genq")
    assert msg.startswith(f"exam-genq: back end '{rest[rest.index('--backend') + 1] if '--backend' in rest else 'endpoint'}'"
                          f" does not take {flag}"), msg


def test_exam_nuggets_assign_refuses_flags_its_chat_back_end_does_not_take(tmp_path):
    reports = tmp_path / "reports.jsonl"
    reports.write_text('{"metadata": {"run_id": "r", "topic_id": "101", "team_id": "t"}, '
                       '"responses": [{"text": "Bees make honey.", "citations": []}], "references": []}\n')
    out = tmp_path / "a.jsonl"
    msg = _usage_line(run("nuggets", "assign", "--backend", "scripted", "--script", DEMO / "assign-script.jsonl",
                          "--timeout", "5", "--reports", reports, "--bank", DEMO / "nuggetized.jsonl",
                          "--topics", DEMO / "topics.tsv", "--no-cache", "-o", out), "nuggets")
    assert msg == "exam-nuggets: back end 'scripted' does not take --timeout"
    assert not out.exists()


# ---- options given where they change nothing ---------------------------------------------

def _grade_world(tmp_path: Path) -> list:
    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"query_id": "q1", "item_id": "q1/i1", "kind": "question", "text": "What?"}\n')
    passages = tmp_path / "p.jsonl"
    passages.write_text('{"doc_id": "d1", "text": "Bees."}\n')
    return ["--backend", "scripted", "--prompt", "question-selfrating", "--bank", bank, "--passages", passages,
            "--no-cache"]


def test_exam_grade_refuses_the_depth_without_runs_and_a_verifier_without_verification(tmp_path, run_file):
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\n")
    out = tmp_path / "g.jsonl"
    msg = _usage_line(run("grade", *_grade_world(tmp_path), "--qrels", qrels, "--depth", "3", "-o", out), "grade")
    assert msg == "exam-grade: --depth is the pool depth of RUNs: give a RUN"
    msg = _usage_line(run("grade", *_grade_world(tmp_path), "--verifier-backend", "endpoint", run_file, "-o", out),
                      "grade")
    assert msg == "exam-grade: --verifier-backend needs --verify llm"
    assert not out.exists()


@pytest.mark.parametrize("extra, flag", [(["-q", "--methods", "bootstrap"], "--methods"),
                                         (["--methods", "bootstrap", "--crc-correction", "crc"], "--crc-correction")])
def test_interval_options_that_would_change_nothing_are_refused(extra, flag):
    msg = _usage_line(run("correlate", "interval", DEMO / "qrels.txt", DEMO / "qrels.txt", DEMO / "good.run",
                          *extra), "correlate")
    assert msg.startswith(f"exam-correlate: {flag} ")


def test_exam_nuggets_refuses_inputs_and_options_its_source_does_not_read(tmp_path):
    grades, support = _grades_file(tmp_path), tmp_path / "support.jsonl"
    support.write_text(grades.read_text())
    reports = tmp_path / "reports.jsonl"
    reports.write_text('{"metadata": {"run_id": "r", "topic_id": "q1", "team_id": "t"}, '
                       '"responses": [{"text": "Bees.", "citations": []}], "references": []}\n')
    cases = [
        (["qrels", grades, "--reports", reports, "--from", "support", "--support-grades", support],
         "--from support reads --support-grades only"),
        (["qrels", "--reports", reports, "--from", "support", "--support-grades", support, "--support-min", "1"],
         "--support-min applies to GRADES"),
        (["qrels", grades, "--reports", reports, "--from", "nuggets", "--support-grades", support],
         "--from nuggets reads GRADES only"),
        (["bank", "--to", "ours", "--topics", DEMO / "topics.tsv", DEMO / "nuggets.jsonl"],
         "--topics applies to --to nuggetizer|autojudge"),
    ]
    for argv, why in cases:
        msg = _usage_line(run("nuggets", *argv), "nuggets")
        assert why in msg, msg


# ---- thresholds off the grades' scale ------------------------------------------------------

def test_thresholds_off_the_scale_are_refused_or_said(tmp_path, run_file):
    """--support-min 99 made every score 0 and --support-min -3 every score 1, exit 0;
    --min-grade 99 made every label 0 without a word."""
    grades = _grades_file(tmp_path)  # question-selfrating grades 1..3 on the scale 0-5
    counted = run("qrels", "--label", "count", "--min-grade", "9", grades)
    assert counted.code == 0 and all(line.endswith(" 0") for line in counted.stdout.splitlines())
    assert counted.stderr == f"exam-qrels: {grades}: no grade reaches --min-grade 9 (the highest is 3): every label is 0\n"
    assert _usage_line(run("qrels", "--label", "count", "--min-grade", "-1", grades), "qrels")
    covered = run("cover", "--min-grade", "5", grades, run_file)
    assert covered.code == 0 and "no grade reaches --min-grade 5 (the highest is 3)" in covered.stderr
    from exam_eval.errors import UsageError
    from exam_eval.measures.nugget_scores import thresholds_for

    for support, partial in ((99, 50), (-3, -5), (5, 0), (6, 2)):
        with pytest.raises(UsageError, match="on the scale 0-5"):
            thresholds_for((0, 5), support, partial)
    top_and_bottom = thresholds_for((0, 5), 5, 1)  # the scale's own levels pass
    assert (top_and_bottom.support, top_and_bottom.partial) == (5, 1)
    with pytest.raises(UsageError, match="--support-min 9: .* on the scale 0-2"):
        thresholds_for((0, 2), 9, 1)


# ---- environment variables -----------------------------------------------------------------

@pytest.mark.parametrize("value", ["abc", "0", "-2", "2.5"])
def test_a_workers_count_that_is_not_one_or_more_is_a_usage_error(monkeypatch, value):
    """It fell back to the default without a word."""
    monkeypatch.setenv("EXAM_EVAL_WORKERS", value)
    msg = _usage_line(run("qrels", DEMO / "qrels.txt", DEMO / "good.run", DEMO / "poor.run"), "qrels")
    assert msg == f"exam-qrels: EXAM_EVAL_WORKERS={value!r}: give a whole number of processes, 1 or more"


@pytest.mark.parametrize("value, shown", [("off", False), ("false", False), ("No", False), ("0", False),
                                          ("1", True)])
def test_progress_switch_reads_the_usual_words_for_off(monkeypatch, value, shown):
    from exam_eval.progress import _RateBar, progress_bar

    monkeypatch.setenv("EXAM_EVAL_PROGRESS", value)
    with progress_bar(3, "test", "items") as bar:
        assert isinstance(bar, _RateBar) == shown


@pytest.mark.parametrize("argv, why", [
    (["--run", DEMO / "good.run", "--min-label", "2"], "--min-label applies to --qrels"),
    (["--qrels", DEMO / "qrels.txt", "--depth", "5"], "--depth applies to --run"),
])
def test_nuggetize_refuses_document_options_of_another_source(argv, why):
    msg = _usage_line(run("genq", "nuggetize", DEMO / "topics.tsv", *argv, "--backend", "scripted", "--script",
                          DEMO / "nuggetize-script.jsonl", "--no-cache"), "genq")
    assert msg == f"exam-genq: {why}"


@pytest.mark.parametrize("backend, why", [
    (["scripted", "-O", "score=true"], "scores the labels' probabilities: add --generate-ratings"),
    (["embedding"], "generates no text"),
])
def test_a_rating_rule_where_nothing_generated_is_read_is_refused(tmp_path, run_file, backend, why):
    """The grades were scored, the rule never applied, and yet the lines said
    question-selfrating/exam-pp and were cached apart, exit 0."""
    world = _grade_world(tmp_path)
    world[1:2] = backend
    out = tmp_path / "g.jsonl"
    msg = _usage_line(run("grade", *world, "--rating-rule", "exam-pp", run_file, "-o", out), "grade")
    assert msg == f"exam-grade: --rating-rule exam-pp reads generated ratings, and back end '{backend[0]}' {why}"
    assert not out.exists()


@pytest.mark.parametrize("shape, flag", [("table", "--summary-only"), ("trec_eval", "--digits")])
def test_nugget_score_options_a_format_does_not_use_are_refused(tmp_path, shape, flag):
    """--summary-only with a table (means only already), --digits with trec_eval (always
    4): the same output, exit 0."""
    reports = tmp_path / "reports.jsonl"
    reports.write_text('{"metadata": {"run_id": "r", "topic_id": "q1", "team_id": "t"}, '
                       '"responses": [{"text": "Bees.", "citations": []}], "references": []}\n')
    extra = ["--summary-only"] if flag == "--summary-only" else ["--digits", "6"]
    msg = _usage_line(run("nuggets", "score", "--reports", reports, "--bank", DEMO / "nuggets.jsonl", "--format", shape,
                          *extra, _grades_file(tmp_path)), "nuggets")
    assert msg.startswith(f"exam-nuggets: {flag} applies to --format ")


@pytest.mark.parametrize("extra, flag", [(["-m", "ndcg@10", "-l", "3"], "--rel-level"), (["-l", "2"], "--rel-level"),
                                         (["-m", "p@5", "--min-grade", "3"], "--min-grade")])
def test_interval_thresholds_of_another_metric_are_refused(extra, flag):
    """-l 3 with ndcg@10 gave -l 2's output, --min-grade with a rank metric the same."""
    msg = _usage_line(run("correlate", "interval", DEMO / "qrels.txt", DEMO / "qrels.txt", DEMO / "good.run",
                          "--methods", "bootstrap", *extra), "correlate")
    assert msg.startswith(f"exam-correlate: {flag} ")
    ok = run("correlate", "interval", DEMO / "qrels.txt", DEMO / "qrels.txt", DEMO / "good.run", "--methods",
             "bootstrap", "--samples", "100", "-m", "P_5", "-l", "2")
    assert ok.code == 0, ok.stderr


@pytest.mark.parametrize("extra", [["--min-grade", "3"], ["--passages", "p.jsonl"]])
def test_grid_tsv_refuses_the_page_options(tmp_path, extra):
    msg = _usage_line(run("verify", "grid", _grades_file(tmp_path), *extra), "verify")
    assert msg == f"exam-verify: {extra[0]} applies to --format html"
