"""Every command: --help with examples, a man page that groff renders without warnings."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import inproc
from refusals import one_line_refusal

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


@pytest.mark.parametrize("prog", sorted(SCRIPTS))
def test_help_has_examples_and_exit_0(prog, run_cli):
    res = run_cli(prog, "--help")
    assert res.returncode == 0, res.stderr
    assert "Usage:" in res.stdout and "Example" in res.stdout


@pytest.mark.parametrize("prog", sorted(SCRIPTS))
def test_man_page_exists_and_renders_cleanly(prog):
    page = ROOT / "man" / f"{prog}.1"
    assert page.is_file(), f"missing man page {page}"
    text = page.read_text()
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "EXAMPLES"):
        assert f".SH {section}" in text or f'.SH "{section}"' in text, (prog, section)
    if shutil.which("groff"):
        res = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(page)], capture_output=True, text=True)
        assert res.stderr == "", res.stderr


@pytest.mark.parametrize("prog", ["exam-qrels", "exam-cover", "exam-correlate", "exam-verify"])
def test_light_commands_start_without_torch(prog):
    module = "exam_eval.commands." + prog.removeprefix("exam-")
    code = (f"import sys, {module} as m\n"
            "try:\n    m.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('HEAVY', [x for x in ('torch', 'transformers') if x in sys.modules])")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "HEAVY []" in res.stdout, res.stdout + res.stderr


def test_the_checkout_launcher_runs_every_command_without_install():
    """bin/exam-eval NAME is exam-NAME, for every console script (and exam-NAME reads the
    same); it needs no line per command."""
    launcher = ROOT / "bin" / "exam-eval"
    res = subprocess.run([sys.executable, str(launcher), "--help"], capture_output=True, text=True)
    assert res.returncode == 0, res
    listed = res.stdout.split("(COMMAND: ")[1].split(";")[0].split(", ")
    assert sorted(f"exam-{name}" for name in listed) == sorted(SCRIPTS)
    res = subprocess.run([sys.executable, str(launcher), "exam-qrels", "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.startswith("Usage: exam-qrels "), res
    demo = ROOT / "exam_eval" / "demo_data"
    args = ["-m", "map", demo / "qrels.txt", demo / "good.run"]
    res = subprocess.run([sys.executable, str(launcher), "qrels", *args], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout == inproc.run("qrels", *args).stdout and "\tall\t" in res.stdout, res


@pytest.mark.parametrize("argv, says", [([], "usage: exam-eval COMMAND"), (["nope"], "exam-eval: no command 'nope'"),
                                        (["_base"], "exam-eval: no command '_base'")])
def test_the_checkout_launcher_refuses_in_one_line(argv, says):
    res = subprocess.run([sys.executable, str(ROOT / "bin" / "exam-eval"), *argv], capture_output=True, text=True)
    assert res.returncode == 1 and res.stdout == "" and len(res.stderr.splitlines()) == 1, res
    assert res.stderr.startswith(says), res.stderr


def test_the_checkout_launcher_runs_in_the_checkouts_venv(tmp_path):
    """The python3 first on PATH may lack pytrec_eval and torch: the launcher started by
    another Python hands itself to the checkout's .venv (here a stand-in that says so)."""
    import shutil

    (tmp_path / "bin").mkdir()
    shutil.copy(ROOT / "bin" / "exam-eval", tmp_path / "bin" / "exam-eval")
    fake = tmp_path / ".venv" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\necho "venv python: $*"\n')
    fake.chmod(0o755)
    res = subprocess.run([sys.executable, str(tmp_path / "bin" / "exam-eval"), "qrels", "-q", "a b"],
                         capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout == f"venv python: {tmp_path / 'bin' / 'exam-eval'} qrels -q a b\n", res


@pytest.mark.parametrize("missing, where", [("pytrec_eval", "scoring"), ("click", "the command's import")])
def test_a_missing_library_is_one_line(missing, where):
    demo = ROOT / "exam_eval" / "demo_data"
    code = (f"import sys; sys.modules[{missing!r}] = None; "
            f"sys.argv = ['exam-qrels', '-c', '-m', 'ndcg_cut.10', {str(demo / 'qrels.txt')!r}, "
            f"{str(demo / 'good.run')!r}]; from exam_eval.launch import run; run('qrels')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.stdout == "", (where, res)
    assert one_line_refusal(res, code=1).startswith(f"exam-qrels: the library {missing} is not installed in ")


def test_an_in_process_run_leaves_the_library_progress_switches_as_a_new_process_finds_them(monkeypatch):
    """Every command switches off huggingface_hub's and transformers' progress bars; in a
    process of its own that ends with it. The in-process runner puts them back, so a later
    run (one that checks HF_HUB_DISABLE_PROGRESS_BARS=0 keeps a first download's bar) finds
    them as a new process would."""
    import inproc

    hub = pytest.importorskip("huggingface_hub.utils")
    hf = pytest.importorskip("transformers.utils.logging")
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    hub.enable_progress_bars()
    hf.enable_progress_bar()
    seen = {}

    def look(*_args, **_kw):  # inside the run, after the command switched them off
        seen["hub_off"], seen["hf_on"] = hub.are_progress_bars_disabled(), hf.is_progress_bar_enabled()
        raise SystemExit(0)

    monkeypatch.setattr("exam_eval.commands._base.StdoutGuard.install", look)
    res = inproc.run("exam-qrels", "--help")
    assert res.code == 0 and seen == {"hub_off": True, "hf_on": False}
    assert not hub.are_progress_bars_disabled() and hf.is_progress_bar_enabled()
