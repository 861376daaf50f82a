"""Fresh random cases: exam-qrels against a real trec_eval 9.0.8 binary, byte for byte.

A trec_eval binary cannot be fetched offline (pytrec-eval-terrier's sdist downloads
trec_eval's sources at build time), so the comparison is opt-in: set
``EXAM_EVAL_TREC_EVAL=/path/to/trec_eval`` (built from usnistgov/trec_eval tag v9.0.8;
its ``-v`` prints 9.0.7). ``EXAM_EVAL_PARITY_CASES`` (default 500) and
``EXAM_EVAL_PARITY_SEED`` (default 12) choose the cases. The binary is first checked
against the recorded outputs in ../shared/data/trec_eval_parity when that is present.

Without the binary, the same random inputs still run through exam-qrels to check what
holds whatever trec_eval prints: never a signal, never a traceback, exit 0 or 2.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from parity_runner import verdict
from test_trec_eval_parity import run_batch

BINARY = os.environ.get("EXAM_EVAL_TREC_EVAL")
N_CASES = int(os.environ.get("EXAM_EVAL_PARITY_CASES", "500"))
SEED = int(os.environ.get("EXAM_EVAL_PARITY_SEED", "12"))

QIDS = ["1", "2", "9", "10", "007", "100", "1000", "3a", "Q_2", "q1"]
MEASURE_SETS = [[], ["-m", "official"], ["-m", "all_trec"], ["-m", "set"], ["-m", "map", "-m", "P.10"],
                ["-m", "ndcg"], ["-m", "ndcg_cut.5,10", "-m", "P.1,5,1000"], ["-m", "iprec_at_recall"],
                ["-m", "Rndcg", "-m", "infAP", "-m", "bpref", "-m", "gm_map", "-m", "gm_bpref"],
                ["-m", "relative_P.5", "-m", "num_nonrel_judged_ret", "-m", "binG", "-m", "G"],
                ["-m", "set_F", "-m", "set_P", "-m", "ndcg_rel", "-m", "Rprec_mult", "-m", "11pt_avg"],
                ["-m", "recall.3", "-m", "success.1,5", "-m", "map_cut.10"], ["-m", "relstring", "-m", "utility"]]


def docno(rnd: random.Random) -> str:
    n = rnd.randint(0, 60)
    kind = rnd.random()
    if kind < 0.3:
        return str(n)                                   # numeric-looking
    if kind < 0.55:
        return f"d{n}"
    if kind < 0.75:
        return "D" + str(rnd.randint(0, 9)) * rnd.randint(1, 4)
    return "doc-" + "x" * rnd.randint(1, 40) + str(rnd.randint(0, 5))   # long


def score(rnd: random.Random) -> str:
    kind = rnd.random()
    if kind < 0.3:
        return str(rnd.randint(-1, 5))                  # ties
    if kind < 0.5:
        return f"{rnd.uniform(0, 1):.2e}"               # scientific notation
    if kind < 0.6:
        return f"{rnd.uniform(-5, 0):.3f}"
    if kind < 0.7:
        return rnd.choice(["0.25", "0.5", "1.0"])
    return f"{rnd.uniform(0, 100):.6f}"


def random_case(rnd: random.Random) -> dict:
    qids = rnd.sample(QIDS, rnd.randint(1, 5))
    qrels_lines, run_lines = [], []
    for qid in qids:
        if rnd.random() < 0.8:                          # some queries only in the run
            docs = {docno(rnd) for _ in range(rnd.randint(1, 16))}
            negative_only = rnd.random() < 0.08
            for d in docs:
                label = rnd.choice([-2, -1] if negative_only else [-2, -1, 0, 0, 0, 1, 1, 2, 3, 4, 7])
                qrels_lines.append(f"{qid} {rnd.choice(['0', '1', 'Q0'])} {d} {label}")
        if rnd.random() < 0.8 or not qrels_lines:       # some queries only in the qrels
            docs = {docno(rnd) for _ in range(rnd.randint(1, 14))}
            tags = ["runA"] if rnd.random() < 0.8 else ["runA", "runB"]
            for d in docs:
                run_lines.append(f"{qid} Q0 {d} {rnd.randint(0, 10)} {score(rnd)} {rnd.choice(tags)}")
    if not run_lines:
        run_lines.append(f"{qids[0]} Q0 {docno(rnd)} 1 1 runA")
    if not qrels_lines:
        qrels_lines.append(f"{qids[0]} 0 {docno(rnd)} 1")
    rnd.shuffle(qrels_lines)
    rnd.shuffle(run_lines)
    flags = []
    for flag in ("-q", "-c", "-n", "-J"):
        if rnd.random() < 0.3:
            flags.append(flag)
    if rnd.random() < 0.25:
        flags += ["-M", str(rnd.choice([0, 1, 3, 5, 10]))]
    if rnd.random() < 0.25:
        flags += ["-l", str(rnd.choice([2, 3]))]
    flags += rnd.choice(MEASURE_SETS)
    return {"flags": flags, "qrels": "\n".join(qrels_lines) + "\n", "run": "\n".join(run_lines) + "\n"}


@pytest.fixture(scope="module")
def fresh_cases(tmp_path_factory):
    rnd = random.Random(SEED)
    tmp = tmp_path_factory.mktemp("random")
    cases = []
    for i in range(N_CASES):
        c = random_case(rnd)
        c["qrels_path"], c["run_path"] = tmp / f"{i}.qrels", tmp / f"{i}.run"
        c["qrels_path"].write_text(c["qrels"])
        c["run_path"].write_text(c["run"])
        cases.append(c)
    ours = run_batch([c["flags"] + [str(c["qrels_path"]), str(c["run_path"])] for c in cases])
    return list(zip(cases, ours))


def test_random_inputs_never_crash_exam_qrels(fresh_cases):
    bad = [(c["flags"], g["exit"], g["signal"], g["stderr"][-300:]) for c, g in fresh_cases
           if g["signal"] is not None or g["exit"] not in (0, 2) or "Traceback" in g["stderr"]
           or (g["exit"] == 2 and (g["stdout"] or len(g["stderr"].splitlines()) != 1))]
    assert not bad, bad[:3]
    # the generator reaches both outcomes, or the check above says little
    exits = {g["exit"] for _, g in fresh_cases}
    assert exits == {0, 2}


def run_binary(flags: list[str], qrels: Path, run: Path) -> tuple[int, str, str]:
    res = subprocess.run([BINARY, *flags, str(qrels), str(run)], capture_output=True, text=True, timeout=60)
    return res.returncode, res.stdout, res.stderr


needs_binary = pytest.mark.skipif(not (BINARY and os.access(BINARY, os.X_OK)),
                                  reason="set EXAM_EVAL_TREC_EVAL to a trec_eval 9.0.8 binary")


@needs_binary
def test_binary_reproduces_the_recorded_outputs(shared_data, tmp_path):
    with gzip.open(shared_data / "trec_eval_parity" / "cases-9.0.8.jsonl.gz", "rt") as fh:
        recorded = [json.loads(line) for line in fh]
    bad = []
    for c in recorded:
        q, r = tmp_path / "q", tmp_path / "r"
        q.write_text(c["qrels"])
        r.write_text(c["run"])
        code, out, _ = run_binary(c["flags"], q, r)
        if code != c["exit"] or (code == 0 and out != c["stdout"]):
            bad.append(c["case"])
    assert not bad, f"this binary is not the recorded trec_eval 9.0.8 (cases {bad[:10]})"


@needs_binary
def test_fresh_random_cases_match_the_binary(fresh_cases):
    bad = []
    for c, ours in fresh_cases:
        code, out, err = run_binary(c["flags"], c["qrels_path"], c["run_path"])
        problem = verdict(code, out, err, ours)
        if problem:
            bad.append(f"{problem}: flags {c['flags']}\nqrels:\n{c['qrels']}run:\n{c['run']}"
                       f"trec_eval:\n{out}ours:\n{ours['stdout']}")
    assert not bad, f"{len(bad)} of {len(fresh_cases)} differ; first:\n" + "\n".join(bad[:2])
