"""The one grading driver (exam_eval.grading.session) that exam-grade, exam-nuggets
support and api.grade share: interrupts, resume, engine refusal, load failures, dry runs.
Expected outputs come from an uninterrupted run of the same work, never from the session
under test."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import replace

import pytest

from exam_eval.backends.scripted import ScriptedBackend
from exam_eval.errors import InputError
from exam_eval.grading import engine
from exam_eval.grading.prompts import get_prompt
from exam_eval.grading.session import GradingSession, Interrupted
from exam_eval.io.bank_items import make_item_id, BankItem

PROMPT = get_prompt("question-selfrating")


def _units(backend):
    docs = {f"q{q}": [f"d{q}-{d}" for d in range(4)] for q in range(2)}
    texts = {d: f"passage {d} " + "word " * i for ds in docs.values() for i, d in enumerate(ds)}
    items = {q: [BankItem(q, make_item_id(q, f"question {i} of {q}?"), "question", f"question {i} of {q}?")
                 for i in range(3)] for q in docs}
    return engine.build_units(docs=docs, texts=texts, items=items, queries={}, prompt=PROMPT,
                              identity=backend.cache_identity)


def _grade(backend, out, cache=None, **run):
    with GradingSession(backend, PROMPT, output=str(out), cache_path=cache) as s:
        s.plan(*_units(backend))
        return s.run(**run)


def _grade_ref(tmp_path):
    ref = tmp_path / "ref.jsonl"
    _grade(ScriptedBackend(script=lambda r, t: "4"), ref)
    return ref


def _keyed(path):
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    return {(r["query_id"], r["doc_id"], r["item_id"]): (r["grade"], r["parse_ok"]) for r in rows}, len(rows)


def _interrupting(after_calls, how):
    calls = {"n": 0}

    def script(req, rendered):
        calls["n"] += 1
        if calls["n"] == after_calls + 1:
            how()
        return "4"

    return script


def _raise_interrupt():
    raise KeyboardInterrupt


class _Closing(ScriptedBackend):
    closed = 0

    def close(self):
        type(self).closed += 1


def test_interrupt_keeps_finished_batches_and_a_rerun_completes(tmp_path):
    want, total = _keyed(_grade_ref(tmp_path))
    out = tmp_path / "g.jsonl"
    cache = str(tmp_path / "cache.sqlite")
    backend = _Closing(script=_interrupting(3, _raise_interrupt), batch_size=1)
    _Closing.closed = 0
    with pytest.raises(Interrupted) as err:
        _grade(backend, out, cache)
    assert isinstance(err.value, KeyboardInterrupt)  # callers that only know Ctrl-C still stop
    got, n = _keyed(out)
    assert err.value.written == n == 3 and _Closing.closed == 1
    assert all(want[k] == v for k, v in got.items())
    stats = _grade(ScriptedBackend(script=lambda r, t: "4"), out, cache)
    assert stats.in_output == 3 and stats.graded == total - 3
    assert _keyed(out) == (want, total)  # every pair once, none twice


def test_sigterm_stops_like_ctrl_c_and_the_handler_is_restored(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "g.jsonl"
    backend = ScriptedBackend(script=_interrupting(2, lambda: os.kill(os.getpid(), signal.SIGTERM)), batch_size=1)
    with pytest.raises(Interrupted) as err:
        _grade(backend, out, sigterm_interrupts=True)
    assert err.value.written == len(out.read_text().splitlines()) >= 2
    assert signal.getsignal(signal.SIGTERM) is before


class _EngineBackend(ScriptedBackend):
    """A scripted back end standing in for one engine of a real one, whose identity
    (what the cache and ``grader_hash`` key on) names the engine, as ct2's and torch's do."""

    def __init__(self, engine, **kw):
        super().__init__(script=lambda r, t: "4", **kw)
        self.engine = engine

    @property
    def cache_identity(self):
        return super().cache_identity + f":{self.engine}"


def _strip_grader_hash(path):
    """The file as grades were written before lines carried ``grader_hash``."""
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({k: v for k, v in g.items() if k != "grader_hash"}) + "\n" for g in lines))


def test_resume_refuses_grades_of_another_engine(tmp_path):
    out = tmp_path / "g.jsonl"
    _grade(_EngineBackend("ctranslate2/int8"), out)
    before = out.read_bytes()
    f32 = _EngineBackend("ctranslate2/float32")
    for dry in (False, True):
        with GradingSession(f32, PROMPT, output=str(out), dry_run=dry) as s:
            with pytest.raises(InputError) as err:
                s.plan(*_units(f32))
        assert err.value.path == str(out) and "made with other settings" in err.value.reason
    assert out.read_bytes() == before
    # the same from lines written before grader_hash: told apart by their engine
    _strip_grader_hash(out)
    with GradingSession(f32, PROMPT, output=str(out)) as s, pytest.raises(InputError) as err:
        s.plan(*_units(f32))
    assert "computed by ctranslate2/int8; this run uses ctranslate2/float32" in err.value.reason
    # another model's grades are no reason to refuse, nor are grades of the same settings
    assert _grade(_EngineBackend("ctranslate2/float32", model="other"), out).graded > 0
    assert _grade(_EngineBackend("ctranslate2/int8"), out).in_output > 0


def test_resume_refuses_other_settings_and_regrades_changed_inputs(tmp_path):
    """Beams, token limits, a verifier, replaced weights: the back end's identity changes
    and a resume into the same file refuses; a passage whose text changed is regraded."""
    out = tmp_path / "g.jsonl"
    _grade(ScriptedBackend(script=lambda r, t: "4"), out)
    other = ScriptedBackend(script=lambda r, t: "4", window=5)  # cuts passages: other grades
    with GradingSession(other, PROMPT, output=str(out)) as s, pytest.raises(InputError, match="other settings"):
        s.plan(*_units(other))
    same = ScriptedBackend(script=lambda r, t: "4")
    units, n = _units(same)
    assert _grade(same, out).in_output == n
    edited = {k: engine.Unit(u.key, replace(u.request, context=u.request.context + " (edited)"), u.pairs)
              for k, u in list(units.items())[:1]}
    with GradingSession(same, PROMPT, output=str(out)) as s:
        plan = s.plan({**units, **edited}, n)
    assert plan.stats.units_to_grade == 1 and plan.stats.in_output == n - len(next(iter(edited.values())).pairs)


def test_lines_without_an_engine_count_as_torch(tmp_path):
    out = tmp_path / "g.jsonl"
    _grade(ScriptedBackend(script=lambda r, t: "4"), out)  # engine None: no "engine" field
    _strip_grader_hash(out)
    assert all("engine" not in json.loads(x) or json.loads(x)["engine"] is None
               for x in out.read_text().splitlines())
    torch_b = ScriptedBackend(script=lambda r, t: "4")
    torch_b.engine = "torch"
    assert _grade(torch_b, out).graded == 0  # resumed: everything already there
    ct2 = ScriptedBackend(script=lambda r, t: "4")
    ct2.engine = "ctranslate2/int8"
    with GradingSession(ct2, PROMPT, output=str(out)) as s, pytest.raises(InputError, match=r"torch \(not recorded\)"):
        s.plan(*_units(ct2))


class _Unloadable(ScriptedBackend):
    def load(self):
        raise OSError("model.safetensors: no such file\nsecond line of detail")


def test_a_model_that_cannot_load_is_one_line_and_nothing_is_written(tmp_path):
    out = tmp_path / "g.jsonl"
    with pytest.raises(InputError) as err:
        _grade(_Unloadable(model="my-model"), out)
    assert err.value.path == "my-model"
    assert err.value.reason == "cannot load model: model.safetensors: no such file"
    assert not out.exists()


def test_dry_run_changes_nothing(tmp_path):
    out = tmp_path / "g.jsonl"
    _grade(ScriptedBackend(script=lambda r, t: "4"), out)
    lines = out.read_text().splitlines()
    torn = "\n".join(lines[:5]) + "\n" + lines[5][:10]
    out.write_text(torn)
    cache = tmp_path / "absent.sqlite"
    with GradingSession(ScriptedBackend(), PROMPT, output=str(out), cache_path=str(cache), dry_run=True) as s:
        plan = s.plan(*_units(s.grader))
    assert plan.stats.in_output == 5 and plan.stats.pairs == len(lines)
    assert out.read_text() == torn and not cache.exists()


def test_an_output_replaced_while_its_run_loads_is_neither_written_nor_removed(tmp_path):
    """make SIGKILLed, its exam-grade left running; the next build's `rm -f` and a new run
    put another file at the path before the old run's first write. The old run must not
    append to the new file (one writer per output), nor remove it when it ends empty."""
    out = tmp_path / "g.jsonl"
    backend = ScriptedBackend(script=lambda r, t: "4")
    with GradingSession(backend, PROMPT, output=str(out)) as s:
        s.plan(*_units(backend))
        out.unlink()
        out.write_text("the other run's line\n")
        with pytest.raises(Exception) as err:
            s.run()
        assert "made anew while this run held it" in str(err.value)
    assert out.read_text() == "the other run's line\n"
    fresh = tmp_path / "k.jsonl"
    with GradingSession(backend, PROMPT, output=str(fresh)) as s2:
        s2.plan(*_units(backend))  # creates it, empty, and locks it
        fresh.unlink()
        fresh.write_text("")  # the other run's file, still empty when this one ends
    assert fresh.exists()
