"""exam-correlate compare as a user runs it: which pairs of runs differ, from human labels
(paired t-test, randomization test) and from a few human labels plus LLM labels (PPI on
the differences); outputs, the picture, and every refusal in one line.

Expected numbers come from pytrec_eval (per-query nDCG@10, trec_eval -c's zeros),
exam-qrels -q, scipy (ttest_rel, permutation_test, the normal distribution) and Holm
written out by hand, never from the command itself."""

from __future__ import annotations

import random

import numpy as np
import pytest
import pytrec_eval
from scipy import stats

from refusals import last_line_refusal, one_line_refusal

HEADER = "run_a run_b metric method queries difference lower upper p p_adjusted differs".split()
LLM = "QuestionSelfRatedUnanswerablePromptWithChoices.qrels"
RUNS = ("idst_bert_p1", "p_bert", "TUW19-p1-f", "bm25base_p")


def _table(stdout: str) -> list[dict]:
    lines = [line.split("\t") for line in stdout.strip().splitlines()]
    assert lines[0] == HEADER
    return [dict(zip(HEADER, row)) for row in lines[1:]]


def _read(path) -> dict:
    out: dict = {}
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) == 4:
            out.setdefault(f[0], {})[f[2]] = int(f[3])
        else:
            out.setdefault(f[0], {})[f[2]] = float(f[4])
    return out


def _ndcg(qrels: dict, run: dict) -> np.ndarray:
    """nDCG@10 of every qrels query, 0 where the run lacks it (trec_eval -c)."""
    res = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(run)
    return np.array([res.get(q, {}).get("ndcg_cut_10", 0.0) for q in sorted(qrels)])


def _holm(p):
    m = len(p)
    out, running = [0.0] * m, 0.0
    for k, i in enumerate(sorted(range(m), key=lambda i: p[i])):
        running = max(running, min(1.0, (m - k) * p[i]))
        out[i] = running
    return out


def _synthetic(tmp_path, nq=8, runs=3, seed=0):
    """Human qrels 0-3, LLM qrels 0-5 loosely tied to them, runs of 10 passages per query."""
    rng = np.random.default_rng(seed)
    hq, lq = [], []
    for q in range(nq):
        for d in range(12):
            h = int(rng.integers(0, 4))
            hq.append(f"q{q} 0 d{d} {h}")
            lq.append(f"q{q} 0 d{d} {int(np.clip(h + rng.integers(-1, 3), 0, 5))}")
    h, l_ = tmp_path / "h.qrels", tmp_path / "l.qrels"
    h.write_text("\n".join(hq) + "\n")
    l_.write_text("\n".join(lq) + "\n")
    paths = []
    for r in range(runs):
        p = tmp_path / f"sys{r}.run"
        p.write_text("".join(f"q{q} Q0 d{d} {d + 1} {rng.normal() * 3 + (12 - d) * (r + 1) / runs:.3f} s{r}\n"
                             for q in range(nq) for d in range(10)))
        paths.append(p)
    return h, l_, paths


# ----------------------------------------------------------------------------- human labels

def test_dl19_t_test_pairs_are_pytrec_eval_and_scipy(run_cli, shared_data, tmp_path):
    d = shared_data / "dl19"
    paths = [d / "runs" / f"{n}.run" for n in RUNS]
    out = tmp_path / "pairs.tsv"
    r = run_cli("exam-correlate", "compare", d / "qrels.txt", *paths, "-o", out)
    assert r.returncode == 0, r.stderr
    rows = _table(out.read_text())
    qrels = _read(d / "qrels.txt")
    values = {n: _ndcg(qrels, _read(p)) for n, p in zip(RUNS, paths)}
    assert [(x["run_a"], x["run_b"]) for x in rows] == [(a, b) for i, a in enumerate(RUNS) for b in RUNS[i + 1:]]
    p = [stats.ttest_rel(values[x["run_a"]], values[x["run_b"]]).pvalue for x in rows]
    for x, pv, adj in zip(rows, p, _holm(p)):
        diff = values[x["run_a"]] - values[x["run_b"]]
        ci = stats.ttest_rel(values[x["run_a"]], values[x["run_b"]]).confidence_interval(0.95)
        assert (x["metric"], x["method"], x["queries"]) == ("ndcg@10", "t", "43")
        assert float(x["difference"]) == pytest.approx(diff.mean(), abs=5e-5)
        assert (float(x["lower"]), float(x["upper"])) == pytest.approx((ci.low, ci.high), abs=5e-5)
        assert float(x["p"]) == pytest.approx(pv, rel=5e-4)
        assert float(x["p_adjusted"]) == pytest.approx(adj, rel=5e-4)
        assert x["differs"] == ("1" if adj < 0.05 else "0")
    k = sum(x["differs"] == "1" for x in rows)
    assert 0 < k < len(rows)
    assert r.stderr.strip().splitlines()[-1] == f"exam-correlate: {k} of 6 pairs differ at alpha 0.05 (t, holm)"


def test_per_query_values_are_exam_qrels_q_c(run_cli, shared_data):
    """The difference of two runs is the mean difference of what exam-qrels -q -c prints."""
    d = shared_data / "dl19"
    per = {}
    for name in RUNS[:2]:
        r = run_cli("exam-qrels", "-q", "-c", "-m", "ndcg_cut.10", d / "qrels.txt", d / "runs" / f"{name}.run")
        assert r.returncode == 0, r.stderr
        per[name] = {q: float(v) for _, q, v in (line.split("\t") for line in r.stdout.splitlines()) if q != "all"}
    r = run_cli("exam-correlate", "compare", d / "qrels.txt", *(d / "runs" / f"{n}.run" for n in RUNS[:2]))
    row = _table(r.stdout)[0]
    assert len(per[RUNS[0]]) == 43
    expect = np.mean([per[RUNS[0]][q] - per[RUNS[1]][q] for q in per[RUNS[0]]])
    assert float(row["difference"]) == pytest.approx(expect, abs=2e-4)  # exam-qrels prints 4 decimals


def test_a_query_a_run_lacks_counts_zero_and_the_baseline(run_cli, tmp_path):
    h, _, paths = _synthetic(tmp_path)
    short = tmp_path / "short.run"
    short.write_text("".join(line + "\n" for line in paths[2].read_text().splitlines() if not line.startswith("q3 ")))
    r = run_cli("exam-correlate", "compare", h, paths[0], paths[1], short, "--baseline", "sys0")
    assert r.returncode == 0, r.stderr
    rows = _table(r.stdout)
    assert [(x["run_a"], x["run_b"]) for x in rows] == [("sys1", "sys0"), ("short", "sys0")]
    qrels = _read(h)
    base, lacking = _ndcg(qrels, _read(paths[0])), _ndcg(qrels, _read(short))
    assert lacking[3] == 0.0 and _ndcg(qrels, _read(paths[2]))[3] > 0
    assert float(rows[1]["difference"]) == pytest.approx((lacking - base).mean(), abs=5e-5)
    assert rows[1]["queries"] == "8"
    # the baseline given as its file names the same run
    again = run_cli("exam-correlate", "compare", h, paths[0], paths[1], short, "--baseline", paths[0])
    assert again.stdout == r.stdout


def test_randomization_is_scipys_exact_test(run_cli, tmp_path):
    """8 queries: all 256 sign patterns, as scipy's permutation_test takes them."""
    h, _, paths = _synthetic(tmp_path, nq=8, runs=3, seed=4)
    r = run_cli("exam-correlate", "compare", h, *paths, "--test", "randomization", "--correction", "bonferroni")
    assert r.returncode == 0, r.stderr
    qrels = _read(h)
    values = [_ndcg(qrels, _read(p)) for p in paths]
    rows = _table(r.stdout)
    for x, (a, b) in zip(rows, ((0, 1), (0, 2), (1, 2))):
        ref = stats.permutation_test((values[a], values[b]), lambda u, v, axis: np.mean(u - v, axis=axis),
                                     permutation_type="samples", vectorized=True, n_resamples=np.inf)
        assert x["method"] == "randomization"
        assert float(x["p"]) == pytest.approx(ref.pvalue, rel=5e-4)
        assert float(x["p_adjusted"]) == pytest.approx(min(1.0, 3 * ref.pvalue), rel=5e-4)
        assert float(x["lower"]) <= float(x["difference"]) <= float(x["upper"])
    # seeded: the same output again, whatever the draws
    assert run_cli("exam-correlate", "compare", h, *paths, "--test", "randomization",
                   "--correction", "bonferroni").stdout == r.stdout


def test_the_picture_png_and_svg(run_cli, tmp_path):
    h, _, paths = _synthetic(tmp_path, nq=12, runs=4)
    png, svg = tmp_path / "runs.png", tmp_path / "runs.svg"
    r = run_cli("exam-correlate", "compare", h, *paths, "--plot", png)
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = run_cli("exam-correlate", "compare", h, *paths, "--plot", svg, "--baseline", "sys0")
    assert r.returncode == 0, r.stderr
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    for name in ("sys0", "sys1", "sys2", "sys3"):  # every run is labelled (matplotlib writes text as glyph paths
        assert f"<!-- {name}" in text or name in text  # or, with svg.fonttype none, as text)
    pdf, other = tmp_path / "runs.pdf", tmp_path / "runs.out"
    for target, magic in ((pdf, b"%PDF"), (other, b"\x89PNG")):  # any other name: PNG, as leaderboard --plot
        r = run_cli("exam-correlate", "compare", h, *paths, "--plot", target)
        assert r.returncode == 0 and target.read_bytes().startswith(magic), r.stderr


# ----------------------------------------------------------------------------- LLM labels

def test_dl19_ppi_on_differences_is_the_closed_form(run_cli, shared_data):
    """--mapping identity on hard LLM labels: each run's predicted nDCG@10 is nDCG@10 with
    the LLM qrels as qrels (pytrec_eval), so PPI's numbers can be written out."""
    d = shared_data / "dl19"
    paths = [d / "runs" / f"{n}.run" for n in RUNS[:3]]
    r = run_cli("exam-correlate", "compare", d / "qrels.txt", d / "llm-qrels" / LLM, *paths, "--n-labelled", "20",
                "--seed", "4", "--mapping", "identity", "--methods", "ppi,t")
    assert r.returncode == 0, r.stderr
    qrels, llm = _read(d / "qrels.txt"), _read(d / "llm-qrels" / LLM)
    queries = sorted(qrels)
    labelled = sorted(random.Random(4).sample(queries, 20))  # the draw interval --seed 4 makes too
    lab = np.array([queries.index(q) for q in labelled])
    unl = np.setdiff1d(np.arange(43), lab)
    human = [_ndcg(qrels, _read(p)) for p in paths]
    pred = [_ndcg(llm, _read(p)) for p in paths]
    rows = _table(r.stdout)
    assert [x["method"] for x in rows] == ["ppi"] * 3 + ["t"] * 3
    ppi_p = []
    for x, (a, b) in zip(rows[:3], ((0, 1), (0, 2), (1, 2))):
        dh, dp = human[a] - human[b], pred[a] - pred[b]
        est = dp[unl].mean() + (dh[lab] - dp[lab]).mean()
        se = np.sqrt(np.var(dp[unl], ddof=1) / 23 + np.var(dh[lab] - dp[lab], ddof=1) / 20)
        assert x["queries"] == "43"
        assert float(x["difference"]) == pytest.approx(est, abs=5e-5)
        assert float(x["lower"]) == pytest.approx(est - stats.norm.isf(0.025) * se, abs=5e-5)
        assert float(x["p"]) == pytest.approx(2 * stats.norm.sf(abs(est) / se), rel=5e-4, abs=1e-12)
        ppi_p.append(2 * stats.norm.sf(abs(est) / se))
    for x, adj in zip(rows[:3], _holm(ppi_p)):  # Holm within each method's family
        assert float(x["p_adjusted"]) == pytest.approx(adj, rel=5e-4, abs=1e-12)
    for x, (a, b) in zip(rows[3:], ((0, 1), (0, 2), (1, 2))):  # t: the labelled queries' human labels alone
        ref = stats.ttest_rel(human[a][lab], human[b][lab])
        assert x["queries"] == "20" and float(x["p"]) == pytest.approx(ref.pvalue, rel=5e-4)
    lines = r.stderr.strip().splitlines()
    assert lines[-2].endswith("pairs differ at alpha 0.05 (ppi, holm)") and lines[-1].endswith("(t, holm)")


def test_llm_labels_with_a_labelled_file_and_few_queries(run_cli, tmp_path):
    h, l_, paths = _synthetic(tmp_path, nq=12, runs=3)
    lab = tmp_path / "lab.txt"
    lab.write_text("q0\nq1\nq2\nq3\nq4\n")
    r = run_cli("exam-correlate", "compare", h, l_, *paths, "--labelled", lab, "--methods", "ppi_tuned")
    assert r.returncode == 0, r.stderr
    rows = _table(r.stdout)
    assert {x["method"] for x in rows} == {"ppi_tuned"} and len(rows) == 3
    warnings = [line for line in r.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "only 5 labelled queries" in warnings[0]
    # every query labelled: PPI has nothing to add, said, and the human test still runs
    every = tmp_path / "every.txt"
    every.write_text("".join(f"q{i}\n" for i in range(12)))
    r = run_cli("exam-correlate", "compare", h, l_, *paths, "--labelled", every, "--methods", "ppi,t")
    assert r.returncode == 0 and "PPI needs at least 2" in r.stderr
    assert {x["method"] for x in _table(r.stdout)} == {"t"}


# ----------------------------------------------------------------------------- refusals

def test_bad_input_is_one_line_exit_2_and_no_output(run_cli, tmp_path):
    h, l_, paths = _synthetic(tmp_path)
    out, png = tmp_path / "out.tsv", tmp_path / "out.png"
    outputs = ("-o", out, "--plot", png)

    def refused(*args, code=2):
        res = run_cli("exam-correlate", "compare", *args, *outputs)
        line = one_line_refusal(res, "exam-correlate", code)
        assert not out.exists() and not png.exists()
        return line

    assert refused(h, paths[0]) == f"exam-correlate: {paths[0]}: compare needs at least 2 runs, got 1"
    other = tmp_path / "other.run"
    other.write_text("q9 Q0 d1 1 1.0 o\n")
    disjoint = tmp_path / "disjoint.run"
    disjoint.write_text("q5 Q0 d1 1 1.0 x\n")
    half = tmp_path / "half.run"
    half.write_text("q0 Q0 d1 1 1.0 x\n")
    assert refused(h, paths[0], other).startswith(f"exam-correlate: {other}: run other has none of the 8 queries")
    assert refused(h, half, disjoint) == (f"exam-correlate: {disjoint}: no judged query in common with {half}: "
                                          "the two runs cannot be compared")
    assert refused(h, *paths, "--baseline", "nope").startswith("exam-correlate: --baseline: 'nope' is not one of")
    lab = tmp_path / "lab.txt"
    lab.write_text("q0\nq1\nq99\n")
    assert refused(h, l_, *paths, "--labelled", lab) == f"exam-correlate: {lab}:3: query q99 is not judged in {h}"
    lab.write_text("q0\n")
    assert "1 labelled query (q0)" in refused(h, l_, *paths, "--labelled", lab)
    assert refused(h, l_, *paths, "--n-labelled", "1") == "exam-correlate: --n-labelled: must be at least 2, got 1"
    for alpha in ("0", "1", "1.5", "-0.1"):
        assert refused(h, *paths, "--alpha", alpha).startswith("exam-correlate: --alpha: must be between 0 and 1")
    bad = tmp_path / "bad.run"
    bad.write_text("q1 Q0 d1 1 0.5 r\nq1 Q0 d2 2 nan r\n")
    assert refused(h, paths[0], bad).startswith(f"exam-correlate: {bad}:2:")


def test_options_that_change_nothing_are_usage_errors(run_cli, tmp_path):
    h, l_, paths = _synthetic(tmp_path)
    for args, flag in (((h, *paths, "--methods", "ppi"), "--methods"), ((h, *paths, "--mapping", "identity"),
                                                                          "--mapping"),
                       ((h, *paths, "--samples", "5000"), "--samples"), ((h, *paths, "--model", "m"), "--model"),
                       ((h, l_, *paths, "--n-labelled", "5", "--test", "t"), "--test"),
                       ((h, *paths, "-l", "2"), "--rel-level")):
        line = one_line_refusal(run_cli("exam-correlate", "compare", *args), "exam-correlate", 1)
        assert line.startswith(f"exam-correlate: {flag} "), line
    line = last_line_refusal(run_cli("exam-correlate", "compare", h, l_, *paths, "--n-labelled", "5",
                                     "--methods", "ppi,bogus"), "exam-correlate", 1)
    assert "unknown method(s) bogus" in line
    r = run_cli("exam-correlate", "compare", h, *paths, "--test", "randomization", "--samples", "5000")
    assert r.returncode == 0, r.stderr


def test_help_does_not_import_matplotlib():
    import subprocess
    import sys
    code = ("import sys, exam_eval.commands.correlate as m\n"
            "try:\n    m.main(['compare', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(k for k in ('torch', 'transformers', 'matplotlib') if k in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip().endswith("[]") and "Usage:" in r.stdout, r.stdout + r.stderr
