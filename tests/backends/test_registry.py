"""One registry of model clients (backends.registry): every back end's roles resolve to
classes of that role, the commands list and refuse from it, and a back end registered
once is taken by every command of its role."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from refusals import one_line_refusal

from exam_eval.backends import registry
from exam_eval.backends.base import Backend
from exam_eval.backends.factory import make_client
from exam_eval.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


def test_each_role_resolves_to_a_class_of_that_role():
    seen = set()
    for name, roles in registry.CLIENTS.items():
        for role in roles:
            cls = registry.client_class(name, role)
            seen.add((name, role))
            if role == "score":
                assert issubclass(cls, Backend), (name, cls)
            elif role == "chat":
                assert callable(getattr(cls, "chat", None)), (name, cls)
            else:
                assert callable(getattr(cls, "generate", None)), (name, cls)
    # what the commands could use before there was one registry, each still there
    assert {("endpoint", r) for r in registry.ROLES} <= seen and {("scripted", r) for r in registry.ROLES} <= seen
    assert {("hf-causal", "chat"), ("hf-seq2seq", "complete"), ("embedding", "score"), ("hf-qa", "score")} <= seen


def test_no_other_table_maps_back_end_names_to_classes():
    """The three registries this replaced (BACKENDS, CHAT_MODELS, GENERATORS) held
    "module:Class" strings or classes by name; such strings now live in registry.py only."""
    found = []
    for path in (ROOT / "exam_eval").rglob("*.py"):
        if path.name == "registry.py" and path.parent.name == "backends":
            continue
        text = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(ROOT)}: {m}" for m in re.findall(r'"exam_eval\.[a-z_.]+:[A-Z]\w+"', text)]
    assert found == []


def test_a_back_end_registered_once_is_made_by_the_one_factory_for_each_of_its_roles(monkeypatch):
    class Echo:
        def __init__(self, *, role, model=None):
            self.options = {"role": role, "model": model}

        def chat(self, conversations, temperature=0.0):
            return []

        def generate(self, prompts, keys=None):
            return []

    monkeypatch.setattr(registry, "CLIENTS", {k: dict(v) for k, v in registry.CLIENTS.items()})
    registry.register("echo", "chat", Echo)
    registry.register("echo", "complete", Echo)
    assert make_client("echo", "chat", model="m").options == {"role": "chat", "model": "m"}
    assert make_client("echo", "complete", model="m", device=None).options == {"role": "complete", "model": "m"}
    with pytest.raises(UsageError, match=r"^back end 'echo' does not take --device, --script$"):
        make_client("echo", "complete", model="m", device="cpu", script="s.jsonl")
    assert "echo" in registry.names("chat") and "echo" not in registry.names("score")
    with pytest.raises(UsageError, match=r"back end 'echo' cannot grade passages .*choose from: hf-seq2seq"):
        make_client("echo", "score")
    with pytest.raises(ValueError):
        registry.register("echo", "rank", Echo)


@pytest.mark.parametrize("argv, says", [
    (["exam-grade", "--backend", "nope", "--prompt", "question-selfrating", "--bank", "b.jsonl", "x.run"],
     "unknown back end 'nope'; known back ends: hf-seq2seq, hf-causal, hf-qa, endpoint, embedding, scripted"),
    (["exam-nuggets", "assign", "--reports", "r.jsonl", "--bank", "b.jsonl", "--topics", "t.tsv", "--backend", "embedding"],
     "back end 'embedding' cannot run the AutoNuggetizer's prompts"),
    (["exam-genq", "generate", "--backend", "hf-qa", "topics.tsv"],
     "back end 'hf-qa' cannot write a bank from the generation prompts (exam-genq generate); choose from: "
     "hf-seq2seq, hf-causal, endpoint, scripted"),
])
def test_commands_refuse_a_back_end_outside_their_role_in_one_line(run_cli, tmp_path, argv, says):
    res = run_cli(*argv, cwd=tmp_path)
    line = one_line_refusal(res, argv[0], 1)
    assert says in line


def test_the_commands_list_the_registrys_names():
    from click.testing import CliRunner

    from exam_eval.commands import genq, grade, nuggets

    for cli, args, role in ((grade.cli, [], "score"), (nuggets.cli, ["assign"], "chat"),
                            (genq.cli, ["generate"], "complete")):
        out = " ".join(CliRunner().invoke(cli, [*args, "--help"], terminal_width=200).output.split())
        assert f"--backend NAME {', '.join(registry.names(role))}" in out, out
