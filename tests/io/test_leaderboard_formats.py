"""Leaderboards in the shapes the tracks exchange: tot, ir_measures (AutoJudge's and the
ir_measures command line's), trec_eval -q output, TSV. The same values written in every
shape read back the same; the real trec_eval outputs of the 37 DL19 runs give the
official leaderboard; bad input is located."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from exam_eval.errors import InputError
from exam_eval.io.leaderboard import read_leaderboard, sniff_format

MEASURES = ("ndcg_cut_10", "map")


def _values(seed: int, runs: int = 6, topics: int = 5):
    rng = np.random.default_rng(seed)
    run_ids = [f"run-{i}" for i in range(runs)]
    topic_ids = [str(1000 + 7 * t) for t in range(topics)]
    # values with ties (rounded), as real leaderboards have them
    per = {m: {r: {t: float(np.round(rng.random(), 1)) for t in topic_ids} for r in run_ids} for m in MEASURES}
    return run_ids, topic_ids, per


def _mean(d):
    return sum(d.values()) / len(d)


def write_shapes(tmp_path, seed: int = 0, with_all: bool = True):
    """The same leaderboard in every shape; returns {shape: path}."""
    run_ids, topic_ids, per = _values(seed)
    paths = {}
    tot, irm = [], []
    for r in run_ids:
        for m in MEASURES:
            for t in topic_ids:
                tot.append(f"{r}\t{m}\t{t}\t{per[m][r][t]}")
                irm.append(f"{r} {t} {m} {per[m][r][t]}")
            if with_all:
                tot.append(f"{r}\t{m}\tall\t{_mean(per[m][r])!r}")
                irm.append(f"{r} all {m} {_mean(per[m][r])!r}")
    paths["tot"] = tmp_path / "board.tot"
    paths["tot"].write_text("\n".join(tot) + "\n")
    paths["ir_measures"] = tmp_path / "board.irm"
    paths["ir_measures"].write_text("\n".join(irm) + "\n")
    te_dir, cli_dir = tmp_path / "trec_eval", tmp_path / "ir_measures_cli"
    te_dir.mkdir()
    cli_dir.mkdir()
    for r in run_ids:
        lines, cli = [], []
        for t in topic_ids:
            for m in MEASURES:
                lines.append(f"{m:<22s}\t{t}\t{per[m][r][t]:.4f}")
                cli.append(f"{t}\t{m}\t{per[m][r][t]}")
        if with_all:
            lines.append(f"{'runid':<22s}\tall\t{r}")
            for m in MEASURES:
                lines.append(f"{m:<22s}\tall\t{_mean(per[m][r])!r}")
                cli.append(f"{m}\t{_mean(per[m][r])!r}")
        # trec_eval files named differently from the run: the runid line names it
        (te_dir / (f"eval{r}.txt" if with_all else f"{r}.txt")).write_text("\n".join(lines) + "\n")
        (cli_dir / f"{r}.txt").write_text("\n".join(cli) + "\n")
    paths["trec_eval"] = te_dir
    paths["ir_measures_cli"] = cli_dir
    if with_all:
        paths["trec_eval_concat"] = tmp_path / "all-runs.trec_eval"
        paths["trec_eval_concat"].write_text("".join(p.read_text() for p in sorted(te_dir.iterdir())))
        paths["tsv"] = tmp_path / "board.tsv"
        paths["tsv"].write_text("run\t" + "\t".join(MEASURES) + "\n" + "".join(
            f"{r}\t" + "\t".join(repr(_mean(per[m][r])) for m in MEASURES) + "\n" for r in run_ids))
    return paths, (run_ids, topic_ids, per)


@pytest.mark.parametrize("seed", range(3))
def test_every_shape_reads_the_same_values(tmp_path, seed):
    paths, (run_ids, topic_ids, per) = write_shapes(tmp_path, seed)
    expected_format = {"tot": "tot", "ir_measures": "ir_measures", "trec_eval": "trec_eval",
                       "ir_measures_cli": "ir_measures", "trec_eval_concat": "trec_eval", "tsv": "tsv"}
    for shape, path in paths.items():
        board = read_leaderboard(path, "auto")
        assert board.format == expected_format[shape], shape
        assert list(board.rows) == run_ids, shape
        assert board.columns == list(MEASURES), shape
        for m in MEASURES:
            for r in run_ids:
                # trec_eval prints 4 decimals per topic but the 'all' row is read as written
                assert board.rows[r][m] == pytest.approx(_mean(per[m][r]), abs=1e-12), (shape, m, r)
            if shape != "tsv":
                tol = 5e-5 if shape.startswith("trec_eval") else 0
                got = board.per_topic(m)
                assert sorted(got) == sorted(topic_ids)
                for t in topic_ids:
                    for r in run_ids:
                        assert got[t][r] == pytest.approx(per[m][r][t], abs=tol)
        assert board.computed == []
        if shape != "tsv":
            # the explicit shape reads the same as the sniffed one
            again = read_leaderboard(path, expected_format[shape])
            assert again.rows == board.rows and again.topics == board.topics


def test_without_all_rows_the_aggregate_is_the_mean_over_topics(tmp_path):
    paths, (run_ids, topic_ids, per) = write_shapes(tmp_path, 5, with_all=False)
    for shape in ("tot", "ir_measures", "trec_eval", "ir_measures_cli"):
        board = read_leaderboard(paths[shape], "auto")
        assert board.computed == list(MEASURES), shape
        for m in MEASURES:
            assert board.column(m) == pytest.approx({r: float(np.mean(list(per[m][r].values()))) for r in run_ids},
                                                    abs=1e-12)
    # trec_eval files without runid lines: the run is the file name
    assert list(read_leaderboard(paths["trec_eval"], "trec_eval").rows) == run_ids


def test_recomputed_means_over_a_topic_subset(tmp_path):
    paths, (run_ids, topic_ids, per) = write_shapes(tmp_path, 2)
    board = read_leaderboard(paths["tot"], "tot")
    subset = set(topic_ids[:3])
    sub = board.recomputed(subset)
    for m in MEASURES:
        for r in run_ids:
            assert sub.rows[r][m] == pytest.approx(np.mean([per[m][r][t] for t in sorted(subset)]), abs=1e-12)


def test_headers_fix_the_column_order(tmp_path):
    p = tmp_path / "h.tsv"
    p.write_text("run_id\ttopic_id\tmeasure\tvalue\nA\t1\tm\t0.5\nA\tall\tm\t0.5\nB\t1\tm\t0.25\nB\tall\tm\t0.25\n")
    assert sniff_format(str(p)) == "ir_measures"
    b = read_leaderboard(p, "auto")
    assert b.column("m") == {"A": 0.5, "B": 0.25}
    q = tmp_path / "h2.txt"
    q.write_text("run measure topic value\nA m 1 0.5\nA m all 0.5\n")
    assert sniff_format(str(q)) == "tot" and read_leaderboard(q, "auto").column("m") == {"A": 0.5}


def test_spot_check_leaderboard_parses(shared_data):
    path = shared_data / "autojudge-spot-check" / "trec-leaderboard.txt"
    board = read_leaderboard(path, "auto")
    assert board.format == "tot"
    assert board.columns == ["Measure-01", "Measure-02"]
    # the file's own 'all' rows, independently parsed here
    expected: dict[tuple[str, str], float] = {}
    for line in path.read_text().splitlines():
        run, measure, topic, value = line.split()
        if topic == "all":
            expected[(run, measure)] = float(value)
    assert {(r, m): v for r, vals in board.rows.items() for m, v in vals.items()} == expected
    assert board.topic_ids("Measure-01") == {"28"}


def test_real_trec_eval_outputs_give_the_official_leaderboard(shared_data, tmp_path):
    """The recorded `trec_eval -q -m all_trec` outputs of the 37 DL19 runs, one file each,
    read as a trec_eval leaderboard: the runid lines name the runs and the 'all' rows of
    ndcg_cut_10 equal official.tsv (the official trec_eval scores)."""
    cases = [json.loads(line) for line in gzip.open(shared_data / "trec_eval_parity" / "dl19-runs-9.0.8.jsonl.gz", "rt")]
    outdir = tmp_path / "dl19-eval"
    outdir.mkdir()
    n = 0
    for c in cases:
        flags = c["flags"] if isinstance(c["flags"], str) else " ".join(c["flags"])
        if flags == "-q -m all_trec":
            (outdir / f"{n:02d}.eval").write_text(c["stdout"])
            n += 1
    assert n == 37
    board = read_leaderboard(outdir, "auto")
    assert board.format == "trec_eval" and len(board.rows) == 37
    official = {}
    lines = (shared_data / "dl19" / "official.tsv").read_text().splitlines()
    col = lines[0].split("\t").index("ndcg_cut_10")
    for line in lines[1:]:
        cells = line.split("\t")
        official[cells[0]] = float(cells[col])
    got = board.column("ndcg_cut_10")
    assert set(got) == set(official)
    for run, v in got.items():
        assert v == pytest.approx(official[run], abs=5e-5), run
        # the per-topic values average to the 'all' row (trec_eval rounds both to 4 places)
        assert np.mean(list(board.topics["ndcg_cut_10"][run].values())) == pytest.approx(v, abs=1e-4)
    assert len(board.topic_ids("ndcg_cut_10")) == 43
    assert "gm_map" in board.columns and "gm_map" not in board.topics  # aggregate-only measure
    # concatenated outputs of several runs in one file split at the runid lines
    cat = tmp_path / "cat.eval"
    cat.write_text("".join(p.read_text() for p in sorted(outdir.iterdir())[:3]))
    assert len(read_leaderboard(cat, "trec_eval").rows) == 3


BAD = [
    ("tot", "A m 1 0.5\nA m all zero\n", 2, "not a number"),
    ("tot", "A m 1 0.5\nA m 1 0.6\n", 2, "duplicate value of m for run A, topic 1"),
    ("tot", "A m 1 0.5\nA m 1\n", 2, "expected 4 fields"),
    ("tot", "A m 1 nan\n", 1, "not finite"),
    ("ir_measures", "A 1 m 0.5 extra\n", 1, "expected 'run topic measure value'"),
    ("trec_eval", "map 1 0.5\nmap 1\n", 2, "expected 3 fields"),
]


@pytest.mark.parametrize("fmt,text,line,reason", BAD)
def test_bad_input_names_file_and_line(tmp_path, fmt, text, line, reason):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(InputError) as exc:
        read_leaderboard(p, fmt)
    assert exc.value.path == str(p) and exc.value.line == line and reason in exc.value.reason


def test_unreadable_shapes_are_refused(tmp_path):
    amb = tmp_path / "amb.txt"
    amb.write_text("A x y 0.5\nB x y 0.25\n")  # no 'all', no numeric topic: tot or ir_measures?
    with pytest.raises(InputError, match="cannot tell tot from ir_measures"):
        read_leaderboard(amb, "auto")
    mixed = tmp_path / "mixed.tot"
    mixed.write_text("A m 1 0.5\nA m all 0.5\nB m 1 0.25\n")
    with pytest.raises(InputError, match="run.*B have per-topic values but no 'all' row"):
        read_leaderboard(mixed, "tot")
    five = tmp_path / "five.txt"
    five.write_text("a b c d e\n")
    with pytest.raises(InputError, match="cannot tell the leaderboard's shape"):
        read_leaderboard(five, "auto")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no leaderboard files"):
        read_leaderboard(empty, "auto")


def test_standard_input_is_read_anew_by_each_read(tmp_path, run_cli):
    """Two leaderboards from '-' in one process (a notebook, the in-process test runner)
    are two reads of standard input, as in two processes: opposite leaderboards give
    spearman 1.0, then -1.0 (stdin was kept across reads and gave 1.0 twice)."""
    truth = tmp_path / "truth.tsv"
    truth.write_text("run\tm\n" + "".join(f"r{i}\t{i / 10}\n" for i in range(5)))
    same = "run\tm\n" + "".join(f"r{i}\t{i / 10}\n" for i in range(5))
    opposite = "run\tm\n" + "".join(f"r{i}\t{(4 - i) / 10}\n" for i in range(5))
    got = []
    for board in (same, opposite):
        res = run_cli("exam-correlate", "leaderboard", truth, "-", input=board)
        assert res.returncode == 0, res.stderr
        got.append(dict(line.split("\t") for line in res.stdout.splitlines())["spearman"])
    assert [float(x) for x in got] == [1.0, -1.0]


def test_a_second_read_of_standard_input_in_one_process_is_its_own(monkeypatch):
    import io
    import sys

    boards = []
    for text in ("run\tm\na\t1\nb\t2\n", "run\tm\na\t5\nb\t3\nc\t4\n"):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
        boards.append(read_leaderboard("-", "auto").rows)
    assert boards[0] == {"a": {"m": 1.0}, "b": {"m": 2.0}}
    assert boards[1] == {"a": {"m": 5.0}, "b": {"m": 3.0}, "c": {"m": 4.0}}
