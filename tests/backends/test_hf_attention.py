"""hf_attention: T5's position bias reaches SDPA with a stride-1 last dimension (what
PyTorch's fused GPU kernels require), padding still masked, the numbers unchanged.

Runs on a CPU: the GPU kernels' choice cannot be observed here, but the mask they are
handed can (torch's check_last_dim_stride_equals_1_dense refuses a GPU fused kernel any
mask whose last stride is not 1)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parents[1]))
from tiny_models import tiny_t5  # noqa: E402,F401


def _masks_seen(model, monkeypatch, ids, mask):
    """(logits, the attn_mask of every SDPA call) for one scoring call."""
    seen = []
    real = torch.nn.functional.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, *args, **kwargs):
        seen.append(attn_mask)
        return real(q, k, v, attn_mask, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=torch.zeros((2, 1), dtype=torch.long)).logits
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", real)
    return logits, seen


def test_the_bias_reaches_sdpa_contiguous_and_the_numbers_stay(tiny_t5, monkeypatch):
    from transformers import AutoModelForSeq2SeqLM

    from exam_eval.backends.hf_attention import NAME, register

    register()
    default = AutoModelForSeq2SeqLM.from_pretrained(tiny_t5).eval()
    ours = AutoModelForSeq2SeqLM.from_pretrained(tiny_t5, attn_implementation=NAME).eval()
    # the stacks hold their own configs: the name must have reached them
    assert ours.encoder.block[0].layer[0].SelfAttention.config._attn_implementation == NAME
    assert ours.decoder.block[0].layer[1].EncDecAttention.config._attn_implementation == NAME

    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 1], [5, 6, 7, 1, 0, 0, 0]])
    mask = (ids != 0).long()
    mask[0, -1] = 1
    a, seen_default = _masks_seen(default, monkeypatch, ids, mask)
    b, seen_ours = _masks_seen(ours, monkeypatch, ids, mask)

    # transformers' own layout: some mask with a strided last dimension (the reason for this module)
    assert any(m is not None and m.stride(-1) != 1 for m in seen_default)
    assert len(seen_ours) == len(seen_default) and all(m is None or m.stride(-1) == 1 for m in seen_ours)
    # the padding is still masked: the encoder's masks hold the -inf-like fill on row 2's padding
    enc = [m for m in seen_ours if m is not None and m.shape[-1] == ids.shape[1] and m.shape[-2] == ids.shape[1]]
    assert enc and all((m[1, :, :, 4:] < -1e30).all() and (m[0] > -1e30).all() for m in enc)
    assert torch.allclose(a, b, atol=1e-6)


def test_padding_changes_the_row_it_pads_and_no_other(tiny_t5):
    """The mask builder registered with the attention is in force: a custom attention
    with none registered would get no padding mask, and a padded row would change."""
    from transformers import AutoModelForSeq2SeqLM

    from exam_eval.backends.hf_attention import NAME, register

    register()
    ours = AutoModelForSeq2SeqLM.from_pretrained(tiny_t5, attn_implementation=NAME).eval()
    short = torch.tensor([[5, 6, 7, 1]])
    padded = torch.tensor([[5, 6, 7, 1, 0, 0]])
    start = torch.zeros((1, 1), dtype=torch.long)
    with torch.inference_mode():
        alone = ours(input_ids=short, attention_mask=torch.ones_like(short), decoder_input_ids=start).logits
        masked = ours(input_ids=padded, attention_mask=(padded != 0).long(), decoder_input_ids=start).logits
        unmasked = ours(input_ids=padded, attention_mask=torch.ones_like(padded), decoder_input_ids=start).logits
    assert torch.allclose(alone, masked, atol=1e-5)
    assert not torch.allclose(alone, unmasked, atol=1e-5)


def test_attention_kwargs_only_for_t5_on_a_gpu(tiny_t5, tmp_path):
    from exam_eval.backends.hf_attention import NAME, attention_kwargs

    assert attention_kwargs(str(tiny_t5), "cuda") == {"attn_implementation": NAME}
    assert attention_kwargs(str(tiny_t5), "cpu") == {}
    assert attention_kwargs(None, "cuda") == {}
    assert attention_kwargs(str(tmp_path / "missing"), "cuda") == {}


def test_the_mask_is_folded_once_a_pass_and_not_kept_after_it(tiny_t5, monkeypatch):
    """Every layer of a stack gets the same bias and padding mask: they are folded into one
    SDPA mask once a forward pass (not once a layer), the layers all get that one tensor,
    and nothing of it is kept once the pass is over."""
    import gc

    from transformers import AutoModelForSeq2SeqLM

    from exam_eval.backends import hf_attention

    hf_attention.register()
    model = AutoModelForSeq2SeqLM.from_pretrained(tiny_t5, attn_implementation=hf_attention.NAME).eval()
    layers = model.config.num_layers
    assert layers >= 2  # otherwise once a pass and once a layer cannot be told apart
    folds = []
    real_fold = hf_attention.fold

    def counting(*args):
        folds.append(real_fold(*args))
        return folds[-1]

    monkeypatch.setattr(hf_attention, "fold", counting)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 1], [5, 6, 7, 1, 0, 0, 0]])
    mask = (ids != 0).long()
    logits, seen = _masks_seen(model, monkeypatch, ids, mask)
    encoder = [m for m in seen if m is not None and m.shape[-2:] == (7, 7)]
    assert len(encoder) == layers and all(m is encoder[0] for m in encoder)
    # one fold for the encoder, one for the decoder's cross-attention (its own padding
    # mask), at most one for the decoder step's self-attention: not one per layer
    assert 2 <= len(folds) <= 3 < 2 * layers + 1
    del seen, encoder
    folds.clear()
    gc.collect()
    assert hf_attention._folds.entries == []
    # the numbers are transformers' own SDPA's
    monkeypatch.setattr(hf_attention, "fold", real_fold)
    sdpa = AutoModelForSeq2SeqLM.from_pretrained(tiny_t5, attn_implementation="sdpa").eval()
    with torch.inference_mode():
        want = sdpa(input_ids=ids, attention_mask=mask, decoder_input_ids=torch.zeros((2, 1), dtype=torch.long)).logits
    assert torch.allclose(logits, want, atol=1e-6)


def test_fold_keeps_the_bias_where_a_token_is_seen_and_a_stride_of_one():
    """The folded mask, counted here: the bias where the padding mask lets a key be seen,
    at most the dtype's minimum where not (a float mask is added), last stride 1."""
    from exam_eval.backends.hf_attention import fold

    bias = torch.randn(3, 3, 2).permute(2, 0, 1).unsqueeze(0)  # (1, heads, q, k), last stride = heads
    assert bias.stride(-1) != 1
    keep = torch.tensor([[True, True, False], [True, False, False]]).view(2, 1, 1, 3)
    q = k = torch.zeros(2, 2, 3, 4)
    low = torch.finfo(torch.float32).min
    for mask in (keep, torch.where(keep, 0.0, low)):
        got = fold(bias, mask, q, k)
        assert got.shape == (2, 2, 3, 3) and got.stride(-1) == 1
        for b in range(2):
            for j in range(3):
                if keep[b, 0, 0, j]:
                    assert torch.equal(got[b, :, :, j], bias[0, :, :, j])
                else:
                    assert (got[b, :, :, j] <= low).all()
