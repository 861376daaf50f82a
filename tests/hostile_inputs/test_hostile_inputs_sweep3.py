"""Hostile inputs of a third sweep (2026-11-26): participants' run ids as file names, grades
files damaged inside or of the other form than their name says, white space that trec_eval
does not split at, and depths cut in an order other than trec_eval's. Each case: one line
naming what is wrong (file and line where there is one), the right exit status, no
traceback, and nothing written or changed."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from exam_eval.errors import InputError
from exam_eval.grading.output import existing_keys, repair
from exam_eval.trec_eval.trec_files import ranked, read_qrels, read_run_table
from inproc import run

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"


def _clean(res, code: int) -> str:
    assert res.escaped is None, res.escaped
    assert "Traceback" not in res.stderr
    assert res.code == code, (res.code, res.stderr)
    assert res.last_line.startswith("exam-grade: "), res.stderr
    return res.last_line


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _world(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "runs").mkdir()
    bank = tmp_path / "bank.jsonl"
    bank.write_text(json.dumps({"query_id": "101", "kind": "question", "text": "What do bees collect?"}) + "\n")
    passages = tmp_path / "passages.jsonl"
    passages.write_text(json.dumps({"doc_id": "p1", "text": "Bees collect nectar."}) + "\n")
    good = tmp_path / "runs" / "good.run"
    good.write_text("101 Q0 p1 1 1.0 good\n")
    return {"bank": bank, "passages": passages, "run": good}


def _grade(w, *args):
    return run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache",
               "--bank", w["bank"], "--passages", w["passages"], *args)


@pytest.mark.parametrize("run_id", ["../escaped", "ABSOLUTE", "./x", "..", "x" * 300])
def test_a_run_id_that_is_no_file_name_in_the_run_out_folder_is_refused(run_id, tmp_path):
    """--responses-run-out DIR wrote RUN_ID.run for each run id of the responses, as it
    came: "../x" wrote beside the folder, an absolute id anywhere on disk, "./x" over "x"."""
    w = _world(tmp_path)
    if run_id == "ABSOLUTE":
        run_id = str(tmp_path / "elsewhere" / "absolute")
    (tmp_path / "out").mkdir()
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"query_id": "101", "run_id": "fine", "text": "Bees collect nectar."}) + "\n"
                         + json.dumps({"query_id": "101", "run_id": run_id, "text": "Nectar."}) + "\n")
    before = _files(tmp_path)
    line = _clean(_grade(w, "--responses", responses, "--responses-run-out", tmp_path / "out",
                         "-o", tmp_path / "grades.jsonl"), 2)
    assert line.startswith(f"exam-grade: {responses}:2: run id ")
    assert "cannot name a file in --responses-run-out" in line
    assert _files(tmp_path) == before  # no run file anywhere, no grades


def test_a_report_run_id_that_is_no_file_name_is_refused_naming_its_line(tmp_path):
    w = _world(tmp_path)
    shutil.copy(DEMO / "nuggets.jsonl", tmp_path / "nuggets.jsonl")
    reports = tmp_path / "reports.jsonl"
    reports.write_text(json.dumps({"metadata": {"team_id": "t", "run_id": "../escaped", "topic_id": "101"},
                                   "responses": [{"text": "Bees collect nectar.", "citations": []}],
                                   "references": []}) + "\n")
    nuggets = tmp_path / "nuggets101.jsonl"
    nuggets.write_text(json.dumps({"query_id": "101", "kind": "nugget", "text": "bees collect nectar"}) + "\n")
    res = run("grade", "--backend", "scripted", "--prompt", "nugget-selfrating", "--no-cache", "--bank", nuggets,
              "--reports", reports, "--reports-run-out", f"{tmp_path / 'out4'}/", "-o", tmp_path / "g.jsonl")
    line = _clean(res, 2)
    assert line.startswith(f"exam-grade: {reports}:1: run id '../escaped' holds '/'")
    assert not (tmp_path / "escaped.run").exists() and not (tmp_path / "out4").exists()
    assert not w["run"].with_name("g.jsonl").exists()


def test_a_run_out_file_over_an_input_run_is_a_usage_error(tmp_path):
    """No traversal needed: the run id "good" and --responses-run-out runs/ replaced the
    input runs/good.run of the same command."""
    w = _world(tmp_path)
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"query_id": "101", "run_id": "good", "text": "Bees collect nectar."}) + "\n")
    before = w["run"].read_bytes()
    line = _clean(_grade(w, w["run"], "--responses", responses, "--responses-run-out", f"{tmp_path / 'runs'}/",
                         "-o", tmp_path / "grades.jsonl"), 1)
    assert line.startswith(f"exam-grade: --responses-run-out {tmp_path / 'runs'}/ (run 'good') names a file the "
                           f"command reads (RUN {w['run']})")
    assert w["run"].read_bytes() == before and not (tmp_path / "grades.jsonl").exists()


def test_a_run_out_file_over_the_grades_output_is_a_usage_error(tmp_path):
    w = _world(tmp_path)
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"query_id": "101", "run_id": "g", "text": "Bees collect nectar."}) + "\n")
    line = _clean(_grade(w, "--responses", responses, "--responses-run-out", f"{tmp_path}/",
                         "-o", tmp_path / "g.run"), 1)
    assert line == (f"exam-grade: --responses-run-out {tmp_path}/ (run 'g') and --output name the same file: "
                    f"{tmp_path / 'g.run'}")
    assert not (tmp_path / "g.run").exists()


def test_the_run_out_is_written_only_once_the_model_loads(tmp_path):
    """exam-grade(1): exit 2 for a model that does not load, "Nothing is written"; the
    segments' run was written before the model was loaded."""
    pytest.importorskip("transformers")
    w = _world(tmp_path)
    (tmp_path / "notamodel").mkdir()
    (tmp_path / "notamodel" / "config.json").write_text("{}")  # found at parsing; fails to load
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"query_id": "101", "run_id": "sysA", "text": "Bees collect nectar."}) + "\n")
    res = run("grade", "--backend", "hf-seq2seq", "--engine", "torch", "--model", tmp_path / "notamodel",
              "--prompt", "question-selfrating", "--no-cache", "--bank", w["bank"], "--responses", responses,
              "--responses-run-out", tmp_path / "segments.run", "-o", tmp_path / "grades.jsonl")
    assert "cannot load model" in _clean(res, 2)
    assert not (tmp_path / "segments.run").exists() and not (tmp_path / "grades.jsonl").exists()
    # and with a model that loads, the run is there
    res = _grade(w, "--responses", responses, "--responses-run-out", tmp_path / "segments.run",
                 "-o", tmp_path / "grades.jsonl")
    assert res.code == 0, res.stderr
    assert (tmp_path / "segments.run").read_text().split()[5] == "sysA"


# ---- grades files damaged inside, or of the other form ------------------------------------

def _members(*texts: str) -> list[bytes]:
    return [gzip.compress(t.encode(), mtime=0) for t in texts]


def test_a_gzip_output_damaged_before_its_end_is_refused_not_cut(tmp_path):
    """A torn shard concatenated before another (the man page's shard recipe), or one
    flipped byte in the first member: repair cut at the damage, dropping every intact
    member after it (all of shard 2 regraded, or the whole file)."""
    one, two, three = _members('{"a": 1}\n{"b": 2}\n', '{"c": 3}\n', '{"d": 4}\n')
    torn_then_whole = tmp_path / "merged.jsonl.gz"
    torn_then_whole.write_bytes(one + two[:-6] + three)
    flipped = tmp_path / "flipped.jsonl.gz"
    bad = bytearray(one + two + three)
    bad[len(one) + 12] ^= 0xFF
    flipped.write_bytes(bytes(bad))
    for path, line in ((torn_then_whole, 3), (flipped, 3)):
        before = path.read_bytes()
        with pytest.raises(InputError) as err:
            repair(str(path))
        assert err.value.path == str(path) and err.value.line == line
        assert f"the gzip member at byte {len(one)} is damaged" in err.value.reason
        assert path.read_bytes() == before
        with pytest.raises(InputError):
            existing_keys(str(path), read_only=True)  # --dry-run says the same


def test_a_torn_or_zero_filled_last_gzip_member_is_still_cut(tmp_path):
    from exam_eval.io.grades import Grade, grade_line

    a, b = (grade_line(Grade(query_id="q", doc_id=d, item_id="q/i", kind="question", grade=3, probs=None,
                             answer="3", parse_ok=True, model="m", prompt="question-selfrating")) for d in ("d1", "d2"))
    one, two = _members(a, b)
    for tail in (two[:-6], b"\0" * 64, two[:5]):
        path = tmp_path / "g.jsonl.gz"
        path.write_bytes(one + two + tail)
        assert repair(str(path)) == len(tail)
        assert gzip.decompress(path.read_bytes()) == (a + b).encode()


def test_a_grades_file_of_the_other_form_than_its_name_is_refused_unchanged(tmp_path):
    """exam-grade appends gzip members to a .gz output and plain lines otherwise, while
    readers go by content: plain text named .gz got gzip members after it (unreadable),
    and a rerun cut the "torn" tail out of the gzip data."""
    docs = DEMO / "good.run"
    for name, data in (("plain.jsonl.gz", b'{"a": 1}\n'), ("zipped.jsonl", gzip.compress(b'{"a": 1}\n'))):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(InputError) as err:
            repair(str(path))
        assert ("holds plain text but its name ends in .gz" if name.endswith(".gz")
                else "holds gzip data but its name does not end in .gz") in err.value.reason
        assert path.read_bytes() == data
    res = run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache", "-k", "1",
              "--bank", DEMO / "questions.jsonl", "--passages", DEMO / "passages.jsonl", docs,
              "-o", tmp_path / "plain.jsonl.gz")
    assert _clean(res, 2).startswith(f"exam-grade: {tmp_path / 'plain.jsonl.gz'}: holds plain text")
    assert (tmp_path / "plain.jsonl.gz").read_bytes() == b'{"a": 1}\n'


# ---- white space that trec_eval does not split at ------------------------------------------

ODD_SPACES = ["\xa0", "\u2028", "\u3000", "\x85", "\x1c", "\x1f"]


@pytest.mark.parametrize("char", ODD_SPACES)
def test_a_trec_line_with_white_space_trec_eval_does_not_split_at_is_refused(char, tmp_path):
    """str.split() split "d1<NBSP>junk" into two fields where trec_eval reads one docno:
    map 0.5 where trec_eval says 0, and a 5-field line trec_eval refuses was scored."""
    run_file = tmp_path / "r.run"
    run_file.write_text(f"101 Q0 d2 2 3 t\n101 Q0 d1{char}junk 1 5 t\n", encoding="utf-8")
    qrels = tmp_path / "q.txt"
    qrels.write_text(f"101 0 d2 0\n101 0 d1{char}x 1\n", encoding="utf-8")
    for read, path in ((read_run_table, run_file), (read_qrels, qrels)):
        with pytest.raises(InputError) as err:
            read(path)
        assert (err.value.path, err.value.line) == (str(path), 2)
        assert err.value.reason.startswith(f"holds U+{ord(char):04X} ")


def test_trec_eval_reads_such_a_character_as_part_of_an_id(trec_eval_binary, tmp_path):
    """Why exam-qrels refuses rather than splits: trec_eval keeps it in the docno."""
    import subprocess

    (tmp_path / "q.txt").write_text("101 0 d1 1\n101 0 d2 0\n")
    (tmp_path / "r.run").write_text("101 Q0 d1\xa0junk 1 5 t\n101 Q0 d2 2 3 t\n", encoding="utf-8")
    out = subprocess.run([str(trec_eval_binary), "-m", "num_rel_ret", str(tmp_path / "q.txt"), str(tmp_path / "r.run")],
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["num_rel_ret", "all", "0"]


# ---- depths cut in trec_eval's order ----------------------------------------------------------

def test_depths_cut_in_trec_evals_order_of_c_float_scores(tmp_path):
    """1.00000001 and 1.0 are one C float: trec_eval ties them and ranks z9 first (docno
    descending); exam-grade -k 1 pooled a1 and exam-cover -k 1 counted a1."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    docs = {"a1": 1.00000001, "z9": 1.0}
    evaluator = pytrec_eval.RelevanceEvaluator({"101": {"a1": 1, "z9": 0}}, {"P.1"})
    credited = evaluator.evaluate({"101": docs})["101"]["P_1"]
    assert ranked(docs) == ["z9", "a1"] and credited == 0.0  # pytrec_eval (trec_eval's C) puts z9 first
    run_file = tmp_path / "r.run"
    run_file.write_text("101 Q0 a1 1 1.00000001 t\n101 Q0 z9 2 1.0 t\n")
    bank = tmp_path / "bank.jsonl"
    bank.write_text(json.dumps({"query_id": "101", "kind": "question", "text": "What do bees collect?"}) + "\n")
    passages = tmp_path / "passages.jsonl"
    passages.write_text("".join(json.dumps({"doc_id": d, "text": f"text {d}"}) + "\n" for d in docs))
    res = run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache", "-k", "1",
              "--bank", bank, "--passages", passages, run_file, "-o", tmp_path / "g.jsonl")
    assert res.code == 0, res.stderr
    assert [json.loads(x)["doc_id"] for x in (tmp_path / "g.jsonl").read_text().splitlines()] == ["z9"]


def test_the_cut_is_the_same_for_exam_cover(tmp_path):
    grades = tmp_path / "g.jsonl"
    lines = []
    for doc, grade in (("a1", 5), ("z9", 0)):
        lines.append(json.dumps({"query_id": "101", "doc_id": doc, "item_id": "101/q1", "kind": "question",
                                 "grade": grade, "parse_ok": True, "model": "m", "prompt": "question-selfrating"}))
    grades.write_text("\n".join(lines) + "\n")
    run_file = tmp_path / "r.run"
    run_file.write_text("101 Q0 a1 1 1.00000001 t\n101 Q0 z9 2 1.0 t\n")
    res = run("cover", "-q", "-k", "1", grades, run_file)
    assert res.escaped is None and res.code in (0, None), res.stderr
    per_query = [x.split() for x in res.stdout.splitlines() if x.split()[1:2] == ["101"]]
    assert per_query and all(float(v) == 0.0 for _, _, v in per_query), res.stdout
    assert os.path.exists(run_file)


# ---- smaller holes ------------------------------------------------------------------------------

def _wb_line(rating) -> str:
    return json.dumps(["101", [{"paragraph_id": "p1", "exam_grades": [{
        "llm": "google/flan-t5-large", "prompt_info": {"prompt_class": "QuestionSelfRatedUnanswerablePromptWithChoices"},
        "self_ratings": [{"question_id": "101/a", "self_rating": 5}, {"question_id": "101/b", "self_rating": rating}]}]}]])


@pytest.mark.parametrize("rating", [4.5, "4", True])
def test_a_workbench_rating_that_is_no_integer_is_refused(rating, tmp_path):
    """Counted as "unparsed" before, so a damaged file gave qrels with exit 0."""
    wb = tmp_path / "wb.jsonl"
    wb.write_text(_wb_line(rating) + "\n")
    res = run("qrels", wb)
    assert res.escaped is None and res.code == 2 and res.stdout == ""
    assert res.last_line == f"exam-qrels: {wb}:1: 'self_rating' must be an integer or null, got {rating!r}"
    wb.write_text(_wb_line(None) + "\n")  # the workbench's unparsed rating stays one
    res = run("qrels", wb)
    assert res.code in (0, None) and res.stdout == "101 0 p1 5\n", res.stderr


def test_a_prompt_file_with_a_label_twice_is_refused(tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("# target: question\n# mode: score\n# labels: 1 1\n# scale: 0 1\nQ: {question}\nP: {context}\n")
    res = run("grade", "--backend", "scripted", "--prompt", prompt, "--no-cache", "-k", "1",
              "--bank", DEMO / "questions.jsonl", "--passages", DEMO / "passages.jsonl", DEMO / "good.run",
              "-o", tmp_path / "g.jsonl")
    assert _clean(res, 2) == f"exam-grade: {prompt}:3: label '1' is given twice: each grade needs its own label " \
                             "(their probabilities are compared)"
    assert not (tmp_path / "g.jsonl").exists()


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


def test_a_run_file_name_that_would_break_the_leaderboard_is_refused(tmp_path):
    bad = tmp_path / "ta\tb.run"
    bad.write_text("101 Q0 p001 1 2.0 r\n")
    res = run("qrels", "-m", "P.1", DEMO / "qrels.txt", bad, DEMO / "good.run")
    assert res.escaped is None and res.code == 1 and res.stdout == ""
    assert "holds a tab, newline or control character: rename the file" in res.last_line


@pytest.mark.parametrize("flags", [["-m", "map"], ["-q"], ["-c"], ["-J"], ["-M", "5"], ["-l", "2"]])
def test_scoring_options_without_a_run_are_a_usage_error(flags, tmp_path):
    """exam-qrels -c -m ndcg_cut.10 grades.jsonl (an empty $(RUNS)) wrote qrels, exit 0."""
    res = run("qrels", *flags, DEMO / "qrels.txt")
    assert res.escaped is None and res.code == 1 and res.stdout == ""
    assert res.last_line.startswith(f"exam-qrels: {flags[0]} says how to score a RUN: give a RUN to score")


@pytest.mark.parametrize("args", [["--report-unit", "report"], ["--verify", "llm"]])
def test_grade_options_that_cannot_apply_are_a_usage_error(args, tmp_path):
    res = run("grade", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache", "-k", "1",
              "--bank", DEMO / "questions.jsonl", "--passages", DEMO / "passages.jsonl", DEMO / "good.run",
              *args, "-o", tmp_path / "g.jsonl")
    line = _clean(res, 1)
    assert line in ("exam-grade: --report-unit needs --reports",
                    "exam-grade: --verify llm verifies extracted answers; prompt 'question-selfrating' extracts "
                    "none (use an extraction prompt such as question-extraction)")
    assert not (tmp_path / "g.jsonl").exists()


def test_labels_are_read_from_standard_input(run_cli):
    """exam_eval(7): every command reads -; exam-qrels refused it (its format is sniffed)."""
    qrels_text = (DEMO / "qrels.txt").read_text()
    res = run_cli("exam-qrels", "-", input=qrels_text)
    assert res.returncode == 0 and res.stdout == run("qrels", DEMO / "qrels.txt").stdout != "", res.stderr
    res = run_cli("exam-qrels", "-m", "P.5", "-", DEMO / "good.run", "-o", "-", input=qrels_text)
    assert res.returncode == 0, res.stderr
    assert res.stdout == run("qrels", "-m", "P.5", DEMO / "qrels.txt", DEMO / "good.run").stdout
    res = run_cli("exam-qrels", "-", input="101 0 p1\n")  # a message names <stdin>, not the copy
    assert res.returncode == 2 and res.stderr.startswith("exam-qrels: <stdin>:1: "), res.stderr


@pytest.mark.parametrize("argv", [["cover", "-", "-"], ["qrels", "-m", "map", "-", "-"]])
def test_standard_input_named_twice_is_a_usage_error(argv):
    res = run(*argv)  # refused before anything is read
    assert res.escaped is None and res.code == 1
    assert "standard input (-) is given 2 times" in res.last_line


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


# ---- the other four commands ----------------------------------------------------------------

def _md5(s: str) -> str:
    import hashlib

    return hashlib.md5(s.encode()).hexdigest()


def _nugget_world(tmp_path: Path, runs=(("runA", 2), ("runB", 1), ("runC", 0))) -> dict[str, Path]:
    """One topic, one nugget, one report per run, and the nugget's assign grades."""
    t, s = "Nugget one.", "Sentence A one."
    (tmp_path / "bank.jsonl").write_text(json.dumps({"query_id": "101", "item_id": f"101/{_md5(t)}",
                                                     "kind": "nugget", "text": t, "importance": "vital"}) + "\n")
    reports, grades = [], []
    for run_id, grade in runs:
        reports.append(json.dumps({"metadata": {"team_id": "t", "run_id": run_id, "topic_id": "101"},
                                   "responses": [{"text": s, "citations": []}], "references": []}))
        grades.append(json.dumps({"query_id": "101", "doc_id": f"{run_id}/101/1-{_md5(s)[:10]}",
                                  "item_id": f"101/{_md5(t)}", "kind": "nugget", "grade": grade, "probs": None,
                                  "answer": str(grade), "parse_ok": True, "model": "m",
                                  "prompt": "nuggetizer-assign", "prompt_hash": "h"}))
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "r.jsonl").write_text("\n".join(reports) + "\n")
    (tmp_path / "grades.jsonl").write_text("\n".join(grades) + "\n")
    return {"bank": tmp_path / "bank.jsonl", "reports": tmp_path / "reports", "grades": tmp_path / "grades.jsonl"}


def test_an_output_inside_a_folder_the_command_reads_is_a_usage_error(tmp_path):
    """-o rep/r.jsonl with --reports rep replaced the only report, exit 0."""
    w = _nugget_world(tmp_path)
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
    w = _nugget_world(tmp_path)
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


def test_support_grades_that_hold_no_support_grade_are_refused(tmp_path):
    w = _nugget_world(tmp_path)
    res = run("nuggets", "score", "--reports", w["reports"], "--bank", w["bank"], w["grades"],
              "--support-grades", w["grades"])
    assert res.escaped is None and res.code == 2
    assert res.last_line == f"exam-nuggets: {w['grades']}: holds no citation-support grades (exam-nuggets support writes them)"


def test_a_measure_named_twice_is_one_column(tmp_path):
    w = _nugget_world(tmp_path)
    res = run("nuggets", "score", "--reports", w["reports"], "--bank", w["bank"], w["grades"],
              "-m", "nugget_all", "-m", "nugget_all", "--format", "table")
    assert res.code in (0, None), res.stderr
    assert res.stdout.splitlines()[0] == "run\tnugget_all"


def test_hidden_files_in_a_reports_folder_are_no_reports(tmp_path):
    w = _nugget_world(tmp_path)
    (w["reports"] / "._r.jsonl").write_bytes(b"\0\x05\x16\x07")  # macOS AppleDouble
    (w["reports"] / ".r.jsonl").write_bytes((w["reports"] / "r.jsonl").read_bytes())  # an editor's copy
    (w["reports"] / ".hidden").mkdir()
    (w["reports"] / ".hidden" / "r.jsonl").write_bytes((w["reports"] / "r.jsonl").read_bytes())
    res = run("nuggets", "score", "--reports", w["reports"], "--bank", w["bank"], w["grades"], "--format", "table")
    assert res.code in (0, None), res.stderr
    assert [x.split("\t")[0] for x in res.stdout.splitlines()[1:]] == ["runA", "runB", "runC"]


def test_complete_normalized_cover_counts_no_undefined_topic_as_zero():
    """-c averaged n_exam_cover 0 in for a run lacking a topic where it is undefined for
    every run: runC, best on the only topic with a value, ranked below runA."""
    from exam_eval.measures.nugget_scores import average_runs

    per = {("runA", "101"): {"n_exam_cover": 2 / 3}, ("runA", "102"): {"n_exam_cover": None},
           ("runC", "101"): {"n_exam_cover": 1.0}}
    got = average_runs(per, ["n_exam_cover"], ["101", "102"])
    assert got["runC"]["n_exam_cover"] == (1.0, 0.0, 1) and got["runA"]["n_exam_cover"][2] == 1
    # a measure with a value there still counts the absent topic as 0
    per = {("runA", "101"): {"exam_cover": 0.5}, ("runA", "102"): {"exam_cover": 0.5}, ("runC", "101"): {"exam_cover": 1.0}}
    assert average_runs(per, ["exam_cover"], ["101", "102"])["runC"]["exam_cover"][0] == 0.5


def test_an_undefined_normalized_nugget_cover_has_no_all_row(tmp_path):
    w = _nugget_world(tmp_path, runs=(("runA", 0),))
    res = run("nuggets", "score", "--reports", w["reports"], "--bank", w["bank"], w["grades"], "-m", "exam_cover",
              "-m", "n_exam_cover")
    assert res.code in (0, None), res.stderr
    assert [x.split("\t")[1:3] for x in res.stdout.splitlines()] == [["exam_cover", "101"], ["exam_cover", "all"]]


def test_blank_nuggets_of_a_model_are_not_written():
    from exam_eval.genq.nuggetize import NuggetizeResult, TopicNuggets

    t = TopicNuggets("101", "honey", [], nuggets=["", "Real nugget.", " \t"], importance=["okay", "vital", "okay"])
    assert [(i.text, i.importance) for i in NuggetizeResult([t], None, None).bank()] == [("Real nugget.", "vital")]


@pytest.mark.parametrize("answer,field", [('{"error": "I cannot help.", "codes": ["E42"]}', "questions"),
                                          ('{"answer": "Many causes.", "confidence": ["high"]}', "questions"),
                                          ('{"questions": ["What is nectar?"]}', "nuggets")])
def test_a_list_under_another_key_is_no_list_of_items(answer, field):
    from exam_eval.genq.parse import parse_items

    assert parse_items(answer, field) is None


def test_a_list_under_a_container_key_still_is():
    from exam_eval.genq.parse import parse_items

    assert parse_items('{"items": ["What is A?", "Why B?"]}', "questions") == ["What is A?", "Why B?"]
    assert parse_items('{"nugget_list": ["A fact."]}', "nuggets") == ["A fact."]


def test_a_bank_is_neither_written_nor_replaced_when_every_query_fails(tmp_path):
    topics = tmp_path / "topics.tsv"
    topics.write_text("101\thoney bees\n")
    script = tmp_path / "script.jsonl"
    script.write_text('{"query_id": "101", "fail": "boom"}\n')
    bank = tmp_path / "bank.jsonl"
    bank.write_text('{"query_id": "101", "item_id": "101/x", "kind": "question", "text": "Old question?"}\n')
    res = run("genq", "--backend", "scripted", "--script", script, topics, "-o", bank, "--force")
    assert res.escaped is None and res.code == 3, res.stderr
    assert "no items: nothing is written" in res.stderr
    assert bank.read_text() == '{"query_id": "101", "item_id": "101/x", "kind": "question", "text": "Old question?"}\n'
    new = tmp_path / "new.jsonl"
    res = run("genq", "--backend", "scripted", "--script", script, topics, "-o", new)
    assert res.code == 3 and not new.exists()


def test_topics_are_read_from_standard_input(run_cli, tmp_path):
    script = tmp_path / "script.jsonl"
    script.write_text('{"query_id": "101", "response": "[\\"Q1?\\"]"}\n')
    res = run_cli("exam-genq", "--backend", "scripted", "--script", script, "-", input="101\thoney bees\n")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["text"] == "Q1?"


def test_a_bank_with_one_text_as_a_question_and_a_nugget_is_refused(tmp_path):
    from exam_eval.io.banks import read_bank

    bank = tmp_path / "bank.jsonl"
    bank.write_text(json.dumps({"query_id": "101", "kind": "question", "text": "Bees make honey."}) + "\n"
                    + json.dumps({"query_id": "101", "kind": "nugget", "text": "Bees make honey."}) + "\n")
    with pytest.raises(InputError) as err:
        read_bank(bank, kind="nugget")
    assert err.value.line == 2 and "is a question on line 1 and a nugget here" in err.value.reason


def test_probs_over_labels_the_prompt_does_not_have_are_refused(tmp_path):
    from exam_eval.io.grades import read_grades

    g = tmp_path / "g.jsonl"
    line = {"query_id": "101", "doc_id": "d1", "item_id": "101/a", "kind": "question", "grade": 5,
            "probs": {"5": 0.5, "9": 0.5}, "answer": "5", "parse_ok": True, "model": "m", "prompt": "question-selfrating"}
    g.write_text(json.dumps({**line, "probs": {"5": 1.0}}) + "\n" + json.dumps(line) + "\n")
    with pytest.raises(InputError) as err:
        read_grades(g)
    assert err.value.line == 2 and err.value.reason.startswith("'probs' holds label '9', which prompt question-selfrating")


# ---- statistics ---------------------------------------------------------------------------------

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


def test_plot_to_an_unusable_path_is_refused_before_any_output(tmp_path):
    t = tmp_path / "t.tsv"
    t.write_text("run\tm\na\t0.5\nb\t0.3\nc\t0.1\n")
    out = tmp_path / "out.txt"
    out.write_text("ORIGINAL\n")
    res = run("correlate", "leaderboard", t, t, "-o", out, "--plot", tmp_path / "nodir" / "x.png")
    assert res.escaped is None and res.code == 2 and "cannot write: no such directory" in res.last_line
    assert out.read_text() == "ORIGINAL\n"


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


def test_an_unterminated_json_string_reads_plainly(tmp_path):
    bad = tmp_path / "g.jsonl"
    bad.write_text('{"a": "x\n')
    res = run("qrels", bad)
    assert res.code == 2 and res.last_line == f"exam-qrels: {bad}:1: invalid JSON (Unterminated string starting at column 7)"


def test_a_grade_of_an_unknown_kind_is_refused(tmp_path):
    g = tmp_path / "g.jsonl"
    g.write_text(json.dumps({"query_id": "101", "doc_id": "d1", "item_id": "101/a", "kind": "banana", "grade": 5,
                             "parse_ok": True, "model": "m", "prompt": "question-selfrating"}) + "\n")
    res = run("qrels", g)
    assert res.code == 2 and res.last_line == (f"exam-qrels: {g}:1: 'kind' must be question, nugget, statement or "
                                               "null, got 'banana'")


def test_ranked_equals_numpys_c_float_order_on_random_rankings():
    """ranked (array('f'), also the measures' trec_ranked) against scores cast to float32
    by numpy, ties by docno: descending for ranked, ascending for preferences."""
    import random

    import numpy as np

    from exam_eval.trec_eval.c_numbers import trec_ranked

    def as_c_float(v):
        with np.errstate(over="ignore"):
            return float(np.float32(v))

    rnd = random.Random(3)
    values = [1.0, 1.00000001, 0.99999999, 0.0, -0.0, 3.4028235e38, 3.40282356e38, -1e39]
    for _ in range(2000):
        docs = {f"d{rnd.randint(0, 60)}": rnd.choice([rnd.random(), rnd.uniform(-1e39, 1e39), *values])
                for _ in range(rnd.randint(1, 50))}
        assert ranked(docs) == sorted(docs, key=lambda d: (as_c_float(docs[d]), d), reverse=True), docs
        assert trec_ranked(docs, docno_ascending=True) == sorted(docs, key=lambda d: (-as_c_float(docs[d]), d))
