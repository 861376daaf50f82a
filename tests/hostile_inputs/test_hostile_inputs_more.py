"""More hostile inputs, found by a sweep of the seven commands: options out of range,
back-end options and scripts, measures trec_eval accepts but pytrec_eval chokes on.
Each case: exit 2 (or 1 for a usage error) with one line naming what is wrong, no
traceback, no output file left behind; or, where trec_eval accepts the input, its result.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from inproc import run

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
RUNS = [DEMO / "good.run", DEMO / "poor.run"]


def _clean(res, prog: str, code: int) -> str:
    """The one error line of a run that must fail cleanly with ``code``."""
    assert res.escaped is None, res.escaped
    assert "Traceback" not in res.stderr
    assert res.code == code, (res.code, res.stderr)
    assert res.last_line.startswith(prog + ": "), res.stderr
    return res.last_line


@pytest.mark.parametrize("gains", ["ndcg.1=3,2=9", "ndcg_rel.1=x", "ndcg.1="])
def test_gain_measures_on_a_leaderboard(gains, run_cli, trec_eval_binary):
    """trec_eval parses a gain list in place on every evaluation; pytrec_eval evaluating a
    second run with the same evaluator crashed (SIGSEGV). Every run's value must be
    trec_eval's."""
    res = run_cli("exam-qrels", "-m", gains, "-m", "map", DEMO / "qrels.txt", *RUNS)
    assert res.returncode == 0, (res.returncode, res.stderr)
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert rows[0][0] == "run" and len(rows) == 3
    for row, run_file in zip(rows[1:], RUNS):
        te = subprocess.run([str(trec_eval_binary), "-m", gains, "-m", "map", str(DEMO / "qrels.txt"),
                             str(run_file)], capture_output=True, text=True, check=True)
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


GRADE = ["grade", "--backend", "scripted", "--prompt", "question-selfrating", "--bank", DEMO / "questions.jsonl",
         "--passages", DEMO / "passages.jsonl", "-k", "1", DEMO / "good.run", "--no-cache"]


@pytest.mark.parametrize("option, shown", [
    ("batch_size=x", "batch_size: expected a whole number >= 0, got 'x'"),
    ("batch_size=nan", "batch_size: expected a whole number >= 0, got nan"),
    ("window=1e999", "window: expected a whole number >= 0, got inf"),
    ("delay=-1", "delay: expected a finite number >= 0, got -1"),
    ("delay=nan", "delay: expected a finite number >= 0, got nan"),
])
def test_backend_option_numbers_are_checked_before_work(option, shown, tmp_path):
    """-O values went to the back end unchecked: int('x'), int(nan) or time.sleep(-1) raised
    a traceback, some of them mid-grading with the output open."""
    out = tmp_path / "grades.jsonl"
    line = _clean(run(*GRADE, "-O", option, "-o", out), "exam-grade", 1)
    assert line == f"exam-grade: --backend-option {shown}"
    assert not out.exists()


def test_backend_option_numbers_still_work():
    plain = run(*GRADE)
    res = run(*GRADE, "-O", "batch_size=2", "-O", "delay=0", "-O", "window=400")
    assert res.escaped is None and res.code == 0, res.stderr
    assert len(res.stdout.splitlines()) == 100  # the top passage of 10 queries, 10 questions each

    def grades(out):  # the grader_hash names the window, which is another grader's setting
        return sorted(json.dumps({k: v for k, v in json.loads(x).items() if k != "grader_hash"})
                      for x in out.splitlines())

    assert grades(res.stdout) == grades(plain.stdout)


@pytest.mark.parametrize("rule, reason", [
    ({"item": 5, "output": "3"}, "'item' must be a string (a substring to match)"),
    ({"context": ["Bee"], "output": "3"}, "'context' must be a string (a substring to match)"),
    ({"probs": {"0": "x", "5": 1}}, "'probs' must be an object of label weights (finite numbers >= 0)"),
    ({"probs": [0.5, 0.5]}, "'probs' must be an object of label weights (finite numbers >= 0)"),
])
def test_script_rules_of_the_wrong_type_name_their_line(rule, reason, tmp_path):
    """A rule's values were used as they came: 5 in a passage's text raised TypeError, a
    weight "x" ValueError, both mid-grading."""
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"output": "4"}) + "\n" + json.dumps(rule) + "\n")
    out = tmp_path / "grades.jsonl"
    line = _clean(run(*GRADE, "-O", f"script={script}", "-o", out), "exam-grade", 2)
    assert line == f"exam-grade: {script}:2: {reason}"
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--truth-max", "--pred-max"])
def test_qrels_comparison_scale_is_bounded(flag, tmp_path):
    """A kappa column per pair of thresholds: --truth-max 10^20 ran out of memory
    (MemoryError, or the OOM killer) before printing anything."""
    out = tmp_path / "cmp.tsv"
    line = _clean(run("correlate", "qrels", DEMO / "qrels.txt", DEMO / "qrels.txt", flag, "99999999999999999999",
                      "-o", out), "exam-correlate", 1)
    assert line == f"exam-correlate: {flag} must be at most 100"
    assert not out.exists()
    res = run("correlate", "qrels", DEMO / "qrels.txt", DEMO / "qrels.txt", "--truth-max", "100", "--pred-max", "3")
    assert res.code == 0 and "kappa@100v3" in res.stdout.splitlines()[0], res.stderr


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
        "grade-cache": ("exam-grade", "--cache", [*GRADE[:-1], "--cache", same]),
        "grade-run-out": ("exam-grade", "--responses-run-out",
                          [*GRADE[:8], "--no-cache", "--responses", responses, "--responses-run-out", same]),
        "assign": ("exam-nuggets", "--assignments",
                   ["nuggets", "assign", "--backend", "scripted", "--script", DEMO / "assign-script.jsonl",
                    "--reports", reports, "--bank", DEMO / "nuggetized.jsonl", "--topics", DEMO / "topics.tsv",
                    "--no-cache", "--assignments", same]),
        "score": ("exam-nuggets", "--assignments",
                  ["nuggets", "score", "--reports", reports, "--bank", DEMO / "nuggets.jsonl", "--assignments", same,
                   DEMO / "nuggetized.jsonl"]),
        "plot": ("exam-correlate", "--plot", ["correlate", "leaderboard", lb, lb, "--plot", same]),
    }[case]
    line = _clean(run(*argv, "-o", same), prog, 1)
    assert line == f"{prog}: {first} and --output name the same file: {same}"
    assert list(tmp_path.glob("same*")) == []


def test_outputs_to_a_device_may_share_it(tmp_path):
    lb = tmp_path / "lb.tsv"
    lb.write_text("run\tmap\na\t0.5\nb\t0.3\nc\t0.1\n")
    pytest.importorskip("matplotlib")
    res = run("correlate", "leaderboard", lb, lb, "--plot", "/dev/null", "-o", "/dev/null")
    assert res.escaped is None and res.code == 0, res.stderr


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
    assert run(*GRADE, "-o", grades).code == 0
    argv, slot = {
        "qrels": (["qrels", "-m", "map", None, DEMO / "good.run"], DEMO / "qrels.txt"),
        "grades": (["qrels", None], grades),
        "topics": (["genq", "--dry-run", None], DEMO / "topics.tsv"),
        "passages": ([*GRADE[:8], None, *GRADE[9:]], DEMO / "passages.jsonl"),
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
    argv = ["exam-grade", *GRADE[1:8], "-", *GRADE[9:]]
    res = run_cli(*argv, input=(DEMO / "passages.jsonl").read_text())
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.splitlines()[-1] == ("exam-grade: <stdin>:1: JSONL passages cannot be read from stdin "
                                           "(the format is sniffed); pass a file, or TSV on stdin")
    tsv = "".join(f"{json.loads(x)['doc_id']}\t{json.loads(x)['text']}\n"
                  for x in (DEMO / "passages.jsonl").read_text().splitlines())
    res = run_cli(*argv, input=tsv)
    assert res.returncode == 0 and res.stdout == run(*GRADE).stdout, res.stderr


def test_truncated_trec_topics_lose_no_topic_silently(tmp_path):
    """A TREC topic file cut inside its last topic read fine, one topic short."""
    topics = [line.split("\t", 1) for line in (DEMO / "topics.tsv").read_text().splitlines()]
    whole = "".join(f"<top>\n<num> Number: {q}\n<title> {t}\n\n<desc> Description:\nd\n</top>\n\n" for q, t in topics)
    good = tmp_path / "topics.trec"
    good.write_text(whole)
    res = run("genq", "--dry-run", good)
    assert res.code == 0 and f"# {len(topics)} calls" in res.stdout, res.stderr
    cut = tmp_path / "cut.trec"
    cut.write_text(whole[:whole.rindex("</top>")])
    last = whole[:whole.rindex("<top>")].count("\n") + 1
    line = _clean(run("genq", "--dry-run", cut), "exam-genq", 2)
    assert line == f"exam-genq: {cut}:{last}: <top> without its </top> (a truncated file?)"


def test_negative_seed_is_a_usage_error(tmp_path):
    """numpy's generators take seeds >= 0: --seed -1 was a ValueError traceback."""
    out = tmp_path / "ci.tsv"
    line = _clean(run("correlate", "interval", DEMO / "qrels.txt", DEMO / "qrels.txt", DEMO / "good.run",
                      "--seed", "-1", "-o", out), "exam-correlate", 1)
    assert line.startswith("exam-correlate: Invalid value for '--seed': -1 is not in the range x>=0.")
    assert not out.exists()


@pytest.mark.parametrize("prompt, answer, expect", [
    ("question-selfrating", "4" * 10000, {(None, False)}),   # int() refuses 4300 digits
    ("umbrela", "##final score: " + "2" * 5000, {(None, False)}),
    # nltk's edit_distance refuses 2000 characters: no answer key matches (0), items
    # without keys count any answer (1)
    ("question-extraction", "nectar " * 2000, {(0, True), (1, True)}),
])
def test_rambling_model_answers_are_recorded_not_fatal(prompt, answer, expect, tmp_path):
    """A model stuck repeating itself is model output like any other: recorded (unparsed
    when it is no grade), never a traceback that stops the grading."""
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"output": answer}) + "\n")
    argv = ["grade", "--backend", "scripted", "--no-cache", "-O", f"script={script}", "--prompt", prompt,
            "--bank", DEMO / "questions.jsonl", "--topics", DEMO / "topics.tsv", "--passages",
            DEMO / "passages.jsonl", "-k", "1", DEMO / "good.run"]
    res = run(*argv)
    assert res.escaped is None and res.code == 0, (res.escaped, res.stderr)
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert lines and {(g["grade"], g["parse_ok"]) for g in lines} == expect
    assert all(g["answer"] == answer for g in lines)


def test_long_answer_keys_still_match_by_edit_distance():
    """Past nltk's 2000-character guard the EXAM rule still holds: 'x'*3000 against
    'x'*2900 is 100 deletions, under 20% of 3000; 'y'*2900 is 2900 substitutions plus 100."""
    from exam_eval.grading.answer_check import matches

    assert matches("x" * 3000, ["x" * 2900])
    assert not matches("x" * 3000, ["y" * 2900])
    assert not matches("nectar " * 2000, ["nectar"])  # 500 times the key's length


@pytest.mark.parametrize("scale", ["0 " + "9" * 5000, "0 99999999999", "-20000 3"])
def test_custom_prompt_scale_is_bounded(scale, tmp_path):
    """'# scale: 0 <5000 digits>' was a ValueError traceback; a scale past 10000 wrote
    grades that the grades reader then refuses (io.c_numbers.LABEL_MAX)."""
    from exam_eval.trec_eval.c_numbers import LABEL_MAX

    prompt = tmp_path / "prompt.txt"
    prompt.write_text(f"# scale: {scale}\n{{context}} {{question}}\n")
    line = _clean(run(*GRADE[:3], "--prompt", prompt, *GRADE[5:]), "exam-grade", 2)
    assert line.startswith(f"exam-grade: {prompt}:1: scale must be 'MIN MAX' within -{LABEL_MAX}..{LABEL_MAX}, not ")


@pytest.mark.parametrize("nest", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000],
                         ids=["array", "object"])
def test_deep_first_line_of_a_leaderboard(nest, tmp_path):
    """The assignment-file sniff read the first line with json.loads: nested 10^5 deep it
    was a RecursionError traceback (found by test_fuzz_inputs with FUZZ_SEED=5)."""
    board = tmp_path / "board.tsv"
    board.write_text(nest + "\nrun\tmap\na\t0.5\n")
    line = _clean(run("correlate", "leaderboard", board, board), "exam-correlate", 2)
    assert line.startswith(f"exam-correlate: {board}: cannot tell the leaderboard's shape")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("status", [200, 500])
def test_server_answering_json_nested_without_end(status):
    """json.loads of an HTTP body nested 10^5 deep raised RecursionError out of the client
    (a traceback); it is a malformed answer like any other: retried, then the call fails."""
    from openai_stub import OpenAIStub, Reply

    from exam_eval.backends.http_client import OpenAIClient

    deep = b"[" * 100_000 + b"]" * 100_000
    with OpenAIStub([Reply(status, body=deep)] * 2) as stub:
        [res] = OpenAIClient(stub.url, "m", backoff=0.01, timeout=5.0, max_retries=1).chat(
            [[{"role": "user", "content": "hi"}]])
    assert res.text is None and res.attempts == 2 and "2 attempts" in res.error


def test_generated_item_with_a_lone_surrogate_is_not_read(tmp_path):
    """A model's JSON answer may hold half of an escaped emoji ("\\ud83d"): the item went on
    to md5 and the writer, a UnicodeEncodeError traceback. It is not read; the others are,
    and a query left with nothing is a failed query (exit 3), as for any unusable answer."""
    topics = tmp_path / "topics.tsv"
    topics.write_text("101\thow do honey bees make honey\n102\tcauses of the french revolution\n")
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"query_id": "101", "response": '{"questions": ["Why? \\ud83d", "What is nectar?"]}'})
                      + "\n" + json.dumps({"query_id": "102", "response": '{"questions": ["\\ud83d"]}'}) + "\n")
    out = tmp_path / "bank.jsonl"
    res = run("genq", "generate", "--backend", "scripted", "--script", script, "--retries", "0", topics, "-o", out)
    assert res.escaped is None and res.code == 3, (res.escaped, res.stderr)
    assert [json.loads(line)["text"] for line in out.read_text().splitlines()] == ["What is nectar?"]


def test_nuggetizer_answer_with_a_lone_surrogate_is_asked_again(tmp_path):
    """ast.literal_eval("['\\ud83d']") gives a lone surrogate: the nugget reached the next
    prompt's hashing, a UnicodeEncodeError traceback. The answer is unparsed (asked again,
    then the topic fails: exit 3), like any unusable answer."""
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"match": ["You are NuggetizeLLM,"], "output": "['Bees \\ud83d make honey']"}) + "\n"
                      + json.dumps({"match": ["NuggetizeScoreLLM"], "output": "['vital']"}) + "\n")
    out = tmp_path / "nuggets.jsonl"
    res = run("genq", "nuggetize", "--backend", "scripted", "--script", script, "--qrels", DEMO / "qrels.txt",
              "--passages", DEMO / "passages.jsonl", DEMO / "topics.tsv", "--no-cache", "--retries", "1", "-o", out)
    assert res.escaped is None and res.code == 3, (res.escaped, res.stderr)
    assert "did not parse" in res.last_line


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
    assert res.stderr.strip().splitlines() == [f"{cmd[0]}: {shown}: is a device, not a file: reading it would not end"]
    assert not out.exists()


def test_the_null_device_is_an_empty_file_not_an_endless_one():
    res = _bounded(["exam-qrels", os.devnull, str(DEMO / "good.run")])
    assert res.returncode == 2 and "is a device" not in res.stderr and "empty" in res.stderr


@pytest.mark.parametrize("samples", ["10000000000", "100000000000000000000"])
def test_bootstrap_samples_beyond_the_memory_are_a_usage_error(samples):
    """--samples 10^10 used to end in numpy's MemoryError traceback (745 GiB of draws),
    10^20 in "every method failed: Maximum allowed dimension exceeded"; both are now one
    line that says how many samples fit, before any work."""
    res = run("correlate", "interval", DEMO / "qrels.txt", DEMO / "qrels.txt", DEMO / "good.run", "--samples", samples)
    line = _clean(res, "exam-correlate", 1)
    assert "--samples" in line and "GiB" in line and "samples fit" in line
    fits = int(line.rsplit("at most ", 1)[1].split()[0].replace(",", ""))
    ok = run("correlate", "interval", DEMO / "qrels.txt", DEMO / "qrels.txt", DEMO / "good.run", "--samples",
             str(min(fits, 2000)), "--methods", "bootstrap")
    assert ok.code == 0 and "bootstrap" in ok.stdout
