"""Hugging Face decoder-only models (Llama, Mistral, Qwen, ...) with chat templates.

The prompt goes through the tokenizer's chat template with the generation prompt
appended, so the next token is the start of the assistant's answer; scoring reads the
labels' probabilities at that position. Batches are left-padded so every row's last
position is its real last token. A tokenizer without a chat template gets the prompt's
plain rendering (base models).

Two engines run the model: torch (the default) and CTranslate2 (``--engine ctranslate2``
or a ``--compute-type``; see :mod:`exam_eval.backends.ct2_causal`).
"""

from __future__ import annotations

import inspect
from typing import Sequence

from .base import PromptBackend
from ..grading.types import GradeRequest
from .ct2_engine import EngineChoice
from .hf_common import (HFGenerativeBase, label_columns, TokenizerOps, cuda_token_budget, label_token_ids, load_failure, model_kwargs,
                        penalty_processor, pick_device, pick_dtype, pretrained_source, quiet_gguf_reader,
                        require_hub_model, sampling_kwargs)

# a Llama-style window is 4k-128k tokens; grading prompts need far less, and a smaller
# cap keeps the attention memory of a batch bounded on modest GPUs and CPUs
DEFAULT_WINDOW_CAP = 4096


class CausalBackend(EngineChoice, HFGenerativeBase, PromptBackend):
    name = "hf-causal"
    can_score = True

    ct2_class = "exam_eval.backends.ct2_causal:CT2CausalBackend"
    ct2_kind = "causal"
    # --engine auto stays on torch: on a CPU, for a trained model (SmolLM2-135M), CTranslate2
    # float32 gives torch's grades at 0.92-0.94x torch's speed, and int8 (2.9x) changes 0.7%
    # to 25% of them depending on the prompt (bench/README.md)
    auto_ct2 = False

    def load(self) -> None:
        if self.model is not None:
            return
        require_hub_model(self._ref, self.model_id)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = pick_device(self._device_opt)
        source, gguf = pretrained_source(self._ref)
        if gguf:
            quiet_gguf_reader()
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source, padding_side="left", **gguf)
            self.model = AutoModelForCausalLM.from_pretrained(source, dtype=pick_dtype(self._dtype_opt, self.device),
                                                              **gguf, **model_kwargs(self.device))
        except (OSError, ValueError) as exc:
            raise load_failure(self.model_id, exc) from None
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model.to(self.device).eval()
        self._ops = TokenizerOps(self.tokenizer)
        if self._batch_opt is None and self.device.startswith("cuda"):
            self.batch_size = 16  # the engine batches by tokens here; this is for other callers
            self.token_budget = cuda_token_budget(self.model, self.device)
            self.generate_budget = cuda_token_budget(self.model, self.device, generate=True, beams=self.num_beams)
        self._torch = torch
        # the output layer at the last position only: the others' logits are never read
        # (a [batch, length, vocabulary] tensor; about 15% of a scoring call on SmolLM2-135M)
        forward = inspect.signature(self.model.forward).parameters
        self._last_only = {"logits_to_keep": 1} if "logits_to_keep" in forward else {}
        self._positions = "position_ids" in forward

    @property
    def model_config(self):
        """The checkpoint's transformers config."""
        return self.model.config

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    @property
    def context_window(self) -> int | None:
        if self._window_opt:
            return self._window_opt
        n = getattr(self.model_config, "max_position_embeddings", None) if self.model is not None else None
        n = min(n or DEFAULT_WINDOW_CAP, DEFAULT_WINDOW_CAP)
        return n - self.max_new_tokens

    def count_tokens(self, text: str) -> int:
        return self._ops.count(text) if self.tokenizer is not None else super().count_tokens(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        return self._ops.truncate(text, max_tokens)

    def _full_text(self, req: GradeRequest, context: str) -> str:
        kw = req.texts(context)
        if self.has_chat_template:
            return self.tokenizer.apply_chat_template(req.prompt.messages(**kw), tokenize=False,
                                                      add_generation_prompt=True)
        return req.prompt.render(**kw)

    def overhead_tokens(self, req: GradeRequest) -> int:
        # the chat template's own tokens count against the window as well
        return self.count_tokens(self._full_text(req, ""))

    def _labels(self, labels: tuple[str, ...], req: GradeRequest) -> list[int] | None:
        """The labels' first tokens, read after ``req``'s prompt (the first request with these labels)."""
        if labels not in self._label_ids:
            self._label_ids[labels] = label_token_ids(self.tokenizer, labels, prefix=self._full_text(req, "x"))
        return self._label_ids[labels]

    @property
    def special_tokens(self) -> bool:
        # chat templates already contain BOS; plain renderings need the tokenizer's own
        return not self.has_chat_template

    def uses_scoring(self, prompt) -> bool:
        return prompt.mode == "score" and self.tokenizer is not None

    def _encode(self, requests: Sequence[GradeRequest]):
        return self.batch_tensors(self.prompt_rows(requests))

    def submit(self, requests):
        # labels whose first tokens coincide cannot be scored: generate and parse those
        rerouted = {i for i, r in enumerate(requests) if r.prompt.mode == "score"
                    and self._labels(tuple(r.prompt.labels), r) is None}
        if not rerouted:
            return super().submit(requests)
        results: list = [None] * len(requests)
        scored = [i for i in range(len(requests)) if i not in rerouted]
        for i, res in zip(scored, super().grade([requests[i] for i in scored]) if scored else []):
            results[i] = res
        gen = sorted(rerouted)
        for i, text in zip(gen, self._generate([requests[i] for i in gen], self.max_new_tokens)):
            results[i] = self.interpret(requests[i], text)
        return lambda: results

    def _score_async(self, requests, labels):
        torch = self._torch
        ids = self._labels(labels, requests[0])
        enc = self.batch_tensors(self.prompt_rows(requests), positions=self._positions)
        with torch.inference_mode():
            # use_cache=False: one forward pass reads one position; a cache would keep every
            # layer's keys and values of the whole batch alive through the call (on a GPU, at
            # the token budget, more memory than a 7B model's weights)
            logits = self.model(**enc, **self._last_only, use_cache=False).logits[:, -1, :].float()
            columns = label_columns(torch, logits, self.label_index(ids))
        return self.read_back(columns, labels)

    def _generate(self, requests, max_new_tokens):
        # a batch holds one prompt (and so one decoding) at a time; split when it does not
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(tuple(r.prompt.decoding), []).append(i)
        out: list = [None] * len(requests)
        for decoding, idx in groups.items():
            for i, text in zip(idx, self._generate_with([requests[i] for i in idx], max_new_tokens, dict(decoding))):
                out[i] = text
        return out

    def _generate_with(self, requests, max_new_tokens, decoding: dict):
        from transformers import LogitsProcessorList

        torch = self._torch
        enc = self._encode(requests)
        prompt_length = enc["input_ids"].shape[1]
        penalties = penalty_processor(decoding, prompt_length)
        extra = sampling_kwargs(decoding)
        if penalties is not None:
            extra["logits_processor"] = LogitsProcessorList([penalties])
        with torch.inference_mode():
            out = self.model.generate(**enc, max_new_tokens=max_new_tokens, num_beams=self.num_beams,
                                      pad_token_id=self.tokenizer.pad_token_id, **extra)
        return self.tokenizer.batch_decode(out[:, prompt_length:], skip_special_tokens=True)
