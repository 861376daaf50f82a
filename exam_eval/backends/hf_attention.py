"""Attention for T5 on a GPU: PyTorch's SDPA, with T5's relative position bias laid out
so that SDPA's fused kernels accept it.

T5 adds a learned relative-position bias to every attention score. transformers builds
it as a (1, heads, q, k) view of a (q, k, heads) lookup, so its last dimension has a
stride of ``heads``; the mask SDPA then receives (that bias with the padding folded in
by ``torch.where``) keeps the layout. PyTorch's fused GPU kernels (memory-efficient,
cuDNN) need a mask whose last dimension has stride 1. Without it every encoder
self-attention falls back to the math kernel, which also computes bfloat16 inputs in
float32: on an H200 that took 59% of a flan-t5-large scoring call
(bench/studies/device_profile.py, 2026-11-26). Made contiguous (1.6 MB a layer at 222 tokens),
the same numbers reach a fused kernel. CPUs take a strided mask as it is, so nothing
changes there.

The function is registered with transformers' ``AttentionInterface`` under :data:`NAME`,
together with transformers' own SDPA mask builder (a custom attention with no mask
function registered gets no padding mask at all), and asked for by name in
``from_pretrained``: T5's encoder and decoder stacks hold copies of the model's config,
which ``set_attn_implementation`` on a loaded model does not reach.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref

#: "sdpa" in the name makes transformers check that the model supports SDPA
NAME = "sdpa_contiguous_bias"
#: checkpoints whose attention passes a relative position bias to the attention function
MODEL_TYPES = frozenset({"t5"})


def _attention(module, query, key, value, attention_mask, position_bias=None, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if position_bias is not None and attention_mask is not None:
        # the bias and the padding folded into one mask, as transformers folds them, but once
        # a forward pass: every layer of a T5 stack gets the same two tensors
        return sdpa_attention_forward(module, query, key, value, _folds.get(position_bias, attention_mask, query, key),
                                      **kwargs)
    if position_bias is not None and position_bias.stride(-1) != 1:
        position_bias = _contiguous(position_bias)
    return sdpa_attention_forward(module, query, key, value, attention_mask, position_bias=position_bias, **kwargs)


def _contiguous(t):
    import torch

    # not .contiguous(): a (1, heads, 1, 1) decoder-step bias counts as contiguous whatever
    # its strides, and the GPU check reads the stride itself
    return t if t.stride(-1) == 1 else t.clone(memory_format=torch.contiguous_format)


def fold(position_bias, attention_mask, query, key):
    """SDPA's mask: transformers' own fold of the bias and a padding mask
    (``create_position_bias_mask``: the bias where a token may be seen, the dtype's minimum
    where not), with a stride-1 last dimension."""
    from transformers.integrations.sdpa_attention import create_position_bias_mask

    return _contiguous(create_position_bias_mask(position_bias, attention_mask, False, query, key))


class _Folds(threading.local):
    """The folded masks of the forward passes running in this thread, by the identity of
    their (bias, mask) pair. A few at once: a decoder layer alternates self- and
    cross-attention. An entry goes when its bias tensor is freed (the pass is over), so a
    (batch, heads, length, length) mask is not kept alive between batches."""

    SIZE = 4

    def __init__(self):
        self.entries: list[list] = []

    def get(self, position_bias, attention_mask, query, key):
        entries = self.entries
        for bias, mask, folded in entries:
            if folded is not None and bias() is position_bias and mask() is attention_mask:
                return folded
        entry: list = [None, weakref.ref(attention_mask), fold(position_bias, attention_mask, query, key)]
        entry[0] = weakref.ref(position_bias, lambda _ref: _drop(entries, entry))
        entries.append(entry)
        while len(entries) > self.SIZE:
            entries.pop(0)[2] = None
        return entry[2]


def _drop(entries: list, entry: list) -> None:
    entry[2] = None
    with contextlib.suppress(ValueError):
        entries.remove(entry)


_folds = _Folds()


@functools.cache
def register() -> str:
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    AttentionInterface.register(NAME, _attention)
    AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    return NAME


def attention_kwargs(source: str | None, device: str) -> dict:
    """``{"attn_implementation": NAME}`` for a T5 checkpoint on a GPU; otherwise nothing,
    and transformers' own choice stands."""
    if source is None or not device.startswith("cuda"):
        return {}
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(source)
    except (OSError, ValueError):
        return {}  # loading the model says what is wrong
    if getattr(config, "model_type", None) not in MODEL_TYPES:
        return {}
    return {"attn_implementation": register()}
