"""exam-qrels against what a real trec_eval 9.0.8 printed (../shared/data/trec_eval_parity).

Every recorded case goes through the real command entry point, each in its own forked
process (tests/parity_runner.py), so a segfault shows up as a signal. trec_eval exit 0:
stdout byte-identical. trec_eval refused (exit 4 or 7): exit 2, nothing on stdout, one
line on stderr carrying trec_eval's own message. trec_eval crashed (exit -11): exit 0 or
2, never a signal, never a traceback.
"""

from __future__ import annotations

import faulthandler
import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import parity_runner  # noqa: E402
from parity_runner import verdict  # noqa: E402


def run_batch(jobs: list[list[str]]) -> list[dict]:
    """Every job's outcome, in order: the jobs dealt to one runner per CPU, run side by side."""
    from concurrent.futures import ThreadPoolExecutor

    n = max(1, min(len(os.sched_getaffinity(0)), 8, len(jobs)))

    def runner(chunk: list[list[str]]) -> list[dict]:
        res = subprocess.run([sys.executable, str(ROOT / "tests" / "parity_runner.py")], input=json.dumps(chunk),
                             capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                             timeout=1800)
        assert res.returncode == 0, res.stderr[-3000:]
        return json.loads(res.stdout)

    with ThreadPoolExecutor(n) as pool:
        dealt = list(pool.map(runner, [jobs[i::n] for i in range(n)]))
    results: list = [None] * len(jobs)
    for i, chunk in enumerate(dealt):
        results[i::n] = chunk
    return results


@pytest.fixture(scope="module")
def outcomes(shared_data, tmp_path_factory):
    """[(recorded case, our result)] for the 1,000 random cases and the 296 DL19 ones."""
    folder = shared_data / "trec_eval_parity"
    tmp = tmp_path_factory.mktemp("parity")
    cases, jobs = [], []
    with gzip.open(folder / "cases-9.0.8.jsonl.gz", "rt") as fh:
        for line in fh:
            c = json.loads(line)
            q, r = tmp / f"{c['case']}.qrels", tmp / f"{c['case']}.run"
            q.write_text(c["qrels"])
            r.write_text(c["run"])
            cases.append(c)
            jobs.append(c["flags"] + [str(q), str(r)])
    with gzip.open(folder / "dl19-runs-9.0.8.jsonl.gz", "rt") as fh:
        for line in fh:
            c = json.loads(line)
            # paths in that file are relative to the data folder (dl19/...)
            c["case"] = f"{c['run']} {' '.join(c['flags'])}"
            cases.append(c)
            jobs.append(c["flags"] + [str(shared_data / c["qrels"]), str(shared_data / c["run"])])
    return list(zip(cases, run_batch(jobs)))


def describe(case, got) -> str:
    return (f"case {case['case']} flags {case['flags']}: exit {got['exit']} signal {got['signal']}\n"
            f"stderr: {got['stderr'][-500:]}\n"
            f"trec_eval stdout:\n{case['stdout'][:1500]}\nours:\n{got['stdout'][:1500]}")


def test_corpus_is_complete(outcomes):
    exits = [c["exit"] for c, _ in outcomes]
    assert len(outcomes) == 1296
    assert exits.count(0) == 936 + 296
    assert sum(e in (4, 7) for e in exits) == 53
    assert exits.count(-11) == 11


def check(outcomes, exits) -> list[str]:
    return [describe(c, g) + f"\n-> {problem}" for c, g in outcomes if c["exit"] in exits
            for problem in [verdict(c["exit"], c["stdout"], c.get("stderr", ""), g)] if problem]


def test_where_trec_eval_succeeds_the_bytes_are_identical(outcomes):
    bad = check(outcomes, (0,))
    assert not bad, f"{len(bad)} cases differ; first:\n" + "\n\n".join(bad[:3])


def test_where_trec_eval_refuses_we_refuse_in_one_line(outcomes):
    # exit 2, nothing on stdout, one line on stderr that carries trec_eval's message
    # ("Can't calculate measure 'map'", "No queries with both results and relevance info")
    bad = check(outcomes, (4, 7))
    assert not bad, f"{len(bad)} refusals differ; first:\n" + "\n\n".join(bad[:3])
    assert all(g["stderr"].startswith("exam-qrels: ") for c, g in outcomes if c["exit"] in (4, 7))


def test_where_trec_eval_crashes_we_do_not(outcomes):
    bad = check(outcomes, (-11,))
    assert not bad, "\n\n".join(bad[:3])


def test_runner_reports_a_segfault_as_a_signal():
    # the crash check above is only worth something if a crash cannot pass as an exit code
    def crash(args):
        faulthandler.disable()   # pytest's handler would dump this child's stack on the terminal
        os.kill(os.getpid(), signal.SIGSEGV)

    got = parity_runner.run_one(crash, [])
    assert got["signal"] == signal.SIGSEGV and got["exit"] is None

    def prints(args):
        os.write(1, b"x\ty\n")  # fd 1 itself: pytest has replaced sys.stdout in this process
        sys.exit(2)

    got = parity_runner.run_one(prints, [])
    assert got == {"exit": 2, "signal": None, "stdout": "x\ty\n", "stderr": ""}
