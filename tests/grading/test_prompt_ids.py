"""Prompt ids assembled from token ids (backends/prompt_ids) are the ids the string path
gives, token for token: the passage cut by its own token count and offsets, the prompt
rendered around it and tokenized whole (``truncation=True`` at the window).

The reference below is the string path as the back ends ran it before prompt_ids (count
the prompt without passage, cut the passage, render, tokenize), on a separate tokenizer
instance. Tokenizers: the tiny WordLevel ones of the model tests, a SentencePiece unigram
model in transformers' T5 pipeline (Metaspace, subword pieces, so cuts fall inside
words), and a byte-level BPE (GPT-2 style, spaces belong to the next word).
"""

from __future__ import annotations

import io
import random

import pytest

pytest.importorskip("transformers")

from exam_eval.grading.types import GradeRequest  # noqa: E402
from exam_eval.backends.hf_common import TokenizerOps  # noqa: E402
from exam_eval.backends.prompt_ids import PromptEncoder, pad  # noqa: E402
from exam_eval.grading.prompts import get_prompt  # noqa: E402
from tiny_models import CORPUS, make_tiny_llama, make_tiny_t5, tiny_llama, tiny_t5  # noqa: E402,F401

WORDS = ("water table rise fall wet dry times the answer is relevant passage question context capital France "
         "Paris aquifer wells springs hydrology naïve café (really?) 3.5% e.g. \"quoted\" — well-known; x: y").split()
PROMPTS = ("question-selfrating", "question-extraction", "nugget-selfrating", "sun", "faggioli-b", "thomas",
           "umbrela", "ci-dl", "citation-support", "answer-verification")


def passages(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = rng.choices(WORDS, k=rng.randint(1, 60))
        sep = rng.choice([" ", " ", " ", "  ", "\n", " \n "])
        text = sep.join(words)
        out.append(rng.choice(["", " ", "\n", "(", "'"]) + text + rng.choice(["", ".", " ", "\n", "?)"]))
    return out + ["", " ", "Paris", "x" * 50]


def requests(prompt_ids=PROMPTS, n_passages: int = 25, seed: int = 0) -> list[GradeRequest]:
    rng = random.Random(seed)
    items = ["what is the capital of France?", "Does the water table rise?", "café — naïve?", "is it 3.5%"]
    out = []
    for pid in prompt_ids:
        prompt = get_prompt(pid)
        for passage in passages(n_passages, seed):
            for item in rng.sample(items, 2):
                answer = "Paris" if pid == "answer-verification" else None
                key = "paris" if pid == "answer-verification" else None
                out.append(GradeRequest(prompt, rng.choice(["water table", "capital of France"]), item,
                                        "" if pid == "answer-verification" else passage, None, answer, key))
    return out


def render(req, context):
    return req.prompt.render(**req.texts(context))


def string_path(tok, req, window, reserve, special, max_length, full_text=render):
    """What the back ends computed before: count, cut, render, tokenize whole."""
    ops = TokenizerOps(tok)
    context = req.context
    if window is not None and context:
        context = ops.truncate(context, window - ops.count(full_text(req, "")) - reserve)
    return tok(full_text(req, context), add_special_tokens=special, truncation=max_length is not None,
               max_length=max_length)["input_ids"]


def check_same(load, reqs, *, window, reserve=8, special=True, max_length=None, full_text=render, batch=16):
    new_tok, old_tok = load(), load()  # the string path's truncation=True must not touch the encoder's
    enc = PromptEncoder(new_tok, full_text, window=window, reserve=reserve, special_tokens=special,
                        max_length=max_length)
    shuffled = list(reqs)
    random.Random(1).shuffle(shuffled)
    for b in range(0, len(shuffled), batch):
        chunk = shuffled[b:b + batch]
        if b % (2 * batch) == 0:
            enc.prepare(chunk)
        got = enc.ids(chunk)
        for req, ids in zip(chunk, got):
            want = string_path(old_tok, req, window, reserve, special, max_length, full_text)
            assert list(ids) == list(want), (req.prompt.id, req.item_text, req.context[:80])
    return enc


# -- tokenizers ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sentencepiece_t5(tmp_path_factory):
    """A SentencePiece unigram model in transformers' T5 tokenizer (what FLAN-T5 uses)."""
    spm = pytest.importorskip("sentencepiece")
    from transformers import T5Tokenizer

    text = CORPUS * 3 + [" ".join(WORDS)] * 2
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=model, vocab_size=200,
                                   model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
                                   hard_vocab_limit=False, character_coverage=1.0, minloglevel=2)
    path = tmp_path_factory.mktemp("sp-t5")
    (path / "spiece.model").write_bytes(model.getvalue())
    sp = spm.SentencePieceProcessor(model_file=str(path / "spiece.model"))
    vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    tok = T5Tokenizer(vocab=vocab, extra_ids=0, model_max_length=512)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def byte_bpe(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS * 3 + [" ".join(WORDS)] * 2,
                            trainers.BpeTrainer(vocab_size=400, special_tokens=["<pad>", "<s>", "</s>"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                show_progress=False))
    path = tmp_path_factory.mktemp("byte-bpe")
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>").save_pretrained(path)
    return path


def loader(path):
    from transformers import AutoTokenizer

    return lambda: AutoTokenizer.from_pretrained(path)


# -- the same ids ------------------------------------------------------------------------------
@pytest.mark.parametrize("window", [None, 512, 150, 60])
def test_sentencepiece_t5_same_ids(sentencepiece_t5, window):
    enc = check_same(loader(sentencepiece_t5), requests(), window=window, max_length=window)
    if window is None or window > 200:  # (smaller windows cut most of these passages: tokenized whole)
        assert enc.composed > enc.whole / 4  # most pairs are assembled, not tokenized whole


@pytest.mark.parametrize("window", [None, 400, 120])
def test_byte_level_bpe_same_ids(byte_bpe, window):
    enc = check_same(loader(byte_bpe), requests(), window=window, special=False)
    assert enc.composed > 0


@pytest.mark.parametrize("window", [96, 40])
def test_tiny_t5_tokenizer_same_ids(tmp_path, window):
    path = make_tiny_t5(tmp_path / "t5", extra_text=[" ".join(WORDS)])
    enc = check_same(loader(path), requests(), window=window, max_length=window)
    assert enc.composed > 0


def test_instructions_longer_than_the_window_are_cut_as_truncation_cuts(sentencepiece_t5):
    """The guard: a prompt whose text without passage exceeds the window is cut whole."""
    reqs = requests(("question-selfrating", "umbrela"), n_passages=6)
    check_same(loader(sentencepiece_t5), reqs, window=30, max_length=30)


def test_chat_template_prompts_same_ids(tmp_path):
    """hf-causal's rendering: the chat template around the prompt, no tokenizer specials."""
    from transformers import AutoTokenizer

    path = make_tiny_llama(tmp_path / "llama", extra_text=[" ".join(WORDS)])
    tok = AutoTokenizer.from_pretrained(path)

    def chat(req, context):
        return tok.apply_chat_template(req.prompt.messages(**req.texts(context)), tokenize=False,
                                       add_generation_prompt=True)

    for window in (None, 200, 60):
        enc = check_same(loader(path), requests(), window=window, special=False, full_text=chat)
        assert enc.composed > 0


def test_a_passage_that_does_not_compose_takes_the_string_path(byte_bpe):
    """Byte-level BPE joins the space before the passage to its first word: a template
    whose passage follows a space without the space being the passage's own composes;
    a passage starting with a space (two spaces in the prompt) still gives exact ids."""
    reqs = requests(("sun",), n_passages=40, seed=3)
    enc = check_same(loader(byte_bpe), reqs, window=None, special=False)
    assert enc.whole > 0 and enc.composed > 0


class CountingTokenizer:
    """A Rust tokenizer whose two batch calls note the texts they get."""

    def __init__(self, tok):
        self._tok = tok
        self.with_offsets: list[str] = []
        self.without: list[str] = []

    def __getattr__(self, name):
        return getattr(self._tok, name)

    def encode_batch(self, texts, **kw):
        self.with_offsets += texts
        return self._tok.encode_batch(texts, **kw)

    def encode_batch_fast(self, texts, **kw):
        self.without += texts
        return self._tok.encode_batch_fast(texts, **kw)


def test_only_passages_are_tokenized_with_offsets(sentencepiece_t5):
    """The offsets (a third of the tokenizer's time) are asked for where they are read: the
    passages' own tokens, whose ends are where a passage is cut. Prompts tokenized whole and
    the templates' halves come without them, and the ids are still the string path's."""
    from types import SimpleNamespace

    load = loader(sentencepiece_t5)
    counting = CountingTokenizer(load().backend_tokenizer)
    reqs = requests(("question-selfrating", "umbrela"), n_passages=12)
    enc = PromptEncoder(SimpleNamespace(backend_tokenizer=counting), render, window=150, reserve=8,
                        special_tokens=True, max_length=150)
    got = enc.ids(reqs)
    reference = load()
    for req, ids in zip(reqs, got):
        assert list(ids) == list(string_path(reference, req, 150, 8, True, 150))
    assert set(counting.with_offsets) == {r.context for r in reqs if r.context}
    assert enc.whole > 0 and len(counting.without) >= enc.whole  # whole prompts, templates' halves


# -- the back ends -------------------------------------------------------------------------------
def test_backends_feed_the_models_the_string_paths_tensors(tiny_t5, tiny_llama):
    """hf-seq2seq's and hf-causal's model inputs (padded ids and mask) are what the string
    path's tokenizer call with padding gave."""
    import torch

    from exam_eval.backends.hf_causal import CausalBackend
    from exam_eval.backends.hf_seq2seq import Seq2SeqBackend

    for backend in (Seq2SeqBackend(model=str(tiny_t5), device="cpu", max_input_tokens=60),
                    CausalBackend(model=str(tiny_llama), device="cpu", max_input_tokens=80)):
        backend.load()
        reqs = requests(("question-selfrating", "thomas"), n_passages=8)[:24]
        got = backend._encode(reqs)
        texts = [backend._full_text(r, backend.fit_context(r)) for r in reqs]
        ref = loader(backend._ref)()
        ref.padding_side = backend.tokenizer.padding_side
        if ref.pad_token_id is None:
            ref.pad_token = ref.eos_token
        want = ref(texts, return_tensors="pt", padding=True, add_special_tokens=backend.special_tokens,
                   truncation=backend.max_prompt_tokens is not None, max_length=backend.max_prompt_tokens)
        assert torch.equal(got["input_ids"], want["input_ids"])
        assert torch.equal(got["attention_mask"], want["attention_mask"])


def test_pad_sides():
    import numpy as np

    ids, mask = pad([np.array([5, 6, 7]), np.array([8])], 0, left=True)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    ids, mask = pad([np.array([5, 6, 7]), np.array([8])], 0, left=False)
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    ids, mask = pad([np.array([5, 6, 7]), np.array([8])], 0, left=False, multiple=4)
    assert ids.tolist() == [[5, 6, 7, 0], [8, 0, 0, 0]] and mask.tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]]
    ids, mask = pad([np.array([5, 6, 7, 9]), np.array([8])], 0, left=True, multiple=4)
    assert ids.tolist() == [[5, 6, 7, 9], [0, 0, 0, 8]]


def test_truncation_left_set_on_the_tokenizer_does_not_cut_the_ids(sentencepiece_t5):
    """A transformers call with truncation=True leaves it set on the Rust tokenizer that
    prompt_ids shares; the encoder's ids stay whole."""
    tok = loader(sentencepiece_t5)()
    reqs = requests(("question-selfrating",), n_passages=6)
    enc = PromptEncoder(tok, render, window=None, reserve=8, special_tokens=True, max_length=None)
    tok(["water table"], truncation=True, max_length=3, padding="max_length")
    ref = loader(sentencepiece_t5)()
    for req, ids in zip(reqs, enc.ids(reqs)):
        assert list(ids) == ref(render(req, req.context))["input_ids"]
