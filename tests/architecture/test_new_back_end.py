"""Adding a back end is one module plus one registry line (issue 59): a back end written
here, in a module of its own outside the package, and registered in one line, is taken by
every command of its roles (exam-grade and exam-nuggets support grade with its ``score``
class; exam-nuggets assign and exam-genq nuggetize talk to its ``chat`` method, exam-genq
generate to its ``generate``), and a flag it does not take is refused as any back end
refuses one. No edit in commands/ or elsewhere in backends/."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from exam_eval.backends import registry
from exam_eval.demo import demo_data_dir

#: the whole back end: a grader that rates every pair 4, and a text client that answers
#: each of the AutoNuggetizer's prompts and the generation prompt in its format
MODULE = textwrap.dedent('''
    import ast

    from exam_eval.backends.base import PromptBackend
    from exam_eval.backends.http_client import ChatResult


    class PlainGrader(PromptBackend):
        name = "plain"

        def __init__(self, model=None):
            self.model_id = model or "plain-1"

        def count_tokens(self, text):
            return len(text.split())

        def _generate(self, requests, max_new_tokens):
            return ["4" for _ in requests]


    def _labels(text, label):
        listed = text.split("Nugget List: ", 1)[1].split("\\n", 1)[0]
        return repr([label] * len(ast.literal_eval(listed)))


    class PlainText:
        def __init__(self, *, role, model=None):
            self.role, self.model_id = role, model or "plain-1"
            self.cache_identity = f"plain:{role}:{self.model_id}"
            self.asked = []

        def chat(self, conversations, temperature=0.0):
            out = []
            for conv in conversations:
                system, user = conv[0]["content"], conv[-1]["content"]
                self.asked.append(system.split(",")[0])
                if "NuggetizeScoreLLM" in system:
                    text = _labels(user, "vital")
                elif "NuggetizeAssignerLLM" in system:
                    text = _labels(user, "support")
                else:
                    text = repr(["Bees turn nectar into honey.", "Honey is stored in wax cells."])
                out.append(ChatResult(text, None, None, 1))
            return out

        def close(self):
            pass

        def generate(self, prompts, keys, temperature=None):
            return [ChatResult('{"questions": ["How do bees make honey?", "Where is honey kept?"]}', None, None, 1)
                    for _ in prompts]
''')


@pytest.fixture
def plain(tmp_path, monkeypatch):
    (tmp_path / "plain_backend.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "CLIENTS", {k: dict(v) for k, v in registry.CLIENTS.items()})
    monkeypatch.setattr(registry, "TRAITS", {k: set(v) for k, v in registry.TRAITS.items()})
    # the one registry line
    registry.CLIENTS["plain"] = {"score": "plain_backend:PlainGrader", "chat": "plain_backend:PlainText",
                                 "complete": "plain_backend:PlainText"}
    yield
    sys.modules.pop("plain_backend", None)


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_a_back_end_of_one_module_and_one_line_serves_every_command_of_its_roles(plain, run_cli, tmp_path):
    data = demo_data_dir()
    common = ("--backend", "plain", "--no-cache")

    bank = tmp_path / "bank.jsonl"
    res = run_cli("exam-genq", "generate", data / "topics.tsv", *common, "-o", bank)
    assert res.returncode == 0, res.stderr
    items = _lines(bank)
    topics = {x.split("\t")[0] for x in (data / "topics.tsv").read_text().splitlines() if x.strip()}
    assert {i["query_id"] for i in items} == topics and {i["text"] for i in items} == {
        "How do bees make honey?", "Where is honey kept?"}
    assert "with plain:plain-1" in res.stderr

    grades = tmp_path / "grades.jsonl"
    res = run_cli("exam-grade", *common, "--prompt", "question-selfrating", "--bank", bank,
                  "--passages", data / "passages.jsonl", "-o", grades, data / "good.run")
    assert res.returncode == 0, res.stderr
    lines = _lines(grades)
    assert lines and {g["grade"] for g in lines} == {4} and {g["model"] for g in lines} == {"plain-1"}

    nuggets = tmp_path / "nuggets.jsonl"
    res = run_cli("exam-genq", "nuggetize", data / "topics.tsv", "--run", data / "good.run", "--depth", "2",
                  "--passages", data / "passages.jsonl", *common, "-o", nuggets)
    assert res.returncode == 0, res.stderr
    made = _lines(nuggets)
    assert {n["text"] for n in made} == {"Bees turn nectar into honey.", "Honey is stored in wax cells."}
    assert {n["importance"] for n in made} == {"vital"}

    reports = tmp_path / "reports.jsonl"
    reports.write_text(json.dumps({"metadata": {"run_id": "r", "topic_id": made[0]["query_id"], "team_id": "t"},
                                   "responses": [{"text": "Bees make honey.", "citations": [0]}],
                                   "references": ["d1"]}) + "\n")
    assigned = tmp_path / "assigned.jsonl"
    res = run_cli("exam-nuggets", "assign", "--reports", reports, "--bank", nuggets, "--topics", data / "topics.tsv",
                  *common, "-o", assigned)
    assert res.returncode == 0, res.stderr
    got = _lines(assigned)
    assert len(got) == sum(n["query_id"] == made[0]["query_id"] for n in made) and {g["grade"] for g in got} == {2}

    support = tmp_path / "support.jsonl"
    passages = tmp_path / "passages.jsonl"
    passages.write_text(json.dumps({"doc_id": "d1", "text": "Bees make honey from nectar."}) + "\n")
    res = run_cli("exam-nuggets", "support", "--reports", reports, "--passages", passages, *common, "-o", support)
    assert res.returncode == 0, res.stderr
    assert _lines(support) and {g["model"] for g in _lines(support)} == {"plain-1"}


@pytest.mark.parametrize("argv, flag", [
    (["exam-grade", "--prompt", "question-selfrating", "--bank", "b.jsonl", "--device", "cpu", "x.run"], "--device"),
    (["exam-genq", "generate", "--timeout", "5", "t.tsv"], "--timeout"),
    (["exam-nuggets", "assign", "--reports", "r.jsonl", "--bank", "b.jsonl", "--topics", "t.tsv", "-O", "k=v"],
     "--backend-option"),
])
def test_a_flag_the_new_back_end_does_not_take_is_refused_as_every_back_end_refuses_it(plain, run_cli, tmp_path,
                                                                                       argv, flag):
    res = run_cli(*argv[:2], "--backend", "plain", *argv[2:], cwd=tmp_path) if argv[0] != "exam-grade" else \
        run_cli(argv[0], "--backend", "plain", *argv[1:], cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip().splitlines()[-1] == f"{argv[0]}: back end 'plain' does not take {flag}", res.stderr
