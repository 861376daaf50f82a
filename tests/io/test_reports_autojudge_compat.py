"""Our report reader against autojudge-base, the field's reference loader (in a
subprocess, see autojudge_env.py). Skips where autojudge-base is not installed or still
does not import."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from autojudge_env import autojudge_env

from exam_eval.errors import InputError
from exam_eval.io.reports import parse_report
from exam_eval.io.track_specs import SPECS

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, sys, dataclasses
from pathlib import Path
from autojudge_base.report import load_report
from autojudge_base.track_spec import SPECS
cases = json.load(open(sys.argv[1]))
out = {"specs": {k: dataclasses.asdict(v) for k, v in SPECS.items()}, "cases": []}
tmp = Path(sys.argv[2])
for i, case in enumerate(cases):
    f = tmp / f"case{i}.jsonl"
    f.write_text(json.dumps(case) + "\n")
    try:
        (r,) = load_report(f)
    except Exception as exc:
        out["cases"].append({"loaded": False, "why": type(exc).__name__})
        continue
    res = {"loaded": True, "topic": str(r.metadata.topic_id),
           "cites": [list(map(str, s.citations or [])) for s in r.get_sentences_with_citations()], "spec": {}}
    for name in [None, *SPECS]:
        errors, warnings = r.check_findings(name)
        res["spec"][str(name)] = [bool(errors), bool(warnings)]
    out["cases"].append(res)
print(json.dumps(out))
"""


def _md(**kw):
    return {"team_id": "t", "run_id": "run-1", "topic_id": "1", **kw}


SEG = "msmarco_v2.1_doc_00_1#2_3"
UUID = "47601789-65d8-4706-9bde-fc89fccfdf14_159897"


def _cases() -> list[dict]:
    cits = [[0, 1], ["a", "b"], ["0", "1"], [1.0], [1.5], [True], [0, "a"], {"a": 0.5}, {"a": 1}, {"a": "0.5"},
            {"a": "x"}, {"a": None}, None, [], {}, [-1], [5], "a", 3, [224], {"b": 0.1, "a": 0.9},
            # digits of other scripts, a zero fraction in text (a sweep, 2026-11-26)
            [0, "١"], [0, "１"], {"a": "１"}, {"a": "٠.5"}, [0, "1.0"], ["1.00"], ["1.5"], ["1_0"]]
    out = [{"metadata": _md(), "responses": [{"text": "x", "citations": c}], "references": ["a", "b"]} for c in cits]
    out += [{"metadata": _md(), "responses": [{"text": "x", "citations": c1}, {"text": "y", "citations": c2}],
             "references": ["a", "b"]}
            for c1, c2 in ((["a"], {"b": 1}), ([], [1]), ({}, [1]), (None, [0]), ([0], ["1"]))]
    mds = [_md(topic_id=28), _md(run_id=5), {"run_id": "r", "topic_id": "1"}, {"team_id": "t", "run_id": "r"},
           {"team_id": "t", "run_id": "r", "narrative_id": 28}, {"team_id": "t", "run_id": "r", "narrative_id": "28"},
           {"team_id": "t", "run_id": "r", "request_id": "28"}, _md(narrative_id="2"), _md(narrative_id=1),
           _md(topic_id=None), _md(team_id=None), _md(task="foo"), _md(task="english"), _md(zzz=1), _md(limit="5"),
           _md(use_starter_kit=True), _md(collection_ids="x"), _md(creator=None), _md(creator=[1]), _md(creator={}),
           _md(type="automatic", use_starter_kit=0), _md(run_id="r" * 30), "notadict",
           {"team_id": "t", "run_id": "r", "narrative_id": "1", "narrative": "q", "type": "auto", "run_desc": "d"}]
    out += [{"metadata": m, "responses": [{"text": "x", "citations": []}]} for m in mds]
    tops = [{"metadata": _md(), "answer": [{"text": "x", "citations": [0]}], "references": ["a"]},
            {"metadata": _md(), "answer": [{"text": "A"}], "responses": [{"text": "R"}]},
            {"metadata": _md()}, {"metadata": _md(), "responses": None, "answer": [{"text": "A"}]},
            {"metadata": _md(), "responses": []}, {"responses": [{"text": "x"}]},
            {"metadata": _md(), "responses": [{"text": 5}]}, {"metadata": _md(), "responses": [{"citations": []}]},
            {"metadata": _md(), "responses": [{"text": "  "}]}, {"metadata": _md(), "responses": [{"text": "a"}, {"text": ""}]},
            {"metadata": _md(), "responses": [{"text": "x"}], "references": [1, 2]},
            {"metadata": _md(), "responses": [{"text": "x"}], "references": None},
            {"metadata": _md(), "responses": [{"text": "x"}], "documents": {"a": {"id": "a", "text": "T"}}},
            {"metadata": _md(), "responses": [{"text": "x"}], "documents": {"a": {"text": "T"}}},
            {"metadata": _md(), "responses": {"text": "x"}},
            {"metadata": _md(), "responses": [{"text": "x", "foo": 1, "metadata": None}]},
            {"metadata": _md(), "responses": [{"text": "x", "metadata": [1]}]},
            {"metadata": _md(), "responses": [{"text": "x"}], "ranking": [{"doc_id": "a", "rank": 1}]},
            {"metadata": _md(), "responses": [{"text": "x"}], "ranking": [{"x": 1}]},
            [1, 2]]
    out += tops
    # track-spec material: RAG 25 / RAGTIME / DRAGUN shaped reports, valid and not
    rag = {"team_id": "t", "run_id": "r", "narrative_id": "1", "narrative": "q", "type": "automatic", "run_desc": "d"}
    words = " ".join(["w"] * 300)
    for refs, c in (([SEG], [0]), ([SEG, SEG], [0]), ([SEG, "bad"], [0]), ([], []), (None, [SEG]), ([SEG], [SEG]),
                    ([SEG] * 101, [0]), ([SEG], [0, 0, 0, 0])):
        obj = {"metadata": rag, "answer": [{"text": "one", "citations": c}, {"text": words, "citations": []}]}
        if refs is not None:
            obj["references"] = refs
        out.append(obj)
    rt = _md(task="english")
    for refs, c in (([UUID], {UUID: 0.9}), (None, {UUID: 0.9}), ([UUID, "x"], {UUID: 0.9}), ([], [UUID]),
                    ([UUID], {"zz": 1.0}), ([UUID], {UUID: 1, UUID[:-1] + "1": 2, UUID[:-1] + "2": 3, UUID[:-1] + "3": 4})):
        obj = {"metadata": rt, "responses": [{"text": "one", "citations": c}]}
        if refs is not None:
            obj["references"] = refs
        out.append(obj)
    dr = _md(type="auto", use_starter_kit=1)
    out += [{"metadata": dr, "responses": [{"text": words, "citations": [SEG]}]},
            {"metadata": dr, "responses": [{"text": "a", "citations": [SEG]}], "references": [SEG]}]
    return out


def _ours(case, spec_name):
    try:
        r = parse_report(case, spec=SPECS.get(spec_name) if spec_name else None, source="x", line=1)
    except InputError:
        return None
    return r


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ajb")
    env = autojudge_env(tmp)
    cases_file = tmp / "cases.json"
    cases_file.write_text(json.dumps(_cases()))
    work = tmp / "work"
    work.mkdir()
    proc = subprocess.run([sys.executable, "-c", PROBE, str(cases_file), str(work)], capture_output=True, text=True,
                          env=env, timeout=300)
    if proc.returncode != 0:
        pytest.skip(f"autojudge-base does not import here: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_track_specs_equal_autojudge_base(reference):
    theirs = reference["specs"]
    assert sorted(theirs) == sorted(SPECS)
    for name, spec in SPECS.items():
        t = theirs[name]
        for key, value in asdict(spec).items():
            other = t[key]
            other = tuple(other) if isinstance(other, list) else other
            assert value == other, (name, key)


def _refused_on_purpose(case) -> bool:
    """Reports we refuse though autojudge-base loads them (issue 21): a boolean among the
    citations, which pydantic's lax mode reads as index 0 or 1."""
    sents = case.get("responses") if isinstance(case, dict) else None
    for s in sents if isinstance(sents, list) else []:
        c = s.get("citations") if isinstance(s, dict) else None
        values = c.values() if isinstance(c, dict) else c if isinstance(c, list) else ()
        if any(isinstance(x, bool) for x in values):
            return True
    return False


def test_loader_accepts_and_resolves_like_autojudge_base(reference):
    cases = _cases()
    assert len(reference["cases"]) == len(cases)
    checked = 0
    for case, ref in zip(cases, reference["cases"]):
        for spec_name in [None, *SPECS]:
            ours = _ours(case, spec_name)
            if _refused_on_purpose(case):
                assert ours is None, (case, spec_name)
                continue
            if not ref["loaded"]:
                assert ours is None, (case, spec_name, "autojudge-base refuses this report")
                continue
            has_errors, has_warnings = ref["spec"][str(spec_name)]
            assert (ours is None) == has_errors, (case, spec_name)
            if ours is not None:
                assert bool(ours.warnings) == has_warnings, (case, spec_name, ours.warnings)
                assert ours.topic_id == ref["topic"]
                assert [[c.doc_id for c in s.citations] for s in ours.sentences] == ref["cites"], case
            checked += 1
    assert checked > 200
