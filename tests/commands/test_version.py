"""Every command says its version (trec_eval has -v): exam-X --version, exit 0, the version
the installed package's metadata gives."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from inproc import run

COMMANDS = ["qrels", "cover", "correlate", "grade", "genq", "nuggets", "verify"]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_says_its_version(name):
    res = run(name, "--version")
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"exam-{name} (exam_eval) {version('exam_eval')}\n"
    assert res.stderr == ""
    assert "--version" in run(name, "--help").stdout
