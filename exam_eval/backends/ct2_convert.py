"""Converted CTranslate2 models: one conversion per (checkpoint, compute type), ever.

A Hugging Face checkpoint is converted on first use (minutes for flan-t5-large) into
``$EXAM_EVAL_CT2_CACHE`` (default ``~/.cache/exam_eval/ct2``), in a folder named by a
hash of

- the checkpoint: a hub id with the commit of its downloaded snapshot, or a local
  directory's real path with the name, size and modification time of each of its files
  (editing or replacing a weight file gives a new key, without reading gigabytes);
- the compute type the weights are quantized to (int8 weights are stored as int8);
- CTranslate2's major version (its model format).

Conversion writes into a temporary folder next to the final one and renames it into
place, so a killed conversion never leaves a half model that a later run would load; an
exclusive lock (``fcntl.flock``) makes concurrent shards wait for one conversion instead
of each doing their own.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from ..errors import InputError
from .model_identity import files_listing
from ..grading.cache import user_cache_dir

#: What CTranslate2 computes in (``ctranslate2.Translator(compute_type=...)``).
COMPUTE_TYPES = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32")
#: Architectures loaded as a ``ctranslate2.Translator`` (encoder-decoder models).
SEQ2SEQ_TYPES = ("t5", "mt5", "umt5", "bart", "mbart", "pegasus", "marian", "m2m_100")
#: Architectures loaded as a ``ctranslate2.Generator`` (decoder-only models): the model
#: types of CTranslate2 4.8's decoder-only loaders (``converters.transformers._MODEL_LOADERS``;
#: a test keeps this list within them).
CAUSAL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi", "phi3", "gpt2",
                "gpt_neox", "gpt_bigcode", "gptj", "codegen", "bloom", "falcon", "opt")
_KINDS = {"seq2seq": (SEQ2SEQ_TYPES, "an encoder-decoder"), "causal": (CAUSAL_TYPES, "a decoder-only")}
_META = "exam_eval_conversion.json"


def cache_root() -> Path:
    env = os.environ.get("EXAM_EVAL_CT2_CACHE")
    return Path(env) if env else user_cache_dir() / "ct2"


def read_config(ref: str) -> dict | None:
    """The checkpoint's config.json without loading the model (None: not available
    offline; the conversion will fetch it)."""
    path = os.path.join(ref, "config.json")
    if not os.path.isdir(ref):
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(ref, "config.json")
        except Exception:  # noqa: BLE001 - an odd hub id: decided at conversion time
            cached = None
        if not isinstance(cached, str):
            return None
        path = cached
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def convertible(ref: str, kind: str = "seq2seq") -> bool:
    """False when the checkpoint's config says CTranslate2 cannot run it as ``kind``
    ("seq2seq": an encoder-decoder, "causal": a decoder-only model); True when it can, or
    when the config is not available offline."""
    config = read_config(ref)
    if config is None:
        return True
    types = _KINDS[kind][0]
    model_type = config.get("model_type")
    is_seq2seq = bool(config.get("is_encoder_decoder", model_type in SEQ2SEQ_TYPES))
    return model_type in types and is_seq2seq == (kind == "seq2seq")


def check_convertible(ref: str, model: str, kind: str) -> None:
    """Bad input before anything loads: a checkpoint CTranslate2 cannot run as ``kind``."""
    if not convertible(ref, kind):
        types, what = _KINDS[kind]
        model_type = (read_config(ref) or {}).get("model_type")
        raise InputError(f"CTranslate2 cannot grade this checkpoint as {what} model (model_type {model_type!r}; "
                         f"supported: {', '.join(types)}); use --engine torch", model)


def check_compute_type(compute_type: str, device: str) -> None:
    import ctranslate2

    if compute_type not in COMPUTE_TYPES:
        raise InputError(f"--compute-type {compute_type}: unknown compute type (known: {', '.join(COMPUTE_TYPES)})")
    supported = ctranslate2.get_supported_compute_types(device)
    if compute_type not in supported:
        # int16 exists only in CTranslate2's Intel MKL kernels, which its wheels use on
        # Intel CPUs only: say so, or an AMD user reads it as a broken install
        why = " (int16 needs Intel MKL, which CTranslate2 uses on Intel CPUs only)" \
            if compute_type == "int16" and device == "cpu" else ""
        raise InputError(f"--compute-type {compute_type}: not supported by this {device}{why} "
                         f"(supported here: {', '.join(sorted(supported))})")


def _local_checkpoint(ref: str) -> tuple[str, str]:
    """(local directory, identity): a hub id is resolved to its downloaded snapshot,
    whose folder name is the commit hash."""
    if os.path.isdir(ref):
        real = os.path.realpath(ref)
        return real, json.dumps(["dir", real, files_listing(real, hidden=True)])
    from huggingface_hub import snapshot_download

    # only what the converter reads: not the TF/Flax/ONNX copies of the weights
    wanted = ["*.json", "*.model", "*.txt", "*.safetensors"]
    local = snapshot_download(ref, allow_patterns=wanted)
    if not any(name.endswith(".safetensors") for name in os.listdir(local)):
        local = snapshot_download(ref, allow_patterns=wanted + ["pytorch_model*.bin"])
    return local, json.dumps(["hub", ref, os.path.basename(os.path.normpath(local))])


def conversion_key(identity: str, compute_type: str) -> str:
    import ctranslate2

    major = ctranslate2.__version__.split(".")[0]
    payload = json.dumps([identity, compute_type, major])
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


@contextmanager
def _locked(path: Path):
    import fcntl

    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def is_complete(folder: Path) -> bool:
    return (folder / _META).is_file() and (folder / "model.bin").is_file()


def converted_model(ref: str, model: str, compute_type: str, log=None) -> Path:
    """The converted model's folder, converting it first when no run has yet."""
    try:
        local, identity = _local_checkpoint(ref)
    except Exception as exc:  # noqa: BLE001 - hub errors have many types; one line is what the user needs
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"cannot fetch the checkpoint for conversion: {first}", model) from None
    root = cache_root()
    final = root / conversion_key(identity, compute_type)
    if is_complete(final):
        return final
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the conversion cache: {exc.strerror}", str(root)) from None
    with _locked(root / (final.name + ".lock")):
        if is_complete(final):  # another process converted it while we waited
            return final
        if final.exists():  # not ours to trust (a copy interrupted by hand): redo it
            shutil.rmtree(final, ignore_errors=True)
        if log is not None:
            log(f"converting {model} to CTranslate2 ({compute_type}) into {final} (once)")
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
        try:
            _convert(local, tmp / "model", compute_type, model)
            out = tmp / "model"
            (out / _META).write_text(json.dumps({"checkpoint": json.loads(identity)[:2], "model": model,
                                                 "compute_type": compute_type}) + "\n", encoding="utf-8")
            os.rename(out, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def _converter(local: str):
    from ctranslate2.converters import TransformersConverter

    class Converter(TransformersConverter):
        def load_model(self, model_class, model_name_or_path, **kwargs):
            model = super().load_model(model_class, model_name_or_path, **kwargs)
            # transformers 5 always reports T5's embeddings as tied and says whether the
            # decoder output is scaled by d_model**-0.5 in scale_decoder_outputs (False for
            # T5 v1.1 / FLAN-T5); CTranslate2 (4.8) decides the scaling from
            # tie_word_embeddings, which would divide FLAN-T5's logits by sqrt(d_model):
            # the same argmax, but flattened label probabilities. Tell it what the model does.
            scaled = getattr(model.config, "scale_decoder_outputs", None)
            if scaled is not None:
                model.config.tie_word_embeddings = bool(scaled)
            return model

    return Converter(local)


def _convert(local: str, out: Path, compute_type: str, model: str) -> None:
    try:
        # quantized once here, so loading is fast and int8 weights take a quarter of the disk
        _converter(local).convert(str(out), quantization=compute_type, force=True)
    except Exception as exc:  # noqa: BLE001 - the converter raises whatever transformers/safetensors raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"CTranslate2 cannot convert this checkpoint: {first}", model) from None
