"""exam-correlate leaderboard / qrels as an AutoJudge organizer runs them: several judges'
leaderboards in tot / ir_measures / trec_eval shapes, per-topic correlation, shared
topics, predicted vs truth qrels; values against scipy / sklearn / krippendorff on the
same files; exit codes and located errors."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest
from scipy import stats

from tests.io.test_leaderboard_formats import MEASURES, _values, write_shapes

KEYS = ["spearman", "kendall_tau_b", "kendall_tau_a", "tau_ap", "tau_ap_b", "tau_gap", "pearson"]


def _table(text):
    return list(csv.DictReader(io.StringIO(text), delimiter="\t"))


def _write_tot(path, per, with_all=True):
    lines = []
    for m, runs in per.items():
        for r, topics in runs.items():
            for t, v in topics.items():
                lines.append(f"{r} {m} {t} {v!r}")
            if with_all:
                lines.append(f"{r} {m} all {float(np.mean(list(topics.values())))!r}")
    path.write_text("\n".join(lines) + "\n")


def _judge(per, seed, noise=0.3):
    """A judge's per-topic values: truth plus noise, rounded (ties)."""
    rng = np.random.default_rng(100 + seed)
    return {m: {r: {t: float(np.round(v + rng.normal(scale=noise), 1)) for t, v in topics.items()}
                for r, topics in runs.items()} for m, runs in per.items()}


def _agg(per, m):
    return {r: float(np.mean(list(t.values()))) for r, t in per[m].items()}


@pytest.mark.parametrize("seed", range(3))
def test_judges_in_every_shape_give_the_same_table(run_cli, tmp_path, seed):
    paths, (run_ids, topic_ids, per) = write_shapes(tmp_path, seed)
    judge = _judge(per, seed)
    jpath = tmp_path / "judge.tot"
    _write_tot(jpath, judge)
    outs = {}
    for shape in ("tot", "ir_measures", "trec_eval", "ir_measures_cli", "tsv"):
        r = run_cli("exam-correlate", "leaderboard", paths[shape], jpath, "--truth-measure", "ndcg_cut_10",
                    "--pred-measure", "ndcg_cut_10", "--pred-measure", "map", "-k", "3", "-k", "5")
        assert r.returncode == 0, r.stderr
        outs[shape] = rows = _table(r.stdout)
        assert [(x["truth_measure"], x["pred_measure"]) for x in rows] == [("ndcg_cut_10", "ndcg_cut_10"),
                                                                          ("ndcg_cut_10", "map")]
    # trec_eval rounds per-topic values to 4 places, but its 'all' rows are what is read
    assert all(outs[s] == outs["tot"] for s in outs), {s: outs[s][0] for s in outs}
    truth = _agg(per, "ndcg_cut_10")
    for row, pm in zip(outs["tot"], ("ndcg_cut_10", "map")):
        pred = _agg(judge, pm)
        x = np.array([truth[r] for r in sorted(run_ids)])
        y = np.array([pred[r] for r in sorted(run_ids)])
        assert float(row["kendall_tau_b"]) == pytest.approx(stats.kendalltau(x, y).statistic, abs=5e-5)
        assert float(row["spearman"]) == pytest.approx(stats.spearmanr(x, y).statistic, abs=5e-5)
        for k in (3, 5):
            top = sorted(run_ids, key=lambda r: -truth[r])[:k]  # truth file order = run_ids order
            expected = stats.kendalltau([truth[r] for r in top], [pred[r] for r in top]).statistic
            assert row[f"kendall@{k}"] == ("nan" if math.isnan(expected) else f"{expected:.4f}")
        assert row["n"] == str(len(run_ids))


def test_several_judges_all_measures(run_cli, tmp_path):
    _, _, per = _values(7)
    truth = tmp_path / "truth.tot"
    _write_tot(truth, per)
    judges = []
    for j in range(3):
        p = tmp_path / f"judge{j}.tot"
        _write_tot(p, _judge(per, j, noise=0.1 * (j + 1)))
        judges.append(p)
    r = run_cli("exam-correlate", "leaderboard", truth, *judges)
    assert r.returncode == 0, r.stderr
    rows = _table(r.stdout)
    assert len(rows) == 3 * len(MEASURES) ** 2
    assert [x["pred"] for x in rows[:4]] == [str(judges[0])] * 4
    assert list(rows[0]) == ["pred", "truth_measure", "pred_measure", *KEYS, "kendall@10", "n"]


def test_per_topic_rankings_and_their_mean(run_cli, tmp_path):
    _, topic_ids, per = _values(3, runs=8, topics=4)
    judge = _judge(per, 3)
    t, p = tmp_path / "t.tot", tmp_path / "p.tot"
    _write_tot(t, per)
    _write_tot(p, judge)
    r = run_cli("exam-correlate", "leaderboard", t, p, "--truth-measure", "map", "--pred-measure", "map",
                "--per-topic")
    assert r.returncode == 0, r.stderr
    rows = _table(r.stdout)
    assert [x["topic"] for x in rows] == sorted(topic_ids) + ["mean"]
    taus = []
    for row in rows[:-1]:
        runs = sorted(per["map"])
        x = [per["map"][run][row["topic"]] for run in runs]
        y = [judge["map"][run][row["topic"]] for run in runs]
        tau = stats.kendalltau(x, y).statistic
        assert row["kendall_tau_b"] == ("nan" if math.isnan(tau) else f"{tau:.4f}")
        if not math.isnan(tau):
            taus.append(tau)
    assert float(rows[-1]["kendall_tau_b"]) == pytest.approx(np.mean(taus), abs=5e-5)
    assert rows[-1]["n"] == str(len(topic_ids))


def test_shared_topics_and_recomputed_means(run_cli, tmp_path):
    _, topic_ids, per = _values(4, runs=7, topics=6)
    judge = _judge(per, 4)
    for m in judge:  # the judge covers only the first 4 topics
        for run in judge[m]:
            judge[m][run] = {t: v for t, v in judge[m][run].items() if t in topic_ids[:4]}
    t, p = tmp_path / "t.tot", tmp_path / "p.tot"
    _write_tot(t, per)
    _write_tot(p, judge)
    r = run_cli("exam-correlate", "leaderboard", t, p, "--truth-measure", "map", "--pred-measure", "map",
                "--shared-topics")
    assert r.returncode == 0, r.stderr
    out = dict(line.split("\t") for line in r.stdout.strip().splitlines())
    runs = sorted(per["map"])
    x = [np.mean([per["map"][run][q] for q in topic_ids[:4]]) for run in runs]
    y = [np.mean(list(judge["map"][run].values())) for run in runs]
    assert float(out["kendall_tau_b"]) == pytest.approx(stats.kendalltau(x, y).statistic, abs=5e-5)
    assert "4 topic(s) in both" in r.stderr
    # without it, the truth's own 'all' rows (all 6 topics)
    r2 = run_cli("exam-correlate", "leaderboard", t, p, "--truth-measure", "map", "--pred-measure", "map")
    out2 = dict(line.split("\t") for line in r2.stdout.strip().splitlines())
    x6 = [np.mean(list(per["map"][run].values())) for run in runs]
    assert float(out2["kendall_tau_b"]) == pytest.approx(stats.kendalltau(x6, y).statistic, abs=5e-5)


def test_spot_check_leaderboard_against_itself(run_cli, shared_data):
    board = shared_data / "autojudge-spot-check" / "trec-leaderboard.txt"
    r = run_cli("exam-correlate", "leaderboard", board, board, "--truth-measure", "Measure-01",
                "--pred-measure", "Measure-02")
    assert r.returncode == 0, r.stderr
    out = dict(line.split("\t") for line in r.stdout.strip().splitlines())
    # Measure-02 orders the three runs exactly the other way round
    assert out["kendall_tau_b"] == "-1.0000" and out["tau_ap_b"] == "-1.0000" and out["n"] == "3"
    assert "tot leaderboard, 3 run(s)" in r.stderr


def test_leaderboard_usage_and_input_errors(run_cli, tmp_path):
    paths, _ = write_shapes(tmp_path, 1)
    tot, tsv = paths["tot"], paths["tsv"]
    r = run_cli("exam-correlate", "leaderboard", tot, tot, "-k", "2")
    assert r.returncode == 1 and "--top-k must be at least 3" in r.stderr
    r = run_cli("exam-correlate", "leaderboard", tsv, tot, "--per-topic")
    assert r.returncode == 1 and "per-topic values" in r.stderr
    r = run_cli("exam-correlate", "leaderboard", tot, tot, tot, "--plot", tmp_path / "x.png")
    assert r.returncode == 1 and "--plot draws one leaderboard pair" in r.stderr
    r = run_cli("exam-correlate", "leaderboard", tot, tot, "--pred-measure", "P_5")
    assert r.returncode == 1 and "no column 'P_5'" in r.stderr
    bad = tmp_path / "bad.tot"
    bad.write_text("A m 1 0.5\nA m all 0.5\nB m 1 x\n")
    out = tmp_path / "out.tsv"
    r = run_cli("exam-correlate", "leaderboard", tot, bad, "--pred-format", "tot", "-o", out)
    assert r.returncode == 2 and f"{bad}:3: value 'x' is not a number" in r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
    amb = tmp_path / "amb.txt"
    amb.write_text("A x y 0.5\nB x y 0.25\n")
    r = run_cli("exam-correlate", "leaderboard", tot, amb)
    assert r.returncode == 2 and "--truth-format/--pred-format" in r.stderr


# --------------------------------------------------------------------------- qrels

def _qrels(path, q):
    path.write_text("".join(f"{t} 0 {d} {g}\n" for t, docs in q.items() for d, g in docs.items()))


@pytest.mark.parametrize("seed", range(3))
def test_qrels_subcommand_equals_sklearn_and_krippendorff(run_cli, tmp_path, seed):
    from sklearn.metrics import cohen_kappa_score, precision_recall_fscore_support
    import krippendorff

    rng = np.random.default_rng(seed)
    truth, pred = {}, {}
    for t in range(4):
        for d in range(30):
            if rng.random() < 0.8:
                truth.setdefault(f"t{t}", {})[f"d{d}"] = int(rng.integers(0, 4))
            if rng.random() < 0.6:
                pred.setdefault(f"t{t}", {})[f"d{d}"] = int(rng.integers(0, 4))
    tp_, pp_ = tmp_path / "truth.qrels", tmp_path / "pred.qrels"
    _qrels(tp_, truth)
    _qrels(pp_, pred)
    r = run_cli("exam-correlate", "qrels", tp_, pp_, "--truth-max", "3", "--pred-max", "3",
                "--truth-min", "2", "--pred-min", "2")
    assert r.returncode == 0, r.stderr
    rows = {x["topic"]: x for x in _table(r.stdout)}
    assert list(rows) == ["t0", "t1", "t2", "t3", "mean", "pooled"]
    alphas = []
    for q in ["t0", "t1", "t2", "t3"]:
        docs = sorted(set(truth[q]) | set(pred[q]))
        t = np.array([truth[q].get(d, 0) for d in docs])
        p = np.array([pred[q].get(d, 0) for d in docs])
        prec, rec, f1, _ = precision_recall_fscore_support(t >= 2, p >= 2, average="binary", zero_division=0)
        row = rows[q]
        assert (row["precision"], row["recall"], row["f1"]) == (f"{prec:.4f}", f"{rec:.4f}", f"{f1:.4f}")
        assert row["kappa@2v2"] == f"{cohen_kappa_score(t >= 2, p >= 2):.4f}"
        assert row["kappa_w"] == f"{cohen_kappa_score(t, p, weights='linear', labels=[0, 1, 2, 3]):.4f}"
        alpha = krippendorff.alpha(reliability_data=np.vstack([t, p]), level_of_measurement="ordinal")
        assert row["kripp_alpha"] == f"{alpha:.4f}"
        alphas.append(alpha)
    assert float(rows["mean"]["kripp_alpha"]) == pytest.approx(np.mean(alphas), abs=5e-5)
    assert rows["mean"]["tp"] == ""
    assert int(rows["pooled"]["tp"]) == sum(int(rows[q]["tp"]) for q in ["t0", "t1", "t2", "t3"])
    r = run_cli("exam-correlate", "qrels", tp_, pp_, "-n")
    assert [x["topic"] for x in _table(r.stdout)] == ["mean", "pooled"]


def test_qrels_topics_policy_and_errors(run_cli, tmp_path):
    t, p = tmp_path / "t.qrels", tmp_path / "p.qrels"
    t.write_text("1 0 a 1\n1 0 b 0\n2 0 a 1\n")
    p.write_text("1 0 a 1\n1 0 c 1\n3 0 z 1\n")
    r = run_cli("exam-correlate", "qrels", t, p)
    assert r.returncode == 0, r.stderr
    rows = {x["topic"]: x for x in _table(r.stdout)}
    assert set(rows) == {"1", "2", "3", "mean", "pooled"}
    assert rows["2"]["recall"] == "0.0000" and rows["3"]["precision"] == "0.0000"  # the other side is empty
    assert "only in" in r.stderr
    r = run_cli("exam-correlate", "qrels", t, p, "--topics", "shared")
    assert {x["topic"] for x in _table(r.stdout)} == {"1", "mean", "pooled"}
    # topic 1: a in both, c only predicted, b judged not relevant
    one = {x["topic"]: x for x in _table(r.stdout)}["1"]
    assert (one["tp"], one["fp"], one["fn"], one["jaccard"]) == ("1", "1", "0", "0.5000")
    r = run_cli("exam-correlate", "qrels", t, p, "--truth-min", "2")
    assert r.returncode == 1 and "--truth-min must be between 1 and --truth-max" in r.stderr
    bad = tmp_path / "bad.qrels"
    bad.write_text("1 0 a 1\n1 0 b x\n")
    out = tmp_path / "o.tsv"
    r = run_cli("exam-correlate", "qrels", t, bad, "-o", out)
    assert r.returncode == 2 and f"{bad}:2:" in r.stderr and not out.exists()
    r = run_cli("exam-correlate", "qrels", t, p, "--truth-max", "3", "--pred-max", "1")
    assert r.returncode == 0 and "kappa_w and kripp_alpha are nan" in r.stderr
    assert all(x["kripp_alpha"] == "nan" for x in _table(r.stdout))


def test_qrels_on_dl19_llm_labels(run_cli, shared_data):
    """The reference workbench's flan-t5 question self-ratings against NIST's labels."""
    from sklearn.metrics import cohen_kappa_score

    qrels = shared_data / "dl19" / "qrels.txt"
    llm = shared_data / "dl19" / "llm-qrels" / "QuestionSelfRatedUnanswerablePromptWithChoices.qrels"
    r = run_cli("exam-correlate", "qrels", qrels, llm, "--truth-max", "3", "--truth-min", "2",
                "--pred-max", "5", "--pred-min", "4", "-n")
    assert r.returncode == 0, r.stderr
    pooled = {x["topic"]: x for x in _table(r.stdout)}["pooled"]

    def read(path):
        out = {}
        for line in path.read_text().split("\n"):
            if line.strip():
                q, _, d, g = line.split()
                out[(q, d)] = int(g)
        return out

    h, l_ = read(qrels), read(llm)
    keys = sorted(set(h) | set(l_))
    t = np.clip([h.get(k, 0) for k in keys], 0, 3)
    p = np.clip([l_.get(k, 0) for k in keys], 0, 5)
    assert pooled["kappa@2v4"] == f"{cohen_kappa_score(t >= 2, p >= 4):.4f}"
    tp = int(np.sum((t >= 2) & (p >= 4)))
    assert pooled["tp"] == str(tp)
    assert float(pooled["recall"]) == pytest.approx(tp / np.sum(t >= 2), abs=5e-5)


def test_every_new_option_is_in_help_and_man_page():
    from pathlib import Path

    from exam_eval.commands.correlate import cli

    man = (Path(__file__).resolve().parents[2] / "man" / "exam-correlate.1").read_text().replace("\\-", "-")
    for name in ("leaderboard", "qrels"):
        for param in cli.commands[name].params:
            opts = [o for o in getattr(param, "opts", []) if o.startswith("-")]
            if opts:  # one of its spellings (the man page gives -o, not --output)
                assert any(o in man for o in opts), (name, opts)
        assert f".SS {name}" in man


def test_kendall_at_k_cut_off_ties_follow_truth_file_order_and_stdin(run_cli, tmp_path):
    # B and C tie for third place in the truth; B comes first in the file, so kendall@3
    # takes A, D, B (autojudge-evaluate's stable sort over the file's 'all' rows)
    truth = "A m all 0.9\nB m all 0.5\nC m all 0.5\nD m all 0.7\nE m all 0.1\n"
    pred = "A m all 0.2\nB m all 0.6\nC m all 0.1\nD m all 0.4\nE m all 0.3\n"
    t = tmp_path / "t.tot"
    t.write_text(truth)
    r = run_cli("exam-correlate", "leaderboard", t, "-", "-k", "3", input=pred)
    assert r.returncode == 0, r.stderr
    out = dict(line.split("\t") for line in r.stdout.strip().splitlines())
    expected = stats.kendalltau([0.9, 0.7, 0.5], [0.2, 0.4, 0.6]).statistic  # A, D, B
    assert out["kendall@3"] == f"{expected:.4f}" and "<stdin>: tot leaderboard" in r.stderr
    t.write_text("".join(sorted(truth.splitlines(True), key=lambda s: s[0] == "B")))  # C before B now
    r = run_cli("exam-correlate", "leaderboard", t, "-", "-k", "3", input=pred)
    out = dict(line.split("\t") for line in r.stdout.strip().splitlines())
    assert out["kendall@3"] == f"{stats.kendalltau([0.9, 0.7, 0.5], [0.2, 0.4, 0.1]).statistic:.4f}"


def test_qrels_truth_may_be_an_ir_datasets_id(run_cli, tmp_path):
    p = tmp_path / "p.qrels"
    p.write_text("1 0 a 1\n")
    r = run_cli("exam-correlate", "qrels", "no-such-collection/nothing", p)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "no-such-collection/nothing: not an existing file, and not a known ir_datasets ID" in r.stderr


def test_per_topic_leaves_out_aggregate_only_measures(run_cli, tmp_path):
    _, topic_ids, per = _values(9, runs=5, topics=3)
    t = tmp_path / "t.tot"
    _write_tot(t, {"map": per["map"]})
    with t.open("a") as f:  # gm_map-like: an 'all' row only
        for i, run in enumerate(per["map"]):
            f.write(f"{run} gm {'all'} {0.1 * i}\n")
    r = run_cli("exam-correlate", "leaderboard", t, t, "--per-topic", "--pred-measure", "map")
    assert r.returncode == 0, r.stderr
    rows = _table(r.stdout)
    assert {x["truth_measure"] for x in rows} == {"map"} and len(rows) == len(topic_ids) + 1
    assert "gm vs map: no topic has 3 systems in common (pair left out)" in r.stderr
    r = run_cli("exam-correlate", "leaderboard", t, t, "--per-topic", "--pred-measure", "gm", "--truth-measure", "gm")
    assert r.returncode == 2 and "no measure pair has a topic with 3 systems in common" in r.stderr
