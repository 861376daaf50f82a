"""Extractive question answering (SQuAD2-style, e.g. ``sjrhuschlee/flan-t5-large-squad2``
or ``deepset/roberta-base-squad2``): the EXAM++ "Manual-EXAM-Squad2" grader.

The model points at an answer span in the passage or at its no-answer position; the
SQuAD2 decision rule applies: unanswerable (grade 0) when the no-answer score
(start and end logits at the first token) beats the best valid span. An answer is then
checked against the bank's answer key (1 match / 0) or, without a key, counts as
answered (1). With ``--verify llm`` a separate LLM (``--verifier-model``) judges the
extracted answer against the key with EXAM++'s answer-verification prompt instead of
word matching: the paper's "LLM-verified Manual-EXAM-Squad2". ``probs`` is null: span scores are not a distribution over the prompt's
labels.

transformers 5 dropped the question-answering pipeline, so span decoding is done here,
following the pipeline's long-standing logic: question and passage as a pair, passage
truncated ("only_second") in overlapping windows, spans limited to passage tokens with
end >= start and at most ``max_answer_tokens`` long. The prompt's template is not
used (the model takes the raw question), but its id and scale label the grades.
"""

from __future__ import annotations

from typing import Sequence

from ..errors import UsageError
from .base import finish_parsed, llm_verify, Backend
from ..grading.types import GradeRequest, GradeResult, Parsed
from .hf_common import check_model_ref, load_failure, loaded_dtype, pick_device, pick_dtype, require_hub_model
from .model_identity import model_files_id, model_name


class QABackend(Backend):
    name = "hf-qa"
    can_verify = True  # with a separate verifier model: it cannot judge answers itself

    def __init__(self, model: str | None = None, device: str | None = None, dtype: str | None = None,
                 batch_size: int | None = None, max_input_tokens: int | None = None,
                 max_answer_tokens: int | str = 30, stride: int | str = 128):
        if not model:
            raise UsageError("hf-qa needs --model (an extractive QA model, e.g. deepset/roberta-base-squad2)")
        self.model_id = model_name(model)
        self._ref = check_model_ref(self.model_id)
        self._device_opt = device
        self._dtype_opt = dtype
        self.batch_size = batch_size or 16
        self._window_opt = max_input_tokens
        self.max_answer_tokens = int(max_answer_tokens)
        self.stride = int(stride)
        self.model = None

    @property
    def cache_identity(self) -> str:
        # what changes an extracted span: the weights and their dtype, the window, the
        # answer's length limit and the stride of the windows over a long passage
        dtype = loaded_dtype(self._dtype_opt, self._device_opt)  # bfloat16 by default on a GPU
        opts = (f":dtype={dtype}" if dtype and dtype != "float32" else "") + \
               (f":max_in={self._window_opt}" if self._window_opt else "") + \
               (f":max_answer={self.max_answer_tokens}" if self.max_answer_tokens != 30 else "") + \
               (f":stride={self.stride}" if self.stride != 128 else "")
        return super().cache_identity + opts + model_files_id(self._ref)

    def check_prompt(self, prompt) -> None:
        if prompt.target != "question" or getattr(prompt, "parser", "extraction") != "extraction":
            raise UsageError(f"hf-qa extracts answers to questions: use an extraction prompt such as "
                             f"question-extraction, not {prompt.id!r} ({prompt.target}, {prompt.mode})")

    def load(self) -> None:
        if self.model is not None:
            return
        require_hub_model(self._ref, self.model_id)
        import torch
        from transformers import AutoModelForQuestionAnswering, AutoTokenizer

        self.device = pick_device(self._device_opt)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self._ref)
            self.model = AutoModelForQuestionAnswering.from_pretrained(
                self._ref, dtype=pick_dtype(self._dtype_opt, self.device))
        except (OSError, ValueError) as exc:
            raise load_failure(self.model_id, exc) from None
        if not self.tokenizer.is_fast:
            raise UsageError(f"hf-qa needs a fast tokenizer (offsets) for {self.model_id}")
        self.model.to(self.device).eval()
        self._torch = torch

    @property
    def context_window(self) -> int:
        if self._window_opt:
            return self._window_opt
        n = getattr(self.tokenizer, "model_max_length", None)
        return n if n and n < 100_000 else 512

    def count_tokens(self, text: str) -> int:
        if self.model is None:
            return super().count_tokens(text)
        return len(self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    def answer(self, questions: Sequence[str], contexts: Sequence[str]) -> list[str]:
        """Best span per (question, passage); "" when the model says unanswerable."""
        torch = self._torch
        window = self.context_window
        enc = self.tokenizer(list(questions), list(contexts), truncation="only_second", max_length=window,
                             stride=min(self.stride, window // 4), return_overflowing_tokens=True,
                             return_offsets_mapping=True, padding=True, return_tensors="pt")
        owner = enc.pop("overflow_to_sample_mapping").tolist()
        offsets = enc.pop("offset_mapping").tolist()
        seq_ids = [enc.sequence_ids(i) for i in range(len(owner))]
        inputs = {k: v.to(self.device) for k, v in enc.items()}
        with torch.inference_mode():
            out = self.model(**inputs)
        starts = out.start_logits.float().cpu().tolist()
        ends = out.end_logits.float().cpu().tolist()
        best: list[tuple[float, str]] = [(float("-inf"), "")] * len(questions)
        null: list[float] = [float("-inf")] * len(questions)
        for w, sample in enumerate(owner):
            s, e, ids = starts[w], ends[w], seq_ids[w]
            null[sample] = max(null[sample], s[0] + e[0])
            ctx = [t for t, sid in enumerate(ids) if sid == 1]
            if not ctx:
                continue
            # top candidates only: the full O(n^2) grid is wasted work
            top_s = sorted(ctx, key=lambda t: -s[t])[:20]
            top_e = sorted(ctx, key=lambda t: -e[t])[:20]
            for a in top_s:
                for b in top_e:
                    if b < a or b - a + 1 > self.max_answer_tokens:
                        continue
                    score = s[a] + e[b]
                    if score > best[sample][0]:
                        text = contexts[sample][offsets[w][a][0]:offsets[w][b][1]]
                        best[sample] = (score, text)
        return ["" if null[i] > best[i][0] or not best[i][1].strip() else best[i][1].strip()
                for i in range(len(questions))]

    def grade(self, requests: Sequence[GradeRequest]) -> list[GradeResult]:
        self.load()
        answers = self.answer([r.item_text or "" for r in requests], [r.context for r in requests])
        results: list[GradeResult | None] = []
        pending: list[int] = []
        for i, (req, ans) in enumerate(zip(requests, answers)):
            if ans and req.answer_keys and self.verifier is not None:
                pending.append(i)  # judged by the verifier model below
                results.append(None)
                continue
            parsed = Parsed(0, True, ans, "unanswerable") if not ans else Parsed(None, True, ans, "extracted")
            grade, ok = finish_parsed(req, parsed)
            results.append(GradeResult(ans, grade, None, ok))
        if pending:
            if self.verifier_backend is None:
                raise UsageError("hf-qa cannot verify answers itself: give --verifier-model")
            verified = llm_verify(self.verifier_backend, self.verifier, [requests[i] for i in pending],
                                  [answers[i] for i in pending], [answers[i] for i in pending])
            for i, res in zip(pending, verified):
                results[i] = res
        return results  # type: ignore[return-value]
