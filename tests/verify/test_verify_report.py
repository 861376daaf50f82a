"""exam-verify report: its numbers against independent computations (direct loops,
pytrec_eval, scipy on the raw files), and the page rendered by headless Chromium."""

from __future__ import annotations

import gzip
import json
import math
import random
import statistics
import subprocess

import pytest
import pytrec_eval
from scipy import stats

import chromium

from exam_eval.io.bank_items import make_item_id
from exam_eval.verify.report import ReportOptions, compute, render

TAU = 4
K = 20


def direct_cover(grades, run, k):
    """grades: (qid, doc, item) -> grade; run: qid -> doc -> score. Mean and SE over the run's queries."""
    items, hits = {}, {}
    for (q, d, i), g in grades.items():
        items.setdefault(q, set()).add(i)
        if g is not None and g >= TAU:
            hits.setdefault((q, d), set()).add(i)
    values = []
    for q in sorted(run):
        if q not in items:
            continue
        top = sorted(run[q], key=lambda d: (run[q][d], d), reverse=True)[:k]
        got = set().union(*(hits.get((q, d), set()) for d in top))
        values.append(len(got) / len(items[q]))
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return statistics.fmean(values), se


def direct_exam_ndcg(grades, run):
    best = {}
    for (q, d, _), g in grades.items():
        if g is not None:
            best.setdefault(q, {})[d] = max(best.get(q, {}).get(d, 0), g)
    ev = pytrec_eval.RelevanceEvaluator(best, {"ndcg_cut.10"}, relevance_level=TAU)
    res = ev.evaluate({q: docs for q, docs in run.items() if q in best})
    return statistics.fmean(v["ndcg_cut_10"] for v in res.values())


# ---------------------------------------------------------------- synthetic data


@pytest.fixture
def synthetic(tmp_path):
    rnd = random.Random(7)
    queries = [f"q{i}" for i in range(1, 6)]
    items = {q: [f"Question {j} about {q}?" for j in range(4)] for q in queries}
    docs = {q: [f"{q}d{j}" for j in range(30)] for q in queries}
    grades = {}
    for q in queries:
        for d in docs[q]:
            for t in items[q]:
                grades[(q, d, make_item_id(q, t))] = rnd.choice([0, 0, 1, 2, 3, 4, 5, None] if d.endswith("7")
                                                                else [0, 0, 0, 1, 3, 4, 5])
    with open(tmp_path / "grades.jsonl", "w") as fh:
        for (q, d, i), g in grades.items():
            fh.write(json.dumps({"query_id": q, "doc_id": d, "item_id": i, "kind": "question", "grade": g,
                                 "parse_ok": g is not None, "answer": str(g), "model": "m", "prompt": "p"}) + "\n")
    with open(tmp_path / "qrels.txt", "w") as fh:
        for q in queries:
            for d in docs[q][:25]:
                fh.write(f"{q} 0 {d} {rnd.randint(0, 3)}\n")
    with open(tmp_path / "bank.jsonl", "w") as fh:
        for q in queries:
            for t in items[q]:
                fh.write(json.dumps({"query_id": q, "item_id": make_item_id(q, t), "kind": "question",
                                     "text": t}) + "\n")
    with open(tmp_path / "passages.jsonl", "w") as fh:
        for q in queries:
            for d in docs[q]:
                fh.write(json.dumps({"doc_id": d, "text": f"Text of passage {d}."}) + "\n")
    runs = {}
    (tmp_path / "runs").mkdir()
    for r in range(6):
        run = {}
        with open(tmp_path / "runs" / f"sys{r}.run", "w") as fh:
            for q in queries[: 5 - (r == 5)]:  # one run misses a query
                chosen = rnd.sample(docs[q], 22)
                for rank, d in enumerate(chosen, 1):
                    score = round(100 - rank + rnd.random() * 3, 3)
                    run.setdefault(q, {})[d] = score
                    fh.write(f"{q} Q0 {d} {rank} {score} sys{r}\n")
        runs[f"sys{r}"] = run
    official = {f"sys{r}": round(rnd.random(), 4) for r in range(6)}
    with open(tmp_path / "official.tsv", "w") as fh:
        fh.write("run\tofficial_rank\tndcg_cut_10\n")
        for rank, (name, v) in enumerate(sorted(official.items(), key=lambda t: -t[1]), 1):
            fh.write(f"{name}\t{rank}\t{v}\n")
    return tmp_path, grades, runs, official


def test_report_numbers_match_direct_computation(synthetic):
    d, grades, runs, official = synthetic
    data = compute(str(d / "grades.jsonl"), str(d / "qrels.txt"),
                   [str(p) for p in sorted((d / "runs").glob("*.run"))],
                   official_path=str(d / "official.tsv"), bank_path=str(d / "bank.jsonl"),
                   passages=str(d / "passages.jsonl"), opts=ReportOptions(relevant_min=2))
    rows = {r.run: r for r in data.rows}
    cover = {name: direct_cover(grades, run, K) for name, run in runs.items()}
    ndcg = {name: direct_exam_ndcg(grades, run) for name, run in runs.items()}
    for name in runs:
        assert rows[name].cover_mean == pytest.approx(cover[name][0], abs=1e-12)
        assert rows[name].cover_se == pytest.approx(cover[name][1], abs=1e-12)
        assert rows[name].qrels_mean == pytest.approx(ndcg[name], abs=1e-12)
        assert rows[name].official == official[name]
    names = sorted(runs)
    c = data.correlations["EXAM-Cover@20"]
    assert c["kendall_tau_b"] == pytest.approx(
        stats.kendalltau([official[n] for n in names], [cover[n][0] for n in names]).statistic)
    q = data.correlations["EXAM-Qrels (ndcg_cut_10)"]
    assert q["spearman"] == pytest.approx(
        stats.spearmanr([official[n] for n in names], [ndcg[n] for n in names]).statistic)
    # the leaderboard is ordered by the official score
    assert [r.run for r in data.rows] == sorted(official, key=lambda n: -official[n])
    html = render(data)
    assert f"{c['kendall_tau_b']:.4f}" in html and f"{rows['sys0'].cover_mean:.4f}" in html
    assert html.count("data:image/png;base64,") == 3  # two scatter plots and the heatmap
    assert "http://" not in html and "https://" not in html and "<script" not in html
    assert "Question 2 about q3?" in html  # the bank, with texts


def test_report_official_computed_from_qrels(synthetic):
    d, _, runs, _ = synthetic
    data = compute(str(d / "grades.jsonl"), str(d / "qrels.txt"), [str(d / "runs" / f"sys{i}.run") for i in (1, 2, 3)], opts=ReportOptions(relevant_min=2, measure="P.10"))
    human = {}
    for line in (d / "qrels.txt").read_text().splitlines():
        q, _, doc, lab = line.split()
        human.setdefault(q, {})[doc] = int(lab)
    ev = pytrec_eval.RelevanceEvaluator(human, {"P.10"}, relevance_level=2)
    for r in data.rows:
        expected = statistics.fmean(v["P_10"] for v in ev.evaluate(runs[r.run]).values())
        assert r.official == pytest.approx(expected, abs=1e-12)


def test_report_cli_errors(synthetic, run_cli):
    d, *_ = synthetic
    out = d / "report.html"
    base = ["report", d / "grades.jsonl", d / "runs" / "sys0.run", "--qrels", d / "qrels.txt", "-o", out]
    r = run_cli("exam-verify", *base, "--official", d / "official.tsv", "--official-column", "map")
    assert r.returncode == 1 and "no column 'map'" in r.stderr and "ndcg_cut_10" in r.stderr
    bad = d / "runs" / "bad.run"
    bad.write_text("q1 Q0 q1d1 1 1.0 x\nq1 Q0 q1d2 2 nan x\n")
    r = run_cli("exam-verify", *base, bad)
    assert r.returncode == 2 and f"{bad}:2:" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()
    r = run_cli("exam-verify", *base, "--measure", "P.5,10")
    assert r.returncode == 1 and "one value" in r.stderr
    r = run_cli("exam-verify", *base)
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("<!DOCTYPE html>")


# ------------------------------------------------------------ DL19 reference data


def test_dl19_report_against_raw_data(shared_data, run_cli, tmp_path):
    dl = shared_data / "dl19"
    run_files = sorted((dl / "runs").glob("*.run"))
    out = tmp_path / "report.html"
    r = run_cli("exam-verify", "report", dl / "graded-flan-t5-large.jsonl.gz", *run_files, "--qrels",
                dl / "qrels.txt", "--official", dl / "official.tsv", "--relevant-min", "2",
                "--bank", dl / "banks" / "questions-genq-oldformat.jsonl.gz", "-o", out)
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    # independent: EXAM-Cover@20 from the raw workbench file and the run files, tau-b by scipy
    grades = {}
    with gzip.open(dl / "graded-flan-t5-large.jsonl.gz", "rt") as fh:
        for line in fh:
            q, paras = json.loads(line)
            for p in paras:
                for block in p["exam_grades"]:
                    for s in block["self_ratings"]:
                        grades[(q, p["paragraph_id"], s["question_id"])] = s["self_rating"]
    official = {}
    for line in (dl / "official.tsv").read_text().splitlines(keepends=True)[1:]:
        cells = line.rstrip("\n").split("\t")
        official[cells[0]] = float(cells[2])
    cover = {}
    for f in run_files:
        run = {}
        for line in f.read_text().splitlines():
            q, _, doc, _, score, _ = line.split()
            run.setdefault(q, {})[doc] = float(score)
        cover[f.stem] = direct_cover(grades, run, K)[0]
    names = sorted(set(cover) & set(official))
    tau = stats.kendalltau([official[n] for n in names], [cover[n] for n in names]).statistic
    assert len(names) == 37
    assert "<td>EXAM-Cover@20</td><td><span class=\"n\">" in html
    row = html.split("<td>EXAM-Cover@20</td>", 1)[1].split("</tr>", 1)[0]
    assert f"{tau:.4f}" in row
    best = max(cover, key=cover.get)
    assert f"{cover[best]:.4f}" in html
    assert "Spurious bank items" in html and "Uncovered relevant passages" in html


# ------------------------------------------------------------ headless Chromium

CHROMIUM_FLAGS = ["--headless", *chromium.FLAGS, "--enable-logging=stderr", "--v=0"]
_chromium = chromium.chromium


def test_report_renders_in_chromium(synthetic, tmp_path):
    from PIL import Image, ImageStat

    exe = _chromium()
    d, *_ = synthetic
    data = compute(str(d / "grades.jsonl"), str(d / "qrels.txt"),
                   [str(p) for p in sorted((d / "runs").glob("*.run"))],
                   official_path=str(d / "official.tsv"), bank_path=str(d / "bank.jsonl"),
                   opts=ReportOptions(relevant_min=2))
    page = tmp_path / "report.html"
    page.write_text(render(data), encoding="utf-8")
    url = page.resolve().as_uri()
    shot = tmp_path / "shot.png"
    profile = tmp_path / "profile"
    r = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--window-size=1280,1600",
                        f"--screenshot={shot}", url], capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    console = [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln
               or "Failed to load resource" in ln or "Not allowed to load" in ln]
    assert not console, console
    assert shot.stat().st_size > 10_000
    img = Image.open(shot).convert("L")
    assert img.size == (1280, 1600)
    extrema = img.getextrema()
    assert extrema[1] - extrema[0] > 100  # text and plots, not a blank page
    assert ImageStat.Stat(img).stddev[0] > 10
    # the DOM chromium built holds the content (the screenshot alone could be an error page)
    r = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
                       capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert '<h2 id="leaderboards">Leaderboards</h2>' in dom
    assert dom.count("<img") == 3 and "Question 0 about q1?" in dom
    assert not [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]


def test_dl19_report_renders_in_chromium(shared_data, tmp_path):
    from PIL import Image

    exe = _chromium()
    dl = shared_data / "dl19"
    data = compute(str(dl / "graded-flan-t5-large.jsonl.gz"), str(dl / "qrels.txt"),
                   [str(p) for p in sorted((dl / "runs").glob("*.run"))], official_path=str(dl / "official.tsv"),
                   bank_path=str(dl / "banks" / "questions-genq-oldformat.jsonl.gz"),
                   opts=ReportOptions(relevant_min=2))
    page = tmp_path / "report.html"
    page.write_text(render(data), encoding="utf-8")
    shot = tmp_path / "shot.png"
    r = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2000",
                        f"--screenshot={shot}", page.resolve().as_uri()], capture_output=True, text=True,
                       timeout=180, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not [ln for ln in r.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    img = Image.open(shot).convert("L")
    lo, hi = img.getextrema()
    assert hi - lo > 100 and sum(1 for n in img.histogram() if n) > 20


def test_source_date_epoch_fixes_the_generated_time(monkeypatch):
    """A report rebuilt from unchanged inputs is byte-identical where the build says when."""
    from exam_eval.verify.report import _generated

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "86400")
    assert _generated().strftime("%Y-%m-%d %H:%M UTC") == "1970-01-02 00:00 UTC"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "not a time")
    assert _generated().year >= 2026
