"""The RAG demo: reports -> grades -> nugget scores -> leaderboard, offline.

    python -m exam_eval.demo_rag --out demo-rag-out          # what `make demo-rag` runs

The four demo runs become RAG reports (each run's top 3 passages per topic, one sentence
each, citing the passage: the TREC RAG 24 shape, citations as indices into
``references``). Then the real commands, each printed before its result:

1. ``exam-grade --reports``: grade every report sentence against the demo's nugget bank
   (the embedding grader, offline; the cache lives in the output folder) and write the
   run that ranks the sentences;
2. ``exam-nuggets score``: nugget scores (All, Vital, Weighted, strict variants) and
   EXAM-Cover per report, as a "tot" leaderboard with ``all`` rows and as a table;
3. ``exam-nuggets qrels``: document qrels from the citations (a cited passage is as
   relevant as the sentences citing it cover nuggets);
4. ``exam-nuggets support`` and ``score --support-grades --assignments``: citation
   support of every (sentence, cited passage), the leaderboard with support precision /
   recall, and the nuggetizer's assign-output file, read back by ``score``;
5. ``exam-nuggets bank --to nuggetizer|autojudge``: the bank for the other tools;
6. ``exam-correlate leaderboard``: the nugget leaderboard against the human one
   (nDCG@10 of the runs with the demo's own judgments).

The AutoNuggetizer's own steps (``exam-genq nuggetize``, ``exam-nuggets assign``) need
a generating LLM, which the offline demo does not have; see the README's table of methods.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .demo import HUMAN_MIN, PRIMARY, RUNS, Step, best_vs_worst, demo_data_dir, show_file

DEPTH = 3


def build_reports(data: Path, out: Path) -> None:
    from .io.passages import read_passages
    from .io.reports import reports_from_run
    from .io.trec import read_run

    texts = read_passages(str(data / "passages.jsonl"))
    out.mkdir(parents=True, exist_ok=True)
    for name in RUNS:
        objs = reports_from_run(name, read_run(str(data / f"{name}.run")), texts, depth=DEPTH, team_id="demo")
        (out / f"{name}.jsonl").write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")


def run_demo(out: Path, backend: str, model: str | None, extra: list[str]) -> int:
    data = demo_data_dir()
    out.mkdir(parents=True, exist_ok=True)
    step = Step(out)
    started = time.perf_counter()
    reports, grades, bank = out / "reports", out / "grades.jsonl", data / "nuggets.jsonl"
    build_reports(data, reports)
    print(f"exam_eval RAG demo: the 4 demo runs as RAG reports ({DEPTH} sentences per topic, each citing its "
          f"passage) in {reports}/")
    print(f"grader: --backend {backend}" + (f" --model {model}" if model else "") + " --prompt nugget-selfrating")

    if grades.exists():
        grades.unlink()  # rebuilt each time, so that a rerun shows the cache at work
    args = ["--reports", str(reports), "--backend", backend, "--prompt", "nugget-selfrating", "--bank", str(bank),
            "--topics", str(data / "topics.tsv"), "--reports-run-out", str(out / "sentences") + "/",
            "--cache", str(out / "grade-cache.sqlite"), "-o", str(grades)]
    if model:
        args += ["--model", model]
    step("exam-grade", *args, *extra, capture_stderr=True)

    tot, table = out / "leaderboard.tot", out / "leaderboard.tsv"
    score = ["score", "--reports", str(reports), "--bank", str(bank)]
    step("exam-nuggets", *score, "--format", "tot", "-o", str(tot), str(grades))
    step("exam-nuggets", *score, "--format", "table", "-o", str(table), str(grades))
    print(f"per-topic leaderboard (run measure topic value, with 'all' rows): {tot}")
    print("nugget scores and EXAM-Cover of the reports (means over topics):")
    show_file(table)

    cited = out / "cited.qrels"
    step("exam-nuggets", "qrels", "--reports", str(reports), "--from", "nuggets", "-o", str(cited), str(grades))
    print(f"wrote {cited} (document qrels from the reports' citations)")

    # citation support (the embedding grader: cosine of sentence and cited passage), then
    # the leaderboard with support precision / recall and the nuggetizer's assign-output file
    support = out / "support.jsonl"
    step("exam-nuggets", "support", "--reports", str(reports), "--passages", str(data / "passages.jsonl"),
         "--backend", backend, *(["--model", model] if model else []), "--cache", str(out / "grade-cache.sqlite"),
         "-o", str(support))
    full, assigned = out / "leaderboard-support.tsv", out / "assignments.jsonl"
    step("exam-nuggets", *score, "--support-grades", str(support), "--assignments", str(assigned),
         "--format", "table", "-o", str(full), str(grades))
    print("with citation support (support_precision, support_recall):")
    show_file(full)
    again = out / "leaderboard-from-assignments.tsv"
    step("exam-nuggets", *score, "--format", "table", "-o", str(again), str(assigned))
    same = again.read_text(encoding="utf-8").splitlines()[1:] == [
        line for line in table.read_text(encoding="utf-8").splitlines()[1:]]
    print(f"wrote {assigned} (the nuggetizer's assign output, one line per report with run_id); scored again from "
          f"it: {'the same nugget scores' if same else 'DIFFERENT nugget scores'}")
    for fmt in ("nuggetizer", "autojudge"):
        step("exam-nuggets", "bank", "--to", fmt, "--topics", str(data / "topics.tsv"), str(bank),
             "-o", str(out / f"bank.{fmt}.jsonl"), capture_stderr=True)
    print(f"wrote {out}/bank.nuggetizer.jsonl and bank.autojudge.jsonl (the bank for the nuggetizer and AutoJudge)")

    runs = [str(data / f"{name}.run") for name in RUNS]
    human = out / "human-qrels.tsv"
    step("exam-qrels", "-c", "-l", str(HUMAN_MIN), "-m", "ndcg_cut.10", str(data / "qrels.txt"), *runs,
         "-o", str(human))
    corr = out / "correlation.txt"
    with corr.open("w", encoding="utf-8") as fh:
        for col in ("nugget_all", "exam_cover"):
            stdout, _ = step("exam-correlate", "leaderboard", str(human), str(table), "--truth-column", PRIMARY,
                             "--pred-column", col)
            print(f"human {PRIMARY} vs report {col}:")
            print(stdout, end="")
            fh.write(f"# human {PRIMARY} vs report {col}\n{stdout}")
    verdict = best_vs_worst(human, {"report nugget_all": (table, "nugget_all"),
                                    "report EXAM-Cover": (table, "exam_cover")})
    print()
    print(verdict)
    (out / "verdict.txt").write_text(verdict + "\n", encoding="utf-8")
    print(f"\nfiles: {out}/ (reports/, grades.jsonl, sentences/, leaderboard.tot, leaderboard.tsv, cited.qrels, "
          f"support.jsonl, leaderboard-support.tsv, assignments.jsonl, bank.*.jsonl, correlation.txt, commands.sh); "
          f"{time.perf_counter() - started:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m exam_eval.demo_rag",
        description="RAG reports -> grades -> nugget scores -> leaderboard on the built-in demo collection (offline).",
        epilog="examples:\n  python -m exam_eval.demo_rag --out demo-rag-out\n"
               "  python -m exam_eval.demo_rag --out demo-rag-t5 --backend hf-seq2seq --model google/flan-t5-large",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("demo-rag-out"), help="output folder (default: demo-rag-out)")
    ap.add_argument("--backend", default="embedding", help="exam-grade back end (default: embedding)")
    ap.add_argument("--model", default=None, help="model for the back end (default: the back end's own)")
    ap.add_argument("extra", nargs="*", help="further exam-grade options, after --")
    args = ap.parse_args(argv)
    return run_demo(args.out.resolve(), args.backend, args.model, args.extra)


if __name__ == "__main__":
    sys.exit(main())
