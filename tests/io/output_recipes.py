"""One fast, successful, offline invocation for every output of every exam-* command, so
that a test can point that one output at something hostile (a FIFO, a device node, a
symlink, a folder, a read-only file...) and compare with the ordinary run.

* :func:`output_flags` discovers the outputs: every (command path, parameter name,
  flag) whose parameter the callback ``exam_eval.commands._base.claim_output`` records in
  ``ctx.meta["exam_eval.output_params"]`` (every output callback, check_output_param,
  check_appended_output, claim_cache, check_file_or_dir, funnels into it; it records the
  name before it returns on resilient parsing, so a context made from no arguments at
  all names every output). Nothing here is a hand-kept list of outputs.
* :func:`recipe` gives the argv (what follows the program name, as
  ``inproc.run(prog, *argv)`` takes it: ``run("correlate", *recipe(("exam-correlate",
  "leaderboard"), "plot", tmp_path))``) of a run that exits 0 and writes that output.
  The output's value is the placeholder ``"{OUT}"`` (an argv element equal to it, or
  holding it: ``"{OUT}/"`` for a folder given with its separator); :func:`fill`
  substitutes it. Every other output of the command goes to a file in
  ``tmp_path/"other"`` (or stdout, or nowhere: ``--no-cache``), so the folder of {OUT}
  receives nothing else. The inputs are written once under ``tmp_path/"in"``.
* :func:`recipe_env` gives the environment a recipe needs (put it over the test's:
  ``run(..., env=recipe_env(...))``).
* :func:`output_kinds` says what {OUT} may name: ``"file"`` (a file the run writes),
  ``"dir"`` (a folder that receives one file per run: exam-grade
  --responses-run-out/--reports-run-out, exam-nuggets score -o), ``"folder"`` (a
  command's own folder: exam-verify label FOLDER, written as FOLDER/design.json) or
  ``"label-folder"`` (exam-verify label-qrels FOLDER: {OUT} must already be a folder
  that exam-verify label made, with labels in it: :func:`make_label_folder` makes one at
  {OUT}; the run writes FOLDER/qrels/NAME.qrels).
* :func:`written` says which path a successful run must have created for a given {OUT}
  and kind (the file itself, a run file in the folder, FOLDER/design.json, ...).

Every recipe is offline (scripted back ends, or ``--backend endpoint`` only with
``--batch-out``, which sends nothing) and takes well under a second in process, but for
the first exam-correlate leaderboard --plot of a process (about 2.5 s: matplotlib's
import, and its font cache under a fresh XDG_CACHE_HOME; 0.3 s after) and exam-verify
report (0.7 s). exam-genq's -o refuses a path that exists already without --force:
``recipe(..., force=True)`` adds it, for an {OUT} that is a FIFO, /dev/null or a link.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
DEMO = ROOT / "exam_eval" / "demo_data"

#: the modules of exam_eval.commands that hold the exam-* commands
MODS = ["qrels", "cover", "correlate", "grade", "genq", "nuggets", "verify"]

OUT = "{OUT}"

#: what every recipe runs with (no progress bars); --batch-out's endpoint wants a key to exist
BASE_ENV = {"EXAM_EVAL_PROGRESS": "0"}
BATCH_ENV = {**BASE_ENV, "OPENAI_API_KEY": "sk-test"}

# --------------------------------------------------------------------------- discovery

def _walk(cmd, path):
    import click

    if isinstance(cmd, click.Group):
        for n, sub in cmd.commands.items():
            yield from _walk(sub, path + [n])
    else:
        yield path, cmd


def _flag(param) -> str:
    import click

    if isinstance(param, click.Option):
        return max(param.opts, key=len)
    return (param.metavar or param.name.upper()).strip("[]. ")


def _minimal_args(cmd) -> list[str]:
    """A value for each required parameter of CMD: click runs no callback of a required
    parameter left without one (it stops at "missing", even on resilient parsing), so an
    output that is a required argument (exam-verify label FOLDER) would go unseen. The
    value is a path that exists: a folder where the type takes no file (click.Path
    file_okay=False), else this file; a resilient parse checks and writes nothing."""
    import click

    args: list[str] = []
    for param in cmd.params:
        if not param.required:
            continue
        ptype = param.type
        value = str(Path(__file__).parent) if isinstance(ptype, click.Path) and not ptype.file_okay else __file__
        values = [value] * (param.nargs if param.nargs > 0 else 1)
        if isinstance(param, click.Option):
            args += [max(param.opts, key=len)] + ([] if param.is_flag else values)
        else:
            args += values
    return args


def output_flags() -> list[tuple[tuple[str, ...], str, str]]:
    """(command path, parameter name, longest flag) of every output of every exam-*
    command, as the commands and their parameters are declared: the parameters whose
    callback is, or ends in, claim_output, seen in what it records on a resilient parse of
    a minimal command line (:func:`_minimal_args`). An output that is an argument (a
    FOLDER) is named by its metavar."""
    import click

    found = []
    for m in MODS:
        cli = importlib.import_module("exam_eval.commands." + m).cli
        prog = "exam-" + m
        for path, cmd in _walk(cli, [prog]):
            parent = None
            if len(path) > 1:  # the group's context, as the real invocation has one
                parent = click.Context(cli, info_name=prog, resilient_parsing=True)
            ctx = cmd.make_context(path[-1], _minimal_args(cmd), parent=parent, resilient_parsing=True)
            names = ctx.meta.get("exam_eval.output_params") or set()
            for param in cmd.params:
                if param.name in names:
                    found.append((tuple(path), param.name, _flag(param)))
    return found


def run_name(command_path) -> str:
    """The name inproc.run takes: "correlate" for ("exam-correlate", "leaderboard")."""
    return command_path[0].removeprefix("exam-")


# --------------------------------------------------------------------------- inputs

def _lines(path: Path, keep) -> str:
    return "".join(line + "\n" for line in path.read_text().splitlines() if keep(line))


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _jsonl(path: Path, objs) -> Path:
    return _write(path, "".join(json.dumps(o) + "\n" for o in objs))


def inputs(tmp_path) -> dict[str, Path]:
    """The inputs every recipe reads, written once under tmp_path/"in" (and the folder
    tmp_path/"other" for the outputs that are not under test): demo topic 101 (and 102
    where a command needs two topics), two passages, two questions."""
    tmp_path = Path(tmp_path)
    d = tmp_path / "in"
    (tmp_path / "other").mkdir(parents=True, exist_ok=True)
    files = {name: d / name for name in (
        "topics.tsv", "passages.jsonl", "questions.jsonl", "nuggets.jsonl", "qrels.txt", "good.run", "poor.run",
        "grades.jsonl", "llm.qrels", "truth.tsv", "pred.tsv", "responses.jsonl", "reports.jsonl", "gen-script.jsonl",
        "chat-script.jsonl", "assign-script.jsonl", "nug-bank.jsonl", "nug-reports", "nug-grades.jsonl",
        "label-runs")}
    if (d / "done").exists():
        return files
    d.mkdir(parents=True, exist_ok=True)
    in_101 = lambda line: line.split()[0] == "101"  # noqa: E731
    top2 = lambda line: line.split()[0] in ("101", "102") and int(line.split()[3]) <= 2  # noqa: E731
    _write(files["topics.tsv"], _lines(DEMO / "topics.tsv", lambda ln: ln.split("\t")[0] in ("101", "102")))
    _write(files["qrels.txt"], _lines(DEMO / "qrels.txt", lambda ln: ln.split()[0] in ("101", "102")))
    _write(files["good.run"], _lines(DEMO / "good.run", top2))
    _write(files["poor.run"], _lines(DEMO / "poor.run", top2))
    docs = ["p064", "p092"]  # good.run's top 2 of topic 101
    _write(files["passages.jsonl"], _lines(DEMO / "passages.jsonl", lambda ln: json.loads(ln)["doc_id"] in docs))
    questions = [json.loads(x) for x in (DEMO / "questions.jsonl").read_text().splitlines()][:2]
    _jsonl(files["questions.jsonl"], questions)
    _write(files["nuggets.jsonl"], _lines(DEMO / "nuggets.jsonl", lambda ln: json.loads(ln)["query_id"] == "101"))
    # grades of every (document of the runs, question) pair of topics 101 and 102
    pool = sorted({(ln.split()[0], ln.split()[2]) for r in ("good.run", "poor.run")
                   for ln in files[r].read_text().splitlines()})
    items = {"101": [q["item_id"] for q in questions], "102": ["102/x"]}
    grades = [{"query_id": q, "doc_id": doc, "item_id": item, "kind": "question", "grade": (i * 3 + j) % 6,
               "probs": None, "answer": str((i * 3 + j) % 6), "parse_ok": True, "model": "m",
               "prompt": "question-selfrating", "prompt_hash": None}
              for i, (q, doc) in enumerate(pool) for j, item in enumerate(items[q])]
    _jsonl(files["grades.jsonl"], grades)
    _write(files["llm.qrels"], "".join(f"{q} 0 {doc} {i % 2}\n" for i, (q, doc) in enumerate(pool)))
    runs = ["r1", "r2", "r3", "r4"]
    _write(files["truth.tsv"], "run\tndcg\n" + "".join(f"{r}\t{v}\n" for r, v in zip(runs, (0.9, 0.7, 0.5, 0.2))))
    _write(files["pred.tsv"], "run\texam\n" + "".join(f"{r}\t{v}\n" for r, v in zip(runs, (0.8, 0.75, 0.3, 0.1))))
    _jsonl(files["responses.jsonl"], [{"query_id": "101", "run_id": "gen", "text": "Bees make honey from nectar."}])
    _jsonl(files["reports.jsonl"], [{"metadata": {"team_id": "t", "run_id": "rep", "topic_id": "101"},
                                     "responses": [{"text": "Bees collect nectar from flowers.", "citations": ["p064"]}],
                                     "references": ["p064"]}])
    _jsonl(files["gen-script.jsonl"], [{"query_id": "101", "response": "- What do bees collect?\n- Where is honey kept?"},
                                       {"query_id": "102", "response": "- What caused the revolution?"}])
    shutil.copy(DEMO / "nuggetize-script.jsonl", files["chat-script.jsonl"])
    # one topic, one nugget, three runs' reports (citing p064) and their assign grades
    from tests.hostile_inputs._worlds import nugget_world

    (d / "nug").mkdir()
    world = nugget_world(d / "nug")
    shutil.move(world["bank"], files["nug-bank.jsonl"])
    shutil.move(world["reports"], files["nug-reports"])
    shutil.move(world["grades"], files["nug-grades.jsonl"])
    shutil.rmtree(d / "nug")
    report_file = files["nug-reports"] / "r.jsonl"
    cited = [json.loads(x) for x in report_file.read_text().splitlines()]
    for rep in cited:
        rep["responses"][0]["citations"] = ["p064"]
        rep["references"] = ["p064"]
    _jsonl(report_file, cited)
    _jsonl(files["assign-script.jsonl"], [{"match": ["NuggetizeAssignerLLM"], "output": "['support']"}])
    # exam-verify label: two runs of topic 101 alone (the queries every run has)
    (files["label-runs"]).mkdir()
    for r in ("good.run", "poor.run"):
        _write(files["label-runs"] / r, _lines(files[r], in_101))
    (d / "done").write_text("")
    return files


# --------------------------------------------------------------------------- recipes

def _other(tmp_path, name: str) -> str:
    return str(Path(tmp_path) / "other" / name)


def _batch_command(name: str, tmp_path) -> list[str]:
    """tests/backends/test_batch_out_safety.py's command line of NAME (without its program
    and without --batch-out and -o), its inputs in tmp_path/"in"/"batch"."""
    from tests.backends.test_batch_out_safety import _command

    d = Path(tmp_path) / "in" / "batch" / name.replace(" ", "-")
    d.mkdir(parents=True, exist_ok=True)
    return [str(a) for a in _command(name, d)[1:]]


def output_kinds(command_path, param_name) -> tuple[str, ...]:
    """What {OUT} may name in :func:`recipe` (its ``kind``); the first is the default."""
    key = (tuple(command_path), param_name)
    if key in ((("exam-grade",), "responses_run_out"), (("exam-grade",), "reports_run_out"),
               (("exam-nuggets", "score"), "output")):
        return ("file", "dir")
    if key == (("exam-verify", "label"), "folder"):
        return ("folder",)
    if key == (("exam-verify", "label-qrels"), "folder"):
        return ("label-folder",)
    return ("file",)


def recipe(command_path, param_name: str, tmp_path, kind: str | None = None, force: bool = False) -> list[str]:
    """The argv of a run of COMMAND_PATH that exits 0 and writes PARAM_NAME's output,
    given as "{OUT}" (:func:`fill`); its inputs are written under tmp_path/"in", its other
    outputs go to tmp_path/"other" (or stdout, or nowhere). KIND (:func:`output_kinds`):
    "dir" gives the folder as "{OUT}/", for one RUN_ID.run (exam-grade) or RUN.txt
    (exam-nuggets score --format trec_eval) per run; "label-folder" (exam-verify
    label-qrels) wants {OUT} made by :func:`make_label_folder` first. FORCE: add --force
    where the command takes it (exam-genq generate, import, nuggetize), whose -o refuses
    a path that exists already ("exists; pass --force"): a FIFO, /dev/null, a link."""
    argv = _recipe(command_path, param_name, tmp_path, kind)
    if force and command_path[0] == "exam-genq":
        argv.append("--force")
    return argv


def _recipe(command_path, param_name: str, tmp_path, kind: str | None) -> list[str]:
    path = tuple(command_path)
    kind = kind or output_kinds(path, param_name)[0]
    if kind not in output_kinds(path, param_name):
        raise ValueError(f"{' '.join(path)} {param_name}: no recipe of kind {kind!r}")
    f = {k: str(v) for k, v in inputs(tmp_path).items()}
    other = lambda name: _other(tmp_path, name)  # noqa: E731
    out = OUT + os.sep if kind == "dir" else OUT
    sub = list(path[1:])
    key = (path, param_name)

    def scripted_grade(*extra):
        return ["--backend", "scripted", "--prompt", "question-selfrating", "--bank", f["questions.jsonl"],
                "--passages", f["passages.jsonl"], *extra]

    # ---- exam-qrels, exam-cover
    if key == (("exam-qrels",), "output"):
        return ["-m", "map", f["qrels.txt"], f["good.run"], f["poor.run"], "-o", out]
    if key == (("exam-cover",), "output"):
        return [f["grades.jsonl"], f["good.run"], f["poor.run"], "-o", out]
    # ---- exam-correlate
    if key == (("exam-correlate", "leaderboard"), "output"):
        return sub + [f["truth.tsv"], f["pred.tsv"], "-o", out]
    if key == (("exam-correlate", "leaderboard"), "plot"):
        return sub + [f["truth.tsv"], f["pred.tsv"], "--plot", out, "-o", other("correlation.tsv")]
    if key == (("exam-correlate", "agreement"), "output"):
        return sub + [f["qrels.txt"], f["llm.qrels"], "-o", out]
    if key == (("exam-correlate", "qrels"), "output"):
        return sub + [f["qrels.txt"], f["llm.qrels"], "-o", out]
    if key == (("exam-correlate", "interval"), "output"):
        return sub + [f["qrels.txt"], f["llm.qrels"], f["good.run"], f["poor.run"], "--n-labelled", "2",
                      "--samples", "100", "-o", out]
    if key == (("exam-correlate", "compare"), "output"):
        return sub + [f["qrels.txt"], f["good.run"], f["poor.run"], "-o", out]
    if key == (("exam-correlate", "compare"), "plot"):
        return sub + [f["qrels.txt"], f["good.run"], f["poor.run"], "--plot", out, "-o", other("pairs.tsv")]
    # ---- exam-grade
    if key == (("exam-grade",), "output"):
        return scripted_grade(f["good.run"], "-k", "2", "--no-cache", "-o", out)
    if key == (("exam-grade",), "cache_path"):
        return scripted_grade(f["good.run"], "-k", "2", "--cache", out, "-o", other("grades.jsonl"))
    if key == (("exam-grade",), "batch_out"):
        return _batch_command("exam-grade", tmp_path) + ["--batch-out", out, "-o", other("grades.jsonl")]
    if key == (("exam-grade",), "responses_run_out"):
        return scripted_grade("--responses", f["responses.jsonl"], "--responses-run-out", out, "--no-cache",
                              "-o", other("grades.jsonl"))
    if key == (("exam-grade",), "reports_run_out"):
        return ["--backend", "scripted", "--prompt", "nugget-selfrating", "--bank", f["nuggets.jsonl"],
                "--reports", f["reports.jsonl"], "--reports-run-out", out, "--no-cache", "-o", other("grades.jsonl")]
    # ---- exam-genq
    if key == (("exam-genq", "generate"), "output"):
        return sub + [f["topics.tsv"], "--backend", "scripted", "--script", f["gen-script.jsonl"], "--no-cache",
                      "-o", out]
    if key == (("exam-genq", "generate"), "cache_path"):
        return sub + [f["topics.tsv"], "--backend", "scripted", "--script", f["gen-script.jsonl"], "--cache", out,
                      "-o", other("bank.jsonl")]
    if key == (("exam-genq", "generate"), "batch_out"):
        return _batch_command("exam-genq generate", tmp_path) + ["--batch-out", out, "-o", other("bank.jsonl")]
    if key == (("exam-genq", "import"), "output"):
        return sub + [f["questions.jsonl"], "-o", out]
    nuggetize = sub + [f["topics.tsv"], "--qrels", f["qrels.txt"], "--min-label", "3", "--passages",
                       str(DEMO / "passages.jsonl"), "--backend", "scripted", "--script", f["chat-script.jsonl"]]
    if key == (("exam-genq", "nuggetize"), "output"):
        return nuggetize + ["--no-cache", "-o", out]
    if key == (("exam-genq", "nuggetize"), "cache_path"):
        return nuggetize + ["--cache", out, "-o", other("nuggets.jsonl")]
    if key == (("exam-genq", "nuggetize"), "batch_out"):
        return _batch_command("exam-genq nuggetize", tmp_path) + ["--batch-out", out, "-o", other("nuggets.jsonl")]
    # ---- exam-nuggets
    score = sub + [f["nug-grades.jsonl"], "--reports", f["nug-reports"], "--bank", f["nug-bank.jsonl"]]
    if key == (("exam-nuggets", "score"), "output"):
        return score + (["--format", "trec_eval"] if kind == "dir" else []) + ["-o", out]
    if key == (("exam-nuggets", "score"), "assignments"):
        return score + ["--assignments", out, "-o", other("scores.tot")]
    if key == (("exam-nuggets", "qrels"), "output"):
        return sub + [f["nug-grades.jsonl"], "--reports", f["nug-reports"], "-o", out]
    if key == (("exam-nuggets", "bank"), "output"):
        return sub + ["--to", "nuggetizer", f["nug-bank.jsonl"], "-o", out]
    support = sub + ["--reports", f["nug-reports"], "--passages", f["passages.jsonl"], "--backend", "scripted"]
    if key == (("exam-nuggets", "support"), "output"):
        return support + ["--no-cache", "-o", out]
    if key == (("exam-nuggets", "support"), "cache_path"):
        return support + ["--cache", out, "-o", other("support.jsonl")]
    assign = sub + ["--reports", f["nug-reports"], "--bank", f["nug-bank.jsonl"], "--topics", f["topics.tsv"],
                    "--backend", "scripted", "--script", f["assign-script.jsonl"]]
    if key == (("exam-nuggets", "assign"), "output"):
        return assign + ["--no-cache", "-o", out]
    if key == (("exam-nuggets", "assign"), "assignments"):
        return assign + ["--no-cache", "--assignments", out, "-o", other("assign.jsonl")]
    if key == (("exam-nuggets", "assign"), "cache_path"):
        return assign + ["--cache", out, "-o", other("assign.jsonl")]
    if key == (("exam-nuggets", "assign"), "batch_out"):
        return _batch_command("exam-nuggets assign", tmp_path) + ["--batch-out", out, "-o", other("assign.jsonl")]
    # ---- exam-verify
    if key == (("exam-verify", "grading"), "output"):
        return sub + [f["grades.jsonl"], "--qrels", f["qrels.txt"], "--bank", f["questions.jsonl"], "--passages",
                      f["passages.jsonl"], "-o", out]
    if key == (("exam-verify", "spurious"), "output"):
        return sub + [f["grades.jsonl"], f["qrels.txt"], "-o", out]
    if key == (("exam-verify", "uncovered"), "output"):
        return sub + [f["grades.jsonl"], f["qrels.txt"], "-o", out]
    if key == (("exam-verify", "grid"), "output"):
        return sub + [f["grades.jsonl"], "--qrels", f["qrels.txt"], "-o", out]
    if key == (("exam-verify", "report"), "output"):
        return sub + [f["grades.jsonl"], f["good.run"], f["poor.run"], "--qrels", f["qrels.txt"], "-o", out]
    if key == (("exam-verify", "label"), "folder"):
        return sub + [out, *_label_args(f)]
    if key == (("exam-verify", "label-qrels"), "folder"):
        return sub + [out]
    raise KeyError(f"no recipe for {' '.join(path)} {param_name}")


def _label_args(f) -> list[str]:
    runs = Path(f["label-runs"])
    return [str(runs / "good.run"), str(runs / "poor.run"), "-n", "1", "-k", "2", "--topics", f["topics.tsv"],
            "--passages", f["passages.jsonl"], "--no-serve"]


def recipe_env(command_path, param_name: str) -> dict[str, str]:
    """The environment variables a recipe needs (over the test's own)."""
    if param_name == "batch_out":
        return dict(BATCH_ENV)
    return dict(BASE_ENV)


def fill(argv, out) -> list[str]:
    """ARGV with "{OUT}" made OUT."""
    return [str(a).replace(OUT, os.fspath(out)) for a in argv]


def make_label_folder(tmp_path, folder=None, assessor: str = "ann") -> Path:
    """A label folder of exam-verify label (FOLDER/design.json) at FOLDER (default
    tmp_path/"label"), with ASSESSOR's labels of every pair in FOLDER/labels/, as
    exam-verify label-qrels wants it. Run in process (inproc.run)."""
    import inproc
    from exam_eval.verify.label_design import read_design
    from exam_eval.verify.label_store import Labels, labels_path

    folder = Path(folder) if folder is not None else Path(tmp_path) / "label"
    f = {k: str(v) for k, v in inputs(tmp_path).items()}
    res = inproc.run("verify", "label", str(folder), *_label_args(f), env=dict(BASE_ENV))
    assert res.returncode == 0, res.stderr
    labels = Labels(labels_path(str(folder), assessor))
    for i, (q, d) in enumerate(read_design(str(folder)).pair_list()):
        labels.append({"event": "label", "qid": q, "docno": d, "label": i % 4, "note": ""})
    return folder


def written(command_path, param_name: str, out, kind: str | None = None) -> Path:
    """The path a successful run of :func:`recipe` (KIND) must have created for {OUT} =
    OUT: OUT itself for a file, the one run file in a "dir", FOLDER/design.json for
    exam-verify label, FOLDER/qrels/ann.qrels for label-qrels."""
    out = Path(out)
    path = tuple(command_path)
    kind = kind or output_kinds(path, param_name)[0]
    if kind == "dir":
        if path == ("exam-nuggets", "score"):
            return out / "runA.txt"
        return out / ("gen.run" if param_name == "responses_run_out" else "rep.run")
    if kind == "folder":
        return out / "design.json"
    if kind == "label-folder":
        return out / "qrels" / "ann.qrels"
    return out
