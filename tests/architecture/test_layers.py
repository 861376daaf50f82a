"""The package's import graph, read from the source with ``ast``: no circles, no import
from a lower layer to a higher one, no command importing another, thin command modules.

LAYERS is the table drawn in docs/architecture.md; keep the two the same. Imports under
``if TYPE_CHECKING:`` are left out (they never run). Imports inside functions count: a
lazy import upward is still an upward dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "exam_eval"

# Lowest first. A module may import modules of a lower layer, and of its own package
# (the first two dotted parts of its name); never a higher layer, nor another package of
# its own layer.
LAYERS: list[tuple[str, ...]] = [
    ("exam_eval.errors",),
    ("exam_eval", "exam_eval.progress", "exam_eval.data"),
    ("exam_eval.io.unfinished",),
    ("exam_eval.io.openers",),
    ("exam_eval.io.outputs",),
    # files <-> exam_eval's types, on nothing but errors: everything that reads a file
    # stands on io, and io needs nothing above it (test_io_is_the_bottom_layer)
    ("exam_eval.io",),
    # trec_eval compatibility: its readers, C number rules, measures and fast path
    ("exam_eval.trec_eval",),
    ("exam_eval.grading.types", "exam_eval.grading.reasoning"),
    ("exam_eval.grading.parsing",),
    ("exam_eval.grading.prompts",),
    ("exam_eval.grading",),
    ("exam_eval.backends", "exam_eval.measures"),
    ("exam_eval.stats",),
    ("exam_eval.genq", "exam_eval.verify"),
    ("exam_eval.api", "exam_eval.commands", "exam_eval.autojudge_offline"),
    ("exam_eval.demo", "exam_eval.demo_data", "exam_eval.launch"),  # scripts that run the commands
    ("exam_eval.demo_rag",),  # the RAG demo reuses the demo's runner
]

# Inside exam_eval.grading the same rule, one level down: the data types and parsers the
# back ends build on are below the engine, which must not need a back end to run.
GRADING_LAYERS: list[tuple[str, ...]] = [
    ("exam_eval.grading", "exam_eval.grading.types", "exam_eval.grading.answer_check", "exam_eval.grading.segment",
     "exam_eval.grading.handover", "exam_eval.grading.reasoning"),
    ("exam_eval.grading.parsing",),
    ("exam_eval.grading.prompts",),
    ("exam_eval.grading.grade_files",),
    ("exam_eval.grading.pool", "exam_eval.grading.report_units", "exam_eval.grading.cache",
     "exam_eval.grading.output"),
    ("exam_eval.grading.writer", "exam_eval.grading.fitting"),
    ("exam_eval.grading.engine", "exam_eval.grading.asking"),
    ("exam_eval.grading.session", "exam_eval.grading.inputs", "exam_eval.grading.listwise"),
]

# A command module holds options, help text and one library call per subcommand: its
# size is mostly help text, so the module ceiling leaves room for a few more subcommands,
# and the code of each command function (docstring left out) has a ceiling of its own.
# (500: exam-verify holds its label and label-qrels subcommands, whose work is in
# verify/label_sample.py, and their long help, issue 59.)
COMMAND_MAX_LINES = 500
COMMAND_BODY_MAX_LINES = 70


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of import nodes under ``if TYPE_CHECKING:``."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                for sub in ast.walk(stmt):
                    skip.add(id(sub))
    return skip


def _package(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rsplit(".", 1)[0]


def _from_target(node: ast.ImportFrom, package: str) -> str:
    """The absolute module of ``from ... import``."""
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_only(tree)
    package = _package(name, path)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            target = _from_target(node, package)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in mods:
                    found.add(sub)
                elif target in mods:
                    found.add(target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in mods)
    found.discard(name)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, mods) for name, path in mods.items()}


def _layer_of(module: str, layers: list[tuple[str, ...]], scope: str) -> tuple[int, str] | None:
    """(layer index, the table entry) of the longest entry that is module or a parent;
    the scope's own package (its ``__init__``) is an entry of its own."""
    best = None
    for i, entries in enumerate(layers):
        for entry in entries:
            if module == entry or (entry != scope and module.startswith(entry + ".")):
                if best is None or len(entry) > len(best[1]):
                    best = (i, entry)
    return best


def _violations(graph, layers, scope: str) -> list[str]:
    bad = []
    for src, targets in graph.items():
        if not (src == scope or src.startswith(scope + ".")):
            continue
        s = _layer_of(src, layers, scope)
        assert s is not None, f"{src} is in no layer of the table: add it"
        for dst in targets:
            if not (dst == scope or dst.startswith(scope + ".")):
                continue
            d = _layer_of(dst, layers, scope)
            assert d is not None, f"{dst} is in no layer of the table: add it"
            if d[0] > s[0] or (d[0] == s[0] and d[1] != s[1]):
                bad.append(f"{src} (layer {s[0]}, {s[1]}) imports {dst} (layer {d[0]}, {d[1]})")
    return sorted(bad)


def test_the_graph_is_read(graph):
    # a parser that silently found nothing would pass every test below
    assert "exam_eval.grading.engine" in graph
    assert "exam_eval.grading.types" in graph["exam_eval.grading.engine"]
    assert "exam_eval.trec_eval.trec_files" in graph["exam_eval.commands.qrels"]
    assert sum(len(v) for v in graph.values()) > 300


def test_no_import_circles(graph):
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert circles == []


def test_no_upward_imports(graph):
    assert _violations(graph, LAYERS, "exam_eval") == []


def test_grading_engine_does_not_need_a_back_end(graph):
    assert _violations(graph, GRADING_LAYERS, "exam_eval.grading") == []


def test_the_layer_rule_catches_an_upward_import():
    fake = {"exam_eval.io.grades": {"exam_eval.grading.engine"}, "exam_eval.grading.engine": {"exam_eval.io.grades"},
            "exam_eval.backends.base": {"exam_eval.measures.exam_cover"}, "exam_eval.measures.exam_cover": set()}
    assert _violations(fake, LAYERS, "exam_eval") == [
        "exam_eval.backends.base (layer 11, exam_eval.backends) imports exam_eval.measures.exam_cover "
        "(layer 11, exam_eval.measures)",
        "exam_eval.io.grades (layer 5, exam_eval.io) imports exam_eval.grading.engine (layer 10, exam_eval.grading)",
    ]


def _io_upward(graph) -> list[str]:
    io = [m for m in graph if m == "exam_eval.io" or m.startswith("exam_eval.io.")]
    return sorted(f"{m} imports {d}" for m in io for d in graph[m]
                  if d.split(".")[:2] in (["exam_eval", "grading"], ["exam_eval", "trec_eval"]))


def test_io_is_the_bottom_layer(graph):
    # io reads files into types and needs nothing above it, not even lazily inside a
    # function: trec_eval and grading stand on its openers and records (issue 47, item 5)
    assert sum(m.startswith("exam_eval.io.") for m in graph) > 10
    assert _io_upward(graph) == []
    fake = {"exam_eval.io.grades": {"exam_eval.grading.types", "exam_eval.io.jsonl"},
            "exam_eval.io.leaderboard": {"exam_eval.trec_eval.trec_files"}, "exam_eval.trec_eval.bulk": {"exam_eval.io"}}
    assert _io_upward(fake) == ["exam_eval.io.grades imports exam_eval.grading.types",
                                "exam_eval.io.leaderboard imports exam_eval.trec_eval.trec_files"]


def test_grades_are_read_with_the_prompts_scales():
    """io.grades reads lines without knowing a prompt (the registry is above it): every
    other reader goes through grading.grade_files, which holds grades to their scales."""
    mods = _modules()
    bad = []
    for name, path in mods.items():
        if name.startswith("exam_eval.io") or name == "exam_eval.grading.grade_files":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and _from_target(node, _package(name, path)) == "exam_eval.io.grades":
                bad += [f"{name} imports {a.name} from exam_eval.io.grades" for a in node.names
                        if a.name in ("read_grades", "iter_grades")]
    assert "exam_eval.grading.grade_files" in mods and bad == []


def test_no_command_imports_another(graph):
    commands = [m for m in graph if m.startswith("exam_eval.commands.")]
    public = {m for m in commands if not m.rsplit(".", 1)[1].startswith("_")}
    assert len(public) >= 7
    bad = sorted(f"{m} imports {d}" for m in public for d in graph[m] if d in public)
    assert bad == []


def test_command_modules_are_thin():
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines())
             for p in (PACKAGE / "commands").glob("*.py")}
    assert sizes["correlate.py"] > 0
    fat = {name: n for name, n in sizes.items() if n > COMMAND_MAX_LINES}
    assert fat == {}


def _body_lines(fn: ast.FunctionDef) -> int:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring is the command's help text
    return body[-1].end_lineno - body[0].lineno + 1 if body else 0


def test_command_functions_hold_no_computation():
    bodies = {}
    for path in (PACKAGE / "commands").glob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef):
                bodies[f"{path.name}:{node.name}"] = _body_lines(node)
    assert bodies["grade.py:cli"] > 10
    fat = {name: n for name, n in bodies.items() if n > COMMAND_BODY_MAX_LINES}
    assert fat == {}
