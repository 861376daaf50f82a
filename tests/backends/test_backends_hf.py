"""Hugging Face back ends on tiny random-weight models (built in the test, no download).

Each number is checked against an independent computation with plain transformers
calls: unbatched forward passes, generate(output_scores=True), a brute-force span
search for extractive QA."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from exam_eval.backends import get_backend  # noqa: E402
from exam_eval.grading.types import GradeRequest  # noqa: E402
from exam_eval.backends.hf_common import label_token_ids  # noqa: E402
from exam_eval.errors import InputError, UsageError  # noqa: E402
from exam_eval.grading.prompts import get_prompt  # noqa: E402
from tiny_models import tiny_llama, tiny_llama_base, tiny_qa, tiny_t5  # noqa: E402,F401

RATE = get_prompt("question-selfrating")
EXTRACT = get_prompt("question-extraction")
SUN = get_prompt("sun")

PASSAGES = [
    "Paris is the capital of France.",
    "The water table will rise during very wet times, and fall in dry times. " * 3,
    "Yes no answer grade.",
]
QUESTION = "what is the capital of France?"


def _reqs(prompt, n=3, keys=None):
    return [GradeRequest(prompt, "capital of france", QUESTION, PASSAGES[i % len(PASSAGES)], keys) for i in range(n)]


@pytest.fixture(scope="module")
def t5(tiny_t5):
    # random weights put a few per cent of their mass on the labels: these checks are of the
    # scoring arithmetic, so the label-mass rule is off (its own tests: test_judges.py, test_grade_cli_hf.py)
    b = get_backend("hf-seq2seq", model=str(tiny_t5), device="cpu", max_new_tokens=6, max_input_tokens=400,
                    engine="torch", min_label_mass=0)  # the checks below call the torch model directly
    b.load()
    return b


@pytest.fixture(scope="module")
def llama(tiny_llama):
    b = get_backend("hf-causal", model=str(tiny_llama), device="cpu", max_new_tokens=6, min_label_mass=0)
    b.load()
    return b


def test_seq2seq_scoring_equals_first_generation_step(t5):
    reqs = _reqs(RATE)
    got = t5.grade(reqs)
    ids = label_token_ids(t5.tokenizer, RATE.labels)
    for req, res in zip(reqs, got):
        enc = t5.tokenizer(t5.render(req), return_tensors="pt")
        out = t5.model.generate(**enc, max_new_tokens=1, do_sample=False, output_scores=True,
                                return_dict_in_generate=True)
        p = torch.softmax(out.scores[0][0].float(), -1)[ids]
        expected = (p / p.sum()).tolist()
        assert [res.probs[lab] for lab in RATE.labels] == pytest.approx(expected, abs=1e-5)
        assert res.grade == int(RATE.labels[max(range(6), key=lambda j: expected[j])])
        assert res.parse_ok and sum(res.probs.values()) == pytest.approx(1.0)


def test_seq2seq_generation_batched_equals_one_by_one(t5):
    reqs = _reqs(EXTRACT)
    got = t5.grade(reqs)
    for req, res in zip(reqs, got):
        enc = t5.tokenizer(t5.render(req), return_tensors="pt")
        out = t5.model.generate(**enc, max_new_tokens=6, do_sample=False)
        assert res.answer == t5.tokenizer.decode(out[0], skip_special_tokens=True)
        assert res.probs is None


def test_seq2seq_beam_search_changes_identity(tiny_t5):
    greedy = get_backend("hf-seq2seq", model=str(tiny_t5))
    beams = get_backend("hf-seq2seq", model=str(tiny_t5), num_beams=4)
    assert greedy.cache_identity != beams.cache_identity


def test_causal_scoring_left_padded_batch_equals_unpadded(llama):
    reqs = _reqs(RATE)
    got = llama.grade(reqs)
    texts = [llama._full_text(r, llama.fit_context(r)) for r in reqs]
    ids = label_token_ids(llama.tokenizer, RATE.labels, prefix=texts[0])
    for text, res in zip(texts, got):
        enc = llama.tokenizer(text, return_tensors="pt", add_special_tokens=False)
        logits = llama.model(**enc).logits[0, -1].float()
        p = torch.softmax(logits, -1)[ids]
        assert [res.probs[lab] for lab in RATE.labels] == pytest.approx((p / p.sum()).tolist(), abs=1e-4)


def test_causal_scoring_with_absolute_positions_is_independent_of_the_batch(tmp_path):
    """GPT-2 reads the position it is given. Left-padded, a short prompt would start at
    the batch's first column's position unless the call numbers each row's own tokens:
    its grade would then depend on which longer prompts share its batch."""
    from tiny_models import make_tiny_gpt2

    b = get_backend("hf-causal", model=str(make_tiny_gpt2(tmp_path / "gpt2")), device="cpu", engine="torch",
                    min_label_mass=0)
    b.load()
    reqs = _reqs(SUN)
    texts = [b._full_text(r, b.fit_context(r)) for r in reqs]
    lengths = [len(b.tokenizer(t, add_special_tokens=True)["input_ids"]) for t in texts]
    assert len(set(lengths)) == 3  # a batch of three widths: two rows are padded
    ids = label_token_ids(b.tokenizer, SUN.labels, prefix=texts[0])
    got = b.grade(reqs)
    for text, res in zip(texts, got):
        enc = b.tokenizer(text, return_tensors="pt", add_special_tokens=True)
        p = torch.softmax(b.model(**enc).logits[0, -1].float(), -1)[ids]
        assert [res.probs[lab] for lab in SUN.labels] == pytest.approx((p / p.sum()).tolist(), abs=1e-5)


def test_causal_scoring_keeps_no_key_value_cache(llama, monkeypatch):
    """A scoring call is one forward pass: a key/value cache of every layer over the whole
    batch would be built for nothing (on a GPU, at the token budget, tens of GB for a 7B
    model). The output the model returns holds none, and the grades equal the unbatched
    calls' of the test above."""
    outputs = []
    forward = llama.model.forward

    def spy(*a, **kw):
        out = forward(*a, **kw)
        outputs.append(out)
        return out

    monkeypatch.setattr(llama.model, "forward", spy)
    got = llama.grade(_reqs(RATE))
    assert outputs and all(getattr(o, "past_key_values", None) is None for o in outputs)
    monkeypatch.undo()
    assert got == llama.grade(_reqs(RATE))


def test_causal_uses_the_chat_template(llama):
    req = _reqs(RATE, 1)[0]
    text = llama._full_text(req, req.context)
    assert text.startswith("<s><|user|> ") and text.endswith("<|assistant|>")
    assert RATE.render(query="", item=QUESTION, context=PASSAGES[0]) in text


def test_causal_generation_batched_equals_one_by_one(llama):
    reqs = _reqs(EXTRACT)
    got = llama.grade(reqs)
    for req, res in zip(reqs, got):
        enc = llama.tokenizer(llama._full_text(req, llama.fit_context(req)), return_tensors="pt",
                              add_special_tokens=False)
        out = llama.model.generate(**enc, max_new_tokens=6, do_sample=False,
                                   pad_token_id=llama.tokenizer.pad_token_id)
        assert res.answer == llama.tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)


def test_causal_without_chat_template_uses_plain_rendering(tiny_llama_base):
    b = get_backend("hf-causal", model=str(tiny_llama_base), device="cpu", min_label_mass=0)
    b.load()
    req = _reqs(SUN, 1)[0]
    assert b._full_text(req, req.context) == SUN.render(query=req.query, item=None, context=req.context)
    res = b.grade([req])[0]
    assert res.parse_ok and set(res.probs) == {"No", "Yes"}


def test_truncation_keeps_question_whole_within_window(tiny_t5):
    b = get_backend("hf-seq2seq", model=str(tiny_t5), device="cpu", max_input_tokens=140)
    b.load()
    long_passage = "The water table will rise during very wet times. " * 60
    req = GradeRequest(RATE, "q", QUESTION, long_passage)
    rendered = b.render(req)
    n = len(b.tokenizer(rendered)["input_ids"])
    assert n <= 140
    assert QUESTION in rendered
    cut = rendered.split("Context: ", 1)[1]
    assert long_passage.startswith(cut) and len(cut) < len(long_passage)


def test_missing_model_directory_is_bad_input(tmp_path):
    with pytest.raises(InputError):
        get_backend("hf-seq2seq", model=str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError):
        get_backend("hf-causal", model=str(tmp_path / "empty"))
    with pytest.raises(UsageError):
        get_backend("hf-seq2seq", model="x", base_url="http://a")


def test_qa_matches_brute_force_span_search(tiny_qa):
    b = get_backend("hf-qa", model=str(tiny_qa), device="cpu")
    b.load()
    contexts = ["Paris is the capital of France. The water table will rise.", PASSAGES[2], PASSAGES[0]]
    questions = [QUESTION, "what will rise?", QUESTION]
    got = b.answer(questions, contexts)
    for q, c, ans in zip(questions, contexts, got):
        enc = b.tokenizer(q, c, return_tensors="pt", return_offsets_mapping=True)
        offsets = enc.pop("offset_mapping")[0].tolist()
        seq = enc.sequence_ids(0)
        out = b.model(**enc)
        s, e = out.start_logits[0].tolist(), out.end_logits[0].tolist()
        best, text = float("-inf"), ""
        ctx = [i for i, sid in enumerate(seq) if sid == 1]
        for a in ctx:
            for z in ctx:
                if a <= z < a + 30 and s[a] + e[z] > best:
                    best, text = s[a] + e[z], c[offsets[a][0]:offsets[z][1]]
        expected = "" if s[0] + e[0] > best else text.strip()
        assert ans == expected


def test_qa_grades_with_and_without_answer_keys(tiny_qa, monkeypatch):
    b = get_backend("hf-qa", model=str(tiny_qa), device="cpu")
    b.load()
    monkeypatch.setattr(b, "answer", lambda qs, cs: ["Paris", "", "Lyon"])
    reqs = [GradeRequest(EXTRACT, "q", QUESTION, "c", ("Paris",)), GradeRequest(EXTRACT, "q", QUESTION, "c", ("Paris",)),
            GradeRequest(EXTRACT, "q", QUESTION, "c", None)]
    got = b.grade(reqs)
    assert [(r.grade, r.parse_ok) for r in got] == [(1, True), (0, True), (1, True)]
    with pytest.raises(UsageError):
        b.check_prompt(get_prompt("nugget-selfrating"))
    with pytest.raises(UsageError):
        b.check_prompt(get_prompt("question-selfrating"))


def test_labels_sharing_a_first_token_are_generated_and_parsed(t5, llama):
    robust = get_prompt("ci-robust04")  # labels "[0]" "[1]" "[2]" all start with "["
    for b in (t5, llama):
        req = GradeRequest(robust, "capital of france", None, PASSAGES[0])
        res = b.grade([req])[0]
        assert res.probs is None and res.answer is not None  # generated, then parsed
        assert res.parse_ok == (res.grade is not None)


def test_the_gpu_load_arguments_are_accepted_and_change_no_number(tiny_t5, tiny_llama):
    """On a GPU the weights load straight onto the device, and a T5 checkpoint gets the
    SDPA attention of hf_attention (a causal model keeps transformers' choice); the same
    arguments, aimed at the CPU, load the same model giving the same logits."""
    from transformers import AutoModelForSeq2SeqLM

    from exam_eval.backends.hf_attention import NAME
    from exam_eval.backends.hf_common import model_kwargs

    assert model_kwargs("cpu") == {} and model_kwargs("cpu", str(tiny_t5)) == {}
    gpu = model_kwargs("cuda:1", str(tiny_t5))
    assert gpu == {"device_map": "cuda:1", "attn_implementation": NAME}
    assert model_kwargs("cuda:1", str(tiny_llama)) == {"device_map": "cuda:1"}
    assert model_kwargs("cuda:1") == {"device_map": "cuda:1"}
    plain = AutoModelForSeq2SeqLM.from_pretrained(tiny_t5).eval()
    mapped = AutoModelForSeq2SeqLM.from_pretrained(tiny_t5, **dict(gpu, device_map="cpu")).eval()
    ids = torch.tensor([[5, 6, 7, 8, 1]])
    start = torch.zeros((1, 1), dtype=torch.long)
    with torch.inference_mode():
        a = plain(input_ids=ids, decoder_input_ids=start).logits
        b = mapped(input_ids=ids, decoder_input_ids=start).logits
    assert mapped.device.type == "cpu" and torch.allclose(a, b, atol=1e-6)
    assert plain.config._attn_implementation == "sdpa" and mapped.config._attn_implementation == NAME


def test_padding_to_a_multiple_changes_no_grade(t5, tiny_t5):
    """On a GPU a T5 batch is padded to a multiple of CUDA_PAD_MULTIPLE tokens: the extra
    padding is masked and T5's positions are relative, so every probability stays the
    same (with transformers' attention and with hf_attention's)."""
    from exam_eval.backends.hf_attention import NAME, register

    reqs = _reqs(RATE, n=6)
    rows = t5.prompt_rows(reqs)
    assert len({len(r) for r in rows}) > 1  # padding happens at all
    want = t5.grade(reqs)
    register()
    ours = get_backend("hf-seq2seq", model=str(tiny_t5), device="cpu", max_new_tokens=6, max_input_tokens=400,
                       engine="torch", min_label_mass=0)
    ours.load()
    from transformers import AutoModelForSeq2SeqLM
    ours.model = AutoModelForSeq2SeqLM.from_pretrained(tiny_t5, attn_implementation=NAME).eval()
    for backend in (t5, ours):
        for multiple in (8, 64):
            backend.pad_multiple = multiple
            assert backend.batch_tensors(rows)["input_ids"].shape[1] % multiple == 0
            got = backend.grade(reqs)
            backend.pad_multiple = 1
            assert [g.grade for g in got] == [w.grade for w in want]
            for g, w in zip(got, want):
                assert g.probs == pytest.approx(w.probs, abs=1e-6)


def test_a_gpu_load_pads_seq2seq_batches_to_the_multiple(tiny_t5, tiny_llama, monkeypatch):
    """What load() sets on a GPU (simulated: the device is named cuda, the model stays
    here): a token budget, and T5's pad multiple; a left-padded causal model keeps 1."""
    from exam_eval.backends import hf_causal, hf_common, hf_seq2seq

    class Loaded:
        """The model as loaded, whose move to the (absent) GPU is a no-op."""

        def __init__(self, real):
            self.real = real

        def __getattr__(self, name):
            return getattr(self.real, name)

        def to(self, device):
            return self

        def eval(self):
            return self

    for module in (hf_seq2seq, hf_causal):
        monkeypatch.setattr(module, "pick_device", lambda opt: "cuda:0")
        monkeypatch.setattr(module, "model_kwargs", lambda device, source=None: {})
        monkeypatch.setattr(module, "cuda_token_budget",
                            lambda model, device, generate=False, beams=1: 16384 * beams if generate else 65536)
        monkeypatch.setattr(module, "pick_dtype", lambda opt, device: None)
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM
    for auto in (AutoModelForSeq2SeqLM, AutoModelForCausalLM):
        real = auto.from_pretrained
        monkeypatch.setattr(auto, "from_pretrained", lambda *a, _real=real, **k: Loaded(_real(*a, **k)))
    seq = get_backend("hf-seq2seq", model=str(tiny_t5), engine="torch", num_beams=2)
    seq.load()
    assert (seq.device, seq.token_budget, seq.pad_multiple) == ("cuda:0", 65536, hf_common.CUDA_PAD_MULTIPLE)
    # a prompt that generates gets the budget that counts generate()'s cache (of 2 beams)
    assert (seq.token_budget_for(RATE), seq.token_budget_for(EXTRACT)) == (65536, 32768)
    causal = get_backend("hf-causal", model=str(tiny_llama))
    causal.load()
    assert (causal.token_budget, causal.pad_multiple) == (65536, 1)
    assert (causal.token_budget_for(RATE), causal.token_budget_for(EXTRACT)) == (65536, 16384)
    here = get_backend("hf-seq2seq", model=str(tiny_t5), device="cpu", engine="torch")
    monkeypatch.setattr(hf_seq2seq, "pick_device", lambda opt: "cpu")
    here.load()
    assert (here.token_budget, here.pad_multiple) == (None, 1)


class _HostReads:
    """Counts the tensor-to-Python reads made while active (``bool(t)``, ``t.item()``,
    ``t.tolist()``, ``int(t)``, ``float(t)``): on a GPU each one waits for the device."""

    NAMES = ("__bool__", "item", "tolist", "__int__", "__float__")

    def __init__(self, monkeypatch):
        self.count = 0
        self.active = False
        for name in self.NAMES:
            real = getattr(torch.Tensor, name)

            def spy(t, *a, _real=real, **k):
                if self.active:
                    self.count += 1
                return _real(t, *a, **k)
            monkeypatch.setattr(torch.Tensor, name, spy)


def test_a_scoring_call_reads_nothing_back_from_the_device(t5, tiny_t5, monkeypatch):
    """The model call of a padded seq2seq scoring batch makes no tensor-to-host read (on a
    GPU, a wait that would stop the engine queueing the next batch); the probabilities
    equal unbatched transformers calls with the tokenizer's own 2D masks, which do read
    (transformers' mask builder asks whether anything is padded)."""
    from transformers import AutoModelForSeq2SeqLM

    from exam_eval.backends.hf_attention import NAME, register

    reads = _HostReads(monkeypatch)
    register()
    reqs = _reqs(RATE, n=6)
    assert len({len(r) for r in t5.prompt_rows(reqs)}) > 1  # the batch is padded
    models = {"sdpa": t5.model, NAME: AutoModelForSeq2SeqLM.from_pretrained(tiny_t5, attn_implementation=NAME).eval()}
    ids = label_token_ids(t5.tokenizer, RATE.labels)
    for attention, model in models.items():
        class Counted:
            def __init__(self, inner):
                self.inner, self.config = inner, inner.config

            def __call__(self, *a, **k):
                reads.active = True
                try:
                    return self.inner(*a, **k)
                finally:
                    reads.active = False

        t5.model = Counted(model)
        try:
            got = t5.grade(reqs)
        finally:
            t5.model = models["sdpa"]
        assert reads.count == 0, attention
        for req, res in zip(reqs, got):
            enc = t5.tokenizer([t5.render(req), "x"], return_tensors="pt", padding=True)
            with torch.inference_mode():
                reads.active = True
                logits = model(**enc, decoder_input_ids=torch.zeros((2, 1), dtype=torch.long)).logits[0, 0]
                reads.active = False
            p = torch.softmax(logits.float()[ids], -1).tolist()
            assert [res.probs[label] for label in RATE.labels] == pytest.approx(p, abs=1e-5)
        assert reads.count > 0  # the 2D masks' check is seen: the spy can fail the test
        reads.count = 0


def test_the_key_mask_is_4d_where_a_row_is_padded_and_none_where_none_is(t5):
    import numpy as np

    rows = [np.array([5, 6, 7]), np.array([8])]
    two_d = t5.batch_tensors(rows)["attention_mask"]
    four_d = t5.batch_tensors(rows, key_mask=True)["attention_mask"]
    assert four_d.dtype == torch.bool and four_d.shape == (2, 1, 1, 3)
    assert torch.equal(four_d[:, 0, 0, :], two_d.bool())
    assert t5.batch_tensors([np.array([5, 6]), np.array([7, 8])], key_mask=True)["attention_mask"] is None
    t5.pad_multiple = 4  # padding made by the rounding alone is padding too
    try:
        rounded = t5.batch_tensors([np.array([5, 6]), np.array([7, 8])], key_mask=True)["attention_mask"]
    finally:
        t5.pad_multiple = 1
    assert rounded[:, 0, 0, :].tolist() == [[True, True, False, False]] * 2


def test_eager_attention_keeps_the_2d_mask(tiny_t5):
    """A boolean 4D mask means "may attend" to SDPA, but eager attention adds the mask to
    the scores: a T5 on eager attention is handed the 2D mask, and grades as unbatched calls."""
    from transformers import AutoModelForSeq2SeqLM

    eager = get_backend("hf-seq2seq", model=str(tiny_t5), device="cpu", max_new_tokens=6, max_input_tokens=400,
                        engine="torch", min_label_mass=0)
    eager.load()
    assert eager.takes_key_mask  # transformers' default here is SDPA
    eager.model = AutoModelForSeq2SeqLM.from_pretrained(tiny_t5, attn_implementation="eager").eval()
    assert not eager.takes_key_mask
    reqs = _reqs(RATE, n=6)
    ids = label_token_ids(eager.tokenizer, RATE.labels)
    for req, res in zip(reqs, eager.grade(reqs)):
        enc = eager.tokenizer(eager.render(req), return_tensors="pt")
        with torch.inference_mode():
            logits = eager.model(**enc, decoder_input_ids=torch.zeros((1, 1), dtype=torch.long)).logits[0, 0]
        p = torch.softmax(logits.float()[ids], -1).tolist()
        assert [res.probs[label] for label in RATE.labels] == pytest.approx(p, abs=1e-5)
