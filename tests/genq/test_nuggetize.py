"""Nugget creation and importance against the installed nuggetizer package: the same
stand-in model behind both, the same nuggets in the same order with the same importance,
no more calls and prompt tokens."""

from __future__ import annotations

import pytest

pytest.importorskip("nuggetizer")

from nuggetizer_stub import CountingModel, nuggetizer_against  # noqa: E402

from exam_eval.backends.chat import EndpointChat  # noqa: E402
from exam_eval.genq import nuggetize as nz  # noqa: E402
from exam_eval.grading.asking import Asker, parse_python_list  # noqa: E402
from exam_eval.grading.cache import GradeCache  # noqa: E402
from exam_eval.io.bank_items import make_item_id  # noqa: E402

QUERIES = {"q1": "how do vaccines train the immune system", "q2": "what causes ocean tides"}
VOCAB = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def _docs(qid: str, n: int, flaky: int | None = None) -> list[str]:
    out = []
    for i in range(n):
        words = [VOCAB[(i * 7 + k * 3 + len(qid)) % len(VOCAB)] for k in range(8)]
        text = f"{qid} doc{i} " + " ".join(words) + "."
        out.append(text + (" FLAKY" if i == flaky else ""))
    return out


def _topics(docs: dict[str, list[str]]) -> list[nz.TopicNuggets]:
    return [nz.TopicNuggets(q, QUERIES[q], d) for q, d in docs.items()]


def _ours(url, docs, cache_path=None):
    chat = EndpointChat(model="stub-model", base_url=url, concurrency=4, max_retries=0)

    def make_asker():
        cache = GradeCache(cache_path) if cache_path else None
        return Asker(chat, parse_python_list, **({"cache": cache} if cache else {}))

    return nz.nuggetize(_topics(docs), make_asker)


def test_same_nuggets_importance_calls_and_tokens(monkeypatch):
    from nuggetizer.core.types import Document, Query, Request

    docs = {"q1": _docs("q1", 35, flaky=12), "q2": _docs("q2", 7)}
    theirs = {}
    with CountingModel() as theirs_model:
        with nuggetizer_against(theirs_model.url, monkeypatch) as nugg:
            for q, ds in docs.items():
                req = Request(Query(q, QUERIES[q]), [Document(f"d{i}", t) for i, t in enumerate(ds)])
                theirs[q] = nugg.create(req)
    with CountingModel() as ours_model:
        result = _ours(ours_model.url, docs)

    assert len(theirs["q1"]) == 30  # 35 documents, one nugget each, cut to 30
    assert {n.importance for n in theirs["q1"]} == {"vital", "okay"}
    for t in result.topics:
        assert [(n.text, n.importance) for n in theirs[t.query_id]] == list(zip(t.nuggets, t.importance))
    # q1: 4 creation windows + 1 re-ask (FLAKY at temperature 0), 3 scoring windows; q2: 1 + 1
    assert theirs_model.calls == 4 + 1 + 3 + 1 + 1
    assert ours_model.calls == theirs_model.calls
    assert ours_model.prompt_tokens == theirs_model.prompt_tokens
    assert result.create_stats.calls + result.score_stats.calls == ours_model.calls

    bank = result.bank()
    assert [i.item_id for i in bank if i.query_id == "q2"] == [make_item_id("q2", n.text) for n in theirs["q2"]]
    assert all(i.extra["query_text"] == QUERIES[i.query_id] for i in bank)


def test_prompts_are_the_nuggetizers(monkeypatch):
    from nuggetizer.core.types import Document, Nugget, Query, Request

    with CountingModel() as model:
        with nuggetizer_against(model.url, monkeypatch) as nugg:
            req = Request(Query("q1", QUERIES["q1"]), [Document(f"d{i}", t) for i, t in enumerate(_docs("q1", 14))])
            assert nz.creator_messages(QUERIES["q1"], _docs("q1", 14)[10:14], ["a 'b'", "c"]) == \
                nugg._create_nugget_prompt(req, 10, 14, ["a 'b'", "c"])
            assert nz.scorer_messages(QUERIES["q1"], ["a 'b'", "c"]) == \
                nugg._create_score_prompt(QUERIES["q1"], [Nugget("a 'b'"), Nugget("c")])


def test_rerun_comes_from_the_cache_and_more_documents_cost_only_the_new_windows(tmp_path):
    docs = {"q1": _docs("q1", 12)}
    with CountingModel() as model:
        first = _ours(model.url, docs, tmp_path / "c.sqlite")
        assert model.calls == 2 + 2
    with CountingModel(port=model.port) as model:  # the same server again: the cache answers for it
        again = _ours(model.url, docs, tmp_path / "c.sqlite")
        assert model.calls == 0
    assert [i.to_json() for i in again.bank()] == [i.to_json() for i in first.bank()]
    # 3 more documents: the second creation window changes (docs 10-14), and of the two
    # scoring windows only the second (nuggets 10-14); the first ten nuggets are unchanged
    docs["q1"] += _docs("q1x", 3)
    with CountingModel(port=model.port) as model:
        _ours(model.url, docs, tmp_path / "c.sqlite")
        assert model.calls == 1 + 1


def test_unparsed_importance_is_left_unlabelled():
    class Chat:
        cache_identity = "fake"
        model_id = "fake"

        def chat(self, convs, temperature=0.0):
            from exam_eval.backends.http_client import ChatResult

            out = []
            for c in convs:
                if c[0]["content"] == nz.CREATOR_SYSTEM:
                    out.append(ChatResult("['a', 'b', 'c']", None, None, 1))
                else:
                    out.append(ChatResult("['vital', 'maybe']", None, None, 1))
            return out

    topics = [nz.TopicNuggets("q1", "query", ["doc"])]
    result = nz.nuggetize(topics, lambda: Asker(Chat(), parse_python_list))
    # 'maybe' and the missing third label: no importance, after the vital one
    assert list(zip(result.topics[0].nuggets, result.topics[0].importance)) == \
        [("a", "vital"), ("b", None), ("c", None)]


def test_document_sources():
    qrels = {"q1": {"d3": 0, "d1": 2, "d2": 1}}
    assert nz.documents_from_qrels(qrels) == {"q1": ["d1", "d2"]}
    assert nz.documents_from_qrels(qrels, 2) == {"q1": ["d1"]}
    runs = [{"q1": {"a": 3.0, "b": 2.0, "c": 1.0}}, {"q1": {"c": 9.0, "d": 1.0, "a": 0.5}}]
    assert nz.documents_from_runs(runs, 2) == {"q1": ["a", "c", "b", "d"]}


def test_cli_nuggetize_then_export_keeps_query_and_importance(tmp_path, run_cli):
    import json

    (tmp_path / "topics.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
    with (tmp_path / "corpus.jsonl").open("w") as fh:
        for q in QUERIES:
            for i, text in enumerate(_docs(q, 12)):
                fh.write(json.dumps({"doc_id": f"{q}-d{i}", "text": text}) + "\n")
    (tmp_path / "qrels").write_text("".join(f"{q} 0 {q}-d{i} {i % 3}\n" for q in QUERIES for i in range(12)))
    bank = tmp_path / "bank.jsonl"
    with CountingModel() as model:
        res = run_cli("exam-genq", "nuggetize", tmp_path / "topics.tsv", "--qrels", tmp_path / "qrels",
                      "--passages", tmp_path / "corpus.jsonl", "--model", "stub", "--base-url", model.url,
                      "--no-cache", "-o", bank, env={"EXAM_EVAL_PROGRESS": "0"})
        assert res.returncode == 0, res.stderr
        assert model.calls == 2 * (1 + 1)  # 8 relevant documents and 8 nuggets per topic
    items = [json.loads(x) for x in bank.read_text().splitlines()]
    assert len(items) == 16 and all(i["importance"] in ("vital", "okay") for i in items)
    assert all(i["query_text"] == QUERIES[i["query_id"]] for i in items)
    out = tmp_path / "nz.jsonl"
    res = run_cli("exam-nuggets", "bank", "--to", "nuggetizer", bank, "-o", out)
    assert res.returncode == 0 and "no importance" not in res.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert {x["qid"]: x["query"] for x in lines} == QUERIES
    assert [n["importance"] for n in lines[0]["nuggets"]] == [i["importance"] for i in items if i["query_id"] == "q1"]


def test_hf_causal_chat_model_runs_the_prompts(tmp_path):
    """A local chat model serves the creator/scorer/assigner prompts (system + user
    through its chat template); a tiny random model writes some text, never a crash."""
    pytest.importorskip("torch")
    from tiny_models import make_tiny_llama

    from exam_eval.backends.factory import make_client

    chat = make_client("hf-causal", "chat", model=str(make_tiny_llama(tmp_path / "llama")), max_tokens=4)
    results = chat.chat([nz.scorer_messages("q", ["a", "b"]), nz.creator_messages("q", ["doc"], [])])
    assert [r.error for r in results] == [None, None] and all(isinstance(r.text, str) for r in results)
    result = nz.nuggetize([nz.TopicNuggets("q1", "q", ["doc one", "doc two"])],
                          lambda: Asker(chat, parse_python_list, retries=1))
    assert result.create_stats.calls == 2  # a random model's answer does not parse: asked again once
    assert result.topics[0].nuggets == [] and not result.topics[0].failed
    chat.close()
