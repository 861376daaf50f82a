"""Decoder-only models (Llama, Mistral, Qwen, Gemma, ...) on CTranslate2: hf-causal's
second engine (``--engine ctranslate2``; see :mod:`exam_eval.backends.ct2_engine`).

Everything but the model call is hf-causal's: the Hugging Face tokenizer and chat
template render, count and cut the passage, the same label tokens are read in context,
labels whose first tokens coincide are generated and parsed instead.

- Scoring: the prompt is forwarded at once (``include_prompt_in_result=False``) and one
  token decoded; that step's logits over the whole vocabulary (``return_logits_vocab``:
  the model's raw logits, since no penalty, suppression or temperature is asked for) are
  read at the labels' first tokens and normalised over them, as the torch engine does.
- Prompts of different token lengths are never put in one call. CTranslate2 forwards only
  the shortest prompt's length at once and decodes the rest of each longer prompt token
  by token, returning a logits step per forced token (so step 0 of a longer prompt is not
  its next-token distribution) and taking about twice as long on a CPU as separate calls
  (bench/README.md). A batch is therefore split into groups of equal length.
- Generation: greedy or beam search, or sampling with the prompt's temperature and
  top_p (and the checkpoint's top_k, as transformers' ``generate`` uses it), stopped at
  the checkpoint's end-of-sequence tokens. What CTranslate2 cannot apply as torch does is
  refused, naming it: OpenAI-style frequency/presence penalties (the prompt's) and the
  decoding settings of a checkpoint's ``generation_config.json`` other than the token
  ids and the sampling settings the torch engine overrides anyway.
"""

from __future__ import annotations

from typing import Sequence

from ..errors import UsageError
from .ct2_engine import CT2Engine
from .ct2_recheck import label_score
from .hf_causal import CausalBackend
from .hf_common import load_failure

#: generation_config.json settings that cannot change what this back end generates: the
#: token ids (eos is mapped to CTranslate2's end tokens), caching and output switches, and
#: what hf-causal passes to ``generate`` itself (max_new_tokens, num_beams, do_sample,
#: temperature, top_p). top_k is mapped.
_NEUTRAL = {"bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "use_cache",
            "cache_implementation", "output_attentions", "output_hidden_states", "output_scores", "output_logits",
            "return_dict_in_generate", "transformers_version", "_from_model_config", "max_length", "max_new_tokens",
            "num_beams", "do_sample", "temperature", "top_p", "top_k", "num_return_sequences"}


def refused_penalties(decoding: dict) -> list[str]:
    """The prompt decoding settings CTranslate2 cannot apply: OpenAI's frequency and
    presence penalties count the generated tokens additively; CTranslate2 only has a
    multiplicative repetition penalty."""
    return [k for k in ("frequency_penalty", "presence_penalty") if float(decoding.get(k, 0.0))]


def refused_generation_config(ref: str) -> list[str]:
    """The checkpoint's own decoding settings that torch's ``generate`` would apply and this
    engine would not (None values and transformers' defaults are not settings)."""
    try:
        from transformers import GenerationConfig

        config = GenerationConfig.from_pretrained(ref)
    except (OSError, ValueError):
        return []  # no generation_config.json: transformers' defaults, which this engine follows
    defaults = GenerationConfig._get_default_generation_params()
    return sorted(k for k, v in config.to_diff_dict().items()
                  if k not in _NEUTRAL and v is not None and v != defaults.get(k, None) and v != {})


def equal_length_groups(tokens: Sequence[Sequence[str]]) -> list[list[int]]:
    """Indices of ``tokens`` grouped by length, in first-seen order."""
    groups: dict[int, list[int]] = {}
    for i, t in enumerate(tokens):
        groups.setdefault(len(t), []).append(i)
    return list(groups.values())


class CT2CausalBackend(CT2Engine, CausalBackend):
    name = "hf-causal"
    ct2_model_class = "Generator"
    cuda_batch_size = 16
    # float32 gives torch's grades; int8 changed a quarter of a trained model's grades on
    # one prompt (SmolLM2-135M, thomas: 74.5% agreement with float32), and its float32
    # rechecks then regraded 83% of the pairs, slower than float32 alone (bench/README.md);
    # --compute-type int8 (with rechecks) remains available
    cpu_compute_type = "float32"

    # read from the checkpoint's configs in load()
    _model_config = None
    _end_token: list[int] | None = None
    _top_k = 50

    def check_prompt(self, prompt) -> None:
        refused = refused_penalties(dict(prompt.decoding))
        if refused and prompt.mode == "generate":
            raise UsageError(f"prompt {prompt.id!r} decodes with {' and '.join(refused)}, which CTranslate2 cannot "
                             "apply as OpenAI defines them; use --engine torch")
        if prompt.mode == "generate":
            self._check_generation_config()

    def _check_generation_config(self) -> None:
        refused = refused_generation_config(self._ref)
        if refused:
            raise UsageError(f"{self.model_id}: its generation_config.json sets {', '.join(refused)}, which the "
                             "CTranslate2 engine does not apply as transformers' generate does; use --engine torch")

    def load(self) -> None:
        if self.model is not None:
            return
        self.load_ct2(padding_side="left")
        from transformers import AutoConfig, GenerationConfig

        try:
            self._model_config = AutoConfig.from_pretrained(self._ref)
        except (OSError, ValueError) as exc:
            raise load_failure(self.model_id, exc) from None
        try:
            gen = GenerationConfig.from_pretrained(self._ref)
        except (OSError, ValueError):
            gen = GenerationConfig.from_model_config(self._model_config)
        eos = gen.eos_token_id if gen.eos_token_id is not None else self.tokenizer.eos_token_id
        self._end_token = None if eos is None else ([eos] if isinstance(eos, int) else list(eos))
        if gen.top_k is not None:
            self._top_k = gen.top_k

    @property
    def model_config(self):
        return self._model_config

    def _tokens(self, texts: Sequence[str]) -> list[list[str]]:
        # as the torch engine: chat templates already contain BOS, plain renderings get the tokenizer's own
        enc = self.tokenizer(list(texts), add_special_tokens=not self.has_chat_template)
        return [self.tokenizer.convert_ids_to_tokens(ids) for ids in enc["input_ids"]]

    def _score_on(self, model, requests, labels):
        ids = self._labels(labels, requests[0])
        tokens = self.id_tokens(self.prompt_rows(requests))
        out: list = [None] * len(requests)
        for group in equal_length_groups(tokens):
            results = model.generate_batch([tokens[i] for i in group], max_length=1, beam_size=1,
                                           include_prompt_in_result=False, return_logits_vocab=True)
            for i, res in zip(group, results):
                # equal lengths: the prompt went in at once, so step 0 is the next-token distribution
                out[i] = label_score(res.logits[0][0], labels, ids)
        return out

    def decoding_options(self, decoding: dict) -> dict:
        """generate_batch arguments for the prompt's decoding, as hf-causal's torch engine
        decodes it (greedy at temperature 0 or none given)."""
        refused = refused_penalties(decoding)
        if refused:
            raise UsageError(f"{' and '.join(refused)}: not available on the CTranslate2 engine; use --engine torch")
        options: dict = {"beam_size": self.num_beams}
        if self._end_token is not None:
            options["end_token"] = self._end_token
        temperature = float(decoding.get("temperature", 0.0))
        if temperature > 0:
            if self.num_beams > 1:
                raise UsageError("sampling (a prompt temperature above 0) with --num-beams: not available on the "
                                 "CTranslate2 engine; use --engine torch")
            # top_k 0 (off) is CTranslate2's "sample from the whole vocabulary" too
            options.update(sampling_temperature=temperature, sampling_topp=float(decoding.get("top_p", 1.0)),
                           sampling_topk=int(self._top_k or 0))
        return options

    def _generate_with(self, requests, max_new_tokens, decoding: dict):
        options = self.decoding_options(decoding)
        tokens = self.id_tokens(self.prompt_rows(requests))
        out: list = [None] * len(requests)
        for group in equal_length_groups(tokens):
            results = self.model.generate_batch([tokens[i] for i in group], max_length=max_new_tokens,
                                                include_prompt_in_result=False, **options)
            for i, res in zip(group, results):
                out[i] = self.tokenizer.decode(res.sequences_ids[0], skip_special_tokens=True)
        return out
