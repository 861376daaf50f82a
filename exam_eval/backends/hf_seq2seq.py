"""Hugging Face encoder-decoder models (T5, FLAN-T5): the reference grader.

Scoring mode reads the first decoder step's distribution over the labels' first
tokens: one encoder pass and one decoder step per pair, instead of generating and
parsing. Generation is greedy unless ``num_beams`` is given.

Two engines run the model (``engine``): torch, and CTranslate2 (int8 on CPU; see
:mod:`exam_eval.backends.ct2_seq2seq`), the default wherever ``ctranslate2`` is
installed (:func:`exam_eval.backends.ct2_engine.choose_engine`).
"""

from __future__ import annotations

from typing import Sequence

from .base import PromptBackend
from ..errors import UsageError
from ..grading.types import GradeRequest
from .ct2_engine import EngineChoice
from .hf_attention import NAME
from .hf_common import (CUDA_PAD_MULTIPLE, HFGenerativeBase, label_columns, TokenizerOps, cuda_token_budget, label_token_ids,
                        load_failure, model_kwargs, pick_device, pick_dtype, require_hub_model)

DEFAULT_MODEL = "google/flan-t5-large"


class Seq2SeqBackend(EngineChoice, HFGenerativeBase, PromptBackend):
    name = "hf-seq2seq"
    can_score = True

    default_model = DEFAULT_MODEL
    ct2_class = "exam_eval.backends.ct2_seq2seq:CT2Seq2SeqBackend"
    ct2_kind = "seq2seq"

    def load(self) -> None:
        if self.model is not None:
            return
        require_hub_model(self._ref, self.model_id)
        try:
            import torch
            from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise UsageError(f"hf-seq2seq needs torch and transformers ({exc}); pip install 'exam_eval[models]'") from None
        self.device = pick_device(self._device_opt)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self._ref)
            self.model = AutoModelForSeq2SeqLM.from_pretrained(self._ref, dtype=pick_dtype(self._dtype_opt, self.device),
                                                               **model_kwargs(self.device, self._ref))
        except (OSError, ValueError, EnvironmentError) as exc:
            raise load_failure(self.model_id, exc) from None
        self.model.to(self.device).eval()
        self._ops = TokenizerOps(self.tokenizer)
        if self._batch_opt is None and self.device.startswith("cuda"):
            self.batch_size = 32  # the engine batches by tokens here; this is for other callers
            self.token_budget = cuda_token_budget(self.model, self.device)
            self.generate_budget = cuda_token_budget(self.model, self.device, generate=True, beams=self.num_beams)
        if self.device.startswith("cuda"):
            self.pad_multiple = CUDA_PAD_MULTIPLE
        self._torch = torch

    @property
    def context_window(self) -> int | None:
        if self._window_opt:
            return self._window_opt
        n = getattr(self.tokenizer, "model_max_length", None)
        # T5 has relative positions (no hard limit) but was trained on 512 tokens; the
        # tokenizer's model_max_length says so, a huge sentinel value means "unset"
        return n if n and n < 100_000 else 512

    def count_tokens(self, text: str) -> int:
        return self._ops.count(text) if self.tokenizer is not None else super().count_tokens(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        return self._ops.truncate(text, max_tokens)

    def _labels(self, labels: tuple[str, ...]) -> list[int] | None:
        if labels not in self._label_ids:
            self._label_ids[labels] = label_token_ids(self.tokenizer, labels)
        return self._label_ids[labels]

    def uses_scoring(self, prompt) -> bool:
        return prompt.mode == "score" and self.tokenizer is not None and self._labels(tuple(prompt.labels)) is not None

    @property
    def max_prompt_tokens(self) -> int | None:
        # the window was already respected by cutting the passage; this cut only guards
        # against a prompt whose instructions alone exceed the window
        return self.context_window

    @property
    def takes_key_mask(self) -> bool:
        """Whether the model reads a boolean 4D mask as "may attend": SDPA does (hf_attention's
        too); eager attention would add it to the scores as numbers, so it keeps the 2D mask.
        Asked at every batch: the answer is kept for the model it was read from."""
        model = self.model
        known = self.__dict__.get("_key_mask")
        if known is not None and known[0] is model:
            return known[1]

        answer = getattr(getattr(model, "config", None), "_attn_implementation", None) in ("sdpa", NAME)
        self._key_mask = (model, answer)
        return answer

    def _encode(self, requests: Sequence[GradeRequest], key_mask: bool = False):
        return self.batch_tensors(self.prompt_rows(requests), key_mask)

    def _score_async(self, requests, labels):
        torch = self._torch
        ids = self._labels(labels)
        # nothing in the call waits for the device (batch_tensors: key_mask), so on a GPU
        # the engine queues the next batch while this one runs
        enc = self._encode(requests, key_mask=self.takes_key_mask)
        start = self.model.config.decoder_start_token_id
        if start is None:
            start = self.tokenizer.pad_token_id
        decoder = torch.full((enc["input_ids"].shape[0], 1), start, dtype=torch.long, device=self.device)
        with torch.inference_mode():
            # one decoder step: no key/value cache to keep
            logits = self.model(**enc, decoder_input_ids=decoder, use_cache=False).logits[:, 0, :].float()
            columns = label_columns(torch, logits, self.label_index(ids))
        return self.read_back(columns, labels)

    def _generate(self, requests, max_new_tokens):
        torch = self._torch
        enc = self._encode(requests)
        with torch.inference_mode():
            out = self.model.generate(**enc, max_new_tokens=max_new_tokens, num_beams=self.num_beams,
                                      do_sample=False)
        return self.tokenizer.batch_decode(out, skip_special_tokens=True)
