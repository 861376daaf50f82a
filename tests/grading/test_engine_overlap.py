"""The overlapped grading loop: a back end that computes on its own (torch on CUDA) is
handed batch k+1 before batch k is read back, so its device never waits for the host's
bookkeeping between batches. The grades are those of the plain loop, and an interrupt or
an error while a batch starts still writes the batch already computed."""

from __future__ import annotations

import json

import pytest

from exam_eval.backends.scripted import ScriptedBackend
from exam_eval.grading import engine
from exam_eval.grading.cache import NullCache
from exam_eval.grading.output import GradesAppender, existing_keys
from exam_eval.grading.prompts import get_prompt
from test_grade_writer import _world

PROMPT = get_prompt("question-selfrating")
BATCH = 4


WORLD = _world(n_queries=3, n_docs=5, n_items=3)
PAIRS = 3 * 5 * 3


def _grade(backend, out, batch_size=BATCH, world=WORLD):
    units, npairs = engine.build_units(docs=world[0], texts=world[1], items=world[2], queries={}, prompt=PROMPT,
                                       identity=backend.cache_identity)
    plan = engine.plan_work(units, npairs, existing_keys(str(out)), NullCache(), backend.model_id, PROMPT)
    sink = GradesAppender(str(out))
    try:
        return engine.execute(plan, backend, PROMPT, sink, batch_size=batch_size)
    finally:
        sink.close()


def _rows(path):
    return {(r["query_id"], r["doc_id"], r["item_id"]): (r["grade"], r["probs"], r["parse_ok"])
            for r in map(json.loads, path.read_text().splitlines())}


class Overlapping(ScriptedBackend):
    """Scores as ScriptedBackend does, but as a device would: started by ``submit``, read
    back later; every start and read-back is logged, and ``fail_at`` makes the n-th start
    raise (an interrupt, or an out-of-memory error)."""

    overlaps = True

    def __init__(self, fail_at: int | None = None, error: BaseException | None = None):
        super().__init__(score=True)
        self.log: list[tuple[str, int]] = []
        self.fail_at, self.error = fail_at, error

    def _score_async(self, requests, labels):
        n = sum(1 for what, _ in self.log if what == "start")
        if n + 1 == self.fail_at:
            raise self.error
        self.log.append(("start", n))
        weights = self._score(requests, labels)

        def read_back():
            self.log.append(("read", n))
            return weights

        return read_back


def test_the_next_batch_starts_before_this_one_is_read_back(tmp_path):
    backend = Overlapping()
    stats = _grade(backend, tmp_path / "g.jsonl")
    n = -(-PAIRS // BATCH)
    assert stats.graded == PAIRS
    expected = [("start", 0)]
    for k in range(1, n):
        expected += [("start", k), ("read", k - 1)]
    expected.append(("read", n - 1))
    assert backend.log == expected


def test_overlapped_grades_equal_the_plain_loops(tmp_path):
    _grade(Overlapping(), tmp_path / "over.jsonl")
    plain = ScriptedBackend(score=True)
    assert not plain.overlaps
    _grade(plain, tmp_path / "plain.jsonl")
    over, base = _rows(tmp_path / "over.jsonl"), _rows(tmp_path / "plain.jsonl")
    assert len(base) == PAIRS and over == base


@pytest.mark.parametrize("error", [KeyboardInterrupt(), RuntimeError("CUDA out of memory")])
def test_a_failure_while_a_batch_starts_keeps_the_batch_computed_before(tmp_path, error):
    out = tmp_path / "g.jsonl"
    backend = Overlapping(fail_at=5, error=error)
    with pytest.raises(type(error)):
        _grade(backend, out)
    # batches 0-3 started; 0-2 were read back in the loop, 3 on the way out
    assert backend.log[-1] == ("read", 3)
    assert len(out.read_text().splitlines()) == 4 * BATCH
    # a rerun grades exactly the rest, and the whole equals one uninterrupted run
    rest = Overlapping()
    stats = _grade(rest, out)
    assert stats.in_output == 4 * BATCH and stats.graded == PAIRS - 4 * BATCH
    _grade(ScriptedBackend(score=True), tmp_path / "whole.jsonl")
    assert _rows(out) == _rows(tmp_path / "whole.jsonl")


torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from exam_eval.backends import get_backend  # noqa: E402
from tiny_models import tiny_llama, tiny_t5  # noqa: E402,F401


@pytest.mark.parametrize("name,fixture", [("hf-seq2seq", "tiny_t5"), ("hf-causal", "tiny_llama")])
def test_torch_back_ends_give_the_same_grades_overlapped(tmp_path, request, name, fixture):
    """The torch back ends' started-then-read-back scoring, driven by the overlapped loop
    (forced here on a CPU), writes exactly the plain loop's lines."""
    model = str(request.getfixturevalue(fixture))
    # random weights put little mass on the labels, so most pairs fall back to generating
    # text (read back in the same loop): a few tokens of it are enough to compare
    settings = dict(model=model, device="cpu", engine="torch", max_new_tokens=4)
    plain = get_backend(name, **settings)
    plain.load()
    assert not plain.overlaps  # a CPU's forward pass is the host's own work
    _grade(plain, tmp_path / "plain.jsonl", batch_size=3)

    over = get_backend(name, **settings)
    over.load()
    started = []
    real = over._score_async

    def spy(requests, labels):
        started.append(len(requests))
        return real(requests, labels)

    over._score_async = spy
    over.__class__ = type("Forced", (type(over),), {"overlaps": True})
    _grade(over, tmp_path / "over.jsonl", batch_size=3)
    assert sum(started) == PAIRS
    assert (tmp_path / "over.jsonl").read_bytes() == (tmp_path / "plain.jsonl").read_bytes()
