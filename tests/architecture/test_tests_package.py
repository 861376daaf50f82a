"""The suite's ``tests`` is this folder, whatever site-packages holds: tira, in the lock,
installs a top-level ``tests`` package, and CI's collection failed on 14 files that import
``tests.io`` / ``tests.hostile_inputs`` until tests/ became a regular package."""

import importlib.util
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_tests_resolves_to_this_folder():
    import tests

    assert Path(tests.__file__).resolve().parent == TESTS


def test_shared_helpers_import_through_tests():
    spec = importlib.util.find_spec("tests.hostile_inputs._worlds")
    assert spec is not None and Path(spec.origin).resolve() == TESTS / "hostile_inputs" / "_worlds.py"
