"""No back-end name is compared outside exam_eval/backends/ (issue 59): a command asks the
registry what a back end can do (``registry.names(role, trait)``, ``registry.has``) or
the client class, never ``backend == "endpoint"``; a new back end then needs no edit in
the commands. Read with ``ast``: help texts and defaults may name back ends, comparisons
may not."""

from __future__ import annotations

import ast
from pathlib import Path

from exam_eval.backends.registry import CLIENTS

PACKAGE = Path(__file__).resolve().parents[2] / "exam_eval"


def _strings(node):
    """The string constants of one side of a comparison, inside tuples, lists and sets too."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for elt in node.elts:
            yield from _strings(elt)


def names_compared(source: str) -> list[tuple[int, str]]:
    """(line, back-end name) of every registry name compared (==, !=, in, not in, ...) in ``source``."""
    names = set(CLIENTS)
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += [(node.lineno, s) for s in _strings(side) if s in names]
    return found


def test_the_scan_sees_each_form_of_comparison():
    source = ("a == 'endpoint'\n'scripted' != b\nc in ('hf-causal', 'x')\nd not in ['embedding']\n"
              "e in {'hf-qa'}\nf(default='endpoint')\ng == 'nope'\n")
    assert names_compared(source) == [(1, "endpoint"), (2, "scripted"), (3, "hf-causal"), (4, "embedding"),
                                      (5, "hf-qa")]


def test_no_back_end_name_is_compared_outside_the_backends_package():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "backends":
            continue
        found += [f"exam_eval/{rel.as_posix()}:{line}: {name!r}"
                  for line, name in names_compared(path.read_text(encoding="utf-8"))]
    assert found == [], "ask the registry what the back end can do:\n" + "\n".join(found)


def test_a_back_end_registered_with_traits_is_taken_by_the_commands_that_ask(monkeypatch):
    """What the commands asked by name before: the traits give the same answers and messages,
    and a new back end with a trait is taken with no edit in commands/."""
    import pytest

    from exam_eval.backends import registry
    from exam_eval.commands._batch import check_batch
    from exam_eval.errors import UsageError

    assert registry.names(None, "batch-files") == ["endpoint"] and registry.names("chat", "canned") == ["scripted"]
    assert not registry.has("nope", "canned")
    with pytest.raises(ValueError):
        registry.has("endpoint", "no-such-trait")
    with pytest.raises(UsageError, match=r"^--batch-out takes the requests of the endpoint back end: give --backend "
                                         r"endpoint and --model \(the name the batch service serves\)$"):
        check_batch("echo", "out.jsonl", (), None)

    monkeypatch.setattr(registry, "CLIENTS", {k: dict(v) for k, v in registry.CLIENTS.items()})
    monkeypatch.setattr(registry, "TRAITS", {k: set(v) for k, v in registry.TRAITS.items()})
    registry.register("echo", "chat", object, traits=("batch-files",))
    assert check_batch("echo", "out.jsonl", (), None)  # a base URL: none is needed
    with pytest.raises(UsageError, match="takes the requests of the endpoint or echo back end"):
        check_batch("scripted", "out.jsonl", (), None)
    with pytest.raises(ValueError):
        registry.register("echo", "chat", object, traits=("no-such-trait",))
