"""trec_eval 9.0.8's own test suite (its Makefile's ``quicktest``: 11 invocations over the
files of its test/ folder) run through exam-qrels with the same flags and files: the
output must be byte-identical to the expected file trec_eval ships and to what the real
binary, built from ../shared/tools, prints here. Skips without that folder or a compiler.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from test_trec_eval_parity import run_batch  # noqa: E402


def quicktest_invocations(source: Path) -> list[tuple[list[str], str]]:
    """[(trec_eval arguments, expected output file)] from the Makefile's quicktest target."""
    out, in_target = [], False
    for line in (source / "Makefile").read_text().splitlines():
        if line.startswith("quicktest:"):
            in_target = True
            continue
        if in_target and not line.startswith("\t"):
            break
        if in_target and "| diff - " in line:
            command, expected = line.strip().split("| diff - ")
            words = shlex.split(command)
            assert words[0] == "./trec_eval", line
            out.append((words[1:], expected.strip()))
    return out


@pytest.fixture(scope="module")
def quicktest(trec_eval_binary):
    source = trec_eval_binary.parent
    if not (source / "test").is_dir():
        pytest.skip(f"{source} has no trec_eval test/ folder (EXAM_EVAL_TREC_EVAL names a bare binary)")
    cases = quicktest_invocations(source)
    # the files are named relative to the source folder, as make runs them
    ours = run_batch([[str(source / w) if w.startswith("test/") else w for w in args] for args, _ in cases])
    out = []
    for (args, expected), got in zip(cases, ours):
        binary = subprocess.run([str(trec_eval_binary), *args], cwd=source, capture_output=True, text=True,
                                timeout=120)
        out.append((args, (source / expected).read_text(), binary, got))
    return out


def test_all_eleven_invocations_are_found(quicktest):
    assert len(quicktest) == 11
    flags = {w for args, *_ in quicktest for w in args}
    assert {"-R", "-Z", "-mndcg.1=3,2=9,4=4.5", "qrels_jg", "prefs", "qrels_prefs"} <= flags


def test_the_binary_passes_its_own_quicktest(quicktest):
    # otherwise the comparison below would compare with a broken trec_eval
    for args, expected, binary, _ in quicktest:
        assert binary.returncode == 0 and binary.stdout == expected, args


@pytest.mark.parametrize("index", range(11))
def test_exam_qrels_prints_the_expected_bytes(quicktest, index):
    args, expected, binary, ours = quicktest[index]
    assert ours["signal"] is None and ours["exit"] == 0, (args, ours["stderr"])
    assert ours["stdout"] == expected, args
    assert ours["stdout"] == binary.stdout


@pytest.mark.parametrize("flags", [["-q", "-R", "qrels_prefs", "-m", "all_prefs"],
                                   ["-q", "-c", "-M", "100", "-R", "qrels_jg", "-m", "qrels_jg"]])
def test_a_dl19_run_in_the_other_judgment_formats(trec_eval_binary, shared_data, flags):
    # TREC-sized inputs (43 queries, 1,000 documents each, graded 0-3 qrels) read as
    # preferences and as judgment groups
    qrels, run = shared_data / "dl19" / "qrels.txt", shared_data / "dl19" / "runs" / "ICT-BERT2.run"
    binary = subprocess.run([str(trec_eval_binary), *flags, str(qrels), str(run)], capture_output=True, text=True,
                            timeout=120)
    assert binary.returncode == 0 and binary.stdout.count("\t") > 80, binary.stderr
    ours = run_batch([flags + [str(qrels), str(run)]])[0]
    assert ours["exit"] == 0, ours["stderr"]
    assert ours["stdout"] == binary.stdout
