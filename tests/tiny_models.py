"""Tiny random-weight models with a tokenizer trained on the spot: real transformers
code paths (from_pretrained, generate, chat templates) without any download.

Use from other tests::

    from tiny_models import make_tiny_t5, make_tiny_llama, tiny_t5, tiny_llama  # fixtures too

(``tests/`` is on sys.path under pytest; ``from tests.tiny_models import ...`` works with
``python -m pytest`` from the project root.)

``make_*`` save a model + tokenizer directory and return its path; the fixtures build
one per test session.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SPECIALS = ["<pad>", "</s>", "<unk>", "<s>", "<|system|>", "<|user|>", "<|assistant|>"]

CORPUS = [
    "Can the question be answered based on the available context? choose one:",
    "The answer is highly relevant, complete, and accurate. 0 1 2 3 4 5 6 7 8 9 10",
    "Question: what is the capital of France? Context: Paris is the capital of France.",
    "Yes No yes no unanswerable answer grade rating score relevant passage query nugget",
    "The water table will rise during very wet times, and fall in dry times.",
    "provide a complete and concise answer to the question based on the context.",
    "Given a query and a passage, you must provide a score on an integer scale of 0 to 3",
    "Instruction: Indicate if the passage is relevant for the question. Output:",
]


def _tokenizer(extra_text: list[str] | None = None, *, eos: bool, bos: bool, chat: bool):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=SPECIALS, min_frequency=1)
    tok.train_from_iterator(CORPUS + (extra_text or []), trainer)
    if eos:
        tok.post_processor = processors.TemplateProcessing(
            single="$A </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))])
    elif bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", bos_token="<s>",
        additional_special_tokens=["<|system|>", "<|user|>", "<|assistant|>"], model_max_length=96)
    if chat:
        wrapped.chat_template = (
            "<s>{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    return wrapped


def make_tiny_t5(path: str | Path, extra_text: list[str] | None = None) -> Path:
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    path = Path(path)
    tok = _tokenizer(extra_text, eos=True, bos=False, chat=False)
    torch.manual_seed(0)
    config = T5Config(vocab_size=len(tok), d_model=32, d_ff=64, d_kv=16, num_layers=2, num_decoder_layers=2,
                      num_heads=2, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                      decoder_start_token_id=tok.pad_token_id)
    model = T5ForConditionalGeneration(config)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def make_tiny_llama(path: str | Path, extra_text: list[str] | None = None, chat: bool = True) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    path = Path(path)
    tok = _tokenizer(extra_text, eos=False, bos=True, chat=chat)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    model = LlamaForCausalLM(config)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def make_tiny_gpt2(path: str | Path, extra_text: list[str] | None = None) -> Path:
    """A decoder-only model with learned absolute positions (no chat template): the
    position of a token is what the model is told, not what it can infer."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    path = Path(path)
    tok = _tokenizer(extra_text, eos=False, bos=True, chat=False)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=2, n_positions=512,
                        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    GPT2LMHeadModel(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_t5(tmp_path_factory) -> Path:
    return make_tiny_t5(tmp_path_factory.mktemp("tiny-t5"))


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    return make_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_llama_base(tmp_path_factory) -> Path:
    """No chat template: the plain rendering is used."""
    return make_tiny_llama(tmp_path_factory.mktemp("tiny-llama-base"), chat=False)


def make_tiny_qa(path: str | Path, extra_text: list[str] | None = None) -> Path:
    """A BERT-style extractive QA model (question/passage pairs, offsets)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForQuestionAnswering, PreTrainedTokenizerFast

    path = Path(path)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(CORPUS + (extra_text or []), trainers.WordLevelTrainer(special_tokens=specials))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                      sep_token="[SEP]", model_max_length=64)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(wrapped), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=2, max_position_embeddings=128, pad_token_id=wrapped.pad_token_id)
    BertForQuestionAnswering(config).save_pretrained(path)
    wrapped.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_qa(tmp_path_factory) -> Path:
    return make_tiny_qa(tmp_path_factory.mktemp("tiny-qa"))
