"""Fresh random cases: exam-qrels against a real trec_eval 9.0.8 binary, byte for byte.

The binary is built once per test run from ../shared/tools (fixture ``trec_eval_binary``
in conftest.py; ``EXAM_EVAL_TREC_EVAL`` names another one), and first checked against
the outputs recorded in ../shared/data/trec_eval_parity when that is present.
``EXAM_EVAL_PARITY_CASES`` (default 500) and ``EXAM_EVAL_PARITY_SEED`` (default 12)
choose the cases.

The generator varies what trec_eval's readers tolerate and what its flags do: blanks,
tabs and runs of them between fields, leading and trailing white space, CRLF, a missing
final newline, blank lines in runs, unsorted and interleaved queries, fields after the
sixth on run lines, score spellings (+1, 1E3, -0, .5), label spellings (01, +2, -1),
-q -c -n -J -M -l (below 0 too), measures with parameters (cutoffs, atol-read ones like 23.4,
level=gain pairs), -R qrels_jg / prefs / qrels_prefs and -Z, and now and then an input
trec_eval refuses. Where trec_eval succeeds the bytes must be identical; where it refuses,
exam-qrels must too, in one line (see parity_runner.verdict); never a signal.

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

N_CASES = int(os.environ.get("EXAM_EVAL_PARITY_CASES", "500"))
SEED = int(os.environ.get("EXAM_EVAL_PARITY_SEED", "12"))

QIDS = ["1", "2", "9", "10", "007", "100", "1000", "3a", "Q_2", "q1"]
MEASURE_SETS = [[], ["-m", "official"], ["-m", "all_trec"], ["-m", "set"], ["-m", "map", "-m", "P.10"],
                ["-m", "ndcg"], ["-m", "ndcg_cut.5,10", "-m", "P.1,5,1000"], ["-m", "iprec_at_recall"],
                ["-m", "Rndcg", "-m", "infAP", "-m", "bpref", "-m", "gm_map", "-m", "gm_bpref"],
                ["-m", "relative_P.5", "-m", "num_nonrel_judged_ret", "-m", "binG", "-m", "G"],
                ["-m", "set_F", "-m", "set_P", "-m", "ndcg_rel", "-m", "Rprec_mult", "-m", "11pt_avg"],
                ["-m", "recall.3", "-m", "success.1,5", "-m", "map_cut.10", "-m", "yaap"], ["-m", "relstring", "-m", "utility"],
                # parameters as trec_eval's quicktest gives them, and level=gain pairs
                ["-m", "ndcg.1=3,2=9,4=4.5"], ["-m", "ndcg_rel.0=1,1=2,3=0.5", "-m", "Rndcg.2=1"],
                ["-m", "Rndcg.0=1.5,2=0.5", "-m", "ndcg.0=1"],
                ["-m", "G.1=2,2=5,7=1", "-m", "ndcg.2=0"], ["-mndcg_cut.10,3,23.4", "-mP.5,7,3"],
                ["-m", "iprec_at_recall..10,.25,.75", "-m", "Rprec_mult.5.0,0.2,0.35"],
                ["-m", "11pt_avg..25,.5,.75", "-m", "success.2,5,20", "-mutility.2,-1,0,0"],
                ["-m", "relstring.5", "-m", "set_F.0.5", "-m", "map_cut.1,2", "-m", "recall.20,2000"],
                ["-m", "all_trec", "-m", "relstring.20"],
                # gains for levels -1 and -2: documents without a label >= 0 get them, and a
                # query judged only below 0 is scored against the labelled query before it
                ["-m", "ndcg.-1=2", "-m", "G.-2=1,-1=0.5", "-m", "ndcg_rel.-1=1,0=1", "-m", "Rndcg.-1=1"],
                # parameters trec_eval ignores or reads in part; utility's wrong count it refuses
                ["-m", "map.5", "-m", "official.5", "-m", "relstring.3,6"], ["-m", "utility.1,2", "-m", "map"],
                # measures these judgments cannot feed: trec_eval stops ("Can't calculate")
                ["-m", "map", "-m", "prefs_simp"], ["-m", "P_avgjg"]]
JG_MEASURE_SETS = [["-m", "qrels_jg"], ["-m", "map_avgjg"], ["-m", "P_avgjg.3,10", "-m", "Rprec_mult_avgjg.0.5,1.5"],
                   ["-m", "qrels_jg", "-m", "num_q"], ["-m", "qrels_jg", "-m", "map"]]
PREFS_MEASURE_SETS = [["-m", "all_prefs"], ["-m", "prefs"], ["-m", "prefs_simp", "-m", "prefs_pair_imp"],
                      ["-m", "prefs_avgjg_Rnonrel", "-m", "prefs_avgjg_Rnonrel_ret"], ["-m", "all_prefs", "-m", "P.5"]]
# value names for -Z files: most of what the measure sets above print
Z_NAMES = ["num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
           "iprec_at_recall_0.00", "iprec_at_recall_0.50", "P_5", "P_10", "P_1000", "ndcg", "ndcg_cut_10",
           "recall_3", "success_1", "infAP", "utility", "set_F", "map_avgjg", "P_avgjg_3", "prefs_simp",
           "prefs_pair", "zzz_after_all"]
SCORE_SPELLINGS = ["+1", "1E3", "-0", ".5", "1.", "5e-1", "-1.5E+2", "0.0", "+.25", "3", "1e-300", "007"]
LABEL_SPELLINGS = {0: ["0", "00", "+0", "-0"], 1: ["1", "01", "+1"], 2: ["2", "002"], -1: ["-1", "-01"]}


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
    if kind < 0.25:
        return str(rnd.randint(-1, 5))                  # ties
    if kind < 0.4:
        return rnd.choice(SCORE_SPELLINGS)
    if kind < 0.55:
        return f"{rnd.uniform(0, 1):.2e}"               # scientific notation
    if kind < 0.65:
        return f"{rnd.uniform(-5, 0):.3f}"
    if kind < 0.75:
        return rnd.choice(["0.25", "0.5", "1.0"])
    return f"{rnd.uniform(0, 100):.6f}"


def label(rnd: random.Random, value: int) -> str:
    if value in LABEL_SPELLINGS and rnd.random() < 0.3:
        return rnd.choice(LABEL_SPELLINGS[value])
    return str(value)


class Layout:
    """How one file's lines are written: separators, edges, line ends."""

    def __init__(self, rnd: random.Random):
        self.rnd = rnd
        self.mixed = rnd.random() < 0.3                 # blanks and tabs, runs of them
        self.edges = rnd.random() < 0.2                 # leading / trailing white space
        self.crlf = rnd.random() < 0.15
        self.no_final_newline = rnd.random() < 0.1

    def line(self, fields: list[str]) -> str:
        rnd = self.rnd
        if not self.mixed:
            text = " ".join(fields)
        else:
            text = fields[0]
            for f in fields[1:]:
                text += rnd.choice([" ", "\t", "  ", " \t", "\t\t", "   "]) + f
        if self.edges:
            text = rnd.choice(["", " ", "\t", "  "]) + text + rnd.choice(["", " ", "\t", " \t"])
        return text

    def file(self, lines: list[str]) -> str:
        end = "\r\n" if self.crlf else "\n"
        text = end.join(lines) + end
        return text[: -len(end)] if self.no_final_newline else text


def judgments(rnd: random.Random, qids: list[str], groups: bool, negatives: bool = True) -> dict[str, dict[str, dict[str, int]]]:
    """qid -> judgment group -> docno -> label (one group "0" for plain qrels)."""
    out = {}
    for qid in qids:
        if rnd.random() < 0.8:                          # some queries only in the run
            out[qid] = {}
            for jg in (rnd.sample(["0", "1", "u2", "10"], rnd.randint(1, 3)) if groups else ["0"]):
                docs = {docno(rnd) for _ in range(rnd.randint(1, 16))}
                negative_only = rnd.random() < 0.08
                # best label 0: under -l 0 trec_eval counts those documents in Rndcg's R
                zero_best = not negative_only and rnd.random() < 0.08
                pick = ([-2, -1] if negative_only else [-1, 0, 0] if zero_best
                        else [-2, -1, 0, 0, 0, 1, 1, 2, 3, 4, 7])
                out[qid][jg] = {d: rnd.choice(pick if negatives else pick[2:] if not negative_only else [0])
                                for d in docs}
    return out


def run_lines(rnd: random.Random, qids: list[str], layout: Layout) -> list[str]:
    extra = rnd.random() < 0.15                         # fields after the sixth (trec_eval ignores them)
    lines = []
    for qid in qids:
        if rnd.random() < 0.8:
            docs = {docno(rnd) for _ in range(rnd.randint(1, 14))}
            tags = ["runA"] if rnd.random() < 0.8 else ["runA", "runB"]
            for d in docs:
                fields = [qid, "Q0", d, str(rnd.randint(0, 10)), score(rnd), rnd.choice(tags)]
                if extra and rnd.random() < 0.5:
                    fields += rnd.sample(["more", "junk", "at", "end", "1", "Q0"], rnd.randint(1, 3))
                lines.append(layout.line(fields))
    if not lines:
        lines.append(layout.line([qids[0], "Q0", docno(rnd), "1", "1", "runA"]))
    rnd.shuffle(lines)                                  # unsorted, queries interleaved
    if rnd.random() < 0.1:                              # blank lines, which trec_eval skips in a run
        for _ in range(rnd.randint(1, 3)):
            lines.insert(rnd.randint(0, len(lines)), rnd.choice(["", " ", "\t "]))
    return lines


def zscores_file(rnd: random.Random, qids: list[str], layout: Layout) -> str:
    lines = []
    for qid in qids:
        if rnd.random() < 0.8:
            for name in rnd.sample(Z_NAMES, rnd.randint(1, len(Z_NAMES))):
                stddev = rnd.choice(["0", "0.0", f"{rnd.uniform(0.05, 3):.4f}", "1"])
                lines.append(layout.line([qid, name, f"{rnd.uniform(-1, 5):.4f}", stddev]))
    if not lines:
        lines.append(layout.line([qids[0], "map", "0.1", "0.2"]))
    rnd.shuffle(lines)
    return layout.file(lines)


def random_case(rnd: random.Random) -> dict:
    qids = rnd.sample(QIDS, rnd.randint(1, 5))
    kind = rnd.random()
    rel_format = "qrels" if kind < 0.8 else "qrels_jg" if kind < 0.88 else rnd.choice(["prefs", "qrels_prefs"])
    flags = []
    for flag in ("-q", "-c", "-n", "-J"):
        if rnd.random() < 0.3:
            flags.append(flag)
    if rnd.random() < 0.25:
        flags += ["-M", str(rnd.choice([0, 1, 3, 5, 10]))]
    measures = rnd.choice({"qrels": MEASURE_SETS, "qrels_jg": JG_MEASURE_SETS}.get(rel_format, PREFS_MEASURE_SETS))
    if rnd.random() < 0.25:
        flags += ["-l", str(rnd.choice([-2, -1, 0, 0, 2, 3, 4]))]
    if rel_format != "qrels":
        flags += ["-R", rel_format]
    flags += measures
    # negative preference levels send prefs_avgjg_Rnonrel* outside trec_eval's arrays: refused
    # (man exam-qrels), so the cases that compare bytes keep levels >= 0
    negatives = not any("Rnonrel" in m or m == "all_prefs" for m in measures)
    layout = Layout(rnd)
    if rel_format == "prefs":
        qrels_text = prefs_file(rnd, qids, layout, negatives)
    else:
        judged = judgments(rnd, qids, groups=rel_format == "qrels_jg", negatives=negatives)
        lines = [layout.line([qid, jg if rel_format == "qrels_jg" else rnd.choice(["0", "1", "Q0"]), d, label(rnd, lab)])
                 for qid, groups in judged.items() for jg, docs in groups.items() for d, lab in docs.items()]
        if not lines:
            lines.append(layout.line([qids[0], "0", docno(rnd), "1"]))
        rnd.shuffle(lines)
        if rnd.random() < 0.02:                         # trec_eval refuses a blank qrels line
            lines.insert(rnd.randint(0, len(lines)), "")
        qrels_text = layout.file(lines)
    run_layout = Layout(rnd)
    run_text = run_layout.file(run_lines(rnd, qids, run_layout))
    case = {"flags": flags, "qrels": qrels_text, "run": run_text}
    if rnd.random() < 0.12:
        case["zscores"] = zscores_file(rnd, qids, Layout(rnd))
    return case


def prefs_file(rnd: random.Random, qids: list[str], layout: Layout, negatives: bool) -> str:
    """-R prefs judgments: ``qid ujg ujsg docno rel_level`` (get_prefs.c)."""
    lines = []
    for qid in qids:
        if rnd.random() < 0.8:
            for jg in rnd.sample(["1", "2", "A"], rnd.randint(1, 2)):
                for jsg in rnd.sample(["0", "1", "s2"], rnd.randint(1, 2)):
                    for d in {docno(rnd) for _ in range(rnd.randint(1, 8))}:
                        level = rnd.choice(["0", "1", "2", "3", "0.5", "10"] + (["-1", "-0.5"] if negatives else []))
                        lines.append(layout.line([qid, jg, jsg, d, level]))
    if not lines:
        lines.append(layout.line([qids[0], "1", "0", docno(rnd), "1"]))
    rnd.shuffle(lines)
    return layout.file(lines)


@pytest.fixture(scope="module")
def fresh_cases(tmp_path_factory):
    rnd = random.Random(SEED)
    tmp = tmp_path_factory.mktemp("random")
    cases, jobs = [], []
    for i in range(N_CASES):
        c = random_case(rnd)
        c["qrels_path"], c["run_path"] = tmp / f"{i}.qrels", tmp / f"{i}.run"
        c["qrels_path"].write_bytes(c["qrels"].encode())
        c["run_path"].write_bytes(c["run"].encode())
        if "zscores" in c:
            c["zscores_path"] = tmp / f"{i}.zscores"
            c["zscores_path"].write_bytes(c["zscores"].encode())
            c["flags"] = c["flags"] + ["-Z", str(c["zscores_path"])]
        cases.append(c)
        jobs.append(c["flags"] + [str(c["qrels_path"]), str(c["run_path"])])
    return list(zip(cases, run_batch(jobs)))


def test_random_inputs_never_crash_exam_qrels(fresh_cases):
    bad = [(c["flags"], g["exit"], g["signal"], g["stderr"][-300:]) for c, g in fresh_cases
           if g["signal"] is not None or g["exit"] not in (0, 2) or "Traceback" in g["stderr"]
           or (g["exit"] == 2 and (g["stdout"] or len(g["stderr"].splitlines()) != 1))]
    assert not bad, bad[:3]
    # the generator reaches both outcomes, every judgment format and -Z, or the check above says little
    exits = {g["exit"] for _, g in fresh_cases}
    assert exits == {0, 2}
    succeeded = [c["flags"] for c, g in fresh_cases if g["exit"] == 0]
    for flag in ("qrels_jg", "prefs", "qrels_prefs", "-Z", "-q", "-c", "-J", "-M", "-l", "-mndcg_cut.10,3,23.4"):
        assert any(flag in f for f in succeeded), flag
    levels = [f[f.index("-l") + 1] for f in succeeded if "-l" in f]
    assert {"-1", "0"} <= set(levels), levels   # below 0, and 0 (Rndcg on best label 0)


def run_binary(binary: Path, flags: list[str], qrels: Path, run: Path) -> tuple[int, str, str]:
    res = subprocess.run([str(binary), *flags, str(qrels), str(run)], capture_output=True, timeout=60)
    # a signal shows as a negative status, as in the recorded corpus
    return res.returncode, res.stdout.decode("utf-8", "replace"), res.stderr.decode("utf-8", "replace")


def test_binary_reproduces_the_recorded_outputs(trec_eval_binary, shared_data, tmp_path):
    with gzip.open(shared_data / "trec_eval_parity" / "cases-9.0.8.jsonl.gz", "rt") as fh:
        recorded = [json.loads(line) for line in fh]
    bad = []
    for c in recorded:
        q, r = tmp_path / "q", tmp_path / "r"
        q.write_text(c["qrels"])
        r.write_text(c["run"])
        code, out, _ = run_binary(trec_eval_binary, c["flags"], q, r)
        if code != c["exit"] or (code == 0 and out != c["stdout"]):
            bad.append(c["case"])
    assert not bad, f"this binary is not the recorded trec_eval 9.0.8 (cases {bad[:10]})"


def test_fresh_random_cases_match_the_binary(trec_eval_binary, fresh_cases):
    bad, outcomes = [], set()
    for c, ours in fresh_cases:
        code, out, err = run_binary(trec_eval_binary, c["flags"], c["qrels_path"], c["run_path"])
        outcomes.add(code)
        problem = verdict(code, out, err, ours)
        if problem:
            bad.append(f"{problem}: flags {c['flags']}\nqrels:\n{c['qrels']}run:\n{c['run']}"
                       f"zscores:\n{c.get('zscores', '')}trec_eval:\n{out}ours:\n{ours['stdout']}")
    assert not bad, f"{len(bad)} of {len(fresh_cases)} differ; first:\n" + "\n".join(bad[:2])
    assert {0, 2, 4} <= outcomes    # scored, stopped on an input, refused a measure
