"""exam-qrels as trec_eval: values checked against pytrec_eval called directly with
trec_eval's own options, and against the official DL19 scores."""

from __future__ import annotations

import math
import random
import re

import pytest
import pytrec_eval

from exam_eval.io.leaderboard import read_leaderboard
from exam_eval.trec_eval.trec_files import read_qrels, read_run

LINE = re.compile(r"^(\S+)\s*\t(\S+)\t(\S+)$")


def parse_output(text: str) -> dict[tuple[str, str], str]:
    out = {}
    for line in text.splitlines():
        m = LINE.match(line)
        assert m, f"not a trec_eval line: {line!r}"
        out[(m.group(1), m.group(2))] = m.group(3)
    return out


def random_case(seed: int):
    rnd = random.Random(seed)
    qrels, run = {}, {}
    for _ in range(rnd.randint(3, 9)):
        qid = f"q{rnd.randint(1, 40)}"
        docs = [f"d{rnd.randint(1, 60)}" for _ in range(rnd.randint(1, 25))]
        qrels[qid] = {d: rnd.choice([-1, 0, 0, 1, 2, 3]) for d in docs}
    # the run covers some qrels queries, misses others, adds unjudged queries
    for qid in list(qrels)[: max(1, len(qrels) - 2)] + ["q99"]:
        docs = {f"d{rnd.randint(1, 80)}" for _ in range(rnd.randint(1, 30))}
        # few distinct scores, so ties are common
        run[qid] = {d: float(rnd.randint(0, 5)) for d in docs}
    return qrels, run


def write_case(tmp_path, qrels, run):
    qp, rp = tmp_path / "q.txt", tmp_path / "r.txt"
    qp.write_text("".join(f"{q} 0 {d} {l}\n" for q in qrels for d, l in qrels[q].items()))
    rp.write_text("".join(f"{q} Q0 {d} 0 {s} tag\n" for q in run for d, s in run[q].items()))
    return qp, rp


def trec_order(docs: dict[str, float]) -> list[str]:
    # written here independently of exam_eval.trec_eval.trec_files.ranked
    return [d for s, d in sorted(((s, d) for d, s in docs.items()), reverse=True)]


MEASURES = ["map", "P.5,10", "ndcg_cut.5,10", "recall.10", "Rprec", "recip_rank", "bpref",
            "success.1,5", "num_ret", "num_rel", "num_rel_ret", "ndcg", "map_cut.10"]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("opts", [(), ("-l", "2"), ("-M", "4"), ("-J",), ("-c",), ("-J", "-M", "6", "-c", "-l", "2")])
def test_per_query_and_summary_match_pytrec_eval(tmp_path, run_cli, seed, opts):
    qrels, run = random_case(seed)
    qp, rp = write_case(tmp_path, qrels, run)
    args = ["-q"] + [a for m in MEASURES for a in ("-m", m)] + list(opts) + [qp, rp]
    res = run_cli("exam-qrels", *args)
    assert res.returncode == 0, res.stderr
    got = parse_output(res.stdout)

    level = int(opts[opts.index("-l") + 1]) if "-l" in opts else 1
    judged = "-J" in opts
    run_used = run
    if "-M" in opts:
        m = int(opts[opts.index("-M") + 1])
        run_used = {q: {d: docs[d] for d in trec_order(docs)[:m]} for q, docs in run.items()}
    expected = pytrec_eval.RelevanceEvaluator(
        qrels, set(MEASURES), relevance_level=level, judged_docs_only_flag=judged).evaluate(run_used)
    evaluated = sorted(set(qrels) & set(run))
    assert sorted(expected) == evaluated
    for qid in evaluated:
        for name, value in expected[qid].items():
            if name in ("num_ret", "num_rel", "num_rel_ret"):
                assert got[(name, qid)] == str(int(value))
            else:
                assert got[(name, qid)] == "%6.4f" % value, (name, qid)
    # the 'all' line: mean over evaluated queries, or over every qrels query with -c
    divisor = len(qrels) if "-c" in opts else len(evaluated)
    for name in ("map", "P_5", "ndcg_cut_10", "recip_rank"):
        mean = sum(expected[q][name] for q in evaluated) / divisor
        assert got[(name, "all")] == "%6.4f" % mean
    assert got[("num_rel_ret", "all")] == str(int(sum(expected[q]["num_rel_ret"] for q in evaluated)))
    # per-query lines come query by query, in lexicographic qid order
    qids = [k[1] for k in got if k[1] != "all"]
    assert qids == sorted(qids)


def test_output_bytes_and_measure_order(tmp_path, run_cli):
    qrels = {"1": {"a": 1, "b": 0}, "2": {"c": 2}}
    run = {"1": {"a": 2.0, "b": 1.0}, "2": {"c": 1.0}}
    qp, rp = write_case(tmp_path, qrels, run)
    # -m order is ignored: trec_eval prints in its table order (num_ret before map before P)
    res = run_cli("exam-qrels", "-m", "P.1", "-m", "map", "-m", "num_ret", qp, rp)
    assert res.returncode == 0, res.stderr
    assert res.stdout == ("num_ret               \tall\t3\n"
                          "map                   \tall\t1.0000\n"
                          "P_1                   \tall\t1.0000\n")


def test_first_parameters_win_like_trec_eval(tmp_path, run_cli):
    qp, rp = write_case(tmp_path, {"1": {"a": 1}}, {"1": {"a": 1.0}})
    res = run_cli("exam-qrels", "-m", "official", "-m", "P.5", "-m", "P.10", qp, rp)
    assert res.returncode == 0
    names = [line.split()[0] for line in res.stdout.splitlines()]
    assert "P_5" in names and "P_10" not in names and "P_30" not in names
    assert names[0] == "runid" and res.stdout.splitlines()[0].endswith("\ttag")
    assert "ignoring" in res.stderr


def test_level_below_one_relabels_binary_measures(tmp_path, run_cli):
    # with -l 0 a judged label-0 document is relevant; pytrec_eval refuses this level
    qp, rp = write_case(tmp_path, {"1": {"a": 0, "b": 1, "c": -1}}, {"1": {"a": 3.0, "b": 2.0, "c": 1.0}})
    res = run_cli("exam-qrels", "-l", "0", "-m", "P.3", "-m", "num_rel", "-m", "ndcg", qp, rp)
    assert res.returncode == 0, res.stderr
    got = parse_output(res.stdout)
    assert got[("P_3", "all")] == "%6.4f" % (2 / 3)       # a and b, not c (-1 < 0)
    assert got[("num_rel", "all")] == "2"
    # nDCG keeps raw labels: only b has gain, at rank 2
    assert got[("ndcg", "all")] == "%6.4f" % (1 / math.log2(3))


def test_gm_map_with_missing_queries(tmp_path, run_cli):
    qrels = {"1": {"a": 1}, "2": {"b": 1}, "3": {"c": 1}}
    run = {"1": {"x": 2.0, "a": 1.0}, "2": {"b": 1.0}}
    qp, rp = write_case(tmp_path, qrels, run)
    res = run_cli("exam-qrels", "-c", "-m", "gm_map", "-m", "num_q", qp, rp)
    got = parse_output(res.stdout)
    # trec_eval: exp(mean of log(max(ap, 1e-5))), a missing query adding log(1e-5)
    expected = math.exp((math.log(0.5) + math.log(1.0) + math.log(1e-5)) / 3)
    assert got[("gm_map", "all")] == "%6.4f" % expected
    assert got[("num_q", "all")] == "3"


@pytest.mark.shared
def test_dl19_ndcg_cut_10_equals_official(shared_data, run_cli):
    d = shared_data / "dl19"
    runs = sorted((d / "runs").glob("*.run"))
    assert len(runs) == 37
    res = run_cli("exam-qrels", "-c", "-m", "ndcg_cut.10", d / "qrels.txt", *runs)
    assert res.returncode == 0, res.stderr
    ours = [line.split("\t") for line in res.stdout.splitlines()]
    assert ours[0] == ["run", "ndcg_cut_10"]
    official = read_leaderboard(d / "official.tsv").column("ndcg_cut_10")
    assert len(ours) == 38
    for name, value in ours[1:]:
        assert abs(float(value) - official[name]) <= 1e-4, name


@pytest.mark.shared
def test_dl19_single_run_is_trec_eval_drop_in(shared_data, run_cli):
    d = shared_data / "dl19"
    run_path = d / "runs" / "idst_bert_p1.run"
    res = run_cli("exam-qrels", "-c", "-m", "ndcg_cut.10", "-m", "recip_rank", "-m", "P.10", d / "qrels.txt", run_path)
    got = parse_output(res.stdout)
    qrels, run = read_qrels(d / "qrels.txt"), read_run(run_path)
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recip_rank", "P.10"}).evaluate(run)
    for name in ("ndcg_cut_10", "recip_rank", "P_10"):
        mean = sum(v[name] for v in ev.values()) / len(qrels)
        assert got[(name, "all")] == "%6.4f" % mean
    official = read_leaderboard(d / "official.tsv").rows["idst_bert_p1"]
    assert abs(float(got[("recip_rank", "all")]) - official["recip_rank"]) < 1e-4
    assert abs(float(got[("P_10", "all")]) - official["P_10"]) < 1e-4
