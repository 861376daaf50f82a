"""hf-causal on CTranslate2: the tiny random Llama of tiny_models.py (with and without a
chat template) converted by the real converter, checked against plain transformers calls
(forward pass, greedy and beam ``generate``).

Tolerance: float32 label probabilities agree with torch's to 1e-5 absolute, whole-vocabulary
logits to 1e-4 (both engines sum the same float32 products in different orders; observed
differences are ~1e-8 for the probabilities, ~1e-6 for the logits)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("ctranslate2")

from exam_eval.backends import get_backend  # noqa: E402
from exam_eval.grading.types import GradeRequest  # noqa: E402
from exam_eval.backends import ct2_convert  # noqa: E402
from exam_eval.backends.ct2_causal import CT2CausalBackend, equal_length_groups  # noqa: E402
from exam_eval.backends.model_identity import model_files_id  # noqa: E402
from exam_eval.backends.hf_causal import CausalBackend  # noqa: E402
from exam_eval.backends.hf_common import label_token_ids  # noqa: E402
from exam_eval.errors import InputError, UsageError  # noqa: E402
from exam_eval.grading.prompts import get_prompt  # noqa: E402
from exam_eval.grading.writer import DEPTH  # noqa: E402
from ct2_helpers import CMD, ENV, cache_args, ct2_cache  # noqa: E402,F401 (ct2_cache: autouse fixture)
from ct2_helpers import assert_same_grades, grade as _grade, keyed as _keyed, rows as _rows, summary as _summary  # noqa: E402
from tiny_models import make_tiny_llama, tiny_llama, tiny_llama_base, tiny_qa, tiny_t5  # noqa: E402,F401

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "exam_eval" / "demo_data"
RATE = get_prompt("question-selfrating")
EXTRACT = get_prompt("question-extraction")
SUN = get_prompt("sun")
PASSAGES = [
    "Paris is the capital of France.",
    "The water table will rise during very wet times, and fall in dry times. " * 3,
    "Yes no answer grade.",
    "Question: what is the capital of France? Context: relevant passage query nugget",
]
QUESTION = "what is the capital of France?"


def _reqs(prompt):
    return [GradeRequest(prompt, "capital of france", QUESTION, p) for p in PASSAGES]


def _ct2(model, **kw):
    # the engines' label probabilities are compared: the label-mass rule (tests/backends/test_judges.py, test_grade_cli_hf.py) is off
    kw.setdefault("min_label_mass", 0)
    b = get_backend("hf-causal", model=str(model), device="cpu", max_new_tokens=6, engine="ctranslate2", **kw)
    b.load()
    return b


def _torch(model):
    b = CausalBackend(model=str(model), device="cpu", max_new_tokens=6)
    b.min_label_mass = 0
    b.load()
    return b


# -- engine choice and identity -----------------------------------------------------------------
def test_engine_choice_and_identity(tiny_llama):
    auto = get_backend("hf-causal", model=str(tiny_llama), device="cpu")
    # auto stays on torch for causal models (not faster enough on a CPU: bench/README.md)
    assert type(auto) is CausalBackend and auto.engine == "torch"
    assert auto.cache_identity == f"hf-causal:{tiny_llama}" + model_files_id(str(tiny_llama))
    # a compute type asks for CTranslate2
    f32 = get_backend("hf-causal", model=str(tiny_llama), device="cpu", compute_type="float32")
    assert isinstance(f32, CT2CausalBackend) and f32.engine == "ctranslate2/float32"
    # float32 is the CPU default of causal models (int8 changes too many grades: bench/README.md)
    default = get_backend("hf-causal", model=str(tiny_llama), device="cpu", engine="ctranslate2")
    assert default.compute_type == "float32" and default.cache_identity == f32.cache_identity
    i8 = get_backend("hf-causal", model=str(tiny_llama), device="cpu", compute_type="int8")
    assert i8.engine == "ctranslate2/int8+float32@0.2"  # int8's close calls regraded, as for hf-seq2seq
    pure = get_backend("hf-causal", model=str(tiny_llama), device="cpu", compute_type="int8", recheck_margin=0)
    assert pure.engine == "ctranslate2/int8"
    bf16 = get_backend("hf-causal", model=str(tiny_llama), dtype="bfloat16")
    assert bf16.engine == "torch/bfloat16"
    ids = {b.cache_identity for b in (auto, f32, i8, pure, bf16)}
    assert len(ids) == 5 and all(i.startswith(f"hf-causal:{tiny_llama}") for i in ids)
    with pytest.raises(UsageError, match="--compute-type is for --engine ctranslate2"):
        get_backend("hf-causal", model=str(tiny_llama), engine="torch", compute_type="int8")
    with pytest.raises(UsageError, match="--dtype is for --engine torch"):
        get_backend("hf-causal", model=str(tiny_llama), engine="ctranslate2", dtype="bfloat16")
    with pytest.raises(UsageError, match="--recheck-margin is for --engine ctranslate2"):
        get_backend("hf-causal", model=str(tiny_llama), engine="torch", recheck_margin=0.5)
    with pytest.raises(UsageError, match="runs --engine torch"):
        CausalBackend(model=str(tiny_llama), engine="ctranslate2")


def test_causal_types_are_ctranslate2_decoder_loaders():
    import transformers
    from ctranslate2.converters import transformers as conv

    decoder_only = set()
    for config_name, loader in conv._MODEL_LOADERS.items():
        config = getattr(transformers, config_name, None)
        if config is not None and loader.architecture_name.endswith(("ForCausalLM", "LMHeadModel")):
            decoder_only.add(config.model_type)
    assert set(ct2_convert.CAUSAL_TYPES) <= decoder_only
    assert {"llama", "mistral", "qwen2", "gemma"} <= set(ct2_convert.CAUSAL_TYPES)
    assert not set(ct2_convert.CAUSAL_TYPES) & set(ct2_convert.SEQ2SEQ_TYPES)


# -- numbers against torch ------------------------------------------------------------------------
@pytest.mark.parametrize("checkpoint,prompt", [("tiny_llama", RATE), ("tiny_llama_base", SUN)])
def test_float32_probabilities_equal_torch_forward(checkpoint, prompt, request):
    path = request.getfixturevalue(checkpoint)
    ct2 = _ct2(path, compute_type="float32")
    ref = _torch(path)
    reqs = _reqs(prompt)
    got = ct2.grade(reqs)
    chat = checkpoint == "tiny_llama"
    texts = [ref._full_text(r, ref.fit_context(r)) for r in reqs]
    assert len(set(texts)) == len(PASSAGES)  # the passages really reached the model
    ids = label_token_ids(ref.tokenizer, prompt.labels, prefix=texts[0])
    tokens = ct2._tokens(texts)
    for text, toks, res in zip(texts, tokens, got):
        # BOS exactly once: from the chat template, or added by the tokenizer for a plain rendering
        assert toks[0] == "<s>" and toks.count("<s>") == 1
        enc = ref.tokenizer(text, return_tensors="pt", add_special_tokens=not chat)
        assert ref.tokenizer.convert_ids_to_tokens(enc["input_ids"][0]) == toks
        with torch.inference_mode():
            logits = ref.model(**enc).logits[0, -1].double()
        expected = torch.softmax(logits[ids], -1).tolist()
        assert [res.probs[lab] for lab in prompt.labels] == pytest.approx(expected, abs=1e-5)
        assert res.parse_ok and res.answer == prompt.labels[max(range(len(expected)), key=expected.__getitem__)]
        # the logits read are step 0's, over the whole vocabulary, before any processing
        step = ct2.model.generate_batch([toks], max_length=1, include_prompt_in_result=False,
                                        return_logits_vocab=True)[0].logits[0]
        assert len(step) == 1
        assert np.asarray(step[0], dtype=np.float64) == pytest.approx(logits.numpy(), abs=1e-4)
    assert [r.grade for r in ref.grade(reqs)] == [r.grade for r in got]


def _texts(backend, reqs):
    """The prompts as the back end renders them, the passage cut to its window."""
    return [backend._full_text(r, backend.fit_context(r)) for r in reqs]


def test_batches_of_different_lengths_equal_one_by_one(tiny_llama):
    ct2 = _ct2(tiny_llama, compute_type="float32")
    reqs = _reqs(RATE) + _reqs(RATE)[:2]
    lengths = [len(t) for t in ct2._tokens(_texts(ct2, reqs))]
    assert len(set(lengths)) == len(PASSAGES)  # one batch, several lengths, some repeated
    batched = ct2.grade(reqs)
    for req, res in zip(reqs, batched):
        assert res.probs == pytest.approx(ct2.grade([req])[0].probs, abs=1e-6)
    assert equal_length_groups([["a"], ["b", "c"], ["d"], []]) == [[0, 2], [1], [3]]


def test_float32_generation_equals_torch_generate(tiny_llama):
    ct2 = _ct2(tiny_llama, compute_type="float32")
    ref = _torch(tiny_llama)
    reqs = _reqs(EXTRACT)
    for beams in (1, 3):
        ct2.num_beams = beams
        for req, res in zip(reqs, ct2.grade(reqs)):
            enc = ref.tokenizer(ref._full_text(req, ref.fit_context(req)), return_tensors="pt",
                                add_special_tokens=False)
            out = ref.model.generate(**enc, max_new_tokens=6, do_sample=False, num_beams=beams,
                                     pad_token_id=ref.tokenizer.pad_token_id)
            expected = ref.tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            assert res.answer == expected and expected
            assert res.probs is None


def test_labels_sharing_a_first_token_are_generated_as_torch_does(tiny_llama):
    robust = get_prompt("ci-robust04")  # labels "[0]" "[1]" "[2]" all start with "["
    ct2 = _ct2(tiny_llama, compute_type="float32")
    ref = _torch(tiny_llama)
    reqs = [GradeRequest(robust, "capital of france", None, p) for p in PASSAGES] + _reqs(RATE)[:1]
    got, want = ct2.grade(reqs), ref.grade(reqs)
    for a, b in zip(got, want):
        assert (a.answer, a.grade, a.parse_ok) == (b.answer, b.grade, b.parse_ok)
    assert all(r.probs is None and r.answer is not None for r in got[:-1])
    assert got[-1].probs == pytest.approx(want[-1].probs, abs=1e-5)  # the scored one in the same batch


def test_int8_is_quantized_and_close_to_float32(tiny_llama):
    f32 = _ct2(tiny_llama, compute_type="float32").grade(_reqs(RATE))
    i8 = _ct2(tiny_llama, compute_type="int8", recheck_margin=0).grade(_reqs(RATE))
    for a, b in zip(f32, i8):
        assert a.probs != b.probs  # really quantized
        assert max(abs(a.probs[k] - b.probs[k]) for k in a.probs) < 0.05


def test_int8_close_calls_regraded_in_float32(tiny_llama):
    reqs = _reqs(RATE)
    f32 = _ct2(tiny_llama, compute_type="float32").grade(reqs)
    pure = _ct2(tiny_llama, compute_type="int8", recheck_margin=0)
    i8 = pure.grade(reqs)
    # the gap of the two best label logits in sd of the vocabulary logits, computed here from torch-free numpy
    gaps = []
    for toks in pure._tokens(_texts(pure, reqs)):
        vocab = np.asarray(pure.model.generate_batch([toks], max_length=1, include_prompt_in_result=False,
                                                     return_logits_vocab=True)[0].logits[0][0], dtype=np.float64)
        top = np.sort(vocab[pure._labels(RATE.labels, _texts(pure, reqs)[0])])[::-1]
        gaps.append((top[0] - top[1]) / vocab.std())
    ordered = sorted(gaps)
    cut = round((ordered[1] + ordered[2]) / 2, 6)  # the two closest calls
    b = _ct2(tiny_llama, compute_type="int8", recheck_margin=cut)
    got = b.grade(reqs)
    for res, a, q, g in zip(got, f32, i8, gaps):
        assert res.probs == pytest.approx(a.probs if g < cut else q.probs, abs=1e-6)
    assert (b.scored_pairs, b.rechecked_pairs) == (len(reqs), 2) and b.run_note().startswith("2 of 4")


# -- decoding: what maps and what is refused --------------------------------------------------------
def test_openai_penalties_are_refused_before_grading(tiny_llama):
    b = get_backend("hf-causal", model=str(tiny_llama), device="cpu", engine="ctranslate2")
    with pytest.raises(UsageError, match=r"prompt 'umbrela' decodes with frequency_penalty.*--engine torch"):
        b.check_prompt(get_prompt("umbrela"))
    b.check_prompt(RATE)  # scoring: nothing to refuse
    b.check_prompt(EXTRACT)  # greedy, no penalties
    # torch applies them
    get_backend("hf-causal", model=str(tiny_llama), device="cpu").check_prompt(get_prompt("umbrela"))


def test_sampling_and_greedy_options(tiny_llama, tmp_path):
    b = _ct2(tiny_llama, compute_type="float32")
    eos = [b.tokenizer.eos_token_id]
    assert b.decoding_options({}) == {"beam_size": 1, "end_token": eos}
    assert b.decoding_options({"temperature": 0.0, "top_p": 1.0}) == {"beam_size": 1, "end_token": eos}
    # transformers samples with top_k 50 unless the checkpoint says otherwise
    assert b.decoding_options({"temperature": 0.7, "top_p": 0.9}) == {
        "beam_size": 1, "end_token": eos, "sampling_temperature": 0.7, "sampling_topp": 0.9, "sampling_topk": 50}
    b.num_beams = 2
    with pytest.raises(UsageError, match="--num-beams"):
        b.decoding_options({"temperature": 0.7})
    with pytest.raises(UsageError, match="presence_penalty"):
        b.decoding_options({"presence_penalty": 0.1})


def test_checkpoint_generation_settings_are_mapped_or_refused(tmp_path):
    model = make_tiny_llama(tmp_path / "llama")
    gen = json.loads((model / "generation_config.json").read_text())
    gen.update(top_k=7, eos_token_id=[gen["eos_token_id"], 5], temperature=0.6, do_sample=True)
    (model / "generation_config.json").write_text(json.dumps(gen))
    b = _ct2(model, compute_type="float32")
    b.check_prompt(EXTRACT)  # sampling settings torch overrides, eos and top_k are mapped
    assert b.decoding_options({"temperature": 1.0})["sampling_topk"] == 7
    assert b.decoding_options({})["end_token"] == gen["eos_token_id"]
    gen["repetition_penalty"] = 1.3
    (model / "generation_config.json").write_text(json.dumps(gen))
    b = get_backend("hf-causal", model=str(model), device="cpu", engine="ctranslate2")
    b.check_prompt(RATE)  # scoring generates nothing
    with pytest.raises(UsageError, match="generation_config.json sets repetition_penalty.*--engine torch"):
        b.check_prompt(EXTRACT)


# -- bad input ---------------------------------------------------------------------------------------
def test_bad_compute_types_and_checkpoints(tiny_llama, tiny_t5, tiny_qa, tmp_path):
    with pytest.raises(InputError, match="unknown compute type"):
        get_backend("hf-causal", model=str(tiny_llama), device="cpu", compute_type="int4")
    with pytest.raises(InputError, match="not supported by this cpu"):
        get_backend("hf-causal", model=str(tiny_llama), device="cpu", compute_type="float16")
    for other, kind in ((tiny_t5, "t5"), (tiny_qa, "bert")):
        with pytest.raises(InputError, match=f"as a decoder-only model \\(model_type '{kind}'"):
            get_backend("hf-causal", model=str(other), device="cpu", engine="ctranslate2")
    # and the seq2seq engine does not take a causal checkpoint
    with pytest.raises(InputError, match="as an encoder-decoder model \\(model_type 'llama'"):
        get_backend("hf-seq2seq", model=str(tiny_llama), device="cpu", engine="ctranslate2")
    assert ct2_convert.convertible(str(tiny_llama), "causal") and not ct2_convert.convertible(str(tiny_t5), "causal")
    broken = make_tiny_llama(tmp_path / "broken")
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    b = get_backend("hf-causal", model=str(broken), device="cpu", engine="ctranslate2")
    with pytest.raises(InputError, match="cannot convert"):
        b.load()


def _args(model, tmp_path, *extra):
    return ["--backend", "hf-causal", "--model", str(model), "--device", "cpu", "--prompt", "question-selfrating",
            "--bank", str(DEMO / "questions.jsonl"), "--passages", str(DEMO / "passages.jsonl"),
            str(DEMO / "good.run"), "--max-input-tokens", "300", *cache_args(tmp_path, extra), *map(str, extra),
            # the engines' scored grades are compared: random weights would fall back to generation
            "--min-label-mass", "0"]


@pytest.mark.parametrize("extra,needle", [
    (["--engine", "ctranslate2", "--compute-type", "int4"], "unknown compute type"),
    (["--compute-type", "float16"], "not supported by this cpu"),
    (["--engine", "ctranslate2", "--prompt", "umbrela"], "use --engine torch"),
    (["--model", "T5"], "model_type 't5'"),
    (["--model", "BROKEN"], "cannot convert"),
])
def test_cli_bad_input_is_one_line_before_grading(tiny_llama, tiny_t5, tmp_path, extra, needle):
    broken = make_tiny_llama(tmp_path / "broken")
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    extra = [{"T5": str(tiny_t5), "BROKEN": str(broken)}.get(x, x) for x in extra]
    if "--model" in extra:
        extra += ["--engine", "ctranslate2"]
    out = tmp_path / "g.jsonl"
    env = dict(ENV, EXAM_EVAL_CT2_CACHE=str(tmp_path / "ct2"))
    args = _args(tiny_llama, tmp_path, "-o", out)
    if "umbrela" in extra:  # a direct prompt: topics instead of a bank
        args = [a for a in args if a not in ("--bank", str(DEMO / "questions.jsonl"))] + ["--topics",
                                                                                          str(DEMO / "topics.tsv")]
    r = _grade(*args, *extra, env=env)
    code = 1 if "umbrela" in extra else 2  # a usage error (the engine's), or bad input
    assert r.returncode == code and needle in r.stderr, r.stderr
    lines = [x for x in r.stderr.strip().splitlines() if "converting" not in x]
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert not out.exists()
    if needle != "cannot convert":  # the conversion runs when the model loads, after the cache opened
        assert not (tmp_path / "cache.sqlite").exists()


# -- end to end: kill/resume, cache, engines never mix --------------------------------------------------
def test_cli_kill_resume_cache_and_no_mixing(tiny_llama, tmp_path):
    env = dict(ENV, EXAM_EVAL_CT2_CACHE=str(tmp_path / "ct2"))
    ct2 = ("--engine", "ctranslate2", "--compute-type", "float32")
    ref = tmp_path / "ref.jsonl"
    r = _grade(*_args(tiny_llama, tmp_path, "--no-cache", "-o", ref, *ct2), env=env)
    assert r.returncode == 0, r.stderr
    total = len(_rows(ref))
    assert total > 100 and {x["engine"] for x in _rows(ref)} == {"ctranslate2/float32"}
    assert all(x["probs"] and x["parse_ok"] for x in _rows(ref))

    out = tmp_path / "g.jsonl"
    args = _args(tiny_llama, tmp_path, "--batch-size", "1", "-o", out, *ct2)
    proc = subprocess.Popen(CMD + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 180
    while (not out.exists() or out.read_bytes().count(b"\n") < 20) and proc.poll() is None \
            and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = out.read_bytes().count(b"\n")
    assert 0 < killed_at < total
    # a resume on another engine (torch: the default) or compute type refuses instead of mixing
    for other in ((), ("--engine", "ctranslate2", "--compute-type", "int8")):
        r = _grade(*_args(tiny_llama, tmp_path, "-o", out, *other), env=env)
        assert r.returncode == 2 and "ctranslate2/float32" in r.stderr and str(out) in r.stderr, r.stderr
    assert out.read_bytes().count(b"\n") == killed_at
    r = _grade(*args, env=env)
    assert r.returncode == 0, r.stderr
    rows = _rows(out)
    assert len(rows) == total == len({(x["query_id"], x["doc_id"], x["item_id"]) for x in rows})
    got, want = _keyed(out), _keyed(ref)
    assert_same_grades(got, want)  # batch 1 against the default batches: float32's tolerance

    # the cache answers a rerun of the same engine, and only that engine (a kill between
    # the output's fsync and the cache commit leaves one write group uncached: up to DEPTH
    # batches of 1)
    again = tmp_path / "again.jsonl"
    r = _grade(*_args(tiny_llama, tmp_path, "-o", again, *ct2), env=env)
    pairs, graded, cached = _summary(r.stderr)
    assert pairs == total and graded <= DEPTH and graded + cached == total
    assert_same_grades(_keyed(again), got)  # the regraded ones in other batches
    torch_out = tmp_path / "torch.jsonl"
    r = _grade(*_args(tiny_llama, tmp_path, "-o", torch_out), env=env)
    assert r.returncode == 0 and _summary(r.stderr)[2] == 0, r.stderr
    rows = _keyed(torch_out)
    assert {v[2] for v in rows.values()} == {"torch"}
    # torch float32 grades the same, with the same probabilities to float32 noise
    for k in want:
        assert rows[k][0] == want[k][0] and rows[k][1] == pytest.approx(want[k][1], abs=1e-5)
