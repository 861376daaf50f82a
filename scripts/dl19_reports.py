#!/usr/bin/env python3
"""Report-level scores on TREC DL 2019 against the official leaderboard.

Issue 11's check on real data without RAG submissions: each of the 37 DL19 runs becomes
a set of RAG reports (its top --depth passages per query, one sentence each, citing the
passage), the passages' texts are the corpus; the reports are graded sentence by
sentence against the DL19 question and nugget banks (exam-grade --reports, embedding
back end by default: offline, minutes on a CPU), scored per report (exam-nuggets score:
EXAM-Cover and the nugget scores All / Vital / Weighted and strict variants) and every
measure's leaderboard is correlated with the official nDCG@10 (exam-correlate
leaderboard: Kendall tau-b, Spearman, ...). Every step is the command a user would run.

    .venv/bin/python scripts/dl19_reports.py                        # out: dl19-reports-out/
    .venv/bin/python scripts/dl19_reports.py --runs 8 --topics 10   # a quick subset

Prints one TSV table: bank, measure, kendall_tau_b, spearman, tau_ap, n.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from exam_eval.io.passages import read_passages  # noqa: E402
from exam_eval.io.reports import reports_from_run  # noqa: E402
from exam_eval.trec_eval.trec_files import read_run  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "dl19"
BANKS = {"questions": ("questions.jsonl.gz", "question-selfrating"),
         "nuggets": ("nuggets.jsonl.gz", "nugget-selfrating")}
MEASURES = ("exam_cover", "n_exam_cover", "nugget_all", "nugget_all_strict", "nugget_vital", "nugget_weighted")


def command(prog: str, *args) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", f"import exam_eval.commands.{prog} as m; m.main()", *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)}\nfailed ({proc.returncode}):\n{proc.stderr}")
    return proc


def build_reports(data: Path, out: Path, depth: int, runs: int | None, topics: int | None) -> list[str]:
    texts = read_passages(str(data / "passages.jsonl.gz"))
    out.mkdir(parents=True, exist_ok=True)
    names = sorted(p.stem for p in (data / "runs").glob("*.run"))[:runs]
    keep = None
    if topics:
        keep = set(sorted({q for n in names for q in read_run(str(data / "runs" / f"{n}.run"))})[:topics])
    for name in names:
        run = read_run(str(data / "runs" / f"{name}.run"))
        if keep is not None:
            run = {q: d for q, d in run.items() if q in keep}
        reports = reports_from_run(name, run, texts, depth=depth, team_id="dl19")
        (out / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reports))
    return names


def correlations(official: Path, board: Path, measure: str) -> dict[str, str]:
    proc = command("correlate", "leaderboard", official, board, "--truth-column", "ndcg_cut_10",
                   "--pred-column", measure)
    return dict(line.split("\t") for line in proc.stdout.splitlines())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path, default=Path("dl19-reports-out"))
    ap.add_argument("--depth", type=int, default=5, help="passages (sentences) per report")
    ap.add_argument("--runs", type=int, default=None, help="only the first N runs (by name)")
    ap.add_argument("--topics", type=int, default=None, help="only the first N topics (by id)")
    ap.add_argument("--backend", default="embedding")
    ap.add_argument("--cache", type=Path, default=None, help="grade cache [OUT/cache.sqlite]")
    ap.add_argument("--banks", nargs="+", choices=sorted(BANKS), default=sorted(BANKS))
    args = ap.parse_args()

    out = args.out
    build_reports(args.data, out / "reports", args.depth, args.runs, args.topics)
    cache = args.cache or out / "cache.sqlite"
    rows = []
    for bank in args.banks:
        bank_file, prompt = BANKS[bank]
        grades = out / f"grades.{bank}.jsonl"
        command("grade", "--backend", args.backend, "--prompt", prompt, "--bank", args.data / "banks" / bank_file,
                "--topics", args.data / "topics.tsv", "--reports", out / "reports", "--cache", cache, "-o", grades)
        board = out / f"leaderboard.{bank}.tsv"
        command("nuggets", "score", "--reports", out / "reports", "--bank", args.data / "banks" / bank_file,
                "--format", "table", "-o", board, grades)
        for measure in MEASURES:
            c = correlations(args.data / "official.tsv", board, measure)
            rows.append((bank, measure, c["kendall_tau_b"], c["spearman"], c["tau_ap"], c["n"]))
    table = ["bank\tmeasure\tkendall_tau_b\tspearman\ttau_ap\tn"] + ["\t".join(r) for r in rows]
    (out / "correlations.tsv").write_text("\n".join(table) + "\n")
    print("\n".join(table))


if __name__ == "__main__":
    main()
