"""exam-qrels -l below 0, held byte for byte to the real trec_eval 9.0.8 binary (issue 41,
item 2). At such a level trec_eval counts num_rel and num_rel_ret over documents judged
>= 0 only, but map, P, recall, Rprec, ... compare each ranked document's entry with the
level, and that entry is -1 for a document the qrels lack and -2 for one judged below 0
(level_measures.py). Fixed cases with -q, -m all_trec, -J, -M, -c at -1 and -2, then 200
random ones; all skip cleanly where the binary cannot be built.
"""

from __future__ import annotations

import random
import subprocess

import pytest

from parity_runner import verdict
from test_trec_eval_parity import run_batch

QRELS = """q1 0 a 2
q1 0 b 0
q1 0 c -1
q1 0 d 1
q1 0 e -2
q2 0 f 1
q2 0 g 0
q2 0 h -1
q3 0 k 0
q3 0 m 0
q4 0 n 3
"""
RUN = """q1 Q0 x 1 5 t
q1 Q0 a 2 4 t
q1 Q0 c 3 3 t
q1 Q0 y 4 3 t
q1 Q0 e 5 2 t
q1 Q0 b 6 1 t
q1 Q0 d 7 0.5 t
q2 Q0 h 1 2 t
q2 Q0 z 2 2 t
q2 Q0 f 3 1 t
q3 Q0 k 1 1 t
q3 Q0 w 2 0 t
q5 Q0 f 1 1 t
"""

FIXED = [flags + extra
         for level in ("-1", "-2")
         for flags in (["-l", level, "-m", "all_trec"], ["-q", "-l", level, "-m", "all_trec"])
         for extra in ([], ["-J"], ["-M", "3"], ["-c"], ["-c", "-J", "-M", "2"])] + [
    ["-q", "-l", "-1", "-m", "all_trec", "-m", "yaap", "-m", "relative_P.1,4,30", "-m", "success.1,2"],
    ["-q", "-l", "-2", "-c", "-m", "official", "-m", "map_cut.1,3,100", "-m", "Rprec_mult.0.2,1.5"],
    ["-l", "-3", "-m", "all_trec"],
    ["-q", "-l", "-1", "-n", "-m", "P.1,2", "-m", "recall.5"],
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("negative_level")
    qp, rp = tmp / "q.txt", tmp / "r.txt"
    qp.write_text(QRELS)
    rp.write_text(RUN)
    return qp, rp


def _binary(binary, args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), *args], capture_output=True, text=True)


def test_fixed_cases_match_the_binary(files, trec_eval_binary):
    qp, rp = files
    ours = run_batch([flags + [str(qp), str(rp)] for flags in FIXED])
    for flags, got in zip(FIXED, ours):
        want = _binary(trec_eval_binary, flags + [str(qp), str(rp)])
        assert want.returncode == 0 and want.stdout, (flags, want.stderr)
        assert verdict(want.returncode, want.stdout, want.stderr, got) is None, (flags, want.stdout, got)


MEASURES = ["map", "gm_map", "Rprec", "recip_rank", "iprec_at_recall", "P", "recall", "Rprec_mult", "11pt_avg",
            "binG", "map_cut", "relative_P", "success", "yaap", "bpref", "gm_bpref", "infAP", "num_rel",
            "num_rel_ret", "num_ret", "ndcg", "ndcg_cut", "Rndcg", "ndcg_rel", "G", "set_P", "set_recall",
            "set_F", "set_relative_P", "set_map", "utility", "11pt_avg.1,.5,0", "P.1,3,7", "recall.2,20",
            "map_cut.1,4", "relative_P.2,6", "success.1,3", "iprec_at_recall.0,.5,1", "Rprec_mult.0.5,2",
            "ndcg.0=1,1=2,2=5", "relstring.5", "runid", "num_q", "num_nonrel_judged_ret"]


def _case(rnd: random.Random) -> tuple[str, str, list[str]]:
    qrels, run = [], []
    pool = [f"d{i:02d}" for i in range(rnd.randint(4, 20))]
    queries = [f"q{i}" for i in range(rnd.randint(1, 5))]
    labelled = False
    for q in queries:
        if rnd.random() < 0.85:
            docs = rnd.sample(pool, rnd.randint(1, len(pool)))
            labels = [rnd.choice([-2, -1, -1, 0, 0, 0, 1, 1, 2, 3]) for _ in docs]
            # a query judged only below -1 after a labelled one makes trec_eval segfault, and
            # one without a label >= 0 before any labelled query makes it refuse: keep both out
            if max(labels) < 0:
                labels[0] = rnd.choice([0, 1]) if not labelled or max(labels) < -1 else labels[0]
            labelled = labelled or max(labels) >= 0
            qrels += [f"{q} 0 {d} {lab}\n" for d, lab in zip(docs, labels)]
        if rnd.random() < 0.9:
            for d in rnd.sample(pool, rnd.randint(1, len(pool))):
                run.append(f"{q} Q0 {d} 1 {rnd.choice([0, 1, 1.5, 2, 3, rnd.random()])} tag{rnd.randint(0, 2)}\n")
    if not qrels:
        qrels.append(f"{queries[0]} 0 {pool[0]} 1\n")
    flags = ["-l", str(rnd.choice([-1, -1, -2, -2, -3, -100]))]
    for flag, p in (("-q", 0.6), ("-J", 0.25), ("-c", 0.3), ("-n", 0.1)):
        if rnd.random() < p:
            flags.append(flag)
    if rnd.random() < 0.3:
        flags += ["-M", str(rnd.choice([0, 1, 2, 5]))]
    if rnd.random() < 0.3:
        flags += ["-m", "all_trec"]
    else:
        for m in rnd.sample(MEASURES, rnd.randint(1, 8)):
            flags += ["-m", m]
    rnd.shuffle(run)
    return "".join(qrels), "".join(run), flags


def test_random_cases_match_the_binary(tmp_path, trec_eval_binary):
    rnd = random.Random(4102)
    cases, jobs = [], []
    for i in range(200):
        qrels, run, flags = _case(rnd)
        qp, rp = tmp_path / f"{i}.q", tmp_path / f"{i}.r"
        qp.write_text(qrels)
        rp.write_text(run)
        cases.append((flags, qp, rp))
        jobs.append(flags + [str(qp), str(rp)])
    ours = run_batch(jobs)
    compared = 0
    for (flags, qp, rp), got in zip(cases, ours):
        want = _binary(trec_eval_binary, flags + [str(qp), str(rp)])
        problem = verdict(want.returncode, want.stdout, want.stderr, got)
        assert problem is None, (problem, flags, qp.read_text(), rp.read_text(), want.stdout, got)
        compared += want.returncode == 0 and want.stdout != ""
    assert compared >= 180, compared   # nearly all of them are byte comparisons
