"""Hostile bytes, whatever the reader: NUL bytes, invalid UTF-8, a byte-order mark, CRLF
line ends, lines of megabytes, damaged gzip, JSON nested without end, escaped lone
surrogates, JSON syntax Python accepts and JSON does not; and inputs that are no regular
file: pipes, devices that never end, standard input, a missing path.

Every refusal here: one line on stderr naming the file (and the line, where the input has
lines), exit 2 (1 for a usage error), no traceback, nothing written. Where the bytes mean
the same content (a byte-order mark, CRLF, a pipe), the output is the plain file's. The
seeded fuzz of every reader is test_fuzz.py."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest

from inproc import run
from refusals import one_line_refusal
from tests.hostile_inputs._worlds import (DEEP, DEEP_OBJ, DEMO, DEMO_GRADE, ROOT, grade_json, item_json, refused,
                                          report_json, write)


# ---- bytes and encodings -------------------------------------------------------------------

def test_nul_bom_crlf_huge_lines_and_broken_gzip(tmp_path):
    qrels, good = DEMO / "qrels.txt", DEMO / "good.run"
    expected = run("qrels", "-m", "map", qrels, good)
    assert expected.code == 0
    text = good.read_bytes()
    for name, data in (("bom", b"\xef\xbb\xbf" + text), ("crlf", text.replace(b"\n", b"\r\n"))):
        p = write(tmp_path / f"{name}.run", None, data)
        res = run("qrels", "-m", "map", qrels, p)
        assert (res.code, res.stdout) == (0, expected.stdout), (name, res.stderr)
    lines = text.split(b"\n")
    nul = write(tmp_path / "nul.run", None, b"\n".join(lines[:4] + [lines[4].replace(b"Q0", b"Q\x000")] + lines[5:]))
    refused(run("qrels", "-m", "map", qrels, nul), nul, 5, "NUL byte")
    huge = write(tmp_path / "huge.run", None, text + b"101 Q0 " + b"p" * 3_000_000 + b" 1 1 t\n")
    res = run("qrels", "-m", "map", qrels, huge)
    assert res.escaped is None and res.code == 0  # a long docno is a docno
    g = "".join(grade_json(doc_id=f"p{i:03d}") + "\n" for i in range(200)).encode()
    trunc = write(tmp_path / "t.jsonl.gz", None, gzip.compress(g)[:-40])
    refused(run("qrels", trunc), trunc, True, "cannot read", "truncated or corrupt gzip")
    z = bytearray(gzip.compress(g))
    z[len(z) // 2] ^= 0x10
    flipped = write(tmp_path / "f.jsonl.gz", None, bytes(z))
    res = run("qrels", flipped)
    assert res.escaped is None and res.code == 2 and str(flipped) in res.last_line, res.stderr


def test_invalid_utf8_is_reported_on_its_line(tmp_path):
    g = write(tmp_path / "g.jsonl", None, (grade_json() + "\n" + grade_json(doc_id="p092") + "\n").encode()
              + b'{"query_id": "\xff"}\n')
    refused(run("qrels", g), g, 3, "not UTF-8 text")
    q = write(tmp_path / "q.txt", None, b"101 0 p064 1\n101 0 p092 1\n101 0 p\xc3 1\n")
    refused(run("qrels", "-m", "map", q, DEMO / "good.run"), q, 3, "not UTF-8 text")


def test_a_huge_field_is_cut_in_the_middle_of_its_one_line(tmp_path):
    qrels = tmp_path / "q.txt"
    qrels.write_text("101 0 p001 3" + "A" * 1_000_000 + "\n")
    msg = one_line_refusal(run("qrels", qrels, DEMO / "good.run"), "exam-qrels")
    assert len(msg) < 1200 and "characters left out" in msg
    assert msg.startswith(f"exam-qrels: {qrels}:1: ")


# ---- JSON: nesting, lone surrogates, syntax ------------------------------------------------

@pytest.mark.parametrize("nest", [DEEP, DEEP_OBJ], ids=["array", "object"])
def test_deep_nesting_in_every_json_reader(tmp_path, nest):
    g = write(tmp_path / "g.jsonl", [grade_json(), nest])
    refused(run("qrels", g), g, 2, "nested deeper than")
    refused(run("cover", g, DEMO / "good.run"), g, 2, "nested deeper than")
    b = write(tmp_path / "b.jsonl", [item_json(), item_json(item_id="101/y", text="other"), nest])
    refused(run("nuggets", "bank", "--to", "ours", b), b, 3, "nested deeper than")
    refused(run("cover", "--bank", b, write(tmp_path / "ok.jsonl", [grade_json()]), DEMO / "good.run"), b, 3)
    (tmp_path / "runs").mkdir()
    r = write(tmp_path / "runs" / "r.jsonl", [nest])
    refused(run("nuggets", "score", "--reports", r, "--bank", b, g), r, 1, "nested deeper than")
    refused(run("grade", "--dry-run", "--backend", "scripted", "--prompt", "umbrela", "--no-cache",
                "--topics", DEMO / "topics.tsv", "--reports", tmp_path / "runs"), r, 1, "nested deeper than")
    t = write(tmp_path / "topics.jsonl", [json.dumps({"query_id": "101", "text": "bees"}), nest])
    refused(run("nuggets", "bank", "--to", "nuggetizer", "--topics", t, DEMO / "nuggets.jsonl"), t, 2)
    p = write(tmp_path / "p.jsonl", [json.dumps({"doc_id": "p064", "text": "bees"}), nest])
    refused(run("grade", "--dry-run", "--backend", "scripted", "--prompt", "question-selfrating", "--no-cache",
                "--bank", DEMO / "questions.jsonl", "--passages", p, DEMO / "good.run"), p, 2, "nested deeper than")


def test_lone_surrogates_are_refused_where_they_are_read(tmp_path):
    (tmp_path / "runs").mkdir()
    r = write(tmp_path / "runs" / "r.jsonl",
              [report_json(), report_json(sentences=[{"text": "a \\ud800 b", "citations": []}],
                                          md={"run_id": "r2", "topic_id": "101", "team_id": "t"})])
    r.write_text(r.read_text().replace("\\\\ud800", "\\ud800"))  # the escape itself, as a file holds it
    b = write(tmp_path / "b.jsonl", [item_json()])
    last = refused(run("nuggets", "score", "--reports", r, "--bank", b, write(tmp_path / "g.jsonl", [grade_json()])),
                   r, 2, "lone surrogate \\ud800", "responses[0].text")
    assert "\ud800" not in last
    bank = write(tmp_path / "bank.jsonl", [item_json(), item_json(item_id=None, text="x \\udfff")])
    bank.write_text(bank.read_text().replace("\\\\udfff", "\\udfff"))
    refused(run("nuggets", "bank", "--to", "nuggetizer", bank), bank, 2, "lone surrogate \\udfff", "text")
    g = write(tmp_path / "grades.jsonl", [grade_json(), grade_json(doc_id="p\\ud801")])
    g.write_text(g.read_text().replace("\\\\ud801", "\\ud801"))
    refused(run("qrels", g), g, 2, "lone surrogate", "doc_id")
    # a correct pair is text, not a surrogate
    ok = write(tmp_path / "pair.jsonl", [item_json(item_id=None, text="bee \\ud83d\\udc1d")])
    ok.write_text(ok.read_text().replace("\\\\u", "\\u"))
    res = run("nuggets", "bank", "--to", "ours", ok)
    assert res.code == 0 and "bee \U0001f41d" in res.stdout, res.stderr


def test_surrogate_in_a_real_process_is_one_line(tmp_path, run_cli):
    """Where it used to end in UnicodeEncodeError: writing the converted bank."""
    bank = tmp_path / "bank.jsonl"
    bank.write_text(item_json(text="honey \\ud800").replace("\\\\", "\\") + "\n")
    res = run_cli("exam-nuggets", "bank", "--to", "ours", bank)
    assert one_line_refusal(res) == (f"exam-nuggets: {bank}:1: lone surrogate \\ud800 in the string at "
                                     "text (an escaped half of a UTF-16 pair is not text)")


def test_an_unterminated_json_string_reads_plainly(tmp_path):
    bad = tmp_path / "g.jsonl"
    bad.write_text('{"a": "x\n')
    res = run("qrels", bad)
    assert res.code == 2 and res.last_line == f"exam-qrels: {bad}:1: invalid JSON (Unterminated string starting at column 7)"


@pytest.mark.parametrize("text, refused_for", [
    ("[" * 64 + "]" * 64, None),
    ("[" * 65 + "]" * 65, "nested deeper than 64"),
    ('{"x": "' + "[" * 100 + '"}', None),  # brackets inside a string are text
    ('["' + "]" * 100 + '", ' + "[" * 65 + "]" * 65 + "]", "nested deeper than 64"),  # ... either way
    ('{"a": "\\\\ud800"}', None),  # an escaped backslash, then the letters "ud800"
    ('["\\ud83d\\ude00"]', None),  # a pair
    ('["\\ud800\\ud800\\udc00"]', "lone surrogate \\ud800"),
    ('["\\udc00\\ud800"]', "lone surrogate \\udc00"),
    ('{"n": Infinity}', "Infinity is not allowed"),
    ('{"n": -Infinity}', "-Infinity is not allowed"),
])
def test_json_refusals(text, refused_for):
    from exam_eval.io.jsonl import loads_checked

    if refused_for is None:
        assert loads_checked(text) == json.loads(text)
    else:
        with pytest.raises(ValueError, match=re.escape(refused_for)):
            loads_checked(text)


# ---- pipes, standard input, missing files ---------------------------------------------------

def _pipe(tmp_path, source: Path) -> Path:
    """A named pipe that a thread fills once with ``source``'s bytes, as `<(cat source)`."""
    fifo = tmp_path / f"{source.name}.fifo"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as fh:
            fh.write(source.read_bytes())

    threading.Thread(target=feed, daemon=True).start()
    return fifo


@pytest.mark.timeout(60)  # a named pipe opened a second time, with no writer left, blocked for ever
@pytest.mark.parametrize("case", ["qrels", "grades", "topics", "passages"])
def test_pipes_read_like_files(case, tmp_path):
    """Readers sniff the format and then open the input again: a pipe (`<(zcat ...)`) was
    empty the second time, and the command said 'qrels file is empty', 'no topics found' or
    'invalid JSON' about an input that was fine; a named pipe (mkfifo) hung."""
    grades = tmp_path / "grades.jsonl"
    assert run(*DEMO_GRADE, "-o", grades).code == 0
    argv, slot = {
        "qrels": (["qrels", "-m", "map", None, DEMO / "good.run"], DEMO / "qrels.txt"),
        "grades": (["qrels", None], grades),
        "topics": (["genq", "--dry-run", None], DEMO / "topics.tsv"),
        "passages": ([*DEMO_GRADE[:8], None, *DEMO_GRADE[9:]], DEMO / "passages.jsonl"),
    }[case]
    from_file = run(*[slot if a is None else a for a in argv])
    assert from_file.code == 0, from_file.stderr
    fifo = _pipe(tmp_path, slot)
    res = run(*[fifo if a is None else a for a in argv])
    assert res.escaped is None and res.code == 0, res.stderr
    assert res.stdout.replace(str(fifo), str(slot)) == from_file.stdout


def test_jsonl_passages_on_stdin_say_why_they_are_refused(run_cli):
    """Only TSV passages are read from stdin (JSONL is told by sniffing, which reads the
    input twice); JSONL there was refused as if it were broken TSV."""
    argv = ["exam-grade", *DEMO_GRADE[1:8], "-", *DEMO_GRADE[9:]]
    res = run_cli(*argv, input=(DEMO / "passages.jsonl").read_text())
    assert one_line_refusal(res) == ("exam-grade: <stdin>:1: JSONL passages cannot be read from stdin "
                                     "(the format is sniffed); pass a file, or TSV on stdin")
    tsv = "".join(f"{json.loads(x)['doc_id']}\t{json.loads(x)['text']}\n"
                  for x in (DEMO / "passages.jsonl").read_text().splitlines())
    res = run_cli(*argv, input=tsv)
    assert res.returncode == 0 and res.stdout == run(*DEMO_GRADE).stdout, res.stderr


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


def test_topics_are_read_from_standard_input(run_cli, tmp_path):
    script = tmp_path / "script.jsonl"
    script.write_text('{"query_id": "101", "response": "[\\"Q1?\\"]"}\n')
    res = run_cli("exam-genq", "--backend", "scripted", "--script", script, "-", input="101\thoney bees\n")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["text"] == "Q1?"


@pytest.mark.parametrize("argv", [["cover", "-", "-"], ["qrels", "-m", "map", "-", "-"]])
def test_standard_input_named_twice_is_a_usage_error(argv):
    res = run(*argv)  # refused before anything is read
    assert res.escaped is None and res.code == 1
    assert "standard input (-) is given 2 times" in res.last_line


def test_missing_file_and_unknown_dataset(tmp_path, run_cli):
    res = run_cli("exam-qrels", tmp_path / "nope.txt")
    assert res.returncode == 2 and "no such file" in res.stderr
    res = run_cli("exam-cover", tmp_path / "nope.jsonl", tmp_path / "r")
    assert res.returncode == 2 and "nope.jsonl" in res.stderr


# ---- devices ------------------------------------------------------------------------------

def _bounded(cmd: list[str], stdin=None) -> subprocess.CompletedProcess:
    """A command that, were the guard gone, would read without end: its memory capped and
    its time limited, so a regression fails the test rather than the machine."""
    import resource
    import sys

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    module = "exam_eval.commands." + cmd[0].removeprefix("exam-")
    # one thread for the numeric libraries: their per-thread buffers are address space,
    # which on a many-core machine would count against the cap before any input is read
    threads = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS")}
    return subprocess.run([sys.executable, "-c", f"import {module} as m; m.main()", *cmd[1:]], stdin=stdin,
                          capture_output=True, text=True, timeout=120, preexec_fn=cap,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), MALLOC_ARENA_MAX="2", **threads))


ENDLESS = [d for d in ("/dev/zero", "/dev/urandom") if os.path.exists(d)]


@pytest.mark.skipif(not ENDLESS, reason="no /dev/zero here")
@pytest.mark.parametrize("where", ["labels", "run", "passages", "bank", "stdin"])
def test_a_device_that_never_ends_is_refused_in_one_line(where, tmp_path):
    """/dev/zero, /dev/urandom as an input: read line by line or whole they never end (the
    memory fills up); they are refused before any reading, exit 2, no output file."""
    out = tmp_path / "out.jsonl"
    dev = ENDLESS[-1] if where == "bank" else ENDLESS[0]
    grade = ["exam-grade", "--backend", "scripted", "--prompt", "question-selfrating", "-o", str(out)]
    files = {"run": str(DEMO / "good.run"), "passages": str(DEMO / "passages.jsonl"),
             "bank": str(DEMO / "questions.jsonl"), where: dev}
    cmd = {"labels": ["exam-qrels", dev, str(DEMO / "good.run")],
           "stdin": ["exam-cover", "-", str(DEMO / "good.run")]}.get(
        where, grade + [files["run"], "--passages", files["passages"], "--bank", files["bank"]])
    with open(dev, "rb") as stdin:
        res = _bounded(cmd, stdin=stdin if where == "stdin" else subprocess.DEVNULL)
    assert res.returncode == 2, (res.returncode, res.stderr[-500:])
    shown = "<stdin>" if where == "stdin" else dev
    assert one_line_refusal(res) == f"{cmd[0]}: {shown}: is a device, not a file: reading it would not end"
    assert not out.exists()


def test_the_null_device_is_an_empty_file_not_an_endless_one():
    res = _bounded(["exam-qrels", os.devnull, str(DEMO / "good.run")])
    assert res.returncode == 2 and "is a device" not in res.stderr and "empty" in res.stderr
