"""What a resume into an existing -o and the grade cache may reuse: only grades of the same
inputs (passage, query where shown, answer keys) by a grader of the same settings (token
limits, scripts, model files, dtype). The oracle is always a run with --no-cache into a
fresh file, never the resumed file itself."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from inproc import run as run_cmd

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"


def _inputs(tmp_path: Path) -> dict[str, Path]:
    """Two queries, three passages each, two questions each (12 pairs)."""
    run = tmp_path / "small.run"
    lines = [ln for ln in (DEMO / "good.run").read_text().splitlines() if ln.split()[0] in ("101", "102")]
    keep = [ln for q in ("101", "102") for ln in [x for x in lines if x.split()[0] == q][:3]]
    run.write_text("\n".join(keep) + "\n")
    docs = {ln.split()[2] for ln in keep}
    passages = tmp_path / "passages.jsonl"
    passages.write_text("".join(ln + "\n" for ln in (DEMO / "passages.jsonl").read_text().splitlines()
                                if json.loads(ln)["doc_id"] in docs))
    bank = tmp_path / "bank.jsonl"
    items = [json.loads(ln) for ln in (DEMO / "questions.jsonl").read_text().splitlines()]
    chosen = [i for q in ("101", "102") for i in [x for x in items if x["query_id"] == q][:2]]
    bank.write_text("".join(json.dumps(i) + "\n" for i in chosen))
    return {"run": run, "passages": passages, "bank": bank}


def _grade(*args, out: Path, cache: Path | None):
    r = run_cmd("grade", *args, *(("--cache", cache) if cache else ("--no-cache",)), "-o", out)
    assert r.escaped is None, r.escaped
    return r


def _final(path: Path) -> dict:
    """The grades a reader sees: the last line for each (query, doc, item)."""
    out = {}
    for line in path.read_text().splitlines():
        g = json.loads(line)
        out[(g["query_id"], g["doc_id"], g["item_id"])] = (g["grade"], g["parse_ok"], g["answer"])
    return out


def _oracle(tmp_path: Path, args: list, name: str) -> dict:
    fresh = tmp_path / f"oracle-{name}.jsonl"
    r = _grade(*args, out=fresh, cache=None)
    assert r.code in (0, None), r.stderr
    return _final(fresh)


def _script(path: Path, rules: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rules))
    return path


def test_a_passage_edit_is_regraded_on_resume_and_missed_by_the_cache(tmp_path):
    f = _inputs(tmp_path)
    script = _script(tmp_path / "s.jsonl", [{"context": "EDITED", "output": "5"}, {"output": "1"}])
    args = ["--backend", "scripted", "-O", f"script={script}", "--prompt", "question-selfrating",
            "--generate-ratings", "--bank", f["bank"], "--run", f["run"]]
    out, cache = tmp_path / "g.jsonl", tmp_path / "c.sqlite"
    assert _grade(*args, "--passages", f["passages"], out=out, cache=cache).code in (0, None)
    rows = [json.loads(x) for x in f["passages"].read_text().splitlines()]
    rows[0]["text"] = "EDITED " + rows[0]["text"]
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(x) + "\n" for x in rows))
    new_args = [*args, "--passages", edited]
    r = _grade(*new_args, out=out, cache=cache)
    assert r.code in (0, None), r.stderr
    oracle = _oracle(tmp_path, new_args, "edit")
    assert _final(out) == oracle
    assert sum(g[0] == 5 for g in oracle.values()) == 2  # the edited passage's two questions
    fresh_cached = tmp_path / "g2.jsonl"
    assert _grade(*new_args, out=fresh_cached, cache=cache).code in (0, None)
    assert _final(fresh_cached) == oracle


def test_answer_keys_added_to_a_bank_are_regraded_on_resume(tmp_path):
    f = _inputs(tmp_path)
    script = _script(tmp_path / "s.jsonl", [{"output": "nectar"}])
    items = [json.loads(x) for x in f["bank"].read_text().splitlines()]
    no_keys = tmp_path / "no_keys.jsonl"
    no_keys.write_text("".join(json.dumps({**i, "answers": ["something else"]}) + "\n" for i in items))
    args = ["--backend", "scripted", "-O", f"script={script}", "--prompt", "question-extraction",
            "--passages", f["passages"], "--run", f["run"]]
    out = tmp_path / "g.jsonl"
    assert _grade(*args, "--bank", no_keys, out=out, cache=None).code in (0, None)
    assert all(g[0] == 0 for g in _final(out).values())
    new_args = [*args, "--bank", f["bank"]]
    assert _grade(*new_args, out=out, cache=None).code in (0, None)
    oracle = _oracle(tmp_path, new_args, "keys")
    assert any(g[0] == 1 for g in oracle.values())
    assert _final(out) == oracle


def test_a_query_edit_is_regraded_where_the_prompt_shows_the_query(tmp_path):
    f = _inputs(tmp_path)
    topics = tmp_path / "topics.tsv"
    topics.write_text((DEMO / "topics.tsv").read_text())
    script = _script(tmp_path / "s.jsonl", [{"context": "", "output": "1"}])
    args = ["--backend", "scripted", "-O", f"script={script}", "--prompt", "thomas", "--passages", f["passages"],
            "--run", f["run"]]
    out = tmp_path / "g.jsonl"
    assert _grade(*args, "--topics", topics, out=out, cache=None).code in (0, None)
    edited = tmp_path / "topics2.tsv"
    edited.write_text(topics.read_text().replace("how do honey bees make honey", "what do bees eat"))
    r = _grade(*args, "--topics", edited, out=out, cache=None)
    assert r.code in (0, None) and "3 already in output" in r.stderr, r.stderr  # query 102's three, not 101's


def test_other_settings_are_refused_on_resume_and_are_another_grader_in_the_cache(tmp_path):
    f = _inputs(tmp_path)
    script_a = _script(tmp_path / "a.jsonl", [{"output": "1"}])
    script_b = _script(tmp_path / "b.jsonl", [{"output": "4"}])
    common = ["--backend", "scripted", "--prompt", "question-selfrating", "--generate-ratings", "--bank", f["bank"],
              "--passages", f["passages"], "--run", f["run"]]
    out, cache = tmp_path / "g.jsonl", tmp_path / "c.sqlite"
    assert _grade(*common, "-O", f"script={script_a}", out=out, cache=cache).code in (0, None)
    before = out.read_bytes()
    for n, other in enumerate((["-O", f"script={script_b}"], ["-O", f"script={script_a}", "-O", "window=5"])):
        r = _grade(*common, *other, out=out, cache=cache)
        assert r.code == 2 and "made with other settings" in r.last_line, r.stderr
        # the lines carry a hash of the settings; the cache knows the settings it hashes, so
        # the refusal names the one that differs
        if n == 0:
            assert re.search(r"the grades there: script=\w+; this run: script=\w+", r.last_line), r.last_line
        else:
            assert "the grades there: no further setting; this run: window=5" in r.last_line, r.last_line
        assert out.read_bytes() == before
        fresh = tmp_path / "fresh.jsonl"
        fresh.unlink(missing_ok=True)
        r = _grade(*common, *other, out=fresh, cache=cache)
        assert r.code in (0, None) and "0 from cache" in r.stderr, r.stderr
        assert _final(fresh) == _oracle(tmp_path, [*common, *other], f"other{n}")


@pytest.mark.slow
def test_hf_token_limits_replaced_weights_and_a_trailing_slash(tmp_path):
    pytest.importorskip("torch")
    from tiny_models import make_tiny_t5

    f = _inputs(tmp_path)
    model = make_tiny_t5(tmp_path / "t5")
    common = ["--backend", "hf-seq2seq", "--engine", "torch", "--device", "cpu", "--prompt", "question-selfrating",
              "--bank", f["bank"], "--passages", f["passages"], "--run", f["run"]]
    out, cache = tmp_path / "g.jsonl", tmp_path / "c.sqlite"
    assert _grade(*common, "--model", model, out=out, cache=cache).code in (0, None)
    before = out.read_bytes()
    # the same folder named with a slash, and the dtype a CPU uses anyway: the same grader
    r = _grade(*common, "--model", f"{model}/", "--dtype", "float32", out=out, cache=cache)
    assert r.code in (0, None) and "12 already in output" in r.stderr, r.stderr
    assert out.read_bytes() == before
    # a token limit that cuts the passages: refused on resume, not served from the cache
    r = _grade(*common, "--model", model, "--max-input-tokens", "16", out=out, cache=cache)
    assert r.code == 2 and "other settings" in r.last_line, r.stderr
    cut = tmp_path / "cut.jsonl"
    r = _grade(*common, "--model", model, "--max-input-tokens", "16", out=cut, cache=cache)
    assert "0 from cache" in r.stderr, r.stderr
    # weights replaced in place (a fine-tuning run writing to the same folder)
    import torch
    from transformers import T5ForConditionalGeneration

    m = T5ForConditionalGeneration.from_pretrained(model)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p))
    shutil.rmtree(model / "model.safetensors", ignore_errors=True)
    m.save_pretrained(model)
    r = _grade(*common, "--model", model, out=out, cache=cache)
    assert r.code == 2 and "model's files changed" in r.last_line, r.stderr
    fresh = tmp_path / "fresh.jsonl"
    r = _grade(*common, "--model", model, out=fresh, cache=cache)
    assert "0 from cache" in r.stderr, r.stderr
    assert _final(fresh) == _oracle(tmp_path, [*common, "--model", model], "weights")


def test_endpoint_options_that_change_answers_are_part_of_its_identity():
    from exam_eval.backends.endpoint import EndpointBackend

    def ident(**kw):
        return EndpointBackend(model="m", **{"base_url": "http://127.0.0.1:9/v1", **kw}).cache_identity

    base = ident()
    assert base == ident(base_url="http://127.0.0.1:8000/v1", concurrency=3)  # another port: the same grader
    changed = [ident(logprobs="false"), ident(max_new_tokens=5), ident(max_input_tokens=100), ident(top_logprobs=3),
               ident(api="completions")]
    assert len({base, *changed}) == 1 + len(changed)


def test_the_dtype_a_gpu_picks_by_default_is_another_grader(monkeypatch, tmp_path):
    """On a GPU the torch engine loads bfloat16 unless told otherwise: its grades must not
    stand in for float32's (a CPU's, or --dtype float32's)."""
    torch = pytest.importorskip("torch")
    from tiny_models import make_tiny_t5

    from exam_eval.backends.hf_seq2seq import Seq2SeqBackend

    model = str(make_tiny_t5(tmp_path / "t5"))
    cpu = Seq2SeqBackend(model=model, engine="torch").cache_identity
    assert cpu == Seq2SeqBackend(model=model, engine="torch", dtype="float32").cache_identity
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    gpu = Seq2SeqBackend(model=model, engine="torch").cache_identity
    assert gpu == Seq2SeqBackend(model=model, engine="torch", dtype="bfloat16").cache_identity != cpu
    assert Seq2SeqBackend(model=model, engine="torch", device="cpu").cache_identity == cpu


def test_a_passage_edited_then_restored_is_regraded_each_time(tmp_path):
    """Only the last line for a key says what is done: A, then B, then A again must end
    with A's grades, not with B's kept under a line of A's input that came before."""
    f = _inputs(tmp_path)
    script = _script(tmp_path / "s.jsonl", [{"context": "EDITED", "output": "5"}, {"output": "1"}])
    args = ["--backend", "scripted", "-O", f"script={script}", "--prompt", "question-selfrating",
            "--generate-ratings", "--bank", f["bank"], "--run", f["run"]]
    rows = [json.loads(x) for x in f["passages"].read_text().splitlines()]
    rows[0]["text"] = "EDITED " + rows[0]["text"]
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(x) + "\n" for x in rows))
    out = tmp_path / "g.jsonl"
    for passages in (f["passages"], edited, f["passages"]):
        assert _grade(*args, "--passages", passages, out=out, cache=None).code in (0, None)
    assert _final(out) == _oracle(tmp_path, [*args, "--passages", f["passages"]], "aba")


def test_a_model_folder_staged_again_with_the_same_files_is_the_same_grader(tmp_path):
    """A job that copies its model to local disk at every start (new times, same bytes),
    or a README added beside the weights, must still resume; other weights must not."""
    pytest.importorskip("torch")
    import os

    from tiny_models import make_tiny_t5

    from exam_eval.backends.model_identity import model_files_id

    model = make_tiny_t5(tmp_path / "t5")
    before = model_files_id(str(model))
    staged = tmp_path / "staged"
    shutil.copytree(model, staged)
    for p in staged.iterdir():
        os.utime(p, (1e9, 1e9))
    (staged / "README.md").write_text("notes\n")
    assert model_files_id(str(staged)) == before
    weights = staged / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte of the weights
    weights.write_bytes(bytes(data))
    assert model_files_id(str(staged)) != before


def test_hf_qa_and_embedding_identities(monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    from tiny_models import make_tiny_qa

    from exam_eval.backends.hf_qa import QABackend

    qa = str(make_tiny_qa(tmp_path / "qa"))
    cpu = QABackend(model=qa).cache_identity
    assert QABackend(model=qa, dtype="float32").cache_identity == cpu == QABackend(model=qa + "/").cache_identity
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert QABackend(model=qa).cache_identity == QABackend(model=qa, dtype="bfloat16").cache_identity != cpu
    monkeypatch.undo()

    pytest.importorskip("sentence_transformers")
    from exam_eval.backends.embedding import DEFAULT_MODEL, EmbeddingBackend, packaged_model_path

    emb = tmp_path / "emb"
    shutil.copytree(packaged_model_path(), emb)
    mine = EmbeddingBackend(model=str(emb)).cache_identity
    assert mine == EmbeddingBackend(model=f"{emb}/").cache_identity and ":files=" in mine
    assert ":files=" not in EmbeddingBackend(model=DEFAULT_MODEL).cache_identity  # the packaged one's as always
