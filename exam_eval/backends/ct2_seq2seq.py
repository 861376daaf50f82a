"""FLAN-T5 (and other encoder-decoder checkpoints) on CTranslate2: hf-seq2seq's fast engine.

Selected by ``--engine ctranslate2`` of the hf-seq2seq back end, and by default wherever
``ctranslate2`` is installed (see :mod:`exam_eval.backends.ct2_engine`).
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

from typing import Sequence

from ..grading.types import GradeRequest
from .ct2_engine import CT2Engine
from .ct2_recheck import label_score
from .hf_seq2seq import Seq2SeqBackend


class CT2Seq2SeqBackend(CT2Engine, Seq2SeqBackend):
    name = "hf-seq2seq"
    ct2_model_class = "Translator"

    def load(self) -> None:
        if self.model is None:
            self.load_ct2()

    def _tokens(self, requests: Sequence[GradeRequest]) -> list[list[str]]:
        # the torch engine's ids (passage cut to the window, the whole prompt guarded by it)
        return self.id_tokens(self.prompt_rows(requests))

    def _score_on(self, model, requests, labels):
        ids = self._labels(labels)
        results = model.translate_batch(self._tokens(requests), beam_size=1, max_decoding_length=1,
                                        min_decoding_length=0, return_logits_vocab=True)
        return [label_score(res.logits[0][0], labels, ids) for res in results]

    def _generate(self, requests, max_new_tokens):
        results = self.model.translate_batch(self._tokens(requests), beam_size=self.num_beams,
                                             max_decoding_length=max_new_tokens, min_decoding_length=0)
        tok = self.tokenizer
        return [tok.decode(tok.convert_tokens_to_ids(r.hypotheses[0]), skip_special_tokens=True) for r in results]
