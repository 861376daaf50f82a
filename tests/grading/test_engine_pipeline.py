"""The engine's pipeline: batches made a chunk ahead in a prefetch thread, batching by
tokens, and CTranslate2's one line for missing CUDA libraries."""

from __future__ import annotations

import threading

import pytest

from exam_eval.grading import engine
from worst_interrupts import interrupt_inside_conditions, run_as_grading_thread


class Lengths:
    """A back end whose prepare() reports token counts (and which thread asked)."""

    def __init__(self, lengths):
        self.lengths = lengths
        self.threads = set()
        self.prepared = []

    def prepare(self, requests):
        self.threads.add(threading.current_thread().name)
        self.prepared.append(len(requests))
        return [self.lengths[r] for r in requests]


def units(n):
    return [engine.Unit(key=str(i), request=i) for i in range(n)]


def test_fixed_batches_keep_the_plans_order():
    us = units(50)
    got = list(engine.batches(us, Lengths(list(range(50))), 8))
    assert [u.request for b in got for u in b] == list(range(50))
    assert [len(b) for b in got] == [8] * 6 + [2]


def test_token_batches_are_longest_first_and_within_the_budget():
    lengths = [(i * 37) % 200 + 10 for i in range(300)]
    got = list(engine.batches(units(300), Lengths(lengths), 8, token_budget=1000))
    flat = [u.request for b in got for u in b]
    assert sorted(flat) == list(range(300))  # every unit once
    # longest first within each chunk the prefetch thread prepares
    expected = [n for c in engine.chunks(list(range(300)), 8) for n in sorted((lengths[i] for i in c), reverse=True)]
    assert [lengths[i] for i in flat] == expected
    for b in got:
        assert len(b) == 1 or max(lengths[u.request] for u in b) * len(b) <= 1000
    # full batches: adding the next unit would overflow (a chunk's last batch may be short)
    chunk_of = {i: n for n, c in enumerate(engine.chunks(list(range(300)), 8)) for i in c}
    inner = [(b, nxt) for b, nxt in zip(got, got[1:]) if chunk_of[b[0].request] == chunk_of[nxt[0].request]]
    assert len(inner) >= len(got) - 3
    for b, nxt in inner:
        assert max(lengths[u.request] for u in b) * (len(b) + 1) > 1000


def test_prefetch_prepares_in_its_own_thread_and_raises_its_errors():
    backend = Lengths([5] * 40)
    with engine.Prefetch(engine.batches(units(40), backend, 4)) as ahead:
        assert sum(len(b) for b in ahead) == 40
    assert backend.threads == {"exam-eval-prefetch"}

    def broken():
        yield [1]
        raise ValueError("bad chunk")

    with pytest.raises(ValueError, match="bad chunk"):
        with engine.Prefetch(broken()) as ahead:
            list(ahead)


def test_prefetch_stops_when_the_grading_loop_stops():
    made = []

    def endless():
        i = 0
        while True:
            made.append(i)
            yield [i]
            i += 1

    p = engine.Prefetch(endless())
    with pytest.raises(KeyboardInterrupt):
        with p as ahead:
            for b in ahead:
                if b == [3]:
                    raise KeyboardInterrupt
    assert not p.thread.is_alive() and len(made) < 10


def test_missing_cublas_is_one_line(tiny_t5, monkeypatch):
    pytest.importorskip("ctranslate2")
    import ctranslate2

    from exam_eval.backends import ct2_engine
    from exam_eval.backends import get_backend
    from exam_eval.errors import UsageError

    err = RuntimeError("Library libcublas.so.12 is not found or cannot be loaded")
    assert ct2_engine.missing_cuda_library(err) == "libcublas.so.12"
    assert ct2_engine.missing_cuda_library(RuntimeError("out of memory")) is None
    b = get_backend("hf-seq2seq", model=str(tiny_t5), device="cpu", engine="ctranslate2", compute_type="float32")
    b._ct2_device = "cuda"

    def translator(*_a, **_k):
        raise err

    monkeypatch.setattr(ctranslate2, "Translator", translator)
    with pytest.raises(UsageError) as exc:
        b.load()
    msg = str(exc.value)
    assert "\n" not in msg and "libcublas.so.12" in msg and "nvidia-cublas-cu12" in msg



def test_missing_cublas_at_the_first_batch_is_one_line(tiny_t5):
    """CTranslate2 may load cuBLAS at its first real call, past the load and the warm-up
    (as on the GPU machine of 2026-11-26): grading says the same one line there."""
    pytest.importorskip("ctranslate2")
    from exam_eval.backends import get_backend
    from exam_eval.grading.types import GradeRequest
    from exam_eval.errors import UsageError
    from exam_eval.grading.prompts import get_prompt

    b = get_backend("hf-seq2seq", model=str(tiny_t5), device="cpu", engine="ctranslate2", compute_type="float32",
                    min_label_mass=0)  # the scored path reaches the model call
    b.load()
    req = GradeRequest(get_prompt("question-selfrating"), "q", "what is it?", "a passage")
    assert b.grade([req])[0].probs  # the CPU engine grades

    def no_cublas(*_a, **_k):
        raise RuntimeError("Library libcublas.so.12 is not found or cannot be loaded")

    b._score_on = no_cublas
    b._ct2_device = "cuda"
    with pytest.raises(UsageError) as exc:
        b.grade([req])
    msg = str(exc.value)
    assert "\n" not in msg and "libcublas.so.12" in msg and "--engine torch" in msg
    b._ct2_device = "cpu"  # on a CPU the same error is not about CUDA libraries: it stands
    with pytest.raises(RuntimeError, match="libcublas"):
        b.grade([req])


from tiny_models import tiny_t5  # noqa: E402,F401


def test_chunks_start_small_and_grow_to_the_lookahead_in_whole_batches():
    """The model waits for the first chunk's tokenizing only: FIRST_CHUNK units, then
    doubling up to the full chunk; each chunk whole batches, every unit once, in the plan's order."""
    us = units(3 * engine.LOOKAHEAD)
    got = list(engine.chunks(us, 8))
    assert [u.request for c in got for u in c] == list(range(len(us)))
    sizes = [len(c) for c in got]
    assert sizes[0] == engine.FIRST_CHUNK and sizes[:4] == [sizes[0] * 2 ** k for k in range(4)]
    assert engine.FIRST_CHUNK < engine.LOOKAHEAD
    assert max(sizes) == engine.LOOKAHEAD and all(s % 8 == 0 for s in sizes[:-1])
    # large batches: the full chunk is 16 batches, the first 2 of them
    big = [len(c) for c in engine.chunks(units(5000), 300)]
    assert big[0] == 600 and all(s % 300 == 0 for s in big[:-1]) and sum(big) == 5000


def test_token_batches_count_the_width_the_back_end_pads_to():
    """A back end that pads a batch to a multiple of 8 tokens: the budget holds the
    rounded width, and no batch that fits would have taken one unit more."""
    lengths = [(i * 37) % 200 + 10 for i in range(300)]
    backend = Lengths(lengths)
    backend.pad_multiple = 8
    got = list(engine.batches(units(300), backend, 8, token_budget=1000))
    assert sorted(u.request for b in got for u in b) == list(range(300))

    def width(b):
        return -(-max(lengths[u.request] for u in b) // 8) * 8

    assert all(len(b) == 1 or width(b) * len(b) <= 1000 for b in got)
    chunk_of = {i: n for n, c in enumerate(engine.chunks(list(range(300)), 8)) for i in c}
    inner = [(b, nxt) for b, nxt in zip(got, got[1:]) if chunk_of[b[0].request] == chunk_of[nxt[0].request]]
    assert inner and all(width(b + nxt[:1]) * (len(b) + 1) > 1000 for b, nxt in inner)
    # unrounded, some batch would have been cut elsewhere
    assert [len(b) for b in got] != [len(b) for b in engine.batches(units(300), Lengths(lengths), 8, token_budget=1000)]


def test_a_chunk_is_tokenized_in_pieces_and_stops_between_them():
    """An interrupt sets ``stop`` while the prefetch thread tokenizes a chunk (8,192
    prompts can take seconds): the thread goes no further than the piece of PREPARE_PIECE
    prompts it is in, so leaving the grading loop (which joins it) waits for that piece
    only, and the thread is not left inside the tokenizer when the process ends."""
    import threading

    stop = threading.Event()
    pieces = []

    class Interrupted:
        def prepare(self, requests):
            pieces.append(len(requests))
            stop.set()  # the signal comes during the chunk's first piece
            return [5] * len(requests)

    size = engine.PREPARE_PIECE  # batches this large: the first chunk is two of them
    got = list(engine.batches(units(3 * size), Interrupted(), size, token_budget=10**9, stop=stop))
    assert pieces == [engine.PREPARE_PIECE] and got == []
    # without a stop: every piece, and every unit batched once
    pieces.clear()
    stop = threading.Event()

    class Lengths5:
        def prepare(self, requests):
            pieces.append(len(requests))
            return [5] * len(requests)

    got = list(engine.batches(units(3 * size), Lengths5(), size, token_budget=10**9))
    assert max(pieces) == engine.PREPARE_PIECE and sum(pieces) == 3 * size
    assert sorted(u.request for b in got for u in b) == list(range(3 * size))
    # the grading loop's Prefetch ends its thread on leaving, at the next piece at most
    with engine.Prefetch(engine.batches(units(3 * size), Lengths5(), 8, stop=stop), stop) as ahead:
        next(iter(ahead))
    assert stop.is_set() and not ahead.thread.is_alive()


def test_an_interrupt_inside_a_lock_the_prefetch_takes_cannot_hang_it(monkeypatch):
    """The writer's hang (tests/grading/test_grade_writer.py) had a twin: the grading thread takes
    each prepared batch from the prefetch thread, and an interrupt landing inside a
    queue.Queue's Condition, its lock taken, would leave the prefetch thread waiting on that
    lock for ever and the block's end joining it. Every Condition the grading thread enters
    once armed raises at that worst point; the hand-over must not go through one."""
    grading: dict = {}
    armed = interrupt_inside_conditions(monkeypatch, grading)

    def endless():
        i = 0
        while True:
            yield [i]
            i += 1

    def grade():
        with engine.Prefetch(endless()) as ahead:
            grading["prefetch"] = ahead
            for b in ahead:
                if b == [5]:
                    armed[0] = True  # the next hand-over is interrupted at its worst point
                elif b == [50]:
                    armed[0] = False  # no Condition on the way: leave the block as usual
                    break

    outcome = run_as_grading_thread(grade, grading)
    assert outcome.get("done"), "the prefetch's hand-over hung on a lock an interrupt left taken"
    assert not grading["prefetch"].thread.is_alive()


def test_the_next_chunk_is_prepared_while_this_one_is_graded(tmp_path):
    """Through exam-grade's engine: while the grading thread grades the first chunk's
    batches, the prefetch thread prepares the second chunk (tokenizing overlaps grading:
    a prefetch only batches ahead would wait for the grading to reach the chunk's end), and
    not the third (one chunk ahead at most: the prompts' ids of a whole pool never pile up)."""
    from exam_eval.backends.scripted import ScriptedBackend
    from exam_eval.grading.cache import NullCache
    from exam_eval.grading.output import GradesAppender
    from exam_eval.grading.prompts import get_prompt
    from exam_eval.io.bank_items import BankItem, make_item_id

    prompt = get_prompt("question-selfrating")
    docs = {f"q{q}": [f"d{q}-{d}" for d in range(16)] for q in range(8)}
    texts = {d: f"passage {d}" for ds in docs.values() for d in ds}
    items = {q: [BankItem(q, make_item_id(q, f"question {i} of {q}?"), "question", f"question {i} of {q}?")
                 for i in range(14)] for q in docs}
    units, npairs = engine.build_units(docs=docs, texts=texts, items=items, queries={}, prompt=prompt,
                                       identity="")
    batch = 4
    sizes = [len(c) for c in engine.chunks(list(range(npairs)), batch)]
    assert npairs == 1792 and sizes[:3] == [256, 512, 1024]  # three chunks, one prepare() call each
    prepared: list[int] = []
    second = threading.Event()
    seen = {"first_chunk_saw_second": False, "most_prepared_in_first_chunk": 0}

    class Ahead(ScriptedBackend):
        graded = 0

        def prepare(self, requests):
            prepared.append(len(requests))
            if len(prepared) == 2:
                second.set()
            return [5] * len(requests)

        def grade(self, requests):
            if self.graded < sizes[0]:  # a batch of the first chunk
                if self.graded == 0:
                    seen["first_chunk_saw_second"] = second.wait(timeout=10)
                seen["most_prepared_in_first_chunk"] = max(seen["most_prepared_in_first_chunk"], len(prepared))
            self.graded += len(requests)
            return super().grade(requests)

    backend = Ahead()
    plan = engine.plan_work(units, npairs, set(), NullCache(), backend.model_id, prompt)
    sink = GradesAppender(str(tmp_path / "g.jsonl"))
    try:
        stats = engine.execute(plan, backend, prompt, sink, NullCache(), batch_size=batch)
    finally:
        sink.close()
    assert stats.graded == npairs and prepared == sizes
    assert seen == {"first_chunk_saw_second": True, "most_prepared_in_first_chunk": 2}
