"""Rndcg under -l below 1 on a query whose best label is 0 (issue 41): trec_eval counts
the 0-labelled documents in R there, which pytrec_eval (level >= 1 only) cannot; exam-qrels
computes it from m_Rndcg.c (trec_eval/gain_measures.py). Held byte for byte to the real binary,
and to bytes recorded from it where the binary cannot be built."""

from __future__ import annotations

import random
import subprocess

import pytest

from exam_eval.trec_eval.gain_measures import rndcg
from exam_eval.trec_eval.evaluate import _float

# query 1: best label 0; 2: graded; 3: 0 and a negative label; 4: negative labels only,
# after labelled queries (trec_eval scores it, see WHERE TREC_EVAL CRASHES)
QRELS = """1 0 a 0
1 0 b 0
1 0 c 0
2 0 a 2
2 0 b 0
2 0 d 1
3 0 a 0
3 0 e -1
4 0 a -1
"""
RUN = """1 Q0 a 1 3.0 t
1 Q0 b 2 2.0 t
1 Q0 z 3 1.0 t
2 Q0 a 1 1.0 t
2 Q0 d 2 2.0 t
3 Q0 e 1 3.0 t
3 Q0 y 2 2.0 t
3 Q0 a 3 1.0 t
4 Q0 a 1 1.0 t
"""

FLAG_SETS = [
    ["-q", "-l", "0", "-m", "all_trec"],
    ["-q", "-l", "0", "-m", "Rndcg"],
    ["-q", "-l", "0", "-m", "Rndcg", "-m", "ndcg", "-m", "official"],
    ["-q", "-l", "0", "-m", "Rndcg.0=2"],
    # gains less than 1 apart compare equal in m_Rndcg.c's int comparator: the order
    # given decides which is on top (-nan one way, a value the other)
    ["-q", "-l", "0", "-m", "Rndcg.0=0.5,3=-0.3"],
    ["-q", "-l", "0", "-m", "Rndcg.3=-0.3,0=0.5"],
    ["-q", "-l", "0", "-m", "Rndcg.-1=3,0=1"],       # a gain for documents the qrels lack
    ["-q", "-l", "0", "-m", "Rndcg.-2=2,0=1,5=4"],
    ["-q", "-l", "0", "-J", "-m", "Rndcg.0=2"],
    ["-q", "-l", "0", "-M", "1", "-m", "Rndcg.0=2,1=5"],
    ["-q", "-l", "0", "-M", "0", "-m", "Rndcg.0=2"],
    ["-l", "0", "-c", "-m", "Rndcg.0=2", "-m", "ndcg"],
    ["-q", "-n", "-l", "0", "-m", "set", "-m", "Rndcg"],
]


def _files(tmp_path, qrels=QRELS, run=RUN):
    qp, rp = tmp_path / "q.txt", tmp_path / "r.txt"
    qp.write_text(qrels)
    rp.write_text(run)
    return str(qp), str(rp)


@pytest.mark.parametrize("flags", FLAG_SETS, ids=" ".join)
def test_rndcg_at_level_zero_matches_trec_eval(tmp_path, run_cli, trec_eval_binary, flags):
    qp, rp = _files(tmp_path)
    want = subprocess.run([str(trec_eval_binary), *flags, qp, rp], capture_output=True, text=True)
    assert want.returncode == 0, want.stderr
    got = run_cli("exam-qrels", *flags, qp, rp)
    assert got.returncode == 0, got.stderr
    assert got.stdout == want.stdout


def test_rndcg_at_level_zero_recorded(tmp_path, run_cli):
    # trec_eval 9.0.8's bytes for this input (recorded from the binary): with level 0's
    # gain left at 0, no ideal gain is positive and Rndcg is 0/0 (-nan); trec_eval keeps
    # the first parameters given, so -m Rndcg prints as Rndcg_0=0.5,3=-0.3
    qp, rp = _files(tmp_path)
    got = run_cli("exam-qrels", "-q", "-l", "0", "-m", "Rndcg", "-m", "Rndcg.0=0.5,3=-0.3", qp, rp)
    assert got.returncode == 0, got.stderr
    assert got.stdout == ("Rndcg_0=0.5,3=-0.3    \t1\t  -nan\n"
                          "Rndcg_0=0.5,3=-0.3    \t2\t0.7149\n"
                          "Rndcg_0=0.5,3=-0.3    \t3\t  -nan\n"
                          "Rndcg_0=0.5,3=-0.3    \t4\t0.0000\n"
                          "Rndcg_0=0.5,3=-0.3    \tall\t  -nan\n")
    got = run_cli("exam-qrels", "-q", "-l", "0", "-m", "Rndcg.0=2", qp, rp)
    assert got.stdout == ("Rndcg_0=2             \t1\t0.7654\n"
                          "Rndcg_0=2             \t2\t0.6473\n"
                          "Rndcg_0=2             \t3\t0.2500\n"
                          "Rndcg_0=2             \t4\t0.0000\n"
                          "Rndcg_0=2             \tall\t0.4157\n")


def _random_query(rnd: random.Random):
    top = rnd.choice([0, 0, 1, 2, 3])
    labels = {f"d{i}": rnd.randint(-1, top) for i in rnd.sample(range(12), rnd.randint(1, 8))}
    labels["d0x"] = 0 if max(labels.values()) < 0 else labels.get("d0x", 0)
    docs = {f"d{i}": float(rnd.randint(0, 5)) for i in rnd.sample(range(14), rnd.randint(1, 10))}
    gains = ",".join(f"{rnd.randint(-2, 4)}={rnd.choice([0, 1, 2, 0.5, -0.3, 1.7, -2, 3.2])}"
                     for _ in range(rnd.randint(0, 3)))
    return labels, docs, gains or None


def test_rndcg_port_matches_trec_eval_on_random_queries(tmp_path, trec_eval_binary):
    # the port on every kind of query (graded ones too, which pytrec_eval scores in
    # exam-qrels), so that its loops are held to m_Rndcg.c beyond the level-0 case
    rnd = random.Random(41)
    for case in range(60):
        queries = {f"q{k}": _random_query(rnd) for k in range(3)}
        level = rnd.choice([0, 0, 1, 2])
        judged_only = rnd.random() < 0.2
        raw = queries["q0"][2]   # trec_eval takes one parameter string per measure
        qp, rp = _files(tmp_path,
                        "".join(f"{q} 0 {d} {lab}\n" for q, (labels, _, _) in queries.items()
                                for d, lab in labels.items()),
                        "".join(f"{q} Q0 {d} 1 {s} t\n" for q, (_, docs, _) in queries.items()
                                for d, s in docs.items()))
        args = [str(trec_eval_binary), "-q", "-l", str(level)] + (["-J"] if judged_only else [])
        out = subprocess.run(args + ["-m", "Rndcg" + (f".{raw}" if raw else ""), qp, rp],
                             capture_output=True, text=True, check=True).stdout
        want = {line.split("\t")[1]: line.split("\t")[2] for line in out.splitlines()}
        for q, (labels, docs, _) in queries.items():
            got = _float(rndcg(labels, docs, raw, level, judged_only))
            assert got == want[q], (case, q, labels, docs, raw, level, judged_only)
