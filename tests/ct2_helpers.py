"""What the CTranslate2 engine tests share: a conversion cache of their own, and
exam-grade run as a user runs it with readers for its output and summary."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from inproc import command
from child_env import ChildEnv

ROOT = Path(__file__).resolve().parents[1]
ENV = ChildEnv(PYTHONPATH=str(ROOT), EXAM_EVAL_PROGRESS="0", HF_HUB_OFFLINE="1")
CMD = [sys.executable, "-c", "import exam_eval.commands.grade as m; m.main()"]


@pytest.fixture(autouse=True)
def ct2_cache(tmp_path_factory, monkeypatch):
    # one conversion cache per test run, never the user's ~/.cache
    root = tmp_path_factory.getbasetemp() / "ct2-cache"
    monkeypatch.setenv("EXAM_EVAL_CT2_CACHE", str(root))
    return root


def cache_args(tmp_path: Path, extra) -> list[str]:
    """The test's grade cache, unless ``extra`` says --no-cache (both are a usage error)."""
    return [] if "--no-cache" in extra else ["--cache", str(tmp_path / "cache.sqlite")]


def grade(*args, env=None, process=False):
    return command("grade", *args, env=env or ENV, process=process)


def rows(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


def keyed(path):
    return {(r["query_id"], r["doc_id"], r["item_id"]): (r["grade"], r["probs"], r["engine"]) for r in rows(path)}


#: how far a pair's probabilities may move when it is graded in another batch: the same
#: float32 model gives other sums to other batch compositions (seen under load: 1.6e-9)
BATCH_TOLERANCE = 1e-6


def assert_same_grades(got: dict, want: dict, tolerance: float = BATCH_TOLERANCE) -> None:
    """``keyed`` outputs alike: the same pairs, grades and engines exactly, probabilities
    within ``tolerance``."""
    assert got.keys() == want.keys()
    for k in want:
        assert got[k][0] == want[k][0] and got[k][2] == want[k][2], k
        assert got[k][1] == pytest.approx(want[k][1], abs=tolerance), k


def summary(stderr):
    m = re.search(r"(\d+) pairs: (\d+) graded, (\d+) from cache", stderr)
    assert m, stderr
    return tuple(map(int, m.groups()))
