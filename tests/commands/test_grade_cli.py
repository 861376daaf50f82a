"""exam-grade as a user runs it: a real subprocess on the demo collection with the
scripted back end (deterministic pseudo-grades, optional per-batch delay).

Kill/resume, bank edits, bad inputs, interoperability with exam-qrels / exam-cover."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from inproc import command

from exam_eval.grading import writer
from exam_eval.io.bank_items import make_item_id
from exam_eval.grading.grade_files import read_grades
from child_env import CTRL_C_REACHES, ChildEnv
from waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
BANK = DEMO / "questions.jsonl"
PASSAGES = DEMO / "passages.jsonl"
RUNS = [DEMO / "good.run", DEMO / "poor.run"]
ENV = ChildEnv(PYTHONPATH=str(ROOT), EXAM_EVAL_PROGRESS="0")
CMD = [sys.executable, "-c", CTRL_C_REACHES + "import exam_eval.commands.grade as m; m.main()"]


def base_args(tmp_path, *extra, bank=BANK, cache="cache.sqlite"):
    return ["--backend", "scripted", "--prompt", "question-selfrating", "--bank", str(bank),
            "--passages", str(PASSAGES), *map(str, RUNS), "--cache", str(tmp_path / cache), *extra]


def grade(*args, timeout=300):
    return command("grade", *args, env=ENV, timeout=timeout)


def summary(stderr: str) -> dict[str, int]:
    m = re.search(r"(\d+) pairs: (\d+) graded, (\d+) from cache, (\d+) deduplicated, (\d+) already in output, "
                  r"(\d+) failed", stderr)
    assert m, stderr
    keys = ("pairs", "graded", "from_cache", "deduplicated", "in_output", "failed")
    return dict(zip(keys, map(int, m.groups())))


def rows(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


def keyed(path):
    return {(r["query_id"], r["doc_id"], r["item_id"]): (r["grade"], r["answer"], r["parse_ok"]) for r in rows(path)}


def pooled(depth=20):
    """The pool recomputed directly from the run files (score desc, docno desc)."""
    pool: dict[str, set] = {}
    for run in RUNS:
        per_q: dict[str, list] = {}
        for line in run.read_text().split("\n"):
            if line.strip():
                q, _, d, _, s, _ = line.split()
                per_q.setdefault(q, []).append((float(s), d))
        for q, docs in per_q.items():
            docs.sort(key=lambda x: (x[0], x[1]), reverse=True)
            pool.setdefault(q, set()).update(d for _, d in docs[:depth])
    return pool


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ref")
    out = tmp / "ref.jsonl"
    r = grade(*base_args(tmp, "-o", out))
    assert r.returncode == 0, r.stderr
    return out, summary(r.stderr)


def test_uninterrupted_run_grades_the_whole_pool(reference):
    out, s = reference
    pool = pooled()
    bank = Counter(json.loads(x)["query_id"] for x in BANK.read_text().splitlines())
    expected = sum(len(pool[q]) * bank[q] for q in pool)
    assert s["pairs"] == expected == len(rows(out)) == len(keyed(out))
    assert s["graded"] + s["deduplicated"] == expected and s["from_cache"] == 0


def test_output_is_read_by_read_grades_exam_qrels_and_exam_cover(reference, run_cli, tmp_path):
    out, _ = reference
    grades = read_grades(str(out))
    assert len(grades) == len(rows(out))
    assert {g.prompt for g in grades} == {"question-selfrating"} and {g.kind for g in grades} == {"question"}
    r = run_cli("exam-qrels", out)
    assert r.returncode == 0, r.stderr
    got = {(q, d): int(lab) for q, _, d, lab in (line.split() for line in r.stdout.splitlines())}
    best: dict = {}
    for row in rows(out):
        k = (row["query_id"], row["doc_id"])
        best[k] = max(best.get(k, -1), row["grade"])
    assert got == best
    r = run_cli("exam-cover", out, RUNS[0])
    assert r.returncode == 0, r.stderr
    assert "all" in r.stdout


def _start(args):
    return subprocess.Popen(CMD + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV)


def _count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _kill_after(args, path: Path, lines: int):
    proc = _start(args)
    deadline = time.time() + 120
    while _count_lines(path) < lines and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    return proc.returncode


def test_sigkill_at_several_points_then_resume_equals_uninterrupted(reference, tmp_path):
    ref_out, ref_s = reference
    out = tmp_path / "g.jsonl"
    args = base_args(tmp_path, "-o", out, "-O", "delay=0.01", "--batch-size", "4")
    killed_at = []
    for target in (1, 150, 600):
        rc = _kill_after(args, out, target)
        assert rc == -signal.SIGKILL
        killed_at.append(_count_lines(out))
    assert killed_at[0] < killed_at[-1] < ref_s["pairs"], killed_at
    # a writer killed mid-line leaves a torn line: simulate the worst case
    with open(out, "a") as fh:
        fh.write('{"query_id": "101", "doc_id": "p0')
    r = grade(*args)
    assert r.returncode == 0, r.stderr
    assert "torn" in r.stderr
    s = summary(r.stderr)
    assert s["in_output"] > 0 and s["pairs"] == ref_s["pairs"]
    lines = rows(out)
    keys = [(x["query_id"], x["doc_id"], x["item_id"]) for x in lines]
    assert len(keys) == len(set(keys)), "duplicate keys after resume"
    assert keyed(out) == keyed(ref_out)


def test_ctrl_c_exits_cleanly_with_a_resume_hint(tmp_path):
    out = tmp_path / "g.jsonl"
    args = base_args(tmp_path, "-o", out, "-O", "delay=0.02", "--batch-size", "2")
    proc = _start(args)
    wait_for(lambda: _count_lines(out) >= 10, 60, "ten grades in the output", proc=proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "resume" in err and "Traceback" not in err
    assert len(rows(out)) == _count_lines(out)  # only whole lines were written
    r = grade(*base_args(tmp_path, "-o", out))
    assert r.returncode == 0, r.stderr
    s = summary(r.stderr)
    assert s["in_output"] > 0 and s["in_output"] + s["graded"] + s["deduplicated"] == s["pairs"]
    assert len(rows(out)) == len(keyed(out)) == s["pairs"]


def test_a_background_job_of_a_script_keeps_ignoring_ctrl_c_and_stops_on_sigterm(tmp_path):
    """A shell starts `exam-grade ... &` of a script with SIGINT ignored, so that Ctrl-C at
    the terminal reaches only the foreground; the command left it ignored no more (it set
    its own handler over it). SIGTERM stops it as before."""
    out = tmp_path / "g.jsonl"
    plain = [sys.executable, "-c", "import exam_eval.commands.grade as m; m.main()"]
    args = base_args(tmp_path, "-o", out, "-O", "delay=0.02", "--batch-size", "2")
    proc = subprocess.Popen(["sh", "-c", 'trap "" INT; exec "$@"', "sh", *plain, *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    wait_for(lambda: _count_lines(out) >= 10, 60, "ten grades in the output", proc=proc)
    proc.send_signal(signal.SIGINT)
    written = _count_lines(out)
    # an interrupt honoured ends the run once the writer has written what it was handed
    # (writer.DEPTH batches of 2 lines, and one in hand); this one is ignored: the run
    # grades on, three times past that, and is still running
    past = 3 * (writer.DEPTH + 1) * 2
    wait_for(lambda: _count_lines(out) >= written + past, 60, f"{past} more grades after the ignored Ctrl-C",
             proc=proc)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "resume" in err and "Traceback" not in err, err
    assert len(rows(out)) == _count_lines(out)


def _edited_bank(tmp_path) -> tuple[Path, dict[str, str]]:
    """Change the first question of every query; return the new texts."""
    seen, new_text, out = set(), {}, []
    for line in BANK.read_text().splitlines():
        item = json.loads(line)
        q = item["query_id"]
        if q not in seen:
            seen.add(q)
            item["text"] = item["text"].rstrip("?") + " exactly?"
            item["item_id"] = make_item_id(q, item["text"])
            item.pop("answers", None)
            new_text[q] = item["text"]
        out.append(json.dumps(item))
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join(out) + "\n")
    return path, new_text


def test_bank_edit_regrades_only_the_changed_items(tmp_path):
    out = tmp_path / "g.jsonl"
    r = grade(*base_args(tmp_path, "-o", out))
    assert r.returncode == 0, r.stderr
    first = summary(r.stderr)
    bank2, changed = _edited_bank(tmp_path)
    texts = {json.loads(x)["doc_id"]: json.loads(x)["text"] for x in PASSAGES.read_text().splitlines()}
    pool = pooled()
    expected = sum(len({texts[d] for d in pool[q]}) for q in changed if q in pool)
    # a fresh output, same cache: only the changed items reach the model
    r = grade(*base_args(tmp_path, "-o", tmp_path / "fresh.jsonl", bank=bank2))
    s = summary(r.stderr)
    assert r.returncode == 0, r.stderr
    assert s["graded"] == expected
    assert s["from_cache"] == first["pairs"] - sum(len(pool[q]) for q in changed if q in pool)
    # the same output file: the unchanged pairs are already there, the new ones are appended
    r = grade(*base_args(tmp_path, "-o", out, bank=bank2))
    s = summary(r.stderr)
    assert s["graded"] == 0 and s["from_cache"] == sum(len(pool[q]) for q in changed if q in pool)
    assert s["in_output"] == first["pairs"] - s["from_cache"]


def test_dry_run_reports_and_writes_nothing(tmp_path):
    out = tmp_path / "g.jsonl"
    r = grade(*base_args(tmp_path, "-o", out, "--dry-run"))
    assert r.returncode == 0, r.stderr
    assert not out.exists()
    report = dict(line.split("\t", 1) for line in r.stdout.splitlines())
    pool = pooled()
    assert int(report["pool (passages with text)"]) == sum(len(d) for d in pool.values())
    assert "unknown" in report["estimated time"]
    grade(*base_args(tmp_path, "-o", out))
    r = grade(*base_args(tmp_path, "-o", tmp_path / "other.jsonl", "--dry-run"))
    report = dict(line.split("\t", 1) for line in r.stdout.splitlines())
    assert int(report["from cache"]) == int(report["pairs"]) and int(report["to grade (pairs)"]) == 0


def test_responses_are_segmented_pooled_and_ranked(tmp_path, run_cli):
    resp = tmp_path / "answers.jsonl"
    long_text = "\n\n".join(f"Paragraph {i}: bees make honey from nectar in the hive, step {i}." for i in range(3))
    resp.write_text(json.dumps({"query_id": "101", "run_id": "gen", "text": long_text}) + "\n")
    out, run_out = tmp_path / "g.jsonl", tmp_path / "gen.run"
    r = grade("--backend", "scripted", "--prompt", "question-selfrating", "--bank", BANK, "--responses", resp,
              "--responses-run-out", run_out, "--cache", tmp_path / "c.sqlite", "-o", out)
    assert r.returncode == 0, r.stderr
    run_lines = [line.split() for line in run_out.read_text().splitlines()]
    assert len(run_lines) == 3 and all(x[0] == "101" and x[5] == "gen" for x in run_lines)
    docs = {x["doc_id"] for x in rows(out)}
    assert docs == {x[2] for x in run_lines}
    assert len(rows(out)) == 3 * 10  # 3 segments x 10 questions of topic 101
    r = run_cli("exam-cover", out, run_out)
    assert r.returncode == 0, r.stderr


def test_shards_concatenate_to_the_full_run(reference, tmp_path):
    ref_out, _ = reference
    parts = []
    for i in (1, 2, 3):
        o = tmp_path / f"s{i}.jsonl"
        r = grade(*base_args(tmp_path, "--shard", f"{i}/3", "-o", o, cache=f"c{i}.sqlite"))
        assert r.returncode == 0, r.stderr
        parts.append(o.read_text())
    merged = tmp_path / "merged.jsonl"
    merged.write_text("".join(parts))
    assert keyed(merged) == keyed(ref_out) and len(rows(merged)) == len(rows(ref_out))


# -- bad input: one line, exit 2 (usage: 1), no output file -------------------------------

def _bad_cases(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text(json.dumps({"query_id": "999", "item_id": make_item_id("999", "why?"), "kind": "question",
                                   "text": "why?"}) + "\n")
    notext = tmp_path / "notext.jsonl"
    notext.write_text("".join(json.dumps({"doc_id": d}) + "\n" for d in ["p001"]))
    badrun = tmp_path / "bad.run"
    badrun.write_text("101 Q0 p001 1 1.0 x\n101 Q0 p002 oops\n")
    partial = tmp_path / "partial.jsonl"
    partial.write_text(PASSAGES.read_text().split("\n", 1)[1])
    nuggets_only = DEMO / "nuggets.jsonl"
    S = ["--backend", "scripted", "--cache", str(tmp_path / "c.sqlite")]
    common = ["--passages", str(PASSAGES), *map(str, RUNS)]
    return [
        ("unknown prompt", 1, [*S, "--prompt", "nosuch", "--bank", str(BANK), *common]),
        ("unknown back end", 1, ["--backend", "nosuch", "--prompt", "question-selfrating", "--bank", str(BANK), *common]),
        ("missing model path", 2, ["--backend", "hf-seq2seq", "--model", str(tmp_path / "no-model"),
                                   "--prompt", "question-selfrating", "--bank", str(BANK), *common]),
        ("empty bank", 2, [*S, "--prompt", "question-selfrating", "--bank", str(empty), *common]),
        ("bank without pooled queries", 2, [*S, "--prompt", "question-selfrating", "--bank", str(foreign), *common]),
        ("passages without text", 2, [*S, "--prompt", "question-selfrating", "--bank", str(BANK),
                                      "--passages", str(notext), *map(str, RUNS)]),
        ("missing passages with --on-missing error", 2, [*S, "--prompt", "question-selfrating", "--bank", str(BANK),
                                                         "--passages", str(partial), "--on-missing", "error",
                                                         *map(str, RUNS)]),
        ("bad run line", 2, [*S, "--prompt", "question-selfrating", "--bank", str(BANK), "--passages",
                             str(PASSAGES), str(badrun)]),
        ("wrong item kind", 2, [*S, "--prompt", "question-selfrating", "--bank", str(nuggets_only), *common]),
        ("bad shard", 1, [*S, "--prompt", "question-selfrating", "--bank", str(BANK), "--shard", "4/3", *common]),
        ("option the back end lacks", 1, [*S, "--prompt", "question-selfrating", "--bank", str(BANK),
                                          "--num-beams", "4", *common]),
        ("no pool", 1, [*S, "--prompt", "question-selfrating", "--bank", str(BANK)]),
        ("direct prompt without topics", 1, [*S, "--prompt", "sun", *common]),
    ]


def test_bad_inputs_one_line_no_output(tmp_path):
    for name, code, args in _bad_cases(tmp_path):
        out = tmp_path / f"{name.replace(' ', '_')}.jsonl"
        r = grade(*args, "-o", out)
        assert r.returncode == code, (name, r.returncode, r.stderr)
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith("exam-grade: "), (name, r.stderr)
        assert "Traceback" not in r.stderr
        assert not out.exists(), name


def test_error_messages_name_the_file_and_line(tmp_path):
    cases = {c[0]: c for c in _bad_cases(tmp_path)}
    r = grade(*cases["bad run line"][2])
    assert "bad.run:2:" in r.stderr
    r = grade(*cases["passages without text"][2])
    assert "notext.jsonl:1:" in r.stderr


def test_corrupt_existing_output_is_not_touched(tmp_path):
    out = tmp_path / "g.jsonl"
    out.write_text('{"not": "a grade"}\n')
    before = out.read_bytes()
    r = grade(*base_args(tmp_path, "-o", out))
    assert r.returncode == 2 and "g.jsonl:1:" in r.stderr
    assert out.read_bytes() == before


def test_direct_prompt_with_topics(tmp_path):
    out = tmp_path / "g.jsonl"
    r = grade("--backend", "scripted", "--prompt", "umbrela", "--topics", DEMO / "topics.tsv", "--passages", PASSAGES,
              *RUNS, "--cache", tmp_path / "c.sqlite", "-o", out)
    assert r.returncode == 0, r.stderr
    got = rows(out)
    assert {x["item_id"] for x in got} == {None} and {x["kind"] for x in got} == {None}
    assert len(got) == sum(len(d) for d in pooled().values())


def test_help_has_examples():
    r = grade("--help")
    assert r.returncode == 0 and "Examples:" in r.stdout and "--shard" in r.stdout


def test_list_prompts():
    r = grade("--list-prompts")
    assert r.returncode == 0
    ids = [line.split("\t")[0] for line in r.stdout.splitlines()]
    assert "question-selfrating" in ids and "umbrela" in ids


def test_help_does_not_import_torch():
    code = ("import sys, exam_eval.commands.grade as m\n"
            "try:\n    m.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'heavy import'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, r.stderr


def test_backend_options_are_typed(tmp_path):
    from exam_eval.backends.factory import split_backend_options as _split_backend_options

    assert _split_backend_options(("batch-size=4", "delay=0.5", "logprobs=false", "api=chat")) == \
        {"batch_size": 4, "delay": 0.5, "logprobs": False, "api": "chat"}
    out = tmp_path / "g.jsonl"
    r = grade(*base_args(tmp_path, "-O", "batch_size=3", "-o", out))
    assert r.returncode == 0, r.stderr


def test_sigkill_with_gzip_output_resumes_exactly(reference, tmp_path):
    import gzip as gz

    ref_out, _ = reference
    out = tmp_path / "g.jsonl.gz"
    args = base_args(tmp_path, "-o", out, "-O", "delay=0.01", "--batch-size", "4")
    proc = _start(args)
    deadline = time.time() + 60
    while (not out.exists() or out.stat().st_size < 3000) and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    with open(out, "ab") as fh:  # a torn gzip member, as a kill during write leaves it
        fh.write(gz.compress(b'{"query_id": "101"}\n')[:15])
    r = grade(*base_args(tmp_path, "-o", out))
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in gz.decompress(out.read_bytes()).decode().splitlines()]
    assert len(lines) == len({(x["query_id"], x["doc_id"], x["item_id"]) for x in lines})
    assert {(x["query_id"], x["doc_id"], x["item_id"]): (x["grade"], x["answer"], x["parse_ok"]) for x in lines} \
        == keyed(ref_out)
