"""The built-in demo: the whole EXAM pipeline on the shipped demo collection, offline.

    python -m exam_eval.demo --out demo-out          # what `make demo` runs

It runs the real commands, printing each command line before its result, so every step
can be repeated by hand:

1. ``exam-grade``: grade the top passages of the four demo runs against the hand-written
   question bank (default: the sentence-embedding grader on all-MiniLM-L6-v2, packaged on
   PyPI, so no network is needed). The grade cache lives in the output folder; a second
   demo run is answered from it and says so. The grades file is rewritten on every run.
2. ``exam-qrels``: turn the grades into EXAM-Qrels (label = max grade over the questions).
3. ``exam-qrels`` again, as trec_eval: the EXAM-Qrels leaderboard of the runs, and the
   same measures with the human qrels (the leaderboard the EXAM one should agree with).
4. ``exam-cover``: the EXAM-Cover leaderboard.
5. ``exam-correlate leaderboard`` (human vs EXAM-Qrels and vs EXAM-Cover) and
   ``exam-correlate agreement`` (EXAM labels vs human labels, passage by passage).

Then it checks what a newcomer will ask first: does the automatic leaderboard put the
best run (by human judgments) above the worst one? It says so plainly either way.

The demo default is an embedding grader because, on TREC DL 2019, it agreed with NIST
better than the tiny LLMs that install from PyPI (docs/demo-model.md). Real evaluations
use ``google/flan-t5-large`` or an LLM endpoint: see ``--backend``/``--model`` and
exam-grade(1).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import threading
import time
from importlib import resources
from pathlib import Path

from exam_eval.errors import OutputError
from exam_eval.io.leaderboard import read_leaderboard
from exam_eval.io.outputs import ensure_output_dir, special_kind, write_error

RUNS = ("good", "mediocre", "poor", "random")
MIN_GRADE = 4  # "answered": the EXAM papers' strict threshold on the 0-5 self-rating scale
HUMAN_MIN = 2  # TREC DL: human label >= 2 is relevant
MEASURES = ("ndcg_cut.10", "P.5")
PRIMARY = "ndcg_cut_10"


def demo_data_dir() -> Path:
    return Path(str(resources.files("exam_eval") / "demo_data"))


class Step:
    """Runs one exam-* command as a user would (a subprocess), echoing the command line."""

    def __init__(self, out: Path, show: bool = True, shown_as: Path | None = None):
        self.out = out
        self.show = show
        #: the folder the files end up in, where ``out`` is where they are made: commands are
        #: shown (and logged) with its paths
        self.shown_as = shown_as
        self.log = out / "commands.sh"
        # the commands are run by the interpreter that runs the demo; the script finds them
        # where that interpreter's installs put them (.venv/bin), so it runs as written in a
        # shell where that folder is not on PATH
        scripts = sysconfig.get_path("scripts")
        write_text(self.log, "#!/bin/sh\n# the commands the demo ran, from the directory it was started in\nset -e\n"
                   f"PATH={shlex.quote(scripts)}:\"$PATH\"; export PATH\n")

    def __call__(self, prog: str, *args: str, capture_stderr: bool = False) -> tuple[str, str]:
        shown = " ".join([prog] + [shlex.quote(self._rel(self._as_shown(a))) for a in args])
        write_text(self.log, shown + "\n", mode="a")
        if self.show:
            print(f"\n$ {shown}", flush=True)
        module = "exam_eval.commands." + prog.removeprefix("exam-")
        cmd = [sys.executable, "-c", f"from {module} import main; main()", *args]
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        err_chunks: list[str] = []

        def pump():
            # Pass exam-grade's progress through live while keeping its summary line.
            for line in proc.stderr:
                err_chunks.append(line)
                if capture_stderr or proc.returncode:
                    sys.stderr.write(line)
                    sys.stderr.flush()

        t = threading.Thread(target=pump, daemon=True)
        t.start()
        stdout = proc.stdout.read()
        proc.wait()
        t.join()
        stderr = "".join(err_chunks)
        if proc.returncode != 0:
            if not capture_stderr:  # else it was passed through already
                sys.stderr.write(stderr)
            sys.stderr.write(f"demo: `{shown}` failed with exit status {proc.returncode}\n")
            raise SystemExit(proc.returncode if proc.returncode > 0 else 1)
        return stdout, stderr

    def _as_shown(self, arg: str) -> str:
        if self.shown_as is not None and (arg == str(self.out) or arg.startswith(str(self.out) + os.sep)):
            return str(self.shown_as) + arg[len(str(self.out)):]
        return arg

    @staticmethod
    def _rel(arg: str) -> str:
        """Paths under the working directory are shown relative to it (shorter, copyable)."""
        if not os.path.isabs(arg):
            return arg
        cwd = os.getcwd()
        return os.path.relpath(arg, cwd) if arg.startswith(cwd + os.sep) else arg


def write_text(path: Path, text: str, mode: str = "w") -> None:
    """The demo's own small files; a failure (disk full, no permission) names the file."""
    try:
        with path.open(mode, encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise write_error(str(path), exc) from None


def read_tsv(path: Path) -> dict[str, dict[str, float]]:
    return {run: {k: v for k, v in row.items()} for run, row in read_leaderboard(path).rows.items()}


def show_file(path: Path) -> None:
    print(path.read_text(encoding="utf-8"), end="")


def run_demo(out: Path, backend: str, model: str | None, prompt: str, extra: list[str]) -> int:
    """The demo into ``out``. Its files are made in a folder of their own inside it and moved
    in at the end: a run that fails (a model that needs the network, a GPU) leaves an
    earlier demo's files as they were, its grades beside its leaderboards."""
    import shutil
    import tempfile

    made = not out.exists()
    ensure_output_dir(out)
    work = Path(tempfile.mkdtemp(prefix=".demo-in-progress-", dir=out))
    done = False
    try:
        cache = out / "grade-cache.sqlite"
        if cache.exists():  # carried over: a rerun is served from it
            shutil.copy2(cache, work / cache.name)
        code = _run_steps(work, out, backend, model, prompt, extra)
        files = sorted(work.iterdir())
        for f in files:  # all checked before the first is moved: an earlier demo's files stay whole
            _check_replaceable(out / f.name)
        for f in files:
            os.replace(f, out / f.name)
        done = True
        return code
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if made and not done:  # a folder this run made holds nothing of it
            shutil.rmtree(out, ignore_errors=True)


def _check_replaceable(path: Path) -> None:
    """The demo's files replace an earlier demo's (regular files, or links, which a rename
    replaces and whose targets stay): a folder, a device or a FIFO put in their place is
    not renamed over (/dev/null made a regular file, as root, for every program)."""
    if path.is_symlink():
        return
    kind = "a folder" if path.is_dir() else special_kind(path)
    if kind is not None:
        raise OutputError(f"is {kind} where the demo writes a file: not replaced; remove it or give another --out",
                          str(path))


def _run_steps(work: Path, out: Path, backend: str, model: str | None, prompt: str, extra: list[str]) -> int:
    """The demo's steps, its files made in ``work`` and named as they will be in ``out``."""
    data = demo_data_dir()
    step = Step(work, shown_as=out)
    runs = [str(data / f"{name}.run") for name in RUNS]
    grades = work / "grades.jsonl"
    cache = work / "grade-cache.sqlite"
    started = time.perf_counter()
    print(f"exam_eval demo: 10 topics, 100 passages, 4 runs, 100 questions ({data})")
    print(f"grader: --backend {backend}" + (f" --model {model}" if model else "") + f" --prompt {prompt}")

    # 1. grade. The grades file is made anew each time (a fresh folder), so that a rerun
    #    exercises the cache.
    grade_args = ["--backend", backend, "--prompt", prompt, "--bank", str(data / "questions.jsonl"),
                  "--passages", str(data / "passages.jsonl"), "--topics", str(data / "topics.tsv"),
                  "--cache", str(cache), "-o", str(grades)]
    if model:
        grade_args += ["--model", model]
    _, err = step("exam-grade", *grade_args, *extra, *runs, capture_stderr=True)
    m = re.search(r"(\d+) pairs: (\d+) graded, (\d+) from cache", err)
    if m:
        pairs, graded, cached = map(int, m.groups())
        if graded == 0 and cached == pairs:
            print(f"all {pairs} grades were served from the cache ({cache.name}); no model call was made")
        elif cached:
            print(f"{cached} of {pairs} grades served from the cache, {graded} graded now")
        else:
            print(f"{pairs} pairs graded (cached in {cache.name}: the next run is served from the cache)")

    # 2. EXAM-Qrels
    exam_qrels = work / "exam.qrels"
    step("exam-qrels", str(grades), "-o", str(exam_qrels))
    print(f"wrote {out / exam_qrels.name}")

    # 3. leaderboards: EXAM-Qrels and human qrels, same measures; binary measures at the
    #    scale's own "relevant" level on each side.
    mflags = [a for m_ in MEASURES for a in ("-m", m_)]
    exam_lb, human_lb, cover_lb = work / "exam-qrels.tsv", work / "human-qrels.tsv", work / "exam-cover.tsv"
    step("exam-qrels", "-c", "-l", str(MIN_GRADE), *mflags, str(exam_qrels), *runs, "-o", str(exam_lb))
    print("EXAM-Qrels leaderboard:")
    show_file(exam_lb)
    step("exam-qrels", "-c", "-l", str(HUMAN_MIN), *mflags, str(data / "qrels.txt"), *runs, "-o", str(human_lb))
    print("human-qrels leaderboard (the demo's own judgments):")
    show_file(human_lb)

    # 4. EXAM-Cover
    step("exam-cover", "-c", "--min-grade", str(MIN_GRADE), "--bank", str(data / "questions.jsonl"),
         str(grades), *runs, "-o", str(cover_lb))
    print("EXAM-Cover leaderboard:")
    show_file(cover_lb)

    # 5. meta-evaluation
    corr = work / "correlation.txt"
    shown = []
    for pred, col in ((exam_lb, PRIMARY), (cover_lb, "exam_cover")):
        stdout, _ = step("exam-correlate", "leaderboard", str(human_lb), str(pred),
                         "--truth-column", PRIMARY, "--pred-column", col)
        print(f"human {PRIMARY} vs {pred.stem} {col}:")
        print(stdout, end="")
        shown.append(f"# human {PRIMARY} vs {pred.stem} {col}\n{stdout}")
    write_text(corr, "".join(shown))
    agree = work / "agreement.txt"
    step("exam-correlate", "agreement", str(data / "qrels.txt"), str(exam_qrels),
         "--human-min", str(HUMAN_MIN), "--llm-min", str(MIN_GRADE), "-o", str(agree))
    print(f"agreement of EXAM labels (>= {MIN_GRADE}) with the human labels (>= {HUMAN_MIN}):")
    show_file(agree)

    verdict = best_vs_worst(human_lb, {"EXAM-Qrels " + PRIMARY: (exam_lb, PRIMARY),
                                       "EXAM-Cover": (cover_lb, "exam_cover")})
    print()
    print(verdict)
    write_text(work / "verdict.txt", verdict + "\n")
    # what the folder holds, every file of it moves to ``out``: a list written out by hand
    # lost verdict.txt once
    files = ", ".join(sorted(f.name for f in work.iterdir()))
    print(f"\nfiles: {out}/ ({files}); {time.perf_counter() - started:.0f} s")
    # a folder of its own: this one keeps the embedding grader's files to compare with
    t5 = Step._rel(str(out.with_name(out.name.removesuffix("-out") + "-t5")))
    # the interpreter that ran this demo: a shell without the venv active has no torch in its python
    python = shlex.quote(Step._rel(sys.executable))
    print("real evaluations grade with google/flan-t5-large or an LLM endpoint, e.g.\n"
          f"  {python} -m exam_eval.demo --out {t5} --backend hf-seq2seq --model google/flan-t5-large\n"
          "  (see the README, docs/demo-model.md and man exam-grade)")
    return 0


def best_vs_worst(human_lb: Path, exam: dict[str, tuple[Path, str]]) -> str:
    human = {run: row[PRIMARY] for run, row in read_tsv(human_lb).items()}
    best = max(human, key=lambda r: (human[r], r))
    worst = min(human, key=lambda r: (human[r], r))
    lines = [f"best run by human judgments: {best} ({PRIMARY} {human[best]:.4f}); "
             f"worst: {worst} ({human[worst]:.4f})"]
    for label, (path, col) in exam.items():
        vals = {run: row[col] for run, row in read_tsv(path).items()}
        b, w = vals.get(best), vals.get(worst)
        if b is None or w is None:
            lines.append(f"{label}: cannot compare ({best} or {worst} missing)")
        elif b > w:
            lines.append(f"{label}: puts {best} ({b:.4f}) above {worst} ({w:.4f}) - as the humans do")
        else:
            lines.append(f"{label}: does NOT put {best} ({b:.4f}) above {worst} ({w:.4f}); "
                         "this grader fails the demo's basic check")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m exam_eval.demo",
        description="Run the EXAM pipeline end to end on the built-in demo collection (offline).",
        epilog="examples:\n"
               "  python -m exam_eval.demo --out demo-out\n"
               "  python -m exam_eval.demo --out demo-t5 --backend hf-seq2seq --model google/flan-t5-large\n"
               "  python -m exam_eval.demo --out demo-vllm --backend endpoint --model meta-llama/Llama-3.1-8B-Instruct"
               " -- --base-url http://gpu1:8000/v1",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("demo-out"), help="output folder (default: demo-out)")
    ap.add_argument("--backend", default="embedding", help="exam-grade back end (default: embedding)")
    ap.add_argument("--model", default=None, help="model for the back end (default: the back end's own)")
    ap.add_argument("--prompt", default="question-selfrating", help="grading prompt (default: question-selfrating)")
    ap.add_argument("extra", nargs="*", help="further exam-grade options, after --")
    args = ap.parse_args(argv)
    return run_demo(args.out.resolve(), args.backend, args.model, args.prompt, args.extra)


if __name__ == "__main__":
    from exam_eval.commands._base import run_guarded

    # the commands' contract: one line and exit 2 when --out cannot be written, quiet on `| head`
    run_guarded("demo", main)
