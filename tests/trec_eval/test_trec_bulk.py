"""The bulk run/qrels readers and the batched, forked scoring (issue 19, item 4) against
the line reader and the plain in-memory path: same queries, documents, scores (to the
bit), tags and output bytes, and the same refusals (message, file and line)."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from exam_eval.errors import InputError
from exam_eval.trec_eval import trec_files as trec, bulk as trec_bulk
from exam_eval.trec_eval.trec_files import read_qrels, read_run_table, read_run_tagged
from exam_eval.trec_eval.registry import parse_measures
from exam_eval.trec_eval.evaluate import evaluate, write_trec_eval
from exam_eval.trec_eval.parallel import fork_map

ROOT = Path(__file__).resolve().parents[2]

# trec_eval's (C isspace); 0x1C-0x1F, which str.split() splits at too, are refused by both
# readers (tests/hostile_inputs/test_runs.py)
SEPARATORS = [" ", "  ", "\t", " \t ", "\x0b", "\x0c", "\x0b\x0c "]
# ("1_0", which Python reads as 10 and trec_eval as 1, is refused by both readers: see
# test_an_underscored_number_is_refused_alike)
SCORES = ["1", "-0", "+1", "1E3", "2.5e-3", "0.1", "10.6328", ".5", "5.", "007", "nan", "-inf",
          "123456789012345678", "0.12345678901234567", "-3.25", "1e400"]
LABELS = ["0", "1", "2", "3", "01", "+2", "-1", "-2", "007"]
# what a run may hold: no NaN or infinity, no digits beyond a double
FINITE_SCORES = [s for s in SCORES if s not in ("007", "nan", "-inf", "1e400")]


def line_reader_run(path):
    return trec._read_run_lines(path, None)


def line_reader_qrels(path):
    # the bulk reader declines an empty file: that is the line reader's
    got = trec.slurp(path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(trec_bulk, "scan_qrels", lambda data: (_ for _ in ()).throw(trec_bulk.Decline()))
        return read_qrels(path) if got else None


def random_run_text(rnd: random.Random, n_queries: int, depth: int, shuffled: bool, extra: bool) -> str:
    lines = []
    for q in range(n_queries):
        qid = rnd.choice(["", "q", "Q_"]) + str(rnd.randint(0, 10**rnd.randint(1, 7)))
        docs = rnd.sample(range(10**6), depth)
        for rank, d in enumerate(docs, 1):
            sep = rnd.choice(SEPARATORS) if rnd.random() < 0.2 else " "
            score = rnd.choice(FINITE_SCORES) if rnd.random() < 0.2 else f"{rnd.uniform(-5, 30):.{rnd.randint(0, 9)}f}"
            fields = [qid, "Q0", f"d{d}" if rnd.random() < 0.5 else str(d), str(rank), score, "tag" + str(q % 3)]
            if extra and rnd.random() < 0.1:
                fields += ["more", "junk"]
            lines.append(sep.join(fields) + (rnd.choice([" ", "\t"]) if rnd.random() < 0.05 else ""))
        if rnd.random() < 0.1:
            lines.append(rnd.choice(["", "  ", "\t"]))
    if shuffled:
        rnd.shuffle(lines)
    end = rnd.choice(["\n", "\r\n", "\r"])
    return end.join(lines) + (end if rnd.random() < 0.8 else "")


def same_run(a, b) -> bool:
    if list(a) != list(b):
        return False
    for q in a:
        if list(a[q]) != list(b[q]):
            return False
        for d, s in a[q].items():
            t = b[q][d]
            if not (s == t and math.copysign(1, s) == math.copysign(1, t)):
                return False
    return True


@pytest.mark.parametrize("workers", ["1", "2"])
def test_bulk_run_reader_equals_the_line_reader(tmp_path, monkeypatch, workers):
    monkeypatch.setenv("EXAM_EVAL_WORKERS", workers)
    monkeypatch.setattr(trec_bulk, "BATCH_DOCS", 7)
    rnd = random.Random(19)
    bulk_taken = 0
    for i in range(60):
        path = tmp_path / f"{i}.run"
        path.write_bytes(random_run_text(rnd, rnd.randint(1, 12), rnd.randint(1, 30), rnd.random() < 0.4,
                                         rnd.random() < 0.3).encode())
        want = line_reader_run(path)
        got = read_run_table(path)
        if not isinstance(got, tuple):
            bulk_taken += 1
            got = got.docs(list(range(len(got.qids)))), got.tag
        assert same_run(got[0], want[0]) and got[1] == want[1], path.read_text()[:500]
        assert same_run(read_run_tagged(path)[0], want[0])
    assert bulk_taken >= 50   # the cases are the bulk reader's, not the line reader's


def test_big_sorted_run_is_read_in_stretches_by_workers(tmp_path, monkeypatch):
    rnd = random.Random(5)
    path = tmp_path / "big.run"
    with open(path, "w") as fh:
        for q in range(300):
            fh.writelines(f"{1000 + q} Q0 {rnd.randrange(10**7)}-{r} {r} {rnd.uniform(0, 20):.4f} big\n"
                          for r in range(1, 1001))
    assert path.stat().st_size > 8 << 20   # large enough for workers
    want = line_reader_run(path)
    for workers in ("1", "2", "3"):
        monkeypatch.setenv("EXAM_EVAL_WORKERS", workers)
        table = read_run_table(path)
        assert not isinstance(table, tuple)
        assert same_run(table.docs(list(range(len(table.qids)))), want[0]) and table.tag == want[1]


def test_bulk_qrels_reader_equals_the_line_reader(tmp_path):
    rnd = random.Random(7)
    for i in range(60):
        lines = []
        for q in range(rnd.randint(1, 8)):
            for d in rnd.sample(range(500), rnd.randint(1, 40)):
                sep = rnd.choice(SEPARATORS) if rnd.random() < 0.2 else " "
                lines.append(sep.join([str(q), rnd.choice(["0", "Q0", "1"]), f"doc{d}", rnd.choice(LABELS)]))
        rnd.shuffle(lines)
        path = tmp_path / f"{i}.qrels"
        path.write_text(rnd.choice(["\n", "\r\n"]).join(lines) + "\n")
        assert read_qrels(path) == line_reader_qrels(path)
        assert list(read_qrels(path)) == list(line_reader_qrels(path))


@pytest.mark.parametrize("kind", ["run", "qrels"])
def test_an_underscored_number_is_refused_alike(tmp_path, kind):
    path = tmp_path / f"x.{kind}"
    good = "1 Q0 a 1 2.5 t\n" if kind == "run" else "1 0 a 1\n"
    bad = "1 Q0 b 2 1_0 t\n" if kind == "run" else "1 0 b 1_0\n"
    path.write_text(good + bad)
    errors = []
    for reader in ((trec.read_run, line_reader_run) if kind == "run" else (read_qrels, line_reader_qrels)):
        with pytest.raises(InputError) as exc:
            reader(path)
        errors.append(str(exc.value))
    assert errors[0] == errors[1] and f"{path}:2:" in errors[0]


def test_numbers_decline_what_python_alone_reads():
    text = b"1 1_0"
    a = np.frombuffer(text, np.uint8)
    for kind in (int, float):
        with pytest.raises(trec_bulk.Decline):
            trec_bulk._numbers(a, np.array([0, 2]), np.array([1, 5]), kind)


def test_numbers_are_what_float_and_int_make(tmp_path):
    tokens = ["1", "-0", "+1", ".5", "5.", "007", "-3.25", "10.6328", "999999999999999", "9999999999999999",
              "0.000000000000001", "1234567.1234567", "1E3", "nan", "-.5", "+.5", "18446744073709551616"]
    rnd = random.Random(3)
    tokens += [f"{rnd.uniform(-1e4, 1e4):.{rnd.randint(0, 12)}f}" for _ in range(3000)]
    tokens += [repr(rnd.uniform(-1e4, 1e4)) for _ in range(1000)]
    text = " ".join(tokens).encode()
    a = np.frombuffer(text, np.uint8)
    ends = np.cumsum([len(t) + 1 for t in tokens]) - 1
    starts = ends - np.array([len(t) for t in tokens])
    got = trec_bulk._numbers(a, starts, ends, float)
    for t, g in zip(tokens, got.tolist()):
        w = float(t)
        assert (w == g and math.copysign(1, w) == math.copysign(1, g)) or (w != w and g != g), t
    ints = [t for t in tokens if t.lstrip("+-").replace("_", "").isdigit() and abs(int(t)) < 2**63]
    text = " ".join(ints).encode()
    a = np.frombuffer(text, np.uint8)
    ends = np.cumsum([len(t) + 1 for t in ints]) - 1
    starts = ends - np.array([len(t) for t in ints])
    assert trec_bulk._numbers(a, starts, ends, int).tolist() == [int(t) for t in ints]
    for bad in ("1.0", "x", "1e3", "18446744073709551616"):   # int() refuses, or beyond 64 bits
        a = np.frombuffer(bad.encode(), np.uint8)
        with pytest.raises(trec_bulk.Decline):
            trec_bulk._numbers(a, np.array([0]), np.array([len(bad)]), int)


BAD_RUN_LINES = [
    ("1 Q0 d 1 3", "expected 6 fields"),
    ("1 Q0 d 1 x t", "is not a number"),
    ("1 Q0 d 1 inf t", "is not finite"),
    ("1 Q0 d 1 nan t", "is not finite"),
    ("1 Q0 dup 1 1 t", "duplicate document dup"),
    ("1 Q0 d\x01x 1 1 t", None),          # a control byte: the line reader's (it accepts it)
    ("1 Q0 dé 1 1 t", None),               # non-ASCII: the line reader's
]


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("bad,reason", BAD_RUN_LINES)
def test_refusals_name_the_same_file_and_line(tmp_path, monkeypatch, workers, bad, reason):
    monkeypatch.setenv("EXAM_EVAL_WORKERS", workers)
    monkeypatch.setattr(trec_bulk, "BATCH_DOCS", 5)
    rnd = random.Random(hash(bad) % 1000)
    lines = [f"{q} Q0 d{q}x{r} {r} {rnd.uniform(0, 9):.3f} t" for q in range(1, 40) for r in range(1, 20)]
    lines.insert(3, "1 Q0 dup 1 1 t")
    at = rnd.randrange(100, len(lines))
    lines.insert(at, bad)
    path = tmp_path / "bad.run"
    path.write_text("\n".join(lines) + "\n")
    try:
        want = line_reader_run(path)
    except InputError as exc:
        want = exc
    assert (reason is None) == (not isinstance(want, InputError))
    try:
        got = read_run_table(path)
        if not isinstance(got, tuple):
            got.check_all()
    except InputError as exc:
        got = exc
    if reason is None:
        assert not isinstance(got, InputError)
    else:
        assert isinstance(got, InputError) and str(got) == str(want)
        assert f"{path}:{at + 1}: " in str(got) and reason in str(got)


def _random_case(rnd: random.Random, tmp: Path, i: int) -> tuple[Path, Path]:
    qrels_lines = []
    for q in range(rnd.randint(1, 12)):
        for d in rnd.sample(range(60), rnd.randint(1, 25)):
            qrels_lines.append(f"{q} 0 d{d} {rnd.choice([-1, 0, 0, 1, 1, 2, 3])}")
    run_lines = []
    for q in range(rnd.randint(1, 14)):
        for r, d in enumerate(rnd.sample(range(80), rnd.randint(1, 60)), 1):
            run_lines.append(f"{q} Q0 d{d} {r} {rnd.choice([1, 2, 2.5, rnd.uniform(0, 9)])} run{i}")
    if rnd.random() < 0.5:
        rnd.shuffle(run_lines)
    qp, rp = tmp / f"{i}.qrels", tmp / f"{i}.run"
    qp.write_text("\n".join(qrels_lines) + "\n")
    rp.write_text("\n".join(run_lines) + "\n")
    return qp, rp


@pytest.mark.parametrize("workers", ["1", "2"])
def test_batched_scoring_gives_the_bytes_of_the_plain_path(tmp_path, monkeypatch, workers):
    import io

    monkeypatch.setenv("EXAM_EVAL_WORKERS", workers)
    monkeypatch.setattr(trec_bulk, "BATCH_DOCS", 40)    # several batches even on small runs
    rnd = random.Random(11)
    flags = [dict(), dict(complete=True), dict(level=2), dict(level=0), dict(judged_only=True),
             dict(max_docs=5), dict(max_docs=0), dict(complete=True, judged_only=True, max_docs=10)]
    measures = [[], ["all_trec"], ["ndcg_cut.5,10", "P.1,5", "relstring", "utility"]]
    for i in range(40):
        qp, rp = _random_case(rnd, tmp_path, i)
        qrels = read_qrels(qp)
        table = read_run_table(rp)
        assert not isinstance(table, tuple)
        run, tag = line_reader_run(rp)
        opts = rnd.choice(flags)
        requests = parse_measures(rnd.choice(measures))
        outs = []
        for r in (run, table):
            buf = io.StringIO()
            write_trec_eval(evaluate(qrels, r, requests, run_tag=tag, **opts), buf, per_query=True)
            outs.append(buf.getvalue())
        assert outs[0] == outs[1], (opts, i)


def test_fork_map_keeps_order_and_redoes_a_failed_share_in_the_parent(monkeypatch):
    monkeypatch.setenv("EXAM_EVAL_WORKERS", "3")
    parent = os.getpid()
    assert fork_map(lambda x: x * x, list(range(20))) == [x * x for x in range(20)]
    # work that fails only in a worker is redone here: same results
    assert fork_map(lambda x: x if os.getpid() == parent else 1 / 0, list(range(9))) == list(range(9))
    # an error met by the parent is raised, from the first failing item in order

    def boom(x):
        if x >= 5:
            raise InputError(f"bad {x}", "f", x)
        return x
    with pytest.raises(InputError, match="f:5: bad 5"):
        fork_map(boom, list(range(9)))


def _exam_qrels(*args, workers: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), EXAM_EVAL_WORKERS=workers)
    return subprocess.run([sys.executable, "-m", "exam_eval.commands.qrels", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=600)


def test_leaderboard_and_errors_with_and_without_workers(tmp_path, monkeypatch):
    rnd = random.Random(23)
    qp, _ = _random_case(rnd, tmp_path, 0)
    runs = [_random_case(rnd, tmp_path, i)[1] for i in range(1, 7)]
    plain = _exam_qrels("-m", "all_trec", qp, *runs, workers="1")
    forked = _exam_qrels("-m", "all_trec", qp, *runs, workers="2")
    assert plain.returncode == 0 and plain.stdout.count("\n") == 7
    assert forked.stdout == plain.stdout and forked.returncode == 0
    # a duplicate in a late run and no common query in an early one: the input error wins,
    # as when every run was read before any was scored
    early = tmp_path / "early.run"
    early.write_text("no-such-query Q0 d1 1 1 t\n")
    late = tmp_path / "late.run"
    late.write_text(runs[0].read_text() + runs[0].read_text().splitlines()[0] + "\n")
    n = late.read_text().count("\n")
    for workers in ("1", "2"):
        res = _exam_qrels(qp, early, *runs[1:], late, workers=workers)
        assert res.returncode == 2 and res.stdout == ""
        assert res.stderr.strip().endswith(f"{late}:{n}: duplicate document "
                                           f"{runs[0].read_text().split()[2]} for query "
                                           f"{runs[0].read_text().split()[0]} (first on line 1)")
        res = _exam_qrels(qp, early, *runs[1:], workers=workers)
        assert res.returncode == 2 and "no queries in common" in res.stderr and str(early) in res.stderr


@pytest.mark.parametrize("load, others, cores, expect", [
    (1.0, 0, 2, 2),      # a benchmark's own earlier processes in the average, nothing running now: fork
    (4.0, 3, 2, 1),      # busy in both views: no worker
    (0.0, 5, 2, 2),      # a burst that just began: the average is what counts
    (1.6, None, 4, 2),   # no /proc/loadavg: the average alone
])
def test_workers_count_the_cores_idle_in_both_views(monkeypatch, load, others, cores, expect):
    from exam_eval.trec_eval import parallel

    monkeypatch.delenv("EXAM_EVAL_WORKERS", raising=False)
    monkeypatch.setattr(parallel, "_looked", None)
    monkeypatch.setattr(parallel.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(parallel, "_running_others", lambda: others)
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda _pid: set(range(cores)), raising=False)
    assert parallel.worker_count() == expect
    # the look stands for a while: a leaderboard asks once per run
    monkeypatch.setattr(parallel, "_running_others", lambda: 99)
    assert parallel.worker_count() == expect


def test_glibc_takes_the_top_pad():
    import platform

    from exam_eval.trec_eval.allocator import keep_freed_memory

    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        pytest.skip("the top pad is a glibc setting")
    assert keep_freed_memory() is True


def test_nested_work_stays_in_its_process_while_workers_run(monkeypatch):
    # a leaderboard forks per run; a run's own batches then stay with whoever scores it
    monkeypatch.setenv("EXAM_EVAL_WORKERS", "2")

    def outer(_):
        me = os.getpid()
        return me, fork_map(lambda _x: os.getpid(), [0, 1, 2, 3])

    got = fork_map(outer, [0, 1])
    assert len({pid for pid, _ in got}) == 2          # the two items went to two processes
    for pid, inner in got:
        assert inner == [pid] * 4
    # outside a shared map, a nested call may fork again
    assert len(set(fork_map(lambda _x: os.getpid(), [0, 1]))) == 2
