"""Hostile command lines: option values out of range (seeds, sample counts, scales,
thresholds, EXAM_EVAL_WORKERS), options given where they apply to nothing (grade options
on a qrels file, a method's options without the method, a page's options for a TSV), and
output paths that name an input or another output, a folder, or a file that a run id
would put outside its folder.

Every refusal here: one line "exam-CMD: ..." on stderr, exit 1 for a usage error (2 where
a file's content or the disk is at fault), no traceback, and nothing written or changed:
no output, no partial file, no file outside the folder it names."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from inproc import run
from refusals import last_line_refusal, one_line_refusal
from tests.hostile_inputs._worlds import (DEMO, DEMO_GRADE, GOOD_QRELS, GOOD_RUN, ROOT, grade_args_without_run,
                                          grades_file, nugget_world, report_line, run_file,  # noqa: F401 (a fixture)
                                          write_jsonl)


# ---- exam-qrels ------------------------------------------------------------------------------

def test_usage_errors_exit_1(tmp_path, run_cli):
    q = tmp_path / "q.txt"
    q.write_text(GOOD_QRELS)
    r = tmp_path / "r.txt"
    r.write_text(GOOD_RUN)
    for args in (["-m", "nonsense", q, r], ["-m", "P.0", q, r], ["-m", "P.5,5", q, r], ["--bogus", q],
                 ["-q", q, r, r]):
        res = run_cli("exam-qrels", *args)
        one_line_refusal(res, "exam-qrels", code=1)


@pytest.mark.parametrize("flags", [["-m", "map"], ["-q"], ["-c"], ["-J"], ["-M", "5"], ["-l", "2"]])
def test_scoring_options_without_a_run_are_a_usage_error(flags, tmp_path):
    """exam-qrels -c -m ndcg_cut.10 grades.jsonl (an empty $(RUNS)) wrote qrels, exit 0."""
    res = run("qrels", *flags, DEMO / "qrels.txt")
    assert res.escaped is None and res.code == 1 and res.stdout == ""
    assert res.last_line.startswith(f"exam-qrels: {flags[0]} says how to score a RUN: give a RUN to score")


# Given where they apply to nothing, options were accepted with exit 0: a Makefile whose
# grades file became a qrels file went on scoring another thing without a word.
@pytest.mark.parametrize("args, flag, what", [
    (["--min-grade", "3"], "--min-grade", "is a qrels file"),
    (["--label", "binary"], "--label", "is a qrels file"),
    (["--model", "m"], "--model", "is a qrels file"),
    (["--kind", "nugget"], "--kind", "is a qrels file"),
    (["-R", "qrels_jg", "-m", "qrels_jg", "--prompt", "p"], "--prompt", "is read with -R qrels_jg"),
])
def test_exam_qrels_refuses_grade_options_on_labels_that_are_not_grades(run_file, args, flag, what):
    msg = one_line_refusal(run("qrels", *args, DEMO / "qrels.txt", run_file), "exam-qrels", code=1)
    assert f"{flag} applies to a grades file" in msg and what in msg


def test_min_grade_with_the_maximum_grade_label_is_refused(tmp_path, run_file):
    grades = grades_file(tmp_path)
    msg = one_line_refusal(run("qrels", "--min-grade", "3", grades, run_file), "exam-qrels", code=1)
    assert "--min-grade is the threshold of --label count|binary" in msg
    counted = run("qrels", "--label", "count", "--min-grade", "3", grades)
    assert counted.code == 0 and counted.stdout.splitlines() == ["q1 0 d1 0", "q1 0 d2 0", "q1 0 d3 1"]


def test_thresholds_off_the_scale_are_refused_or_said(tmp_path, run_file):
    """--support-min 99 made every score 0 and --support-min -3 every score 1, exit 0;
    --min-grade 99 made every label 0 without a word."""
    grades = grades_file(tmp_path)  # question-selfrating grades 1..3 on the scale 0-5
    counted = run("qrels", "--label", "count", "--min-grade", "9", grades)
    assert counted.code == 0 and all(line.endswith(" 0") for line in counted.stdout.splitlines())
    assert counted.stderr == f"exam-qrels: {grades}: no grade reaches --min-grade 9 (the highest is 3): every label is 0\n"
    assert one_line_refusal(run("qrels", "--label", "count", "--min-grade", "-1", grades), "exam-qrels", code=1)
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


# ---- exam-correlate ---------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--truth-max", "--pred-max"])
def test_qrels_comparison_scale_is_bounded(flag, tmp_path):
    """A kappa column per pair of thresholds: --truth-max 10^20 ran out of memory
    (MemoryError, or the OOM killer) before printing anything."""
    out = tmp_path / "cmp.tsv"
    res = run("correlate", "qrels", DEMO / "qrels.txt", DEMO / "qrels.txt", flag, "99999999999999999999", "-o", out)
    line = one_line_refusal(res, "exam-correlate", 1)
    assert line == f"exam-correlate: {flag} must be at most 100"
    assert not out.exists()
    res = run("correlate", "qrels", DEMO / "qrels.txt", DEMO / "qrels.txt", "--truth-max", "100", "--pred-max", "3")
    assert res.code == 0 and "kappa@100v3" in res.stdout.splitlines()[0], res.stderr


def test_negative_seed_is_a_usage_error(tmp_path):
    """numpy's generators take seeds >= 0: --seed -1 was a ValueError traceback."""
    out = tmp_path / "ci.tsv"
    res = run("correlate", "interval", DEMO / "qrels.txt", DEMO / "qrels.txt", DEMO / "good.run",
              "--seed", "-1", "-o", out)
    line = one_line_refusal(res, "exam-correlate", 1)
    assert line.startswith("exam-correlate: Invalid value for '--seed': -1 is not in the range x>=0.")
    assert not out.exists()


@pytest.mark.parametrize("samples", ["10000000000", "100000000000000000000"])
def test_bootstrap_samples_beyond_the_memory_are_a_usage_error(samples):
    """--samples 10^10 used to end in numpy's MemoryError traceback (745 GiB of draws),
    10^20 in "every method failed: Maximum allowed dimension exceeded"; both are now one
    line that says how many samples fit, before any work."""
    res = run("correlate", "interval", DEMO / "qrels.txt", DEMO / "qrels.txt", DEMO / "good.run", "--samples", samples)
    line = last_line_refusal(res, "exam-correlate", 1)  # after a notice of the methods left out
    assert "--samples" in line and "GiB" in line and "samples fit" in line
    fits = int(line.rsplit("at most ", 1)[1].split()[0].replace(",", ""))
    ok = run("correlate", "interval", DEMO / "qrels.txt", DEMO / "qrels.txt", DEMO / "good.run", "--samples",
             str(min(fits, 2000)), "--methods", "bootstrap")
    assert ok.code == 0 and "bootstrap" in ok.stdout


@pytest.mark.parametrize("sub, extra", [("agreement", []), ("qrels", []),
                                        ("interval", [DEMO / "good.run", "--methods", "bootstrap"])])
def test_exam_correlate_refuses_a_grader_option_on_qrels(sub, extra):
    res = run("correlate", sub, "--model", "m", DEMO / "qrels.txt", DEMO / "qrels.txt", *extra)
    msg = one_line_refusal(res, "exam-correlate", code=1)
    assert "--model applies to a grades file" in msg and "qrels.txt is a qrels file" in msg


@pytest.mark.parametrize("extra, flag", [(["-q", "--methods", "bootstrap"], "--methods"),
                                         (["--methods", "bootstrap", "--crc-correction", "crc"], "--crc-correction")])
def test_interval_options_that_would_change_nothing_are_refused(extra, flag):
    msg = one_line_refusal(run("correlate", "interval", DEMO / "qrels.txt", DEMO / "qrels.txt", DEMO / "good.run",
                               *extra), "exam-correlate", code=1)
    assert msg.startswith(f"exam-correlate: {flag} ")


@pytest.mark.parametrize("extra, flag", [(["-m", "ndcg@10", "-l", "3"], "--rel-level"), (["-l", "2"], "--rel-level"),
                                         (["-m", "p@5", "--min-grade", "3"], "--min-grade")])
def test_interval_thresholds_of_another_metric_are_refused(extra, flag):
    """-l 3 with ndcg@10 gave -l 2's output, --min-grade with a rank metric the same."""
    msg = one_line_refusal(run("correlate", "interval", DEMO / "qrels.txt", DEMO / "qrels.txt", DEMO / "good.run",
                               "--methods", "bootstrap", *extra), "exam-correlate", code=1)
    assert msg.startswith(f"exam-correlate: {flag} ")
    ok = run("correlate", "interval", DEMO / "qrels.txt", DEMO / "qrels.txt", DEMO / "good.run", "--methods",
             "bootstrap", "--samples", "100", "-m", "P_5", "-l", "2")
    assert ok.code == 0, ok.stderr


# ---- exam-grade, exam-genq, exam-verify, exam-nuggets ----------------------------------------------

@pytest.mark.parametrize("args", [["--report-unit", "report"], ["--verify", "llm"]])
def test_grade_options_that_cannot_apply_are_a_usage_error(args, tmp_path):
    res = run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache", "-k", "1",
              "--bank", DEMO / "questions.jsonl", "--passages", DEMO / "passages.jsonl", DEMO / "good.run",
              *args, "-o", tmp_path / "g.jsonl")
    line = one_line_refusal(res, "exam-grade", 1)
    assert line in ("exam-grade: --report-unit needs --reports",
                    "exam-grade: --verify llm verifies extracted answers; prompt 'question-selfrating' extracts "
                    "none (use an extraction prompt such as question-extraction)")
    assert not (tmp_path / "g.jsonl").exists()


def test_cache_and_no_cache_together_are_a_usage_error(tmp_path, run_file):
    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"query_id": "q1", "item_id": "q1/i1", "kind": "question", "text": "What?"}\n')
    passages = tmp_path / "p.jsonl"
    passages.write_text('{"doc_id": "d1", "text": "Bees."}\n')
    cache, out = tmp_path / "c.sqlite", tmp_path / "g.jsonl"
    res = run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--bank", bank,
              "--passages", passages, "--cache", cache, "--no-cache", run_file, "-o", out)
    msg = one_line_refusal(res, "exam-grade", code=1)
    assert "--no-cache" in msg and str(cache) in msg
    assert not cache.exists() and not out.exists()


def test_exam_grade_refuses_the_depth_without_runs_and_a_verifier_without_verification(tmp_path, run_file):
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\n")
    out = tmp_path / "g.jsonl"
    res = run("grade", *grade_args_without_run(tmp_path), "--qrels", qrels, "--depth", "3", "-o", out)
    msg = one_line_refusal(res, "exam-grade", code=1)
    assert msg == "exam-grade: --depth is the pool depth of RUNs: give a RUN"
    res = run("grade", *grade_args_without_run(tmp_path), "--verifier-backend", "endpoint", run_file, "-o", out)
    msg = one_line_refusal(res, "exam-grade", code=1)
    assert msg == "exam-grade: --verifier-backend needs --verify llm"
    assert not out.exists()


@pytest.mark.parametrize("argv, why", [
    (["--run", DEMO / "good.run", "--min-label", "2"], "--min-label applies to --qrels"),
    (["--qrels", DEMO / "qrels.txt", "--depth", "5"], "--depth applies to --run"),
])
def test_nuggetize_refuses_document_options_of_another_source(argv, why):
    msg = one_line_refusal(run("genq", "nuggetize", DEMO / "topics.tsv", *argv, "--backend", "scripted", "--script",
                               DEMO / "nuggetize-script.jsonl", "--no-cache"), "exam-genq", code=1)
    assert msg == f"exam-genq: {why}"


def test_exam_verify_refuses_a_query_the_grades_lack(tmp_path):
    grades = grades_file(tmp_path)
    msg = one_line_refusal(run("verify", "grading", grades, "-q", "nosuch"), "exam-verify", code=1)
    assert "-q nosuch" in msg and "its queries: q1" in msg
    assert run("verify", "grading", grades, "-q", "q1").code == 0


@pytest.mark.parametrize("extra", [["--min-grade", "3"], ["--passages", "p.jsonl"]])
def test_grid_tsv_refuses_the_page_options(tmp_path, extra):
    msg = one_line_refusal(run("verify", "grid", grades_file(tmp_path), *extra), "exam-verify", code=1)
    assert msg == f"exam-verify: {extra[0]} applies to --format html"


def test_exam_nuggets_refuses_inputs_and_options_its_source_does_not_read(tmp_path):
    grades, support = grades_file(tmp_path), tmp_path / "support.jsonl"
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
        msg = one_line_refusal(run("nuggets", *argv), "exam-nuggets", code=1)
        assert why in msg, msg


@pytest.mark.parametrize("shape, flag", [("table", "--summary-only"), ("trec_eval", "--digits")])
def test_nugget_score_options_a_format_does_not_use_are_refused(tmp_path, shape, flag):
    """--summary-only with a table (means only already), --digits with trec_eval (always
    4): the same output, exit 0."""
    reports = tmp_path / "reports.jsonl"
    reports.write_text('{"metadata": {"run_id": "r", "topic_id": "q1", "team_id": "t"}, '
                       '"responses": [{"text": "Bees.", "citations": []}], "references": []}\n')
    extra = ["--summary-only"] if flag == "--summary-only" else ["--digits", "6"]
    res = run("nuggets", "score", "--reports", reports, "--bank", DEMO / "nuggets.jsonl", "--format", shape,
              *extra, grades_file(tmp_path))
    msg = one_line_refusal(res, "exam-nuggets", code=1)
    assert msg.startswith(f"exam-nuggets: {flag} applies to --format ")


@pytest.mark.parametrize("target", ["ours", "autojudge"])
def test_bank_conversion_names_the_one_target_default_importance_applies_to(tmp_path, target):
    bank = write_jsonl(tmp_path / "bank.jsonl", [{"query_id": "101", "kind": "nugget", "text": "bees"}])
    res = run("nuggets", "bank", "--to", target, "--default-importance", "okay", bank)
    line = one_line_refusal(res, "exam-nuggets", code=1)
    assert line == "exam-nuggets: --default-importance applies to --to nuggetizer"


# ---- environment variables, interrupts ----------------------------------------------------------

@pytest.mark.parametrize("value", ["abc", "0", "-2", "2.5"])
def test_a_workers_count_that_is_not_one_or_more_is_a_usage_error(monkeypatch, value):
    """It fell back to the default without a word."""
    monkeypatch.setenv("EXAM_EVAL_WORKERS", value)
    msg = one_line_refusal(run("qrels", DEMO / "qrels.txt", DEMO / "good.run", DEMO / "poor.run"), "exam-qrels", code=1)
    assert msg == f"exam-qrels: EXAM_EVAL_WORKERS={value!r}: give a whole number of processes, 1 or more"


@pytest.mark.parametrize("value, shown", [("off", False), ("false", False), ("No", False), ("0", False),
                                          ("1", True)])
def test_progress_switch_reads_the_usual_words_for_off(monkeypatch, value, shown):
    from exam_eval.progress import _RateBar, progress_bar

    monkeypatch.setenv("EXAM_EVAL_PROGRESS", value)
    with progress_bar(3, "test", "items") as bar:
        assert isinstance(bar, _RateBar) == shown


def test_ctrl_c_while_a_command_imports_is_one_line(tmp_path):
    """The entry points import the command under a guard: an interrupt there printed a
    KeyboardInterrupt traceback from exam_eval's own imports."""
    import subprocess
    import sys

    code = ("import builtins, sys\n"
            "real = builtins.__import__\n"
            "def fake(name, *a, **k):\n"
            "    if name.endswith('grading.inputs') or name == 'click':\n"
            "        raise KeyboardInterrupt\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = fake\n"
            "from exam_eval.launch import grade\n"
            "sys.argv = ['exam-grade', '--help']\n"
            "grade()\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert res.returncode == 130 and res.stderr == "exam-grade: interrupted\n", res.stderr


# ---- output paths ----------------------------------------------------------------------------

REPORT = {"metadata": {"run_id": "r", "topic_id": "101", "team_id": "t"},
          "responses": [{"text": "Bees make honey from nectar.", "citations": ["p064"]}], "references": ["p064"]}


@pytest.mark.parametrize("case", ["grade-cache", "grade-run-out", "assign", "score", "plot"])
def test_two_outputs_naming_one_file(case, tmp_path):
    """Each output was written as if alone: grades appended to the cache's sqlite file,
    the response run renamed over the grades, assignments over the grades, a PNG over the
    TSV; all with exit 0. Now a usage error before any work, nothing written."""
    same = tmp_path / "same.out"
    reports = tmp_path / "reports.jsonl"
    reports.write_text(json.dumps(REPORT) + "\n")
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"query_id": "101", "run_id": "g", "text": "Bees collect nectar."}) + "\n")
    lb = tmp_path / "lb.tsv"
    lb.write_text("run\tmap\na\t0.5\nb\t0.3\nc\t0.1\n")
    prog, first, argv = {
        "grade-cache": ("exam-grade", "--cache", [*DEMO_GRADE[:-1], "--cache", same]),
        "grade-run-out": ("exam-grade", "--responses-run-out",
                          [*DEMO_GRADE[:8], "--no-cache", "--responses", responses, "--responses-run-out", same]),
        "assign": ("exam-nuggets", "--assignments",
                   ["nuggets", "assign", "--backend", "scripted", "--script", DEMO / "assign-script.jsonl",
                    "--reports", reports, "--bank", DEMO / "nuggetized.jsonl", "--topics", DEMO / "topics.tsv",
                    "--no-cache", "--assignments", same]),
        "score": ("exam-nuggets", "--assignments",
                  ["nuggets", "score", "--reports", reports, "--bank", DEMO / "nuggets.jsonl", "--assignments", same,
                   DEMO / "nuggetized.jsonl"]),
        "plot": ("exam-correlate", "--plot", ["correlate", "leaderboard", lb, lb, "--plot", same]),
    }[case]
    line = one_line_refusal(run(*argv, "-o", same), prog, 1)
    assert line == f"{prog}: {first} and --output name the same file: {same}"
    assert list(tmp_path.glob("same*")) == []


def test_outputs_to_a_device_may_share_it(tmp_path):
    lb = tmp_path / "lb.tsv"
    lb.write_text("run\tmap\na\t0.5\nb\t0.3\nc\t0.1\n")
    pytest.importorskip("matplotlib")
    res = run("correlate", "leaderboard", lb, lb, "--plot", "/dev/null", "-o", "/dev/null")
    assert res.escaped is None and res.code == 0, res.stderr


@pytest.mark.parametrize("prog", ["qrels", "cover"])
def test_an_output_with_a_trailing_slash_is_refused_before_reading(prog, tmp_path):
    keep = tmp_path / "keep.txt"
    keep.write_text("precious\n")
    args = [DEMO / "qrels.txt"] if prog == "qrels" else [tmp_path / "missing-grades.jsonl", DEMO / "good.run"]
    res = run(prog, *args, "-o", f"{keep}/")
    assert res.escaped is None and res.code == 2
    # refused at parsing: the missing grades file is not what it names
    assert res.last_line == f"exam-{prog}: {keep}/: cannot write: names a folder (it ends with a separator); give a file name"
    assert keep.read_text() == "precious\n"


@pytest.mark.parametrize("shape", ["tot", "ir_measures", "table"])
def test_exam_nuggets_score_refuses_a_folder_for_a_one_file_format(tmp_path, shape):
    """-o out/ (a folder: what the trec_eval shape takes) wrote a file named out."""
    reports = write_jsonl(tmp_path / "reports.jsonl", [{"metadata": {"run_id": "A", "topic_id": "101", "team_id": "x"},
                                                        "responses": [{"text": "Bees make honey.", "citations": []}],
                                                        "references": []}])
    bank = write_jsonl(tmp_path / "bank.jsonl", [{"query_id": "101", "kind": "nugget", "text": "bees"}])
    grades = write_jsonl(tmp_path / "g.jsonl", [{"query_id": "101", "doc_id": "x", "item_id": "101/x", "kind": "nugget",
                                                 "grade": 2, "parse_ok": True, "model": "m", "prompt": "nuggetizer-assign"}])
    out = tmp_path / "out"
    msg = one_line_refusal(run("nuggets", "score", "--format", shape, "--reports", reports, "--bank", bank, "-o",
                               f"{out}/", grades), "exam-nuggets")
    assert msg == f"exam-nuggets: {out}/: cannot write: names a folder (it ends with a separator); give a file name"
    assert not out.exists()


def test_an_output_inside_a_folder_the_command_reads_is_a_usage_error(tmp_path):
    """-o rep/r.jsonl with --reports rep replaced the only report, exit 0."""
    w = nugget_world(tmp_path)
    report = w["reports"] / "r.jsonl"
    before = report.read_bytes()
    for argv in (["nuggets", "score", "--reports", w["reports"], "--bank", w["bank"], w["grades"], "-o", report],
                 ["nuggets", "qrels", "--reports", w["reports"], w["grades"], "-o", report]):
        res = run(*argv)
        assert res.escaped is None and res.code == 1, res.stderr
        assert res.last_line.startswith(f"exam-nuggets: --output names a file the command reads (--reports {w['reports']})")
        assert report.read_bytes() == before
    # a new file in that folder is read by no one before it is written: fine
    res = run("nuggets", "score", "--reports", w["reports"], "--bank", w["bank"], w["grades"],
              "-o", w["reports"] / "new.tot")
    assert res.code in (0, None), res.stderr


def test_a_failing_output_leaves_every_output_as_it_was(tmp_path):
    """--format trec_eval -o DIR replaced runA.txt, then failed on runB.txt (a folder);
    --assignments was replaced, then -o failed."""
    w = nugget_world(tmp_path)
    out = tmp_path / "out"
    (out / "runB.txt").mkdir(parents=True)
    (out / "runA.txt").write_text("OLD runA result\n")
    res = run("nuggets", "score", "--reports", w["reports"], "--bank", w["bank"], w["grades"], "--format", "trec_eval",
              "-m", "nugget_all", "-o", f"{out}/")
    assert res.escaped is None and res.code == 2, res.stderr
    assert (out / "runA.txt").read_text() == "OLD runA result\n" and not (out / "runC.txt").exists()
    asg = tmp_path / "asg.jsonl"
    asg.write_text("OLD assignments\n")
    res = run("nuggets", "score", "--reports", w["reports"], "--bank", w["bank"], w["grades"],
              "--assignments", asg, "-o", "/dev/full")
    assert res.escaped is None and res.code == 2 and "No space left" in res.last_line, res.stderr
    assert asg.read_text() == "OLD assignments\n"


def test_plot_to_an_unusable_path_is_refused_before_any_output(tmp_path):
    t = tmp_path / "t.tsv"
    t.write_text("run\tm\na\t0.5\nb\t0.3\nc\t0.1\n")
    out = tmp_path / "out.txt"
    out.write_text("ORIGINAL\n")
    res = run("correlate", "leaderboard", t, t, "-o", out, "--plot", tmp_path / "nodir" / "x.png")
    assert res.escaped is None and res.code == 2 and "cannot write: no such directory" in res.last_line
    assert out.read_text() == "ORIGINAL\n"


# ---- run files named after run ids (--responses-run-out, --reports-run-out, -o DIR) ------------

def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _run_out_world(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "runs").mkdir()
    bank = tmp_path / "bank.jsonl"
    bank.write_text(json.dumps({"query_id": "101", "kind": "question", "text": "What do bees collect?"}) + "\n")
    passages = tmp_path / "passages.jsonl"
    passages.write_text(json.dumps({"doc_id": "p1", "text": "Bees collect nectar."}) + "\n")
    good = tmp_path / "runs" / "good.run"
    good.write_text("101 Q0 p1 1 1.0 good\n")
    return {"bank": bank, "passages": passages, "run": good}


def _grade_in(w, *args):
    return run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache",
               "--bank", w["bank"], "--passages", w["passages"], *args)


@pytest.mark.parametrize("run_id", ["../escaped", "ABSOLUTE", "./x", "..", "x" * 300])
def test_a_run_id_that_is_no_file_name_in_the_run_out_folder_is_refused(run_id, tmp_path):
    """--responses-run-out DIR wrote RUN_ID.run for each run id of the responses, as it
    came: "../x" wrote beside the folder, an absolute id anywhere on disk, "./x" over "x"."""
    w = _run_out_world(tmp_path)
    if run_id == "ABSOLUTE":
        run_id = str(tmp_path / "elsewhere" / "absolute")
    (tmp_path / "out").mkdir()
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"query_id": "101", "run_id": "fine", "text": "Bees collect nectar."}) + "\n"
                         + json.dumps({"query_id": "101", "run_id": run_id, "text": "Nectar."}) + "\n")
    before = _files(tmp_path)
    line = one_line_refusal(_grade_in(w, "--responses", responses, "--responses-run-out", tmp_path / "out",
                                      "-o", tmp_path / "grades.jsonl"), "exam-grade", 2)
    assert line.startswith(f"exam-grade: {responses}:2: run id ")
    assert "cannot name a file in --responses-run-out" in line
    assert _files(tmp_path) == before  # no run file anywhere, no grades


def test_a_report_run_id_that_is_no_file_name_is_refused_naming_its_line(tmp_path):
    w = _run_out_world(tmp_path)
    shutil.copy(DEMO / "nuggets.jsonl", tmp_path / "nuggets.jsonl")
    reports = tmp_path / "reports.jsonl"
    reports.write_text(json.dumps({"metadata": {"team_id": "t", "run_id": "../escaped", "topic_id": "101"},
                                   "responses": [{"text": "Bees collect nectar.", "citations": []}],
                                   "references": []}) + "\n")
    nuggets = tmp_path / "nuggets101.jsonl"
    nuggets.write_text(json.dumps({"query_id": "101", "kind": "nugget", "text": "bees collect nectar"}) + "\n")
    res = run("grade", "--backend", "scripted", "--prompt", "nugget-selfrating", "--no-cache", "--bank", nuggets,
              "--reports", reports, "--reports-run-out", f"{tmp_path / 'out4'}/", "-o", tmp_path / "g.jsonl")
    line = one_line_refusal(res, "exam-grade", 2)
    assert line.startswith(f"exam-grade: {reports}:1: run id '../escaped' holds '/'")
    assert not (tmp_path / "escaped.run").exists() and not (tmp_path / "out4").exists()
    assert not w["run"].with_name("g.jsonl").exists()


def test_a_run_id_that_is_no_file_name_is_refused_by_score_into_a_folder(tmp_path):
    """--format trec_eval -o DIR wrote DIR/../evil.txt for run id '../evil'."""
    reports = tmp_path / "reports.jsonl"
    reports.write_text("".join(report_line(r, [{"text": "Bees make honey.", "citations": []}])
                               for r in ("../evil", "ok")))
    grades = tmp_path / "grades.jsonl"
    grades.write_text("")  # refused before the grades are read
    out = tmp_path / "folder"
    out.mkdir()
    res = run("nuggets", "score", "--reports", reports, "--bank", DEMO / "nuggetized.jsonl", grades,
              "--format", "trec_eval", "-o", out)
    msg = one_line_refusal(res, "exam-nuggets")
    assert msg.startswith(f"exam-nuggets: {reports}:1: run id '../evil' holds '/'"), msg
    assert list(out.iterdir()) == [] and not (tmp_path / "evil.txt").exists()


def test_a_run_out_file_over_an_input_run_is_a_usage_error(tmp_path):
    """No traversal needed: the run id "good" and --responses-run-out runs/ replaced the
    input runs/good.run of the same command."""
    w = _run_out_world(tmp_path)
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"query_id": "101", "run_id": "good", "text": "Bees collect nectar."}) + "\n")
    before = w["run"].read_bytes()
    res = _grade_in(w, w["run"], "--responses", responses, "--responses-run-out", f"{tmp_path / 'runs'}/",
                    "-o", tmp_path / "grades.jsonl")
    line = one_line_refusal(res, "exam-grade", 1)
    assert line.startswith(f"exam-grade: --responses-run-out {tmp_path / 'runs'}/ (run 'good') names a file the "
                           f"command reads (RUN {w['run']})")
    assert w["run"].read_bytes() == before and not (tmp_path / "grades.jsonl").exists()


def test_a_run_out_file_over_the_grades_output_is_a_usage_error(tmp_path):
    w = _run_out_world(tmp_path)
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"query_id": "101", "run_id": "g", "text": "Bees collect nectar."}) + "\n")
    line = one_line_refusal(_grade_in(w, "--responses", responses, "--responses-run-out", f"{tmp_path}/",
                                      "-o", tmp_path / "g.run"), "exam-grade", 1)
    assert line == (f"exam-grade: --responses-run-out {tmp_path}/ (run 'g') and --output name the same file: "
                    f"{tmp_path / 'g.run'}")
    assert not (tmp_path / "g.run").exists()


def test_the_run_out_is_written_only_once_the_model_loads(tmp_path):
    """exam-grade(1): exit 2 for a model that does not load, "Nothing is written"; the
    segments' run was written before the model was loaded."""
    pytest.importorskip("transformers")
    w = _run_out_world(tmp_path)
    (tmp_path / "notamodel").mkdir()
    (tmp_path / "notamodel" / "config.json").write_text("{}")  # found at parsing; fails to load
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"query_id": "101", "run_id": "sysA", "text": "Bees collect nectar."}) + "\n")
    res = run("grade", "--backend", "hf-seq2seq", "--engine", "torch", "--model", tmp_path / "notamodel",
              "--prompt", "question-selfrating", "--no-cache", "--bank", w["bank"], "--responses", responses,
              "--responses-run-out", tmp_path / "segments.run", "-o", tmp_path / "grades.jsonl")
    assert "cannot load model" in last_line_refusal(res, "exam-grade", 2)  # after the bank's ids notice
    assert not (tmp_path / "segments.run").exists() and not (tmp_path / "grades.jsonl").exists()
    # and with a model that loads, the run is there
    res = _grade_in(w, "--responses", responses, "--responses-run-out", tmp_path / "segments.run",
                    "-o", tmp_path / "grades.jsonl")
    assert res.code == 0, res.stderr
    assert (tmp_path / "segments.run").read_text().split()[5] == "sysA"


@pytest.mark.parametrize("case", ["a 240-byte run id", "a folder in the way"])
def test_run_out_files_are_refused_before_the_load_and_none_is_left(tmp_path, case):
    """The run id fit NAME_MAX but its temp file's name did not, and a folder named as a run
    file was met only when written: after the model load, leaving the other run's file."""
    long_id = "x" * 240
    other = long_id if case == "a 240-byte run id" else "zzz"
    resp = write_jsonl(tmp_path / "resp.jsonl", [{"query_id": "t1", "run_id": "aaa", "text": "Other text about one."},
                                                 {"query_id": "t1", "run_id": other, "text": "Some text about one."}])
    bank = write_jsonl(tmp_path / "bank.jsonl", [{"query_id": "t1", "kind": "nugget", "text": "fact one"}])
    out = tmp_path / "out"
    out.mkdir()
    if case == "a folder in the way":
        (out / "zzz.run").mkdir()
    grades = tmp_path / "g.jsonl"
    res = run("grade", "--responses", resp, "--responses-run-out", f"{out}/", "--bank", bank, "--prompt",
              "nugget-selfrating", "--backend", "scripted", "-O", "load_delay=30", "--no-cache", "-o", grades)
    msg = one_line_refusal(res, "exam-grade")
    if case == "a 240-byte run id":
        assert msg.startswith(f"exam-grade: {resp}:2: run id '{long_id}' is too long for a file name (241 bytes")
    else:
        assert msg == f"exam-grade: {out}/zzz.run: cannot write: is a directory"
    assert not grades.exists() and [p.name for p in out.iterdir()] == ([] if other == long_id else ["zzz.run"])
