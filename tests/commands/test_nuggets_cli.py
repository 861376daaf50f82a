"""exam-nuggets as a user runs it: reports graded through the real engine (scripted back
end), scores and leaderboards parsed back and checked against values worked out by hand
from the script, qrels read by pytrec_eval and exam-qrels, banks converted both ways,
citation grading resumed and cached, bad input one line with exit 2."""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exam_eval.io.banks import read_bank
from refusals import one_line_refusal

ROOT = Path(__file__).resolve().parents[2]

# topic -> nuggets (text, importance)
BANK = {
    "t1": [("alpha fact", "vital"), ("beta fact", "okay"), ("gamma fact", None)],
    "t2": [("delta fact", "vital"), ("epsilon fact", "vital")],
}
# the scripted grader: a sentence mentioning a nugget's first word fully supports it,
# one mentioning it in capitals partially, anything else not at all
REPORTS = [
    {"metadata": {"run_id": "good", "topic_id": "t1", "team_id": "x"},
     "responses": [{"text": "alpha and beta here.", "citations": ["d1"]}, {"text": "GAMMA somewhat.", "citations": ["d2"]}],
     "references": []},
    {"metadata": {"run_id": "good", "topic_id": "t2", "team_id": "x"},
     "responses": [{"text": "delta and epsilon.", "citations": [0]}], "references": ["d3"]},
    {"metadata": {"run_id": "poor", "topic_id": "t1", "team_id": "y"},
     "responses": [{"text": "BETA only.", "citations": {"d2": 0.5}}, {"text": "nothing useful.", "citations": {}}],
     "references": ["d2"]},
    {"metadata": {"run_id": "poor", "topic_id": "t2", "team_id": "y"},
     "responses": [{"text": "DELTA maybe.", "citations": []}], "references": []},
]
DOCS = {"d1": "alpha is true and beta too", "d2": "gamma, partly", "d3": "delta"}

# levels by construction: (run, topic) -> {nugget text: level}
LEVELS = {
    ("good", "t1"): {"alpha fact": 2, "beta fact": 2, "gamma fact": 1},
    ("good", "t2"): {"delta fact": 2, "epsilon fact": 2},
    ("poor", "t1"): {"alpha fact": 0, "beta fact": 1, "gamma fact": 0},
    ("poor", "t2"): {"delta fact": 1, "epsilon fact": 0},
}


def script(req, rendered):
    word = req.item_text.split()[0]
    if word in req.context:
        return "['support']"
    if word.upper() in req.context:
        return "['partial_support']"
    return "['not_support']"


def expected_scores(run, topic, default_importance="vital"):
    credit = {2: 1.0, 1: 0.5, 0: 0.0}
    strict = {2: 1.0, 1: 0.0, 0: 0.0}
    rows = [(imp or default_importance, LEVELS[(run, topic)][text]) for text, imp in BANK[topic]]
    out = {}
    for suffix, c in (("", credit), ("_strict", strict)):
        vals = [c[lv] for _, lv in rows]
        vit = [c[lv] for imp, lv in rows if imp == "vital"]
        w = [1.0 if imp == "vital" else 0.5 for imp, _ in rows]
        out["nugget_all" + suffix] = sum(vals) / len(vals)
        out["nugget_vital" + suffix] = sum(vit) / len(vit) if vit else 0.0
        out["nugget_weighted" + suffix] = sum(wi * v for wi, v in zip(w, vals)) / sum(w)
    out["exam_cover"] = sum(lv == 2 for lv in LEVELS[(run, topic)].values()) / len(BANK[topic])
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from exam_eval.backends.scripted import ScriptedBackend
    from exam_eval.grading import engine
    from exam_eval.grading.cache import NullCache
    from exam_eval.grading.output import GradesAppender
    from exam_eval.grading.prompts import get_prompt
    from exam_eval.io.banks import items_by_query
    from exam_eval.io.reports import read_reports

    d = tmp_path_factory.mktemp("nuggets")
    (d / "runs").mkdir()
    for run in ("good", "poor"):
        with open(d / "runs" / f"{run}.jsonl", "w") as fh:
            for r in REPORTS:
                if r["metadata"]["run_id"] == run:
                    fh.write(json.dumps(r) + "\n")
    with open(d / "bank.jsonl", "w") as fh:
        for topic, nuggets in BANK.items():
            for text, imp in nuggets:
                obj = {"query_id": topic, "item_id": f"{topic}/{hashlib.md5(text.encode()).hexdigest()}",
                       "kind": "nugget", "text": text}
                if imp:
                    obj["importance"] = imp
                fh.write(json.dumps(obj) + "\n")
    with open(d / "corpus.jsonl", "w") as fh:
        for doc, text in DOCS.items():
            fh.write(json.dumps({"doc_id": doc, "text": text}) + "\n")
    (d / "topics.tsv").write_text("t1\tfirst topic\nt2\tsecond topic\n")
    # sentence grades through the real engine, as exam-grade --reports does
    reports = read_reports([str(d / "runs")])
    prompt = get_prompt("nuggetizer-assign")
    items = items_by_query(read_bank(d / "bank.jsonl"))
    docs = {}
    texts = {}
    for r in reports:
        for s in r.sentences:
            docs.setdefault(r.topic_id, []).append(s.doc_id)
            texts[s.doc_id] = s.text
    backend = ScriptedBackend(script=script)
    units, npairs = engine.build_units(docs=docs, texts=texts, items=items, queries={}, prompt=prompt,
                                       identity=backend.cache_identity)
    plan = engine.plan_work(units, npairs, set(), NullCache(), backend.model_id, prompt)
    out = GradesAppender(str(d / "grades.jsonl"))
    engine.execute(plan, backend, prompt, out)
    out.close()
    return d


def parse_rows(text, shape):
    rows = {}
    for line in text.splitlines():
        f = line.split()
        if shape == "tot":
            run, m, topic, v = f
        elif shape == "ir_measures":
            run, topic, m, v = f
        else:
            run = None
            m, topic, v = f
        rows[(run, m, topic)] = float(v)
    return rows


def test_score_tot_matches_hand_values(data, run_cli):
    r = run_cli("exam-nuggets", "score", "--reports", data / "runs", "--bank", data / "bank.jsonl",
                "--digits", "6", data / "grades.jsonl")
    assert r.returncode == 0, r.stderr
    rows = parse_rows(r.stdout, "tot")
    for (run, topic) in LEVELS:
        for m, v in expected_scores(run, topic).items():
            assert rows[(run, m, topic)] == pytest.approx(v, abs=1e-6), (run, topic, m)
    for run in ("good", "poor"):
        for m in ("nugget_all", "nugget_vital_strict", "nugget_weighted", "exam_cover"):
            topics = [rows[(run, m, t)] for t in ("t1", "t2")]
            assert rows[(run, m, "all")] == pytest.approx(sum(topics) / 2, abs=1e-6)
    # one line per (run, measure, topic) plus all: 2 runs x 8 measures x 3
    assert len(r.stdout.splitlines()) == 2 * 8 * 3
    assert "1 bank items have no importance and count as vital" in r.stderr


def test_score_shapes_agree(data, run_cli, tmp_path):
    base = ["score", "--reports", data / "runs", "--bank", data / "bank.jsonl", data / "grades.jsonl"]
    tot = parse_rows(run_cli("exam-nuggets", *base).stdout, "tot")
    irm = run_cli("exam-nuggets", *base, "--format", "ir_measures")
    assert irm.returncode == 0
    assert parse_rows(irm.stdout, "ir_measures") == tot
    out = data / "trec_eval_out"
    r = run_cli("exam-nuggets", *base, "--format", "trec_eval", "-o", str(out) + os.sep)
    assert r.returncode == 0, r.stderr
    for run in ("good", "poor"):
        text = (out / f"{run}.txt").read_text()
        first = text.splitlines()[0]
        assert first == "%-22s\t%s\t%6.4f" % ("nugget_all", "t1", tot[(run, "nugget_all", "t1")])
        assert {(run, m, t): v for (_, m, t), v in parse_rows(text, "trec_eval").items()} == \
            {k: v for k, v in tot.items() if k[0] == run}
    table = run_cli("exam-nuggets", *base, "--format", "table", "-m", "nugget_all", "-m", "exam_cover")
    lines = table.stdout.splitlines()
    assert lines[0] == "run\tnugget_all\texam_cover"
    good = dict(zip(lines[0].split("\t"), lines[1].split("\t")))
    assert float(good["nugget_all"]) == pytest.approx(tot[("good", "nugget_all", "all")], abs=1e-4)
    from exam_eval.io.leaderboard import read_leaderboard

    path = tmp_path / "table.tsv"
    path.write_text(run_cli("exam-nuggets", *base, "--format", "table", "--digits", "7").stdout)
    board = read_leaderboard(path)
    assert board.columns[:2] == ["nugget_all", "nugget_all_strict"]
    assert board.rows["poor"]["nugget_weighted"] == pytest.approx(
        (expected_scores("poor", "t1")["nugget_weighted"] + expected_scores("poor", "t2")["nugget_weighted"]) / 2,
        abs=1e-7)


def test_score_summary_only_and_complete(data, run_cli, tmp_path):
    # a run with a report on t1 only: -c averages over both topics, t2 scoring 0
    lone = tmp_path / "lone.jsonl"
    lone.write_text(json.dumps({**REPORTS[0], "metadata": {**REPORTS[0]["metadata"], "run_id": "lone"}}) + "\n")
    base = ["score", "--reports", data / "runs", "--reports", lone, "--bank", data / "bank.jsonl",
            "--summary-only", "-m", "nugget_all", data / "grades.jsonl"]
    own = parse_rows(run_cli("exam-nuggets", *base).stdout, "tot")
    every = parse_rows(run_cli("exam-nuggets", *base, "-c").stdout, "tot")
    assert all(topic == "all" for (_, _, topic) in own)
    # lone's sentences were never graded: no support anywhere, and it says so
    assert own[("lone", "nugget_all", "all")] == 0.0
    assert own[("good", "nugget_all", "all")] == pytest.approx(every[("good", "nugget_all", "all")])


def test_support_grading_resumes_and_caches(data, run_cli, tmp_path):
    cache = tmp_path / "cache.sqlite"
    out = tmp_path / "support.jsonl"
    args = ["support", "--reports", data / "runs", "--passages", data / "corpus.jsonl", "--backend", "scripted",
            "--cache", cache, "-o", out]
    r = run_cli("exam-nuggets", *args)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    # every (sentence, cited document) pair once: good/t1 2, good/t2 1, poor/t1 1
    assert len(lines) == 4
    assert {(g["query_id"], g["doc_id"]) for g in lines} == {("t1", "d1"), ("t1", "d2"), ("t2", "d3")}
    assert all(g["prompt"] == "citation-support" and g["kind"] == "statement" for g in lines)
    again = run_cli("exam-nuggets", *args)
    assert "0 graded" in again.stderr and "4 already in output" in again.stderr
    assert len(out.read_text().splitlines()) == 4
    out.unlink()
    cached = run_cli("exam-nuggets", *args)
    assert "0 graded, 4 from cache" in cached.stderr
    key = lambda g: (g["query_id"], g["doc_id"], g["item_id"])
    assert sorted(map(json.loads, out.read_text().splitlines()), key=key) == sorted(lines, key=key)


def test_support_grading_survives_a_kill(data, tmp_path):
    out = tmp_path / "support.jsonl"
    cmd = [sys.executable, "-c", "import exam_eval.commands.nuggets as m; m.main()", "support",
           "--reports", str(data / "runs"), "--passages", str(data / "corpus.jsonl"), "--backend", "scripted",
           "-O", "delay=0.6", "--batch-size", "1", "--no-cache", "-o", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and (not out.exists() or not out.read_text().strip()):
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    first = out.read_text().splitlines()
    assert 1 <= len(first) < 4
    done = subprocess.run(cmd[:-5] + ["--no-cache", "-o", str(out)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    keys = [(g["query_id"], g["doc_id"], g["item_id"]) for g in map(json.loads, out.read_text().splitlines())]
    assert len(keys) == 4 == len(set(keys))


def _tiny_t5_support(data, tmp_path):
    """exam-nuggets support on the spot-check reports with a tiny random T5, no cache."""
    pytest.importorskip("torch")
    from tiny_models import make_tiny_t5

    model = make_tiny_t5(tmp_path / "t5")
    out = tmp_path / "support.jsonl"
    args = ["support", "--reports", data / "runs", "--passages", data / "corpus.jsonl", "--backend", "hf-seq2seq",
            "--model", model, "--device", "cpu", "--no-cache", "-o", out]
    return out, args, {"EXAM_EVAL_PROGRESS": "0", "EXAM_EVAL_CT2_CACHE": str(tmp_path / "ct2")}


def test_support_refuses_to_resume_grades_of_another_engine(data, run_cli, tmp_path):
    """exam-grade's rule holds for citation support too: an output of torch float32 grades
    is not resumed by int8 CTranslate2 (the hf-seq2seq default where it is installed)."""
    out, args, env = _tiny_t5_support(data, tmp_path)
    first = run_cli("exam-nuggets", *args, "--dtype", "float32", env=env)
    assert first.returncode == 0, first.stderr
    before = out.read_bytes()
    rows = [json.loads(x) for x in before.decode().splitlines()]
    assert len(rows) == 4 and {r["engine"] for r in rows} == {"torch/float32"}
    for other in ([], ["--dtype", "bfloat16"]):  # ctranslate2/int8 (torch without ctranslate2), torch/bfloat16
        r = run_cli("exam-nuggets", *args, *other, env=env)
        assert r.returncode == 2, r.stderr
        (line,) = r.stderr.strip().splitlines()
        assert line.startswith(f"exam-nuggets: {out}: holds grades of this model and prompt made with other "
                               "settings (computed by torch/float32; this run uses "), line
        assert out.read_bytes() == before
    again = run_cli("exam-nuggets", *args, "--dtype", "float32", env=env)
    assert again.returncode == 0 and "4 already in output" in again.stderr, again.stderr
    assert out.read_bytes() == before


def test_support_takes_exam_grades_engine_flags_and_checks_output_first(data, run_cli, tmp_path):
    """--engine/--compute-type as in exam-grade (--engine torch resumes the torch file above
    without the refusal); -o is checked before the reports are read."""
    r = run_cli("exam-nuggets", "support", "--reports", tmp_path / "no-such-reports", "--backend", "embedding",
                "-o", tmp_path / "missing-dir" / "support.jsonl")
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith(f"exam-nuggets: {tmp_path / 'missing-dir' / 'support.jsonl'}: cannot write"), line
    out, args, env = _tiny_t5_support(data, tmp_path)
    first = run_cli("exam-nuggets", *args, "--engine", "torch", env=env)
    assert first.returncode == 0, first.stderr
    assert {json.loads(x)["engine"] for x in out.read_text().splitlines()} == {"torch"}
    bad = run_cli("exam-nuggets", *args, "--engine", "torch", "--compute-type", "int8", env=env)
    assert bad.returncode in (1, 2), bad.stderr
    one_line_refusal(bad, code=bad.returncode)


def test_score_with_citation_support(data, run_cli, tmp_path):
    sup = tmp_path / "support.jsonl"
    # rules: d1 fully supports, d2 partially, d3 not at all
    rules = tmp_path / "rules.jsonl"
    rules.write_text("\n".join(json.dumps(x) for x in [
        {"context": DOCS["d1"], "output": "full_support"}, {"context": DOCS["d2"], "output": "Partial Support"},
        {"context": DOCS["d3"], "output": "no_support"}]) + "\n")
    r = run_cli("exam-nuggets", "support", "--reports", data / "runs", "--passages", data / "corpus.jsonl",
                "--backend", "scripted", "-O", f"script={rules}", "--no-cache", "-o", sup)
    assert r.returncode == 0, r.stderr
    r = run_cli("exam-nuggets", "score", "--reports", data / "runs", "--bank", data / "bank.jsonl",
                "--support-grades", sup, "-m", "support_precision", "-m", "support_recall", data / "grades.jsonl")
    assert r.returncode == 0, r.stderr
    rows = parse_rows(r.stdout, "tot")
    # good/t1: pairs (s1,d1)=1, (s2,d2)=.5 -> precision .75, recall (1+.5)/2
    assert rows[("good", "support_precision", "t1")] == pytest.approx(0.75)
    assert rows[("good", "support_recall", "t1")] == pytest.approx(0.75)
    # good/t2: (s1,d3)=0; poor/t1: (s1,d2)=.5 of one pair, 2 sentences; poor/t2: no citations
    assert rows[("good", "support_precision", "t2")] == 0.0
    assert rows[("poor", "support_precision", "t1")] == pytest.approx(0.5)
    assert rows[("poor", "support_recall", "t1")] == pytest.approx(0.25)
    assert rows[("poor", "support_recall", "t2")] == 0.0

    # document qrels from the same grades, read by pytrec_eval and by exam-qrels
    q = run_cli("exam-nuggets", "qrels", "--reports", data / "runs", "--from", "both", "--support-grades", sup,
                data / "grades.jsonl")
    assert q.returncode == 0, q.stderr
    # d1: min(support 2, sentence "alpha and beta" level 2) = 2; d2: max(min(1, GAMMA sentence 1),
    # min(1, BETA sentence 1)) = 1; d3: min(0, 2) = 0
    assert q.stdout == "t1 0 d1 2\nt1 0 d2 1\nt2 0 d3 0\n"
    import pytrec_eval

    qrels = {}
    for line in q.stdout.splitlines():
        qid, _, doc, label = line.split()
        qrels.setdefault(qid, {})[doc] = int(label)
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"P.2", "ndcg_cut.2"})
    res = ev.evaluate({"t1": {"d2": 2.0, "d1": 1.0}, "t2": {"d3": 1.0}})
    assert res["t1"]["P_2"] == 1.0 and res["t2"]["P_2"] == 0.0
    # trec_eval's nDCG: gain = label; d2 (1) then d1 (2), ideal d1 then d2
    assert res["t1"]["ndcg_cut_2"] == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    qfile = tmp_path / "cited.qrels"
    qfile.write_text(q.stdout)
    run = tmp_path / "r.run"
    run.write_text("t1 Q0 d2 1 2 x\nt1 Q0 d1 2 1 x\nt2 Q0 d3 1 1 x\n")
    e = run_cli("exam-qrels", "-q", "-m", "P.2", qfile, run)
    assert e.returncode == 0, e.stderr
    assert "P_2                   \tt1\t1.0000" in e.stdout


def test_bank_round_trips(data, run_cli, tmp_path):
    original = read_bank(data / "bank.jsonl")
    nz = tmp_path / "nz.jsonl"
    r = run_cli("exam-nuggets", "bank", "--to", "nuggetizer", "--topics", data / "topics.tsv",
                "--default-importance", "okay", data / "bank.jsonl", "-o", nz)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in nz.read_text().splitlines()]
    assert lines[0]["qid"] == "t1" and lines[0]["query"] == "first topic"
    assert lines[0]["nuggets"][2] == {"text": "gamma fact", "importance": "okay"}
    types = pytest.importorskip("nuggetizer.core.types")
    for line in lines:  # the nuggetizer's own nugget type takes our nuggets
        for n in line["nuggets"]:
            types.ScoredNugget(**n)
    back = read_bank(nz)
    assert [(i.query_id, i.item_id, i.text) for i in back] == [(i.query_id, i.item_id, i.text) for i in original]
    assert [i.importance for i in back] == [i.importance or "okay" for i in original]

    aj = tmp_path / "aj.jsonl"
    assert run_cli("exam-nuggets", "bank", "--to", "autojudge", data / "bank.jsonl", "-o", aj).returncode == 0
    first = json.loads(aj.read_text().splitlines()[0])
    assert first["format_version"] == "v3" and set(first["claim_bank"]) == {"alpha fact", "beta fact", "gamma fact"}
    back = read_bank(aj)
    assert [(i.item_id, i.text, i.importance, i.kind) for i in back] == \
        [(i.item_id, i.text, i.importance, i.kind) for i in original]
    ours = tmp_path / "ours.jsonl"
    assert run_cli("exam-nuggets", "bank", "--to", "ours", aj, "-o", ours).returncode == 0
    assert [i.to_json() for i in read_bank(ours)] == [i.to_json() for i in original]


AJB_PROBE = r"""
import json, sys
from autojudge_base.nugget_data import (NuggetBank, NuggetBanks, NuggetClaim, NuggetQuestion,
                                        load_nugget_banks_from_file, write_nugget_banks)
ours = load_nugget_banks_from_file(sys.argv[1])
seen = {qid: {"claims": {t: [c.claim_id, c.importance] for t, c in (b.claim_bank or {}).items()},
              "questions": {t: [q.question_id, sorted((q.answers or {}))] for t, q in (b.nugget_bank or {}).items()}}
        for qid, b in ours.banks.items()}
bank = NuggetBank(query_id="q7", title_query="avocado")
bank.add_nuggets([NuggetQuestion.from_lazy(query_id="q7", question="Who exports most?", gold_answers=["Mexico"]),
                  NuggetClaim.from_lazy(query_id="q7", claim="Avocados need water.", importance="okay")])
write_nugget_banks(NuggetBanks.from_banks_list([bank]), sys.argv[2])
print(json.dumps(seen))
"""


def _autojudge(tmp_path, *args):
    """Run AJB_PROBE with a stand-in nltk data folder: autojudge-base 1.0.0 fetches nltk's
    punkt and stopwords at import time, which cannot work offline (its nugget code uses neither)."""
    import importlib.util

    if importlib.util.find_spec("autojudge_base") is None:
        pytest.skip("autojudge-base is not installed")
    nltk_dir = tmp_path / "nltk_data"
    (nltk_dir / "tokenizers" / "punkt").mkdir(parents=True)
    (nltk_dir / "corpora" / "stopwords").mkdir(parents=True)
    (nltk_dir / "corpora" / "stopwords" / "english").write_text(
        (ROOT / "exam_eval" / "data" / "stopwords_en.txt").read_text())
    proc = subprocess.run([sys.executable, "-c", AJB_PROBE, *map(str, args)], capture_output=True, text=True,
                          env=dict(os.environ, NLTK_DATA=str(nltk_dir)), timeout=300)
    if proc.returncode != 0:
        pytest.skip(f"autojudge-base does not import here: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_autojudge_base_reads_our_banks_and_we_read_theirs(data, run_cli, tmp_path):
    aj = tmp_path / "aj.jsonl"
    assert run_cli("exam-nuggets", "bank", "--to", "autojudge", data / "bank.jsonl", "-o", aj).returncode == 0
    theirs = tmp_path / "theirs.jsonl"
    seen = _autojudge(tmp_path, aj, theirs)
    original = read_bank(data / "bank.jsonl")
    assert seen == {t: {"questions": {}, "claims": {i.text: [i.item_id, i.importance] for i in original
                                                     if i.query_id == t}} for t in ("t1", "t2")}
    items = read_bank(theirs)
    assert [(i.query_id, i.kind, i.item_id, i.text, i.answers, i.importance) for i in items] == [
        ("q7", "question", hashlib.md5(b"Who exports most?").hexdigest(), "Who exports most?", ["Mexico"], None),
        ("q7", "nugget", hashlib.md5(b"Avocados need water.").hexdigest(), "Avocados need water.", None, "okay")]


def test_autojudge_question_bank_import(tmp_path):
    src = tmp_path / "aj.jsonl"
    src.write_text(json.dumps({
        "query_id": "q9", "title_query": "avocado", "format_version": "v3",
        "nugget_bank": {"Who exports?": {"question": "Who exports?", "question_id": "abc", "query_id": "q9",
                                         "answers": {"Mexico": {"answer": "Mexico"}}, "importance": 2}},
        "claim_bank": [{"claim": "Avocados need water.", "query_id": "q9", "importance": "Vital"}]}) + "\n")
    items = read_bank(src)
    assert [(i.kind, i.item_id, i.answers, i.importance, i.extra) for i in items] == [
        ("question", "abc", ["Mexico"], None, {"importance": 2, "query_text": "avocado"}),
        ("nugget", hashlib.md5(b"Avocados need water.").hexdigest(), None, "vital", {"query_text": "avocado"})]


@pytest.mark.parametrize("case", ["no_metadata", "bad_index", "spec", "importance", "trec_eval_runs", "no_topic"])
def test_bad_input_is_one_line(case, data, run_cli, tmp_path):
    bank, reports, extra = data / "bank.jsonl", data / "runs", []
    code = 2
    if case == "no_metadata":
        reports = tmp_path / "r.jsonl"
        reports.write_text(json.dumps({"responses": [{"text": "x", "citations": []}]}) + "\n")
        where = f"{reports}:1:"
    elif case == "bad_index":
        reports = tmp_path / "r.jsonl"
        reports.write_text("\n" + json.dumps({"metadata": {"run_id": "a", "topic_id": "t1", "team_id": "x"},
                                              "responses": [{"text": "x", "citations": [3]}],
                                              "references": ["d1"]}) + "\n")
        where = f"{reports}:2:"
    elif case == "spec":
        extra, where, code = ["--track-spec", "no-such-track"], "no-such-track", 1  # an option's value: a usage error
    elif case == "importance":
        bank = tmp_path / "b.jsonl"
        bank.write_text(json.dumps({"query_id": "t1", "item_id": "t1/x", "kind": "nugget", "text": "x",
                                    "importance": "high"}) + "\n")
        where = f"{bank}:1: importance must be 'vital' or 'okay'"
    elif case == "trec_eval_runs":
        extra, where, code = ["--format", "trec_eval"], "one run per file", 1
    else:
        bank = tmp_path / "b.jsonl"
        bank.write_text(json.dumps({"query_id": "zz", "item_id": "zz/x", "kind": "nugget", "text": "x"}) + "\n")
        where = "no report is on a topic of the bank"
    out = tmp_path / "out.tot"
    r = run_cli("exam-nuggets", "score", "--reports", reports, "--bank", bank, *extra, data / "grades.jsonl", "-o", out)
    assert where in one_line_refusal(r, "exam-nuggets", code)
    assert not out.exists()


def test_help_does_not_import_torch():
    code = ("import sys, exam_eval.commands.nuggets as m\n"
            "try:\n    m.main(['score', '--help'])\nexcept SystemExit:\n    pass\n"
            "assert 'torch' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_spot_check_reports_end_to_end(shared_data, run_cli, tmp_path):
    """The AutoJudge spot-check reports: exam-grade --reports, then every exam-nuggets step."""
    spot = shared_data / "autojudge-spot-check"
    bank = tmp_path / "bank.jsonl"
    nuggets = [("linear theory is applied to quasi-cylindrical surfaces", "vital"),
               ("shell integration approximates volumes", "okay")]
    bank.write_text("".join(json.dumps({"query_id": "28", "item_id": f"28/{hashlib.md5(t.encode()).hexdigest()}",
                                        "kind": "nugget", "text": t, "importance": imp}) + "\n" for t, imp in nuggets))
    rules = tmp_path / "rules.jsonl"
    rules.write_text("\n".join(json.dumps(x) for x in [
        {"item": "quasi-cylindrical", "context": "quasi-cylindrical", "output": "['support']"},
        {"item": "shell integration", "context": "Shell integration", "output": "['partial_support']"},
        {"item": "", "output": "['not_support']"}]) + "\n")
    grades = tmp_path / "grades.jsonl"
    g = run_cli("exam-grade", "--reports", spot / "runs", "--bank", bank,
                "--prompt", "nuggetizer-assign", "--topics", spot / "queries.jsonl", "--backend", "scripted",
                "-O", f"script={rules}", "--no-cache", "-o", grades)
    assert g.returncode == 0, g.stderr
    s = run_cli("exam-nuggets", "score", "--reports", spot / "runs", "--bank", bank, "--summary-only", "--digits", "8",
                "-m", "nugget_all", "-m", "nugget_vital", "-m", "nugget_weighted", grades)
    assert s.returncode == 0, s.stderr
    rows = parse_rows(s.stdout, "tot")
    assert rows[("my_best_run_01", "nugget_all", "all")] == pytest.approx(0.5)       # support, none
    assert rows[("my_best_run_01", "nugget_vital", "all")] == pytest.approx(1.0)
    assert rows[("my_best_run_02", "nugget_all", "all")] == pytest.approx(0.25)      # none, partial
    assert rows[("my_best_run_02", "nugget_weighted", "all")] == pytest.approx(0.5 * 0.5 / 1.5)
    assert rows[("my_best_run_02_citations", "nugget_vital", "all")] == 0.0
    sup = tmp_path / "support.jsonl"
    r = run_cli("exam-nuggets", "support", "--reports", spot / "runs", "--passages", spot / "corpus.jsonl.gz",
                "--backend", "scripted", "--no-cache", "-o", sup)
    assert r.returncode == 0, r.stderr
    assert len(sup.read_text().splitlines()) == 3  # run_01 cites 224 once; both run_02 variants cite 279 once
    q = run_cli("exam-nuggets", "qrels", "--reports", spot / "runs", "--from", "support", "--support-grades", sup)
    assert q.returncode == 0 and sorted(line.split()[2] for line in q.stdout.splitlines()) == ["224", "279"]


def test_leaderboards_read_back_by_the_leaderboard_reader(data, run_cli, tmp_path):
    """exam-correlate's reader (io/leaderboard) sniffs each shape and gets the same values."""
    from exam_eval.io.leaderboard import read_leaderboard, sniff_format

    base = ["score", "--reports", data / "runs", "--bank", data / "bank.jsonl", "--digits", "6", data / "grades.jsonl"]
    boards = {}
    for shape in ("tot", "ir_measures"):
        path = tmp_path / f"lb.{shape}"
        assert run_cli("exam-nuggets", *base, "--format", shape, "-o", path).returncode == 0
        assert sniff_format(str(path)) == shape
        boards[shape] = read_leaderboard(path, "auto")
    te = tmp_path / "te"
    base.remove("--digits")
    base.remove("6")  # trec_eval's 4 decimals are fixed: --digits there is a usage error
    assert run_cli("exam-nuggets", *base, "--format", "trec_eval", "-o", str(te) + os.sep).returncode == 0
    boards["trec_eval"] = read_leaderboard(te, "trec_eval")
    for shape, board in boards.items():
        for run, topic in LEVELS:
            for m, v in expected_scores(run, topic).items():
                assert board.topics[m][run][topic] == pytest.approx(v, abs=1e-4), (shape, run, topic, m)
        assert board.rows["good"]["nugget_all"] == pytest.approx(
            (expected_scores("good", "t1")["nugget_all"] + expected_scores("good", "t2")["nugget_all"]) / 2, abs=1e-4)


def test_assignments_file_is_scored_alike_by_the_nuggetizer(data, run_cli, tmp_path):
    metrics = pytest.importorskip("nuggetizer.core.metrics")
    path = tmp_path / "assign.jsonl"
    r = run_cli("exam-nuggets", "score", "--reports", data / "runs", "--bank", data / "bank.jsonl", "--digits", "8",
                "--assignments", path, data / "grades.jsonl")
    assert r.returncode == 0, r.stderr
    rows = parse_rows(r.stdout, "tot")
    records = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(records) == 4
    names = {0: "not_support", 1: "partial_support", 2: "support"}
    for rec in records:
        assert {n["text"]: n["assignment"] for n in rec["nuggets"]} == \
            {t: names[lv] for t, lv in LEVELS[(rec["run_id"], rec["qid"])].items()}
        ref = metrics.calculate_nugget_scores(rec["qid"], rec["nuggets"])
        for ours, theirs in (("nugget_all", "all_score"), ("nugget_all_strict", "strict_all_score"),
                             ("nugget_vital", "vital_score"), ("nugget_vital_strict", "strict_vital_score")):
            assert rows[(rec["run_id"], ours, rec["qid"])] == pytest.approx(getattr(ref, theirs), abs=1e-8)


def test_support_dry_run_and_shards(data, run_cli, tmp_path):
    base = ["support", "--reports", data / "runs", "--passages", data / "corpus.jsonl", "--backend", "scripted",
            "--no-cache"]
    out = tmp_path / "s.jsonl"
    dry = run_cli("exam-nuggets", *base, "--dry-run", "-o", out)
    assert dry.returncode == 0, dry.stderr
    report = dict(line.split("\t", 1) for line in dry.stdout.splitlines())
    assert report["pairs"] == "4" and report["to grade (pairs)"] == "4" and report["pool (passages with text)"] == "3"
    assert not out.exists()
    keys = []
    for i in (1, 2):
        part = tmp_path / f"s{i}.jsonl"
        assert run_cli("exam-nuggets", *base, "--shard", f"{i}/2", "-o", part).returncode == 0
        keys += [(g["doc_id"], g["item_id"]) for g in map(json.loads, part.read_text().splitlines())]
    assert len(keys) == 4 == len(set(keys))


def test_bank_export_keeps_the_workbench_query_texts(shared_data, run_cli, tmp_path):
    """Every line of the workbench's DL19 nugget bank carries query_text: the nuggetizer
    export writes it (it wrote "" for all 43 topics); --topics fills in only what is missing."""
    import gzip

    source = shared_data / "dl19" / "banks" / "nuggets.jsonl.gz"
    with gzip.open(source, "rt", encoding="utf-8") as fh:
        want = {str(obj["query_id"]): obj["query_text"] for obj in map(json.loads, fh)}
    out = tmp_path / "nz.jsonl"
    res = run_cli("exam-nuggets", "bank", "--to", "nuggetizer", source, "-o", out)
    assert res.returncode == 0 and "give --topics" not in res.stderr, res.stderr
    got = {x["qid"]: x["query"] for x in map(json.loads, out.read_text().splitlines())}
    assert len(got) == 43 and got == want
    topics = tmp_path / "topics.tsv"
    first = next(iter(want))
    topics.write_text(f"{first}\tanother text\n999\tunused\n")
    res = run_cli("exam-nuggets", "bank", "--to", "nuggetizer", source, "--topics", topics, "-o", out)
    assert res.returncode == 0, res.stderr
    assert {x["qid"]: x["query"] for x in map(json.loads, out.read_text().splitlines())} == want
