"""exam-grade --reports as a user runs it: RAG reports built from the demo collection's
runs, the scripted back end, kill/resume, the cache, bad reports."""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from inproc import command

from exam_eval.grading.report_units import CITED_HEADER, report_segments, with_cited
from exam_eval.io.passages import read_passages
from exam_eval.io.reports import read_reports, reports_from_run
from exam_eval.trec_eval.trec_files import read_run
from child_env import ChildEnv

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
BANK = DEMO / "questions.jsonl"
ENV = ChildEnv(PYTHONPATH=str(ROOT), EXAM_EVAL_PROGRESS="0")
CMD = [sys.executable, "-c", "import exam_eval.commands.grade as m; m.main()"]


def grade(*args, timeout=300):
    return command("grade", *args, env=ENV, timeout=timeout)


def rows(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


def keyed(path):
    return {(r["query_id"], r["doc_id"], r["item_id"]): (r["grade"], r["parse_ok"]) for r in rows(path)}


@pytest.fixture(scope="module")
def reports_dir(tmp_path_factory):
    """Every demo run as a report set: top 3 passages per topic, one sentence each."""
    d = tmp_path_factory.mktemp("reports")
    texts = read_passages(str(DEMO / "passages.jsonl"))
    for name, shape in (("good", "rag24"), ("poor", "neuclir"), ("mediocre", "ragtime")):
        objs = reports_from_run(name, read_run(str(DEMO / f"{name}.run")), texts, depth=3, shape=shape)
        (d / f"{name}.jsonl").write_text("".join(json.dumps(o) + "\n" for o in objs))
    return d


def _bank_count():
    counts: dict[str, int] = {}
    for line in BANK.read_text().splitlines():
        q = json.loads(line)["query_id"]
        counts[q] = counts.get(q, 0) + 1
    return counts


def _md5_10(text):
    return hashlib.md5(text.encode("utf-8")).hexdigest()[:10]


def test_sentences_are_graded_against_the_bank_and_ranked(reports_dir, tmp_path, run_cli):
    out, run_dir = tmp_path / "g.jsonl", tmp_path / "runs"
    r = grade("--backend", "scripted", "--prompt", "question-selfrating", "--bank", BANK, "--reports", reports_dir,
              "--reports-run-out", f"{run_dir}/", "--cache", tmp_path / "c.sqlite", "-o", out)
    assert r.returncode == 0, r.stderr
    reports = read_reports([str(reports_dir)])
    bank = _bank_count()
    expected = {(rep.topic_id, s.doc_id) for rep in reports for s in rep.sentences}
    got = rows(out)
    assert {(x["query_id"], x["doc_id"]) for x in got} == expected
    assert len(got) == sum(bank[q] for q, _ in expected)
    # a sentence id is run/topic/N-md5(text)[:10], recomputed here from the files
    raw = [json.loads(x) for x in (reports_dir / "poor.jsonl").read_text().splitlines()]
    ids = {f"poor/{o['metadata']['topic_id']}/{n}-{_md5_10(s['text'])}"
           for o in raw for n, s in enumerate(o["responses"], 1)}
    assert ids == {d for q, d in expected if d.startswith("poor/")}
    # one run file per run, the sentences in report order
    good = (run_dir / "good.run").read_text().splitlines()
    per_topic = {}
    for line in good:
        q, _, doc, rank, _, tag = line.split()
        assert tag == "good"
        per_topic.setdefault(q, []).append((int(rank), doc))
    first = next(rep for rep in reports if rep.run_id == "good")
    assert [d for _, d in sorted(per_topic[first.topic_id])] == [s.doc_id for s in first.sentences]
    # the graded sentences score like any passage run
    r = run_cli("exam-cover", out, run_dir / "good.run")
    assert r.returncode == 0, r.stderr


def test_whole_reports_and_rerun_from_cache(reports_dir, tmp_path):
    cache = tmp_path / "c.sqlite"
    out = tmp_path / "g.jsonl"
    args = ["--backend", "scripted", "--prompt", "question-selfrating", "--bank", BANK, "--reports", reports_dir,
            "--report-unit", "report", "--cache", cache]
    r = grade(*args, "-o", out)
    assert r.returncode == 0, r.stderr
    reports = read_reports([str(reports_dir)])
    assert {x["doc_id"] for x in rows(out)} == {rep.doc_id for rep in reports}
    assert all(x["doc_id"].split("/")[2].startswith("report-") for x in rows(out))
    # the same work into a new file: every grade comes from the cache, identical
    out2 = tmp_path / "g2.jsonl"
    r = grade(*args, "-o", out2)
    assert r.returncode == 0, r.stderr
    assert " 0 graded" in r.stderr and keyed(out2) == keyed(out)
    # cited texts change what the model sees, so nothing may come from the cache
    r = grade(*args, "--cited-documents", "--passages", DEMO / "passages.jsonl", "-o", tmp_path / "g3.jsonl")
    assert r.returncode == 0, r.stderr
    assert " 0 from cache" in r.stderr


def test_cited_document_context():
    text = with_cited("Bees make honey.", ["d2", "d1", "d2", "dx"], {"d1": "one  text", "d2": "two\ntext"})
    assert text == f"Bees make honey.\n\n{CITED_HEADER}\n[d2] two text\n[d1] one text"
    assert with_cited("Alone.", [], {}) == "Alone."


def test_blank_sentences_are_not_graded(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps({"metadata": {"team_id": "t", "run_id": "r", "topic_id": "101"},
                             "responses": [{"text": "Bees.", "citations": []}, {"text": " ", "citations": []},
                                           {"text": "Hives.", "citations": []}]}) + "\n")
    (rep,) = read_reports([str(f)], track_spec="kiddie")  # a smell there, an error without a spec
    assert rep.warnings
    segs = report_segments([rep])
    assert [(s.rank, s.text) for s in segs] == [(1, "Bees."), (3, "Hives.")]


def _count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_sigkill_then_resume_equals_uninterrupted(reports_dir, tmp_path):
    base = ["--backend", "scripted", "--prompt", "question-selfrating", "--bank", BANK, "--reports", reports_dir]
    ref = tmp_path / "ref.jsonl"
    r = grade(*base, "--no-cache", "-o", ref)
    assert r.returncode == 0, r.stderr
    total = len(rows(ref))
    out = tmp_path / "g.jsonl"
    args = [*base, "--cache", tmp_path / "c.sqlite", "-o", out, "-O", "delay=0.01", "--batch-size", "4"]
    killed_at = []
    for target in (1, total // 3, 2 * total // 3):
        proc = subprocess.Popen(CMD + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=ENV)
        deadline = time.time() + 120
        while _count_lines(out) < target and proc.poll() is None and time.time() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        killed_at.append(_count_lines(out))
    assert 0 < killed_at[0] < killed_at[-1] < total, killed_at
    with open(out, "a") as fh:  # a kill mid-line leaves a torn line
        fh.write('{"query_id": "101", "doc_id": "goo')
    r = grade(*args)
    assert r.returncode == 0, r.stderr
    assert "torn" in r.stderr and " 0 already in output" not in r.stderr
    keys = [(x["query_id"], x["doc_id"], x["item_id"]) for x in rows(out)]
    assert len(keys) == len(set(keys)) == total
    assert keyed(out) == keyed(ref)


@pytest.mark.parametrize("report, extra, message", [
    ({"responses": [{"text": "a"}]}, [], "missing 'metadata'"),
    ({"metadata": {"team_id": "t", "run_id": "r", "topic_id": "101"}, "responses": [{"text": "a", "citations": [3]}],
      "references": ["p001"]}, [], "cites reference index 3"),
    ({"metadata": {"team_id": "t", "run_id": "r", "topic_id": "101"}, "responses": [{"text": "a"}]},
     ["--track-spec", "rag99"], "unknown track spec 'rag99'"),
    ({"metadata": {"team_id": "t", "run_id": "r", "topic_id": "101"}, "responses": [{"text": "a"}]},
     ["--track-spec", "rag25"], "metadata.type is required"),
])
def test_malformed_report_is_one_line_exit_2_no_output(tmp_path, report, extra, message):
    f = tmp_path / "bad.jsonl"
    f.write_text(json.dumps(report) + "\n")
    out = tmp_path / "g.jsonl"
    r = grade("--backend", "scripted", "--prompt", "question-selfrating", "--bank", BANK, "--reports", f, *extra,
              "--no-cache", "-o", out)
    assert r.returncode == (1 if "track spec 'rag99'" in message else 2), r.stderr  # an option's value: usage
    lines = r.stderr.strip().splitlines()
    assert message in lines[0] and "Traceback" not in r.stderr
    # one line, then one more for each further problem of the same report (issue 20)
    more = re.search(r"\(and (\d+) more problems?\)$", lines[0])
    assert len(lines) == 1 + (int(more.group(1)) if more else 0)
    if "track spec 'rag99'" not in message:
        assert f"{f}:1:" in lines[0]
        assert all(line.startswith(f"exam-grade: {f}:1: also: ") for line in lines[1:])
    assert not out.exists()


def test_report_options_need_reports(tmp_path):
    r = grade("--backend", "scripted", "--prompt", "question-selfrating", "--bank", BANK, "--track-spec", "rag25",
              DEMO / "good.run", "--passages", DEMO / "passages.jsonl", "--no-cache")
    assert r.returncode == 1 and "--track-spec needs --reports" in r.stderr


def test_spot_check_reports_end_to_end(shared_data, tmp_path):
    sc = shared_data / "autojudge-spot-check"
    out, runs = tmp_path / "g.jsonl", tmp_path / "runs"
    r = grade("--backend", "scripted", "--prompt", "umbrela", "--topics", sc / "queries.jsonl", "--reports",
              sc / "runs", "--cited-documents", "--passages", sc / "corpus.jsonl.gz", "--track-spec", "kiddie",
              "--reports-run-out", f"{runs}/", "--no-cache", "-o", out)
    # kiddie accepts document-id citations only: my_best_run_02 cites as id -> confidence
    assert r.returncode == 2 and "my_best_run_02.jsonl:1" in r.stderr and "accepts neuclir" in r.stderr
    r = grade("--backend", "scripted", "--prompt", "umbrela", "--topics", sc / "queries.jsonl", "--reports",
              sc / "runs", "--cited-documents", "--passages", sc / "corpus.jsonl.gz",
              "--reports-run-out", f"{runs}/", "--no-cache", "-o", out)
    assert r.returncode == 0, r.stderr
    got = rows(out)
    assert len(got) == 8 and {x["query_id"] for x in got} == {"28"} and all(x["parse_ok"] for x in got)
    assert sorted(p.name for p in runs.iterdir()) == ["my_best_run_01.run", "my_best_run_02.run",
                                                       "my_best_run_02_citations.run"]
