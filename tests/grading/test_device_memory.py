"""A batch that runs the device out of memory is graded in halves, and later batches are
cut to half the size that failed (grading.fitting): the grades are those of a run that
never ran out, and one prompt too large alone is one line, the grades before it kept.

No GPU here: the torch back ends run on the CPU, made to act as on a GPU (overlapped,
batched by tokens), with a model call that raises torch's OutOfMemoryError above a
number of tokens, as CUDA's allocator does."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from exam_eval.backends.scripted import ScriptedBackend
from exam_eval.grading import engine
from exam_eval.grading.fitting import Batch, BatchLimit, DeviceMemoryError, TooLarge, call_fitting, submit_fitting
from exam_eval.grading.prompts import get_prompt
from test_engine_overlap import _grade as grade_world, _rows
from test_grade_writer import _world

PROMPT = get_prompt("question-selfrating")
# passages of 1 to 24 extra words: prompts of many lengths, so batches by tokens differ in width
WORLD = _world(n_queries=4, n_docs=25, n_items=3)
PAIRS = 4 * 25 * 3


def _grade(backend, out, batch_size=None):
    """Grade WORLD (by the back end's token budget unless ``batch_size``)."""
    return grade_world(backend, out, batch_size, WORLD)


class Cramped(ScriptedBackend):
    """ScriptedBackend's grades, from a device that holds at most ``room`` prompts a batch:
    a larger batch raises ``MemoryFull`` at its start, as a GPU's allocator does."""

    class MemoryFull(RuntimeError):
        pass

    def __init__(self, room: int, overlaps: bool):
        super().__init__(score=True)
        self.room, self.overlaps = room, overlaps
        self.sizes: list[int] = []  # the batches that ran
        self.failures = self.released = 0

    def out_of_memory(self, exc):
        return isinstance(exc, self.MemoryFull)

    def release_memory(self):
        self.released += 1

    def submit(self, requests):  # grade() too goes through here
        if len(requests) > self.room:
            self.failures += 1
            raise self.MemoryFull("out of memory")
        self.sizes.append(len(requests))
        return super().submit(requests)


@pytest.mark.parametrize("overlaps", [True, False])
def test_batches_too_large_are_halved_and_grade_as_a_run_that_fits(tmp_path, overlaps):
    whole = ScriptedBackend(score=True)
    _grade(whole, tmp_path / "whole.jsonl", batch_size=64)

    cramped = Cramped(room=20, overlaps=overlaps)
    stats = _grade(cramped, tmp_path / "cramped.jsonl", batch_size=64)
    assert _rows(tmp_path / "cramped.jsonl") == _rows(tmp_path / "whole.jsonl")
    assert stats.graded == PAIRS and sum(cramped.sizes) == PAIRS and max(cramped.sizes) <= 20
    # 64 failed, then 32, then batches of 16 fit: two failures, not one per batch
    assert cramped.failures == cramped.released == 2
    assert len(cramped.sizes) >= PAIRS // 16
    assert "ran out of memory at a batch of 32 prompts" in stats.device_memory
    assert "at most 16 prompts" in stats.device_memory


def test_a_run_that_fits_says_nothing(tmp_path):
    stats = _grade(Cramped(room=64, overlaps=True), tmp_path / "g.jsonl", batch_size=64)
    assert stats.device_memory is None


def test_one_prompt_too_large_is_one_error_and_keeps_what_was_written(tmp_path):
    out = tmp_path / "g.jsonl"

    class OneTooLarge(Cramped):
        def submit(self, requests):
            if any(r.context.startswith("passage 24 of query 2") for r in requests):
                self.failures += 1
                raise self.MemoryFull("out of memory")
            return super().submit(requests)

    backend = OneTooLarge(room=10**9, overlaps=True)
    with pytest.raises(DeviceMemoryError) as err:
        _grade(backend, out, batch_size=8)
    assert err.value.exit_code == 1
    assert "ran out of memory on one prompt, alone in its batch (out of memory)" in str(err.value)
    written = _rows(out)
    # the batches before it, and the pieces of its own batch that ran, are on disk
    assert 0 < len(written) < PAIRS and len(written) == sum(backend.sizes)
    # a rerun on a device with room grades exactly the rest
    rest = ScriptedBackend(score=True)
    stats = _grade(rest, out, batch_size=8)
    assert stats.in_output == len(written) and stats.graded == PAIRS - len(written)
    _grade(ScriptedBackend(score=True), tmp_path / "whole.jsonl", batch_size=8)
    assert _rows(out) == _rows(tmp_path / "whole.jsonl")


def test_an_error_that_is_not_memory_is_not_split(tmp_path):
    class Broken(Cramped):
        def submit(self, requests):
            raise ValueError("not a memory problem")

    backend = Broken(room=1, overlaps=True)
    with pytest.raises(ValueError):
        _grade(backend, tmp_path / "g.jsonl", batch_size=8)
    assert backend.released == 0


def test_a_limit_lowered_meanwhile_cuts_the_batches_still_to_come():
    """The prefetch thread cuts batches ahead; it reads the limit at every cut."""

    class Lengths:
        pad_multiple = 8

        def prepare(self, requests):
            return [40] * len(requests)

    units = [SimpleNamespace(request=i) for i in range(200)]
    limit = BatchLimit(units=8, tokens=40 * 20)
    cut = engine.batches(units, Lengths(), 8, limit=limit)
    first = next(cut)
    assert len(first) == 20 and first.tokens == 800 and first.width == 40
    limit.lower(first)
    rest = list(cut)
    assert all(b.tokens <= 400 for b in rest) and max(len(b) for b in rest) == 10
    assert sum(map(len, rest)) == 180


def test_a_batch_cut_before_the_limit_fell_is_split_before_it_runs():
    started = []

    def submit(requests):
        started.append(len(requests))
        return lambda: requests

    limit = BatchLimit(units=8, tokens=100)
    batch = Batch([SimpleNamespace(request=i) for i in range(8)], [30, 30, 20, 20, 10, 10, 10, 10], multiple=1)
    running: list = []
    submit_fitting(ScriptedBackend(), submit, batch, limit, running)
    # 240 padded tokens: halves of 4 x 30 = 120 (halved again) and 4 x 20 = 80
    assert started == [2, 2, 4]
    assert [u.request for units, _ in running for u in units] == list(range(8))
    assert limit.splits == 0  # nothing failed


def test_ctranslate2_on_cuda_names_its_out_of_memory_error():
    from exam_eval.backends.ct2_engine import CT2Engine

    on = SimpleNamespace(_ct2_device="cuda")
    assert CT2Engine.out_of_memory(on, RuntimeError("CUDA failed with error out of memory"))
    assert not CT2Engine.out_of_memory(on, RuntimeError("CUDA failed with error an illegal memory access"))
    assert not CT2Engine.out_of_memory(SimpleNamespace(_ct2_device="cpu"), RuntimeError("out of memory"))


class Shelf:
    """A device for calls that generate: a call of more than ``room`` items, or one that
    holds ``huge``, runs it out of memory."""

    class MemoryFull(RuntimeError):
        pass

    def __init__(self, room: int, huge=None):
        self.room, self.huge = room, huge
        self.calls: list[list] = []
        self.released = 0

    def out_of_memory(self, exc):
        return isinstance(exc, self.MemoryFull)

    def release_memory(self):
        self.released += 1

    def __call__(self, items):
        self.calls.append(list(items))
        if len(items) > self.room or self.huge in items:
            raise self.MemoryFull("out of memory: tried to allocate 2.00 GiB")
        return [f"answer {i}" for i in items]


def test_calls_that_generate_are_made_in_halves_and_later_ones_are_cut():
    shelf, limit = Shelf(room=3), BatchLimit(8)
    got = call_fitting(shelf, shelf, list(range(20)), limit)
    assert got == [f"answer {i}" for i in range(20)]
    # 8 failed, then its halves of 4; the rest ran at 2 a call
    assert [len(c) for c in shelf.calls[:3]] == [8, 4, 2]
    assert limit.units == 2 and all(len(c) <= 2 for c in shelf.calls[3:])
    assert shelf.released == limit.splits == 2
    assert limit.note("-O batch_size=N") == ("the device ran out of memory at a batch of 4 prompts: 2 batches were run "
                                             "in halves and later batches held at most 2 prompts (-O batch_size=N sets "
                                             "a fixed size)")


def test_an_item_too_large_alone_gets_its_reason_and_the_others_their_answers():
    shelf = Shelf(room=8, huge=5)
    got = call_fitting(shelf, shelf, list(range(8)), BatchLimit(8))
    assert [g for i, g in enumerate(got) if i != 5] == [f"answer {i}" for i in range(8) if i != 5]
    assert isinstance(got[5], TooLarge) and got[5].reason == "out of memory: tried to allocate 2.00 GiB"
    assert [5] in shelf.calls


def test_a_failure_that_is_not_memory_is_raised_unsplit():
    shelf = Shelf(room=8)

    def broken(items):
        shelf.calls.append(items)
        raise ValueError("bad prompt")

    with pytest.raises(ValueError):
        call_fitting(shelf, broken, list(range(8)), BatchLimit(8))
    assert len(shelf.calls) == 1 and shelf.released == 0


torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from exam_eval.backends import get_backend  # noqa: E402
from tiny_models import tiny_llama, tiny_t5  # noqa: E402,F401


def _as_on_a_gpu(backend, room_tokens, budget, room_after=None):
    """``backend`` (loaded on the CPU) overlapped and batched by ``budget`` tokens as on a
    GPU, its model raising OutOfMemoryError for a batch over ``room_tokens`` (over 0 once
    ``room_after`` calls have run: another process took the memory)."""
    backend.__class__ = type("OnGPU", (type(backend),), {"overlaps": True})
    backend.token_budget = budget
    forward = backend.model.forward
    calls = {"ran": [], "failed": 0}

    def cramped(*a, **kw):
        ids = kw.get("input_ids", a[0] if a else None)
        if ids.numel() > (0 if room_after is not None and len(calls["ran"]) >= room_after else room_tokens):
            calls["failed"] += 1
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {ids.numel()} tokens")
        calls["ran"].append(tuple(ids.shape))
        return forward(*a, **kw)

    backend.model.forward = cramped
    return calls


@pytest.mark.parametrize("name,fixture", [("hf-seq2seq", "tiny_t5"), ("hf-causal", "tiny_llama")])
def test_torch_back_ends_recover_from_out_of_memory_with_the_same_grades(tmp_path, request, name, fixture):
    model = str(request.getfixturevalue(fixture))
    # the label probabilities of the two runs are compared: the label-mass rule is off
    whole = get_backend(name, model=model, device="cpu", engine="torch", min_label_mass=0)
    whole.load()
    _grade(whole, tmp_path / "whole.jsonl", batch_size=7)

    units = engine.build_units(docs=WORLD[0], texts=WORLD[1], items=WORLD[2], queries={}, prompt=PROMPT,
                               identity=whole.cache_identity)[0]
    widest = max(whole.prepare([u.request for u in units.values()]))
    backend = get_backend(name, model=model, device="cpu", engine="torch", min_label_mass=0)
    backend.load()
    room = 6 * widest
    calls = _as_on_a_gpu(backend, room_tokens=room, budget=40 * widest)
    stats = _grade(backend, tmp_path / "cramped.jsonl")
    assert stats.graded == PAIRS
    assert all(b * w <= room for b, w in calls["ran"])
    # the first batch (40 of the widest) failed, then 20, then 10; after that none
    assert calls["failed"] == 3 and len(calls["ran"]) > 3 * PAIRS // 40
    assert "ran out of memory at a batch of" in stats.device_memory
    got, base = _rows(tmp_path / "cramped.jsonl"), _rows(tmp_path / "whole.jsonl")
    assert got.keys() == base.keys()
    for key, (grade, probs, ok) in base.items():
        assert got[key][0] == grade and got[key][2] == ok
        assert got[key][1] == pytest.approx(probs, abs=1e-5)  # other batches, other padding


def test_one_prompt_over_the_device_memory_is_one_line(tmp_path, tiny_t5, monkeypatch):
    """Through exam-grade: exit 1, one line naming the prompt's tokens and the grades kept,
    no traceback; the same command on a device with room resumes after them."""
    from exam_eval.backends.hf_seq2seq import Seq2SeqBackend
    from inproc import run

    load = Seq2SeqBackend.load

    def load_cramped(self):
        load(self)
        _as_on_a_gpu(self, room_tokens=4096, budget=4096, room_after=2)

    monkeypatch.setattr(Seq2SeqBackend, "load", load_cramped)
    run_file, bank, passages = tmp_path / "r.run", tmp_path / "bank.jsonl", tmp_path / "p.jsonl"
    run_file.write_text("".join(f"q0 Q0 d{d} {d + 1} {9 - d} r\n" for d in range(3)))
    bank.write_text(json.dumps({"query_id": "q0", "kind": "question", "text": "what is it?"}) + "\n")
    texts = ["a long passage " + "and more words " * 60, "a shorter passage, " * 3, "a short passage"]
    passages.write_text("".join(json.dumps({"doc_id": f"d{d}", "text": t}) + "\n" for d, t in enumerate(texts)))
    out = tmp_path / "g.jsonl"
    # one prompt a batch, longest first: the device's memory is gone at the third
    args = [str(run_file), "--passages", str(passages), "--bank", str(bank), "--prompt", PROMPT.id, "--backend",
            "hf-seq2seq", "--model", str(tiny_t5), "--engine", "torch", "--device", "cpu", "--no-cache",
            "--max-input-tokens", "400", "--batch-size", "1", "--min-label-mass", "0", "-o", str(out)]
    r = run("exam-grade", *args)
    assert r.escaped is None and r.code == 1
    assert sum("memory" in line for line in r.stderr.splitlines()) == 1
    assert r.last_line.startswith("exam-grade: the device ran out of memory on one prompt of ")
    assert "tokens, alone in its batch (CUDA out of memory." in r.last_line
    assert r.last_line.endswith(f"the 2 grades written to {out} are kept, and the same command resumes after them")
    assert re.match(r"exam-grade: the device ran out of memory on one prompt of \d+ tokens, alone", r.last_line)
    assert sorted(json.loads(line)["doc_id"] for line in out.read_text().splitlines()) == ["d0", "d1"]
    monkeypatch.undo()
    r = run("exam-grade", *args)
    assert r.code == 0 and "1 graded" in r.stderr and "2 already in output" in r.stderr
    assert sorted(json.loads(line)["doc_id"] for line in out.read_text().splitlines()) == ["d0", "d1", "d2"]


def _tensor_bytes(obj, seen=None) -> int:
    """Bytes of the distinct tensor storages reachable from ``obj`` (a generate() cache,
    whatever its class in this transformers version)."""
    found: dict[int, int] = {}
    stack, seen = [obj], set()
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, torch.Tensor):
            found[o.untyped_storage().data_ptr()] = o.untyped_storage().nbytes()
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set)):
            stack.extend(o)
        elif hasattr(o, "__dict__") and not isinstance(o, type):
            stack.append(vars(o))
    return sum(found.values())


@pytest.mark.parametrize("beams", [1, 2])
@pytest.mark.parametrize("arch", ["t5", "llama-gqa"])
def test_the_generation_budget_counts_the_cache_generate_keeps(arch, beams, monkeypatch):
    """kv_bytes_per_token against the cache a real generate() keeps: an encoder-decoder with
    fewer decoder layers than encoder layers, a causal model with one key/value head for
    four query heads; and the budget's cache within half the free memory."""
    from transformers import LlamaConfig, LlamaForCausalLM, T5Config, T5ForConditionalGeneration

    from exam_eval.backends.hf_common import cuda_token_budget, kv_bytes_per_token

    torch.manual_seed(0)
    if arch == "t5":
        model = T5ForConditionalGeneration(T5Config(vocab_size=50, d_model=16, d_ff=32, d_kv=8, num_layers=3,
                                                    num_decoder_layers=2, num_heads=4, decoder_start_token_id=0,
                                                    pad_token_id=0, eos_token_id=1))
    else:
        model = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                             num_attention_heads=4, num_key_value_heads=1, pad_token_id=0,
                                             eos_token_id=1, bos_token_id=2))
    model.eval()
    rows, width, new = 3, 20, 5
    ids = torch.randint(3, 50, (rows, width))
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                         num_beams=beams, do_sample=False, return_dict_in_generate=True)
    cache = getattr(out, "past_key_values", None) or out.cache
    # every prompt position and every generated one (a causal model's last one excepted; a
    # T5 decoder's start token included), for each row and beam
    kept = _tensor_bytes(cache)
    positions = width + new - (arch != "t5")
    assert kept == kv_bytes_per_token(model) * rows * beams * positions

    free = 2**30  # both budgets under CUDA_MAX_TOKENS for these tiny models
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, free))
    budget = cuda_token_budget(model, "cuda:0", generate=True, beams=beams)
    scoring = cuda_token_budget(model, "cuda:0")
    # the budget's prompts, and as many generated tokens again, in every beam
    assert budget * 2 * beams * kv_bytes_per_token(model) <= free / 2
    assert budget < scoring


def _cramped_generate(backend, room: int):
    """``backend``'s model generating for at most ``room`` prompts a call, as a GPU whose
    memory holds that many caches; the sizes of the calls that ran are returned."""
    generate = backend.model.generate
    ran: list[int] = []

    def cramped(*a, **kw):
        n = kw["input_ids"].shape[0]
        if n > room:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate the caches of {n} prompts")
        ran.append(n)
        return generate(*a, **kw)

    backend.model.generate = cramped
    return ran


def test_a_local_chat_model_answers_in_batches_and_halves_them_out_of_memory(tiny_llama):
    """The AutoNuggetizer's steps hand a chat model up to 256 conversations at once: a
    local model answers them a batch at a time (its batch size), and a batch that runs
    the device out of memory in halves, with the answers of a run that never did."""
    from exam_eval.backends.factory import make_client

    convs = [[{"role": "system", "content": "You are a grader."},
              {"role": "user", "content": f"Question {i}: what is the capital of France? " + "yes " * i}]
             for i in range(7)]
    whole = make_client("hf-causal", "chat", model=str(tiny_llama), max_tokens=5, backend_options={"device": "cpu"})
    want = whole.chat(convs[:1]) + whole.chat(convs[1:4]) + whole.chat(convs[4:])  # batches of 1 and 3
    assert all(r.error is None for r in want)

    chat = make_client("hf-causal", "chat", model=str(tiny_llama), max_tokens=5,
                          backend_options={"device": "cpu", "batch_size": 4})
    chat.chat(convs[:1])  # loads the model
    ran = _cramped_generate(chat.backend, room=2)
    got = chat.chat(convs)
    assert [r.text for r in got] == [r.text for r in want] and all(r.error is None for r in got)
    assert max(ran) == 2 and sum(ran) == 7
    assert "ran out of memory at a batch of 4 prompts" in chat.memory_note and "-O batch_size=N" in chat.memory_note

    plain = make_client("hf-causal", "chat", model=str(tiny_llama), max_tokens=5,
                           backend_options={"device": "cpu", "batch_size": 3})
    plain.chat(convs[:1])
    sizes = _cramped_generate(plain.backend, room=99)
    plain.chat(convs)
    assert sizes == [3, 3, 1] and plain.memory_note is None


def test_a_local_chat_model_is_asked_and_cached_a_few_batches_at_a_time(tmp_path, tiny_llama):
    """The Asker commits each chunk's answers before it sends the next: for a local model
    a chunk is a few batches (an interrupt loses those), not 256 conversations."""
    from exam_eval.backends.chat import CHUNK_BATCHES
    from exam_eval.backends.factory import make_client
    from exam_eval.grading.asking import Ask, Asker

    chat = make_client("hf-causal", "chat", model=str(tiny_llama), max_tokens=3,
                          backend_options={"device": "cpu", "batch_size": 2})
    assert chat.chunk_size == 2 * CHUNK_BATCHES
    sent: list[int] = []
    chat_once = chat.chat

    def spy(convs, temperature=0.0):
        sent.append(len(convs))
        return chat_once(convs, temperature)

    chat.chat = spy
    done: list[int] = []
    n = 2 * CHUNK_BATCHES + 3
    asks = [Ask(f"k{i}", [{"role": "user", "content": f"question {i}"}]) for i in range(n)]
    answers = Asker(chat, lambda text: text or None, retries=0, on_chunk=done.append).ask(asks)
    assert sent == done == [2 * CHUNK_BATCHES, 3] and len(answers) == n
    _cramped_generate(chat.backend, room=1)
    chat.chat([a.messages for a in asks[:2]])
    assert chat.chunk_size == CHUNK_BATCHES  # the batch fell to 1


def test_an_interrupt_inside_a_local_chat_models_chunk_keeps_the_batches_it_finished(tmp_path, tiny_llama):
    """Ctrl-C while the third batch of a chunk generates: the two batches finished before
    it are committed to the cache (a rerun asks only the rest), as an endpoint's answers
    that came before the signal are."""
    from exam_eval.backends.chat import CHUNK_BATCHES
    from exam_eval.backends.factory import make_client
    from exam_eval.grading.asking import Ask, Asker
    from exam_eval.grading.cache import GradeCache
    from exam_eval.grading.types import InterruptedBatch

    assert CHUNK_BATCHES >= 3
    chat = make_client("hf-causal", "chat", model=str(tiny_llama), max_tokens=3,
                          backend_options={"device": "cpu", "batch_size": 2})
    asks = [Ask(f"k{i}", [{"role": "user", "content": f"question {i}"}]) for i in range(6)]
    chat.chat([asks[0].messages])  # loads the model
    generate = chat.backend.model.generate
    calls: list[int] = []

    def interrupted_third(*a, **kw):
        calls.append(kw["input_ids"].shape[0])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return generate(*a, **kw)

    chat.backend.model.generate = interrupted_third
    cache = GradeCache(str(tmp_path / "c.sqlite"))
    with pytest.raises(InterruptedBatch):
        Asker(chat, lambda text: text or None, retries=0, cache=cache).ask(asks)
    kept = cache.get_many(a.key for a in asks)
    assert sorted(kept) == ["k0", "k1", "k2", "k3"] and calls == [2, 2, 2]
    chat.backend.model.generate = generate
    done: list[int] = []
    answers = Asker(chat, lambda text: text or None, retries=0, cache=cache, on_chunk=done.append).ask(asks)
    assert len(answers) == 6 and done == [4, 2]  # four from the cache, two asked
    cache.close()


def test_question_generation_halves_a_batch_and_fails_only_a_prompt_too_large_alone(tiny_llama):
    from exam_eval.backends.chat import LocalChat

    prompts = [f"Write questions about topic {i}." for i in range(5)]
    keys = [(str(i), None) for i in range(5)]
    want = LocalChat(role="complete", name="hf-causal", model=str(tiny_llama), max_tokens=6, device="cpu", batch_size=1)
    expected = want.generate(prompts, keys)
    gen = LocalChat(role="complete", name="hf-causal", model=str(tiny_llama), max_tokens=6, device="cpu", batch_size=4)
    gen.generate(prompts[:1], keys[:1])
    ran = _cramped_generate(gen.backend, room=1)
    got = gen.generate(prompts, keys)
    assert [r.text for r in got] == [r.text for r in expected] and max(ran) == 1
    assert "at most 1 prompts" in gen.memory_note and "--batch-size N" in gen.memory_note

    _cramped_generate(gen.backend, room=0)  # now not even one prompt fits
    failed = gen.generate(prompts[:2], keys[:2])
    assert [r.text for r in failed] == [None, None]
    assert all(r.error.startswith("the device ran out of memory on this prompt alone (CUDA out of memory")
               for r in failed)


def _cramp_hf_causal(monkeypatch, room: int) -> None:
    """Every hf-causal model loaded from now on generates for at most ``room`` prompts a
    call (a command run in this process, without progress bars)."""
    from exam_eval.backends.hf_causal import CausalBackend

    load = CausalBackend.load

    def load_cramped(self):
        load(self)
        _cramped_generate(self, room=room)

    monkeypatch.setattr(CausalBackend, "load", load_cramped)
    monkeypatch.setenv("EXAM_EVAL_PROGRESS", "0")


def test_exam_genq_says_at_its_end_that_batches_were_halved(tmp_path, tiny_llama, monkeypatch):
    """Through exam-genq: the questions of every query are asked for, in smaller calls
    than --batch-size once the device ran out of memory, and the run's last lines say so."""
    from inproc import run

    _cramp_hf_causal(monkeypatch, room=2)
    topics = tmp_path / "t.tsv"
    topics.write_text("".join(f"{q}\thow do birds fly, part {q}\n" for q in range(5)))
    r = run("exam-genq", "--backend", "hf-causal", "--model", str(tiny_llama), "--device", "cpu", "--batch-size", "4",
            "--max-tokens", "4", "--retries", "0", str(topics), "-o", str(tmp_path / "bank.jsonl"))
    assert r.escaped is None and r.code in (0, 3)  # a random model rarely writes a list
    assert "failed: the device ran out of memory" not in r.stderr and "OutOfMemoryError" not in r.stderr
    note = [line for line in r.stderr.splitlines() if "ran out of memory" in line]
    assert note == ["exam-genq: the device ran out of memory at a batch of 4 prompts: 1 batch was run in halves and "
                    "later batches held at most 2 prompts (--batch-size N sets a fixed size)"]


def test_exam_nuggets_assign_answers_every_report_and_names_its_option(tmp_path, tiny_llama, monkeypatch):
    """The AutoNuggetizer's listwise assignment on a local chat model: one conversation a
    report, answered in halves once the device ran out of memory, none failed."""
    from inproc import run

    _cramp_hf_causal(monkeypatch, room=1)
    reports = tmp_path / "r.jsonl"
    reports.write_text("".join(json.dumps({"metadata": {"run_id": f"run{i}", "topic_id": "q1", "team_id": "t"},
                                           "responses": [{"text": f"Bees make honey, {i}.", "citations": []}]}) + "\n"
                               for i in range(3)))
    bank = tmp_path / "b.jsonl"
    bank.write_text("".join(json.dumps({"query_id": "q1", "item_id": f"q1/{i}", "kind": "nugget", "text": t}) + "\n"
                            for i, t in enumerate(["Bees make honey.", "Honey is sweet."])))
    topics = tmp_path / "t.tsv"
    topics.write_text("q1\thow do bees make honey\n")
    r = run("exam-nuggets", "assign", "--reports", reports, "--bank", bank, "--topics", topics, "--backend", "hf-causal",
            "--model", str(tiny_llama), "-O", "device=cpu", "-O", "batch_size=2", "--max-tokens", "4", "--retries", "0",
            "--no-cache", "-o", tmp_path / "a.jsonl")
    assert r.escaped is None and r.code == 0, r.stderr
    assert [line for line in r.stderr.splitlines() if "ran out of memory" in line] == [
        "exam-nuggets: the device ran out of memory at a batch of 2 prompts: 1 batch was run in halves and later "
        "batches held at most 1 prompts (-O batch_size=N sets a fixed size)"]


def test_exam_genq_nuggetize_on_a_local_chat_model_says_batches_were_halved(tmp_path, tiny_llama, monkeypatch):
    from inproc import run

    _cramp_hf_causal(monkeypatch, room=1)
    topics, qrels, corpus = tmp_path / "t.tsv", tmp_path / "q.qrels", tmp_path / "c.jsonl"
    topics.write_text("".join(f"q{q}\thow do bees make honey, part {q}\n" for q in range(3)))
    qrels.write_text("".join(f"q{q} 0 q{q}-d{d} 2\n" for q in range(3) for d in range(2)))
    corpus.write_text("".join(json.dumps({"doc_id": f"q{q}-d{d}", "text": f"Bees make honey {q} {d}."}) + "\n"
                              for q in range(3) for d in range(2)))
    r = run("exam-genq", "nuggetize", topics, "--qrels", qrels, "--passages", corpus, "--backend", "hf-causal",
            "--model", str(tiny_llama), "-O", "device=cpu", "-O", "batch_size=2", "--max-tokens", "4",
            "--retries", "0", "--no-cache", "-o", tmp_path / "bank.jsonl")
    assert r.escaped is None and r.code in (0, 3), r.stderr  # a random model's nuggets rarely parse
    assert "topics failed" not in r.stderr
    assert [line for line in r.stderr.splitlines() if "ran out of memory" in line] == [
        "exam-genq: the device ran out of memory at a batch of 2 prompts: 1 batch was run in halves and later "
        "batches held at most 1 prompts (-O batch_size=N sets a fixed size)"]
