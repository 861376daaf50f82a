"""Reading RAG reports and request files (exam_eval.io.reports)."""

from __future__ import annotations

import gzip
import hashlib
import json

import pytest
from pathlib import Path

from exam_eval.errors import InputError, UsageError
from exam_eval.io.reports import read_reports, read_requests


def _write(path, *reports, gz=False):
    text = "".join(json.dumps(r) + "\n" for r in reports)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _report(run="r1", topic="t1", sentences=None, refs=None, **md):
    obj = {"metadata": {"team_id": "team", "run_id": run, "topic_id": topic, **md},
           "responses": sentences if sentences is not None else [{"text": "A sentence.", "citations": ["d1"]}]}
    if refs is not None:
        obj["references"] = refs
    return obj


def _md5_10(text):
    return hashlib.md5(text.encode("utf-8")).hexdigest()[:10]


def test_spot_check_reports_load_with_resolved_citations_and_stable_ids(shared_data):
    reports = read_reports([str(shared_data / "autojudge-spot-check" / "runs")])
    by_run = {r.run_id: r for r in reports}
    assert sorted(by_run) == ["my_best_run_01", "my_best_run_02", "my_best_run_02_citations"]
    r1 = by_run["my_best_run_01"]
    assert r1.topic_id == "28" and r1.team_id == "my_fantastic_team" and r1.citation_format == "neuclir"
    assert [[c.doc_id for c in s.citations] for s in r1.sentences] == [["224"], []]
    r2 = by_run["my_best_run_02"]
    assert r2.citation_format == "ragtime"
    assert [[(c.doc_id, c.confidence) for c in s.citations] for s in r2.sentences] == [[], [("279", 0.7)], []]
    text = "Linear theory has an application in this shell integration calculations."
    assert r2.sentences[1].doc_id == f"my_best_run_02/28/2-{_md5_10(text)}"
    assert r2.doc_id == f"my_best_run_02/28/report-{_md5_10(' '.join(s.text for s in r2.sentences))}"
    # the same sentence in another run gets that run's id: grades never leak between runs
    assert by_run["my_best_run_02_citations"].sentences[1].doc_id.startswith("my_best_run_02_citations/28/2-")


def test_three_citation_shapes(tmp_path):
    f = _write(tmp_path / "r.jsonl",
               _report("idx", sentences=[{"text": "a", "citations": [1, 0]}, {"text": "b", "citations": []}],
                       refs=["d0", "d1"]),
               _report("ids", sentences=[{"text": "a", "citations": ["x", "y"]}]),
               _report("conf", sentences=[{"text": "a", "citations": {"lo": 0.2, "hi": 0.9, "mid": "0.5"}}]),
               {"metadata": {"team_id": "t", "run_id": "ans", "narrative_id": 7},  # RAG 25: answer, narrative_id
                "answer": [{"text": "a", "citations": [0]}], "references": ["z"]})
    reports = {r.run_id: r for r in read_reports([str(f)])}
    assert [c.doc_id for c in reports["idx"].sentences[0].citations] == ["d1", "d0"]
    assert reports["idx"].citation_format == "rag24"
    assert [c.doc_id for c in reports["ids"].sentences[0].citations] == ["x", "y"]
    conf = reports["conf"].sentences[0].citations
    assert [(c.doc_id, c.confidence) for c in conf] == [("hi", 0.9), ("mid", 0.5), ("lo", 0.2)]
    assert reports["ans"].topic_id == "7" and reports["ans"].sentences[0].citations[0].doc_id == "z"
    assert reports["idx"].cited_doc_ids() == ["d1", "d0"]


def test_directory_with_gzip_and_nested_files(tmp_path):
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "a.jsonl", _report("r1"))
    _write(tmp_path / "sub" / "b.jsonl.gz", _report("r2"), gz=True)
    (tmp_path / "README.md").write_text("not a report")
    assert sorted(r.run_id for r in read_reports([str(tmp_path)])) == ["r1", "r2"]


@pytest.mark.parametrize("obj, message", [
    ({"responses": [{"text": "a"}]}, "missing 'metadata'"),
    (_report(run=None), "metadata.run_id must be a string"),
    ({"metadata": {"team_id": "t", "run_id": "r"}, "responses": [{"text": "a"}]}, "missing metadata.topic_id"),
    ({"metadata": {"run_id": "r", "topic_id": "1"}, "responses": [{"text": "a"}]}, "missing metadata.team_id"),
    (_report(sentences=[{"text": "a", "citations": [2]}], refs=["d0"]), "cites reference index 2"),
    (_report(sentences=[{"text": "a", "citations": ["d"]}, {"text": "b", "citations": {"e": 1}}]), "mixes shapes"),
    (_report(sentences=[{"text": "a", "citations": "d1"}]), "citations must be a list"),
    (_report(sentences=[]), "no sentences"),
    (_report(sentences=[{"citations": []}]), "responses[0] has no 'text'"),
    (_report(topic="a b"), "contains whitespace"),
    ({"metadata": {"team_id": "t", "run_id": "r", "topic_id": "1"}}, "missing 'responses'"),
    (_report(topic="1", narrative_id="2"), "disagree"),
])
def test_malformed_report_is_one_located_error(tmp_path, obj, message):
    f = _write(tmp_path / "bad.jsonl", _report("fine"), obj)
    with pytest.raises(InputError) as exc:
        read_reports([str(f)])
    assert exc.value.path == str(f) and exc.value.line == 2
    assert message in exc.value.reason


def test_duplicate_run_topic_across_files(tmp_path):
    a = _write(tmp_path / "a.jsonl", _report("r1", "t1"))
    b = _write(tmp_path / "b.jsonl", _report("r2", "t1"), _report("r1", "t1"))
    with pytest.raises(InputError) as exc:
        read_reports([str(a), str(b)])
    assert (exc.value.path, exc.value.line) == (str(b), 2)
    assert f"first at {a}:1" in exc.value.reason


def test_unknown_track_spec(tmp_path):
    f = _write(tmp_path / "r.jsonl", _report())
    with pytest.raises(UsageError, match="unknown track spec 'rag99'.*rag24|unknown track spec 'rag99'.*ragtime25"):
        read_reports([str(f)], track_spec="rag99")


def test_track_spec_errors_and_smells(tmp_path):
    seg = "msmarco_v2.1_doc_00_1#2_3"
    good = {"metadata": {"team_id": "t", "run_id": "r", "narrative_id": "1", "narrative": "q", "type": "automatic"},
            "answer": [{"text": "one two three", "citations": [0]}], "references": [seg, seg]}
    f = _write(tmp_path / "r.jsonl", good)
    (r,) = read_reports([str(f)], track_spec="rag25")
    assert any("lists a document twice" in w for w in r.warnings)  # references_duplicate is a rag25 smell
    bad = dict(good, metadata={k: v for k, v in good["metadata"].items() if k != "type"})
    _write(f, bad)
    with pytest.raises(InputError, match="metadata.type is required"):
        read_reports([str(f)], track_spec="rag25")
    # structural checks alone accept it
    assert read_reports([str(f)])[0].topic_id == "1"
    # dragun25 takes document ids only
    _write(f, dict(good, metadata=dict(good["metadata"], use_starter_kit=0)))
    with pytest.raises(InputError, match="accepts neuclir"):
        read_reports([str(f)], track_spec="dragun25")


def test_ragtime_length_limit_per_request(tmp_path):
    rep = _report("r", "t1", sentences=[{"text": "x" * 30, "citations": {}}], task="english")
    f = _write(tmp_path / "r.jsonl", rep)
    (r,) = read_reports([str(f)], track_spec="ragtime26", request_limits={"t1": 10})
    assert any("30 chars (limit 10)" in w for w in r.warnings)  # a smell in ragtime26


def test_read_requests_shapes(tmp_path, shared_data):
    spot = read_requests(str(shared_data / "autojudge-spot-check" / "queries.jsonl"))
    assert spot == {"28": "what application has the linear theory design of curved wings ."}
    f = tmp_path / "req.jsonl"
    f.write_text(json.dumps({"request_id": "r1", "title": "Title one", "problem_statement": "long"}) + "\n"
                 + json.dumps({"request_id": 2, "title": " spaced   out "}) + "\n")
    assert read_requests(str(f)) == {"r1": "Title one", "2": "spaced out"}
    t = tmp_path / "topics.tsv"
    t.write_text("1\tfirst\n2\tsecond\n")
    assert read_requests(str(t)) == {"1": "first", "2": "second"}
    f.write_text(json.dumps({"qid": "1", "query": "a"}) + "\n" + json.dumps({"qid": "1", "query": "b"}) + "\n")
    with pytest.raises(InputError) as exc:
        read_requests(str(f))
    assert exc.value.line == 2 and "duplicate request id 1" in exc.value.reason
    f.write_text(json.dumps({"qid": "1"}) + "\n")
    with pytest.raises(InputError, match="no request text"):
        read_requests(str(f))


def test_topic_coverage_against_requests(tmp_path):
    from exam_eval.io.reports import check_topic_coverage

    seg = "msmarco_v2.1_doc_00_1#2_3"

    def rag(run, topic, narrative):
        return {"metadata": {"team_id": "t", "run_id": run, "narrative_id": topic, "narrative": narrative,
                             "type": "automatic"}, "answer": [{"text": "a", "citations": [0]}], "references": [seg]}

    f = _write(tmp_path / "r.jsonl", rag("A", "1", "first  topic"), rag("A", "3", "third"), rag("B", "1", "wrong"),
               rag("B", "2", "second"))
    reports = read_reports([str(f)], track_spec="rag25")
    requests = {"1": "first topic", "2": "second"}
    errors, warnings = check_topic_coverage(reports, requests, "rag25")
    # rag25 treats none of these as smells: run A lacks topic 2 and has an unknown topic 3,
    # run B's narrative for topic 1 is not the request text
    assert any("run A: 1 requested topics have no report (e.g. 2)" in e for e in errors)
    assert any("run A: 1 reports are on topics the requests lack (e.g. 3)" in e for e in errors)
    assert any("run B: 1 reports' metadata.narrative is not the request text (e.g. topic 1)" in e for e in errors)
    assert len(errors) == 3 and not warnings
    # rag26 demotes missing topics to a warning; dragun25 also new topics
    errors, warnings = check_topic_coverage(reports, requests, "dragun25")
    assert not errors and len(warnings) == 2


def test_exam_grade_checks_topics_against_the_spec(tmp_path, run_cli):
    seg = "msmarco_v2.1_doc_00_1#2_3"
    rep = {"metadata": {"team_id": "t", "run_id": "A", "narrative_id": "101", "narrative": "not it",
                        "type": "automatic"}, "answer": [{"text": "Bees make honey.", "citations": [0]}],
           "references": [seg]}
    f = _write(tmp_path / "r.jsonl", rep)
    topics = tmp_path / "topics.tsv"
    topics.write_text("101\thow do bees make honey\n")
    bank = Path(__file__).resolve().parents[2] / "exam_eval" / "demo_data" / "questions.jsonl"
    args = ["--backend", "scripted", "--prompt", "question-selfrating", "--bank", bank, "--reports", f,
            "--topics", topics, "--no-cache", "-o", tmp_path / "g.jsonl"]
    r = run_cli("exam-grade", *args, "--track-spec", "rag25")
    assert r.returncode == 2 and f"{topics}: track spec rag25: run A: 1 reports' metadata.narrative" in r.stderr
    assert not (tmp_path / "g.jsonl").exists()
    assert run_cli("exam-grade", *args).returncode == 0  # without a spec, no cross-report rules
