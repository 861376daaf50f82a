"""The two engines of the Hugging Face generative back ends, and what their CTranslate2
engines share.

hf-seq2seq and hf-causal each run on torch (transformers) or on CTranslate2
(``--engine auto|torch|ctranslate2``). :class:`EngineChoice` picks the class when the back
end is built (``get_backend`` calls ``select_class``); :class:`CT2Engine` is the part of a
CTranslate2 engine that does not depend on the architecture: device, compute type and its
checks, the converted model (``ct2_convert``), the float32 rechecks of int8 close calls
(``ct2_recheck``) and the identity that keeps the grades of the engines apart.

Only ``importlib`` is needed to choose; ctranslate2 is imported where a model is used.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from typing import Any, ClassVar

from ..errors import UsageError
from .base import PromptBackend
from .ct2_convert import check_compute_type, check_convertible, converted_model, convertible
from .ct2_recheck import RecheckMixin
from .hf_common import TokenizerOps, check_model_ref, load_failure, require_hub_model

ENGINES = ("auto", "torch", "ctranslate2")


def choose_engine(engine: str | None, compute_type: str | None, dtype: str | None, auto_ct2: bool = True) -> str:
    """The engine the options ask for. "auto" stands for CTranslate2 where it is installed
    and the back end prefers it (``auto_ct2``; hf-seq2seq: 3-4x faster in int8 on CPU) or a
    --compute-type says so; torch when it is not installed or a torch --dtype is asked for."""
    engine = engine or "auto"
    if engine not in ENGINES:
        raise UsageError(f"--engine {engine}: choose one of {', '.join(ENGINES)}")
    have_ct2 = importlib.util.find_spec("ctranslate2") is not None
    if engine == "auto":
        engine = "ctranslate2" if have_ct2 and not dtype and (auto_ct2 or compute_type) else "torch"
    if engine == "torch" and compute_type:
        raise UsageError("--compute-type is for --engine ctranslate2 (the torch engine takes --dtype)")
    if engine == "ctranslate2":
        if dtype:
            raise UsageError("--dtype is for --engine torch (CTranslate2 takes --compute-type)")
        if not have_ct2:
            raise UsageError("--engine ctranslate2 needs the ctranslate2 package: pip install 'exam_eval[models]'")
    return engine


class EngineChoice:
    """A torch back end with a CTranslate2 engine (a mixin before it)."""

    #: "module:Class" of the CTranslate2 engine
    ct2_class: ClassVar[str]
    #: what the CTranslate2 engine runs: "seq2seq" (a Translator) or "causal" (a Generator)
    ct2_kind: ClassVar[str]
    #: whether --engine auto picks CTranslate2 (where installed and the architecture converts)
    auto_ct2: ClassVar[bool] = True
    default_model: ClassVar[str | None]

    @classmethod
    def select_class(cls, options: dict[str, Any]) -> type:
        """The class that runs the engine ``options`` ask for (``get_backend`` calls this)."""
        engine = choose_engine(options.get("engine"), options.get("compute_type"), options.get("dtype"), cls.auto_ct2)
        if engine == "ctranslate2" and options.get("engine") in (None, "auto") and not options.get("compute_type"):
            # auto: an architecture CTranslate2 does not run (LongT5, ...), or a GGUF file, stays on torch
            model = options.get("model") or cls.default_model
            if model and (model.lower().endswith(".gguf") or not convertible(check_model_ref(model), cls.ct2_kind)):
                engine = "torch"
        if engine == "ctranslate2" and str(options.get("model") or "").lower().endswith(".gguf"):
            raise UsageError("CTranslate2 cannot read a GGUF file: use --engine torch (transformers de-quantises it)")
        if engine == "torch" and options.get("recheck_margin") is not None:
            raise UsageError("--recheck-margin is for --engine ctranslate2 (float32 rechecks of int8 close calls)")
        if engine == "ctranslate2":
            module, _, name = cls.ct2_class.partition(":")
            return getattr(importlib.import_module(module), name)
        return cls


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


def default_compute_type(device: str, cpu: str = "int8") -> str:
    import ctranslate2

    if device == "cpu":
        # int8: int8 weights, float32 activations, the CPU's fast path; float32 is the one
        # type every CPU build offers, for a CPU whose CTranslate2 lacks the default
        return cpu if cpu in ctranslate2.get_supported_compute_types("cpu") else "float32"
    # T5 activations overflow float16; bfloat16 where the GPU has it
    return "bfloat16" if "bfloat16" in ctranslate2.get_supported_compute_types(device) else "float32"


#: padded prompt tokens per batch for CTranslate2 on a GPU without --batch-size (not yet
#: measured on a GPU; CTranslate2's own allocator caches what a batch needs)
CT2_CUDA_TOKENS = 32768


def cpu_threads() -> int:
    # all the cores this process may use (CTranslate2's own default is 4 threads,
    # oversubscribing a 2-core machine)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0


#: the CUDA libraries CTranslate2's PyPI wheels (4.x) load at run time, and the pip
#: packages that ship them
CUDA_LIBRARIES = (("nvidia.cublas", ("libcublasLt.so.12", "libcublas.so.12")),)


def missing_cuda_library(exc: BaseException) -> str | None:
    """The CUDA library an error of CTranslate2 says it cannot load, if that is what it says."""
    found = re.search(r"(lib(?:cublas|cublasLt|cudnn|cudart)\w*\.so[\w.]*)", str(exc))
    return found.group(1) if found else None


def cuda_library_message(exc: BaseException) -> str:
    return (f"--engine ctranslate2 on CUDA: {missing_cuda_library(exc)} cannot be loaded. CTranslate2's PyPI wheel "
            "runs on the CUDA 12 libraries (cuBLAS 12), whatever CUDA torch was built with: "
            "pip install nvidia-cublas-cu12 (found there by exam_eval), or add the folder holding "
            "libcublas.so.12 to LD_LIBRARY_PATH; or grade with --engine torch")


def preload_cuda_libraries() -> None:
    """Load cuBLAS 12 from the nvidia-cublas-cu12 pip package where it is installed:
    CTranslate2 finds it only on the loader's path, which pip's folders are not on."""
    import ctypes

    for package, names in CUDA_LIBRARIES:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        for folder in (spec.submodule_search_locations or []) if spec else []:
            for name in names:
                path = os.path.join(folder, "lib", name)
                if os.path.exists(path):
                    try:
                        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                    except OSError:
                        pass  # CTranslate2 then says what is missing


class CT2Engine(RecheckMixin):
    """A CTranslate2 engine (a mixin before the torch back end it replaces).

    Its ``__init__`` takes the torch back end's options (less --dtype) and the engine's own;
    the back end calls :meth:`load_ct2` in ``load`` and provides
    ``_score_on(model, requests, labels)`` for the rechecks.
    """

    engine_name = "ctranslate2"
    #: ``ctranslate2.Translator`` (encoder-decoder) or ``ctranslate2.Generator`` (decoder-only)
    ct2_model_class: ClassVar[str]
    ct2_kind: ClassVar[str]
    #: batch size on a GPU when --batch-size is not given
    cuda_batch_size: ClassVar[int] = 32
    #: compute type on a CPU when --compute-type is not given
    cpu_compute_type: ClassVar[str] = "int8"

    def __init__(self, model: str | None = None, device: str | None = None, batch_size: int | None = None,
                 max_input_tokens: int | None = None, max_new_tokens: int | None = None,
                 num_beams: int | None = None, engine: str | None = None, compute_type: str | None = None,
                 recheck_margin: float | None = None, threads: int | None = None):
        # the torch back end's options, minus --dtype; the signature is what get_backend checks flags against
        super().__init__(model=model, device=device, batch_size=batch_size, max_input_tokens=max_input_tokens,
                         max_new_tokens=max_new_tokens, num_beams=num_beams, engine=engine)
        self.init_ct2(compute_type, recheck_margin, threads)

    def init_ct2(self, compute_type: str | None, recheck_margin: float | None, threads: int | None) -> None:
        self._ct2_device, self._ct2_index = ct2_device(self._device_opt)
        self.compute_type = compute_type or default_compute_type(self._ct2_device, self.cpu_compute_type)
        check_compute_type(self.compute_type, self._ct2_device)
        self.init_recheck(recheck_margin)
        if self.margin:
            check_compute_type("float32", self._ct2_device)
        check_convertible(self._ref, self.model_id, self.ct2_kind)
        self.threads = threads or cpu_threads()
        if self._batch_opt is None and self._ct2_device == "cuda":
            self.batch_size = self.cuda_batch_size
            self.token_budget = CT2_CUDA_TOKENS

    #: CTranslate2 answers a batch when asked: the torch engine's launch now and read back
    #: later (``_score_async``, ``overlaps``) does not apply
    overlaps = False

    def _score_async(self, requests, labels):
        return PromptBackend._score_async(self, requests, labels)

    def submit(self, requests):
        """As the torch back end's, the work done here; a CUDA library that CTranslate2
        loads only at its first real model call (the GPU run of 2026-11-26 got past the
        load and the warm-up, and stopped at the first batch) is the one line of
        :func:`cuda_library_message` too, not a traceback."""
        try:
            return super().submit(requests)
        except RuntimeError as exc:
            if self._ct2_device == "cuda" and missing_cuda_library(exc):
                raise UsageError(cuda_library_message(exc)) from None
            raise

    def out_of_memory(self, exc: Exception) -> bool:
        # CTranslate2's CUDA errors are RuntimeErrors: "CUDA failed with error out of memory"
        return self._ct2_device == "cuda" and isinstance(exc, RuntimeError) and "out of memory" in str(exc)

    def release_memory(self) -> None:
        """CTranslate2 keeps its own allocator's cache; nothing of torch's to empty."""

    @property
    def engine(self) -> str:
        return f"ctranslate2/{self.compute_type}{self.recheck_suffix}"

    @property
    def cache_identity(self) -> str:
        recheck = f":recheck={self.margin:g}" if self.margin else ""
        return super().cache_identity + f":ct2={self.compute_type}{recheck}"

    def load_ct2(self, **tokenizer_kwargs) -> None:
        """The Hugging Face tokenizer, the converted model (and its float32 twin for rechecks)."""
        try:
            import ctranslate2  # noqa: F401 - here only to fail with the install hint
            from transformers import AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise UsageError(f"--engine ctranslate2 needs ctranslate2 and transformers ({exc}); "
                             "pip install 'exam_eval[models]'") from None

        require_hub_model(self._ref, self.model_id)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(self._ref, **tokenizer_kwargs)
        except (OSError, ValueError) as exc:
            raise load_failure(self.model_id, exc) from None
        self.model = self._open(self.compute_type)
        self.load_recheck()
        self.device = self._ct2_device
        self._ops = TokenizerOps(self.tokenizer)

    def id_tokens(self, rows) -> list[list[str]]:
        """Token ids as the token strings CTranslate2 takes (one vocabulary lookup per id)."""
        import numpy as np

        if getattr(self, "_vocab", None) is None:
            self._vocab = np.array(self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer)))), dtype=object)
        return [self._vocab[np.asarray(r, dtype=np.int64)].tolist() for r in rows]

    def _open(self, compute_type: str):
        """The checkpoint converted to ``compute_type`` (once, cached), loaded; on a GPU
        run once, so that missing CUDA libraries show now, as one line."""
        import ctranslate2

        folder = converted_model(self._ref, self.model_id, compute_type,
                                 log=lambda msg: print(f"exam_eval: {msg}", file=sys.stderr, flush=True))
        if self._ct2_device == "cuda":
            preload_cuda_libraries()
        try:
            model = getattr(ctranslate2, self.ct2_model_class)(
                str(folder), device=self._ct2_device, device_index=self._ct2_index, compute_type=compute_type,
                intra_threads=self.threads)
            if self._ct2_device == "cuda":
                self._warm_up(model)
            return model
        except (RuntimeError, ValueError) as exc:
            if missing_cuda_library(exc):
                raise UsageError(cuda_library_message(exc)) from None
            raise load_failure(self.model_id, exc) from None

    def _warm_up(self, model) -> None:
        """One tiny model call (cuBLAS is loaded at the first matrix product)."""
        token = self.tokenizer.convert_ids_to_tokens([self.tokenizer.eos_token_id or 0])
        if self.ct2_model_class == "Translator":
            model.translate_batch([token], beam_size=1, max_decoding_length=1)
        else:
            model.generate_batch([token], max_length=1, beam_size=1)

    def close(self) -> None:
        self.model = None
        self._prompt_ids = None
        self.close_recheck()

