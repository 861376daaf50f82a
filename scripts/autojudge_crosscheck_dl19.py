#!/usr/bin/env python3
"""exam-correlate leaderboard / qrels against the TREC AutoJudge evaluator's own code on
TREC DL 2019 files.

Truth leaderboard: the recorded `trec_eval -q -m all_trec` outputs of the 37 DL19 runs
(NIST qrels). Judge leaderboard: the same runs scored by exam-qrels with a reference-
workbench LLM qrels file. Both are written as "tot" files; autojudge-evaluate 1.1's
LeaderboardEvaluator (kendall, spearman, pearson, tauap_b, tau_gap, kendall@10, overall
and per topic) and its qrel-evaluate functions (set_overlap, grade_agreement) read the
same files, and every value must equal exam-correlate's to the 4 printed decimals.

autojudge-evaluate does not import offline (its __init__ imports tira and autojudge-base,
whose document module downloads nltk data at import time). This script therefore
registers the two packages without running their __init__ files, which loads exactly the
modules the evaluator's functions use. A verification aid only: exam_eval does not
depend on autojudge-evaluate.

    .venv/bin/python -m pip install --no-deps autojudge-evaluate autojudge-base
    .venv/bin/python scripts/autojudge_crosscheck_dl19.py [--llm ../shared/data/dl19/llm-qrels/Sun.qrels]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))

from exam_eval.io.leaderboard import read_leaderboard  # noqa: E402

MEASURES = ("ndcg_cut_10", "map")
QRELS_CASES = (  # llm-qrels file, truth max, pred max, truth min, pred min
    ("Sun", 1, 1, 1, 1),
    ("QuestionSelfRatedUnanswerablePromptWithChoices", 3, 3, 2, 2),
    ("NuggetSelfRatedPrompt", 3, 5, 2, 4),
)


def _register_without_init(name: str) -> None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"{name} is not installed: pip install --no-deps autojudge-evaluate autojudge-base")
    mod = types.ModuleType(name)
    mod.__path__ = list(spec.submodule_search_locations)
    sys.modules[name] = mod


def _cli(*args: str) -> str:
    res = subprocess.run([sys.executable, "-c", "import exam_eval.commands.correlate as m; m.main()", *args],
                         capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)})
    if res.returncode:
        sys.exit(res.stderr)
    return res.stdout


def _write_tot(board_path: Path, out: Path) -> None:
    board = read_leaderboard(board_path, "auto")
    with out.open("w") as f:
        for m in MEASURES:
            for run, per in board.topics[m].items():
                for topic, v in per.items():
                    f.write(f"{run}\t{m}\t{topic}\t{v}\n")
                f.write(f"{run}\t{m}\tall\t{board.rows[run][m]}\n")


class Tally:
    def __init__(self):
        self.n = self.bad = 0

    def check(self, what: str, theirs: float, mine: str) -> None:
        self.n += 1
        if (theirs != theirs and mine == "nan") or mine == f"{theirs:.4f}":
            return
        self.bad += 1
        print(f"DIFFERS {what}: autojudge-evaluate {theirs!r}, exam-correlate {mine}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llm", default=str(DATA / "dl19" / "llm-qrels" /
                                         "QuestionSelfRatedUnanswerablePromptWithChoices.qrels"))
    args = ap.parse_args()
    for name in ("autojudge_base", "autojudge_evaluate"):
        _register_without_init(name)
    sys.modules["autojudge_base"].LeaderboardFormat = str  # a typing alias evaluation.py imports
    from autojudge_base.qrels.qrels import read_qrel_file
    from autojudge_evaluate.evaluation import LeaderboardEvaluator
    from autojudge_evaluate.nugget_doc_eval import grade_agreement, set_overlap

    tally = Tally()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        truth_dir, judge_dir = tmp / "truth", tmp / "judge"
        truth_dir.mkdir()
        judge_dir.mkdir()
        for line in gzip.open(DATA / "trec_eval_parity" / "dl19-runs-9.0.8.jsonl.gz", "rt"):
            case = json.loads(line)
            flags = case["flags"] if isinstance(case["flags"], str) else " ".join(case["flags"])
            if flags == "-q -m all_trec":
                (truth_dir / (Path(case["run"]).stem + ".eval")).write_text(case["stdout"])
        for run in sorted((DATA / "dl19" / "runs").glob("*.run")):
            res = subprocess.run([sys.executable, "-c", "import exam_eval.commands.qrels as m; m.main()", "-q",
                                  "-m", "ndcg_cut.10", "-m", "map", args.llm, str(run)],
                                 capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)}, check=True)
            (judge_dir / (run.stem + ".eval")).write_text(res.stdout)
        truth, judge = tmp / "truth.tot", tmp / "judge.tot"
        _write_tot(truth_dir, truth)
        _write_tot(judge_dir, judge)

        methods = {"kendall": "kendall_tau_b", "spearman": "spearman", "pearson": "pearson",
                   "tauap_b": "tau_ap_b", "tau_gap": "tau_gap", "kendall@10": "kendall@10"}
        ev = LeaderboardEvaluator(truth, truth_format="tot", eval_format="tot", correlation_methods=list(methods))
        theirs = ev.evaluate(judge)
        table = _cli("leaderboard", str(truth), str(judge))
        header = table.splitlines()[0].split("\t")
        ours = {(r[1], r[2]): dict(zip(header, r)) for r in (x.split("\t") for x in table.strip().splitlines()[1:])}
        for pair, vals in theirs.items():
            for a, o in methods.items():
                tally.check(f"{pair} {a}", vals[a], ours[pair][o])
        print("leaderboard ndcg_cut_10 vs ndcg_cut_10: " + ", ".join(
            f"{o} {ours[('ndcg_cut_10', 'ndcg_cut_10')][o]}" for o in methods.values()))

        per_topic = ev.evaluate_per_topic(judge)
        table = _cli("leaderboard", str(truth), str(judge), "--per-topic")
        header = table.splitlines()[0].split("\t")
        ours = {(r[1], r[2], r[3]): dict(zip(header, r))
                for r in (x.split("\t") for x in table.strip().splitlines()[1:])}
        for pair, topics in per_topic.items():
            for topic, vals in topics.items():
                for a, o in methods.items():
                    tally.check(f"{pair} topic {topic} {a}", vals[a], ours[pair + (topic,)][o])

        qrels = DATA / "dl19" / "qrels.txt"
        for name, tmax, pmax, tmin, pmin in QRELS_CASES:
            llm = DATA / "dl19" / "llm-qrels" / f"{name}.qrels"
            t, p = read_qrel_file(qrels), read_qrel_file(llm)
            ov = set_overlap(t, p, truth_relevance_threshold=tmin, predict_relevance_threshold=pmin)
            ag = grade_agreement(t, p, truth_max_grade=tmax, predict_max_grade=pmax,
                                 truth_relevance_threshold=tmin, predict_relevance_threshold=pmin)
            table = _cli("qrels", str(qrels), str(llm), "--truth-max", str(tmax), "--pred-max", str(pmax),
                         "--truth-min", str(tmin), "--pred-min", str(pmin))
            header = table.splitlines()[0].split("\t")
            rows = {r[0]: dict(zip(header, r)) for r in (x.split("\t") for x in table.strip().splitlines()[1:])}
            for r in ov:
                for col in ("precision", "recall", "f1"):
                    tally.check(f"{name} {r.topic_id} {col}", getattr(r, col), rows[r.topic_id][col])
            for r in ag:
                for col, v in (("jaccard", r.jaccard), ("kappa_w", r.kappa_weighted), ("kripp_alpha", r.kripp_alpha),
                               ("ari", r.ari), *((f"kappa@{a}v{b}", v) for (a, b), v in r.kappa_binary.items())):
                    tally.check(f"{name} {r.topic_id} {col}", v, rows[r.topic_id][col])
            # qrel-evaluate's MEAN row: the mean over topics of each column, NaN skipped
            for col in ("precision", "recall", "f1"):
                tally.check(f"{name} MEAN {col}", float(np.mean([getattr(r, col) for r in ov])), rows["mean"][col])
            for col, attr in (("jaccard", "jaccard"), ("kappa_w", "kappa_weighted"), ("kripp_alpha", "kripp_alpha"),
                              ("ari", "ari")):
                vals = [getattr(r, attr) for r in ag if getattr(r, attr) == getattr(r, attr)]
                tally.check(f"{name} MEAN {col}", float(np.mean(vals)) if vals else float("nan"), rows["mean"][col])
            print(f"qrels {name}: mean F1 {rows['mean']['f1']}, Jaccard {rows['mean']['jaccard']}, "
                  f"kripp_alpha {rows['mean']['kripp_alpha']}; pooled kappa@{tmin}v{pmin} {rows['pooled'][f'kappa@{tmin}v{pmin}']}")
    print(f"{tally.n} values compared with autojudge-evaluate, {tally.bad} differ")
    return 1 if tally.bad else 0


if __name__ == "__main__":
    sys.exit(main())
