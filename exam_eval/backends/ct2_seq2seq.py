"""FLAN-T5 (and other encoder-decoder checkpoints) on CTranslate2: hf-seq2seq's fast engine.

Selected by ``--engine ctranslate2`` of the hf-seq2seq back end, and by default wherever
``ctranslate2`` is installed (see :func:`exam_eval.backends.hf_seq2seq.choose_engine`).
Everything but the model call is hf-seq2seq's: the Hugging Face tokenizer renders,
counts and cuts the passage (the question stays whole), the same label tokens are read.

- Scoring: one encoder pass and one decoding step; the first step's logits over the whole
  vocabulary (``return_logits_vocab``) are read at the labels' first tokens and normalised
  over them, exactly as the torch engine does.
- Generation: greedy or beam search, stopped at ``</s>``, decoded by the tokenizer.

The compute type (int8 on CPU by default) is part of the grader's identity: int8 and
float32 grades differ on a few % of pairs, so they never share cache entries and every
grade line names its engine. By default the int8 types regrade their close calls in
float32 (:mod:`exam_eval.backends.ct2_recheck`).
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

from ..errors import UsageError
from .base import GradeRequest
from .ct2_convert import check_compute_type, check_seq2seq, converted_model
from .ct2_recheck import RecheckMixin
from .hf_common import load_failure
from .hf_seq2seq import Seq2SeqBackend


def ct2_device(device: str | None) -> tuple[str, int]:
    """('cpu'|'cuda', index) from --device; default: CUDA when CTranslate2 sees a GPU."""
    import ctranslate2

    if not device:
        return ("cuda", 0) if ctranslate2.get_cuda_device_count() > 0 else ("cpu", 0)
    kind, _, index = device.partition(":")
    if kind not in ("cpu", "cuda") or (index and not index.isdigit()):
        raise UsageError(f"--device {device}: CTranslate2 runs on cpu or cuda[:N]")
    if kind == "cuda" and ctranslate2.get_cuda_device_count() <= int(index or 0):
        raise UsageError(f"--device {device}: CTranslate2 sees no such CUDA device")
    return kind, int(index or 0)


def default_compute_type(device: str) -> str:
    import ctranslate2

    if device == "cpu":
        return "int8"  # int8 weights, float32 activations: the CPU's fast path
    # T5 activations overflow float16; bfloat16 where the GPU has it
    return "bfloat16" if "bfloat16" in ctranslate2.get_supported_compute_types(device) else "float32"


class CT2Seq2SeqBackend(RecheckMixin, Seq2SeqBackend):
    name = "hf-seq2seq"
    engine_name = "ctranslate2"

    def __init__(self, model: str | None = None, device: str | None = None, batch_size: int | None = None,
                 max_input_tokens: int | None = None, max_new_tokens: int | None = None,
                 num_beams: int | None = None, engine: str | None = None, compute_type: str | None = None,
                 recheck_margin: float | None = None, threads: int | None = None):
        super().__init__(model=model, device=device, batch_size=batch_size, max_input_tokens=max_input_tokens,
                         max_new_tokens=max_new_tokens, num_beams=num_beams, engine=engine)
        self._ct2_device, self._ct2_index = ct2_device(self._device_opt)
        self.compute_type = compute_type or default_compute_type(self._ct2_device)
        check_compute_type(self.compute_type, self._ct2_device)
        self.init_recheck(recheck_margin)
        if self.margin:
            check_compute_type("float32", self._ct2_device)
        check_seq2seq(self._ref, self.model_id)
        # all the cores this process may use (CTranslate2's own default is 4 threads,
        # oversubscribing a 2-core machine)
        self.threads = threads or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0)
        if self._batch_opt is None and self._ct2_device == "cuda":
            self.batch_size = 32

    @property
    def engine(self) -> str:
        return f"ctranslate2/{self.compute_type}{self.recheck_suffix}"

    @property
    def cache_identity(self) -> str:
        recheck = f":recheck={self.margin:g}" if self.margin else ""
        return super().cache_identity + f":ct2={self.compute_type}{recheck}"

    def load(self) -> None:
        if self.model is not None:
            return
        try:
            import ctranslate2  # noqa: F401 - here only to fail with the install hint
            from transformers import AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise UsageError(f"--engine ctranslate2 needs ctranslate2 and transformers ({exc}); "
                             "pip install 'exam_eval[models]'") from None
        from .hf_common import TokenizerOps

        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self._ref)
        except (OSError, ValueError) as exc:
            raise load_failure(self.model_id, exc) from None
        self.model = self._open(self.compute_type)
        self.load_recheck()
        self.device = self._ct2_device
        self._ops = TokenizerOps(self.tokenizer)

    def _open(self, compute_type: str):
        """The checkpoint converted to ``compute_type`` (once, cached), loaded."""
        import ctranslate2

        folder = converted_model(self._ref, self.model_id, compute_type,
                                 log=lambda msg: print(f"exam_eval: {msg}", file=sys.stderr, flush=True))
        try:
            return ctranslate2.Translator(str(folder), device=self._ct2_device, device_index=self._ct2_index,
                                          compute_type=compute_type, intra_threads=self.threads)
        except (RuntimeError, ValueError) as exc:
            raise load_failure(self.model_id, exc) from None

    def _tokens(self, requests: Sequence[GradeRequest]) -> list[list[str]]:
        window = self.context_window
        out = []
        for r in requests:
            # as the torch engine: the window was respected by cutting the passage; this
            # cut only guards against instructions that alone exceed it
            ids = self.tokenizer(self.render(r), truncation=True, max_length=window)["input_ids"]
            out.append(self.tokenizer.convert_ids_to_tokens(ids))
        return out

    def _score_on(self, model, requests, labels):
        import numpy as np

        ids = self._labels(labels)
        results = model.translate_batch(self._tokens(requests), beam_size=1, max_decoding_length=1,
                                             min_decoding_length=0, return_logits_vocab=True)
        out = []
        for res in results:
            logits = np.asarray(res.logits[0][0], dtype=np.float64)[ids]
            # softmax over the label logits: p(label) / sum p(labels), as the torch engine
            w = np.exp(logits - logits.max())
            out.append(dict(zip(labels, (w / w.sum()).tolist())))
        return out

    def _generate(self, requests, max_new_tokens):
        results = self.model.translate_batch(self._tokens(requests), beam_size=self.num_beams,
                                             max_decoding_length=max_new_tokens, min_decoding_length=0)
        tok = self.tokenizer
        return [tok.decode(tok.convert_tokens_to_ids(r.hypotheses[0]), skip_special_tokens=True) for r in results]

    def close(self) -> None:
        self.model = None
        self.close_recheck()
