"""The GPU run's two scripts (bench/device_stage.sh, bench/device_run.sh), tried without a
GPU: what is staged is what bench_pipeline reads, and the run's steps stop at their limits
while the later steps still run."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STAGE_SCRIPT = ROOT / "bench" / "device_stage.sh"
RUN_SCRIPT = ROOT / "bench" / "device_run.sh"

pytestmark = pytest.mark.skipif(not (shutil.which("bash") and shutil.which("git") and shutil.which("timeout")),
                                reason="needs bash, git and timeout")


def fake_dl19(folder: Path) -> Path:
    """A DL19-shaped folder: what bench_pipeline reads, and files beside it that it does not."""
    (folder / "banks").mkdir(parents=True)
    (folder / "runs").mkdir()
    (folder / "first-stage-runs").mkdir()
    with gzip.open(folder / "passages.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"doc_id": "d1", "text": "a passage"}) + "\n")
    for name in ("questions.jsonl.gz", "nuggets.jsonl.gz"):
        with gzip.open(folder / "banks" / name, "wt") as fh:
            fh.write("{}\n")
    for name in ("a.run", "b.run"):
        (folder / "runs" / name).write_text("1 Q0 d1 1 1.0 r\n")
    (folder / "first-stage-runs" / "c.run").write_text("1 Q0 d1 1 1.0 r\n")
    (folder / "qrels.txt").write_text("1 0 d1 1\n")
    return folder


def git_repo(folder: Path) -> Path:
    """A repository whose .git stands in for the project's (GIT_DIR), so the exclude file
    written is this one."""
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / "f").write_text("x\n")
    subprocess.run(["git", "-C", str(folder), "add", "f"], check=True)
    subprocess.run(["git", "-C", str(folder), "commit", "-qm", "c"], check=True, env=env)
    return folder / ".git"


def stage(tmp_path: Path, data: Path, *args: str) -> subprocess.CompletedProcess:
    gitdir = tmp_path / "repo" / ".git"
    if not gitdir.exists():
        git_repo(tmp_path / "repo")
    env = dict(os.environ, DATA=str(data), STAGE=str(tmp_path / "stage"), GIT_DIR=str(gitdir))
    return subprocess.run(["bash", str(STAGE_SCRIPT), *args], capture_output=True, text=True, env=env)


def test_stage_copies_only_what_bench_pipeline_reads(tmp_path):
    data = fake_dl19(tmp_path / "dl19")
    (tmp_path / "stage" / "whl").mkdir(parents=True)  # an earlier --ct2 staging's wheel
    (tmp_path / "stage" / "whl" / "old.whl").write_text("x")
    for _ in range(2):  # a second staging replaces the first, and adds no second exclude line
        r = stage(tmp_path, data)
        assert r.returncode == 0, r.stderr
    staged = sorted(str(p.relative_to(tmp_path / "stage")) for p in (tmp_path / "stage").rglob("*") if p.is_file())
    assert staged == ["COMMIT", "dl19/banks/questions.jsonl.gz", "dl19/passages.jsonl.gz", "dl19/runs/a.run",
                      "dl19/runs/b.run"]
    exclude = (tmp_path / "repo" / ".git" / "info" / "exclude").read_text().splitlines()
    assert exclude.count("/.device/") == 1
    assert "travels:" in r.stdout


def test_stage_without_the_data_says_so_in_one_line(tmp_path):
    r = stage(tmp_path, tmp_path / "nowhere")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "nowhere" in r.stderr
    assert not (tmp_path / "stage").exists()


@pytest.mark.shared
def test_the_staged_copy_gives_bench_pipeline_the_same_pool(tmp_path, shared_data):
    r = stage(tmp_path, shared_data / "dl19")
    assert r.returncode == 0, r.stderr
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import common
    finally:
        sys.path.remove(str(ROOT / "bench"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    original = common.build_pool(shared_data / "dl19", tmp_path / "a", 3, 5, 1)
    copy = common.build_pool(tmp_path / "stage" / "dl19", tmp_path / "b", 3, 5, 1)
    assert copy["chosen"] == original["chosen"] and copy["texts"] == original["texts"]
    assert len(copy["texts"]) == 15
    for name in ("pool.run", "passages.jsonl", "bank.jsonl"):
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "a" / name).read_bytes()


FAKE_PYTHON = r"""#!/usr/bin/env bash
# stands in for python3: the inline scripts (versions, imports), and bench_pipeline.py
# writing its files; with ARGV_LOG, each call's arguments and bytecode folder go there
args=$*
[ -n "${ARGV_LOG:-}" ] && echo "${args//$'\n'/ } | prefix=${PYTHONPYCACHEPREFIX:-}" >>"$ARGV_LOG"
[ "$1" = -c ] && { echo "inline script"; exit 0; }
out= models= json=
while [ $# -gt 0 ]; do
  case $1 in --out) out=$2; shift ;; --models) models=$2; shift ;; --json) json=$2; shift ;; esac
  shift
done
[ -n "$json" ] && { echo "profile step"; exit 0; }  # device_profile.py: its lines in run.log
mkdir -p "$out"
echo '{"complete": false}' >"$out/bench_pipeline.json"
[ "$models" = slow ] && exec sleep 60
echo '{"complete": true}' >"$out/bench_pipeline.json"
echo "table of ${models:-host}" >"$out/bench_pipeline.txt"
"""


def test_run_stops_a_step_at_its_limit_and_runs_the_rest(tmp_path):
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    (tmp_path / "data").mkdir()
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=str(fake), DATA=str(tmp_path / "data"), WHEELS=str(tmp_path / "none"),
               OUT=str(out), LARGE="slow", BASE="fast", BUDGET="60", LARGE_CAP="2", MIN_STEP="1",
               KEEP_BATCHES="1", KEEP_HOST="1", PATH=f"{tmp_path}:{os.environ['PATH']}")
    r = subprocess.run(["bash", str(RUN_SCRIPT)], capture_output=True, text=True, env=env, timeout=50)
    assert r.returncode == 0, r.stdout + r.stderr
    log = (out / "run.log").read_text()
    assert "== slow: STOPPED at its limit (2s)" in log
    assert "== fast: done in" in log and "== host cost (device CPU): done in" in log
    assert "== batches (slow, exam-grade's engine): done in" in log
    # the steps in their order of need, the optional flan-t5-base last
    order = [log.index(f"== {name}") for name in ("slow", "batches (slow", "host cost", "profile (slow", "fast")]
    assert order == sorted(order)
    assert "== profile (slow, the model alone): done in" in log and "profile step" in log
    assert "no wheel carried" in log
    # the stopped step's file holds what it saved before; the others' their tables
    assert json.loads((out / "large" / "bench_pipeline.json").read_text()) == {"complete": False}
    assert (out / "base" / "bench_pipeline.txt").read_text() == "table of fast\n"
    assert (out / "host" / "bench_pipeline.txt").read_text() == "table of host\n"
    assert "table of fast" in r.stdout  # the tables are printed at the end (the device tool's output tail)


def test_run_needs_the_staged_data(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable, DATA=str(tmp_path / "missing"), OUT=str(tmp_path / "out"))
    r = subprocess.run(["bash", str(RUN_SCRIPT)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2
    assert "device_stage.sh" in r.stdout


def test_the_judged_pool_is_every_judged_passage_against_its_questions(tmp_path, shared_data):
    """bench/studies/device_batches.py's judged step grades what the reference workbench graded for DL19:
    every judged passage against its query's questions (counted here from the files)."""
    import collections

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import common
    finally:
        sys.path.remove(str(ROOT / "bench"))
    dl19 = shared_data / "dl19"
    with gzip.open(dl19 / "passages.jsonl.gz", "rt") as fh:
        judged = collections.Counter(json.loads(line)["query_id"] for line in fh)
    with gzip.open(dl19 / "banks" / "questions.jsonl.gz", "rt") as fh:
        questions = collections.Counter()
        for line in fh:
            obj = json.loads(line)
            questions[obj["query_id"]] += len(obj["items"])
    pool = common.build_judged_pool(dl19, tmp_path)
    assert {q: len(ds) for q, ds in pool["chosen"].items()} == {q: n for q, n in judged.items() if q in questions}
    pairs = sum(len(ds) * questions[q] for q, ds in pool["chosen"].items())
    assert pairs == sum(n * questions[q] for q, n in judged.items())
    assert pairs > 90_000  # about 92,600: the figure the device run's line gives
    run_lines = (tmp_path / "pool.run").read_text().splitlines()
    assert len(run_lines) == sum(judged[q] for q in pool["chosen"])
    assert {line.split()[2] for line in run_lines} == set(pool["texts"])
    # the rehearsal's cut: the first query's first three passages
    (tmp_path / "cut").mkdir()
    cut = common.build_judged_pool(dl19, tmp_path / "cut", 1, 3)
    first = min(pool["chosen"])
    assert cut["chosen"] == {first: pool["chosen"][first][:3]} and len(cut["texts"]) == 3


def fake_run(tmp_path: Path, **env_vars: str) -> list[str]:
    """device_run.sh with the fake python and every step quick: the calls it made."""
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    (tmp_path / "data").mkdir(exist_ok=True)
    log = tmp_path / "argv.log"
    log.unlink(missing_ok=True)
    env = dict(os.environ, PYTHON=str(fake), DATA=str(tmp_path / "data"), WHEELS=str(tmp_path / "none"),
               OUT=str(tmp_path / "out"), LARGE="fast", BUDGET="60", MIN_STEP="1", KEEP_BATCHES="1",
               KEEP_HOST="1", ARGV_LOG=str(log), **env_vars)
    r = subprocess.run(["bash", str(RUN_SCRIPT)], capture_output=True, text=True, env=env, timeout=50)
    assert r.returncode == 0, r.stdout + r.stderr
    return log.read_text().splitlines()


def test_run_passes_its_knobs_to_the_steps(tmp_path):
    calls = fake_run(tmp_path, PYCACHE=str(tmp_path / "pyc"), FLOAT32_ROW="0", BATCHES_STEPS="default,judged")
    # the versions and import lines see the image as it is; every later process the bytecode folder
    first_warm = next(i for i, c in enumerate(calls) if "import exam_eval" in c)
    assert first_warm >= 2 and all(c.endswith("prefix=") for c in calls[:first_warm])
    assert all(c.endswith(f"prefix={tmp_path / 'pyc'}") for c in calls[first_warm:])
    large = next(c for c in calls if "--models fast" in c)
    assert "--no-float32-row" in large and "--float32-row" not in large.replace("--no-float32-row", "")
    batches = next(c for c in calls if "device_batches.py" in c)
    assert "--steps default,judged" in batches


def test_run_without_a_bytecode_folder_and_on_a_cpu(tmp_path):
    calls = fake_run(tmp_path, PYCACHE="", DEVICE="cpu", BATCHES_STEPS="")
    assert all(c.endswith("prefix=") for c in calls) and not any("import exam_eval" in c for c in calls)
    large = next(c for c in calls if "--models fast" in c)
    assert "--float32-row" in large and "--no-float32-row" not in large  # a CPU asks for the row
    batches = next(c for c in calls if "device_batches.py" in c)
    assert "--steps" not in batches  # device_batches.py's own default: every step
