"""`--help` of every command and subcommand loads none of the heavy or numeric libraries:
the package's own imports sit at the top of each module (issue 59), so a module that pulls
numpy, scipy or pytrec_eval at its top, reached from a command module, would slow every
`--help` and every refusal of a bad flag without a word from test_light_commands_start_without_torch
(torch and transformers only)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
HEAVY = ("numpy", "scipy", "pytrec_eval", "torch", "transformers", "ctranslate2", "matplotlib",
         "sentence_transformers", "ir_datasets", "pandas")

_PROBE = """
import importlib, sys, click
m = importlib.import_module({module!r})

def paths(cmd, prefix):
    yield prefix
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            yield from paths(sub, prefix + [name])

seen = []
for p in paths(m.cli, []):
    try:
        m.main(p + ["--help"])
    except SystemExit as exc:
        assert exc.code == 0, (p, exc.code)
    seen.append(" ".join(p) or "-")
print("PATHS", len(seen))
print("HEAVY", sorted(x for x in {heavy!r} if x in sys.modules))
"""


@pytest.mark.parametrize("prog", sorted(SCRIPTS))
def test_help_of_every_subcommand_loads_no_heavy_library(prog):
    module = "exam_eval.commands." + prog.removeprefix("exam-")
    res = subprocess.run([sys.executable, "-c", _PROBE.format(module=module, heavy=HEAVY)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "HEAVY []" in res.stdout, (prog, res.stdout.splitlines()[-2:])
    assert int(res.stdout.split("PATHS ")[1].split()[0]) >= 1
