"""One grading run from planned units to a closed output: what exam-grade, exam-nuggets
support and :func:`exam_eval.api.grade` share, so the three resume, refuse and recover alike.

A session, once its units are built:

1. takes the output's lock (one writer per file: a second process aimed at it is refused
   at once, naming the first), then resumes an existing output: cuts a torn last batch
   (a dry run only reads around it, and takes no lock), collects the grades already
   there and refuses to append grades of another engine or compute type to grades of the
   same model and prompt (int8 beside float32);
2. opens the grade cache (a dry run creates none) and plans the work;
3. on :meth:`GradingSession.run`, loads the models (a load failure is one
   :class:`InputError`), grades batch by batch behind a progress bar, and turns an
   interrupt (Ctrl-C, and SIGTERM where asked) into :class:`Interrupted` once every
   complete batch is on disk.

What the caller says about it (messages, exit codes) stays with the caller.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Callable

from ..errors import InputError
from ..progress import progress_bar
from . import engine
from .cache import CacheError, GradeCache, NullCache, known_identities, server_scoped
from .fitting import DeviceMemoryError
from .output import GradesAppender, OutputLock, existing_keys, repair


class Interrupted(KeyboardInterrupt):
    """Grading stopped by an interrupt after the last complete batch was written;
    ``written`` lines went to the output in this run. Still a KeyboardInterrupt, so a
    caller that does not look for it stops as it always did."""

    def __init__(self, written: int):
        super().__init__(written)
        self.written = written


def settings_difference(recorded: str, now: str) -> str:
    """Two back-end identities' differing parts (they are ``:``-joined settings)."""
    a, b = recorded.split(":"), now.split(":")
    gone, new = [x for x in a if x not in b], [x for x in b if x not in a]
    said = f"the grades there: {':'.join(gone) or 'no further setting'}; this run: {':'.join(new) or 'none of those'}"
    # a local model's files enter as a digest of their contents (backends.model_identity)
    return f"the model's files changed since, {said}" if any(x.startswith("files=") for x in gone + new) else said


def refuse_other_engine(output: str, recorded: set, engine_name: str | None, grader: str | None = None,
                        identities: Callable[[], set[str]] | None = None, identity: str | None = None) -> None:
    """A resume must not mix grades of other settings into a file under one model name:
    int8 beside float32, beam search beside greedy, another token limit, verifier or
    model files. ``recorded``: the (engine, grader_hash) pairs of the file's lines of this
    model and prompt. Lines that carry a grader_hash are compared on it (``grader``: this
    run's); older ones on their engine, where lines without one came from torch.
    ``identities``: the back-end identities a cache knows, asked only to name the setting
    that differs from this run's ``identity`` (lines carry its hash only)."""
    if not recorded:
        return
    others = {e for e, g in recorded if g is not None and g != grader} if grader is not None else set()
    if others:
        engines = sorted(e or "one engine" for e in others if e != engine_name)
        hashes = {g for _, g in recorded if g is not None and g != grader}
        known = [i for i in (identities() if identities and identity else ()) if engine.grader_hash(i) in hashes]
        if engines and engine_name:
            what, how = f"computed by {', '.join(engines)}; this run uses {engine_name}", \
                "--engine/--compute-type/--recheck-margin/--dtype"
        elif len(known) == 1:
            what, how = settings_difference(known[0], identity), "options"
        else:
            what, how = ("--dtype, --num-beams, --max-input-tokens, --max-tokens, --verify, -O options, or the "
                         "model's files changed since"), "options"
        raise InputError(f"holds grades of this model and prompt made with other settings ({what}): resume with the "
                         f"same {how}, or write to another -o", output)
    engines = {e for e, g in recorded if g is None}
    if engine_name is None or not engines:
        return
    legacy = "torch" if engine_name.startswith("torch") else None
    other = sorted(e or "torch (not recorded)" for e in engines if e != engine_name and not (e is None and legacy))
    if other:
        raise InputError(f"holds grades of this model and prompt computed by {', '.join(other)}; this run uses "
                         f"{engine_name}: resume with the same --engine/--compute-type/--recheck-margin/--dtype, or write to another -o",
                         output)


def _sigterm_as_interrupt(signum, frame):
    raise KeyboardInterrupt


def _models(grader) -> list:
    """The grading model and, where one is attached, the model verifying its answers."""
    verifier = getattr(grader, "verifier_backend", None)
    return [grader] if verifier is None else [grader, verifier]


class GradingSession:
    """``with GradingSession(grader, prompt, output=..., cache_path=...) as s:
    plan = s.plan(units, npairs); stats = s.run()``.

    ``output``: the grades file to resume and append to (None or "-": standard output,
    nothing to resume). ``cache_path``: the sqlite grade cache (None: no cache).
    ``dry_run``: plan only; neither the output nor the cache is created or changed.
    ``retry_unparsed``: the output's pairs whose last line is unparsed are graded again.
    ``log``: where a repaired output is reported (silent when None).
    """

    def __init__(self, grader, prompt, *, output: str | None = None, cache_path: str | None = None,
                 dry_run: bool = False, retry_unparsed: bool = False, log: Callable[[str], None] | None = None):
        self.grader = grader
        self.prompt = prompt
        self.output = output
        self.cache_path = cache_path
        self.dry_run = dry_run
        self.retry_unparsed = retry_unparsed
        self.log = log or (lambda msg: None)
        self.cache = None
        self.lock: OutputLock | None = None
        self.work: engine.Plan | None = None

    def __enter__(self) -> GradingSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    # -- planning -------------------------------------------------------------------------
    def _resume_keys(self) -> set[tuple]:
        out = self.output
        if not out or out == "-":
            return set()
        if not self.dry_run and (not os.path.exists(out) or os.path.isfile(out)):
            # a device or FIFO (-o /dev/stdout) is written in place: nothing to guard
            self.lock = OutputLock(out).acquire()
        if not os.path.exists(out):
            return set()
        if not self.dry_run:
            cut = repair(out)
            if cut:
                self.log(f"{out}: removed a torn last batch ({cut} bytes) left by an interrupted run")
        recorded: dict = {}
        done = existing_keys(out, read_only=self.dry_run, engines=recorded, retry_unparsed=self.retry_unparsed)
        identity = self.grader.cache_identity
        refuse_other_engine(out, recorded.get((self.grader.model_id, self.prompt.id), set()), self.grader.engine,
                            engine.grader_hash(identity), lambda: known_identities(self.cache_path), identity)
        return done

    def _open_cache(self):
        if self.cache_path is None or (self.dry_run and not os.path.exists(self.cache_path)):
            return NullCache()
        return server_scoped(GradeCache(self.cache_path), getattr(self.grader, "cache_server", ""))

    def plan(self, units: dict[str, engine.Unit], npairs: int) -> engine.Plan:
        """What the output and the cache already hold, and what is left to grade.
        Everything that can refuse does so here, before a model loads."""
        done = self._resume_keys()
        self.cache = self._open_cache()
        self.work = engine.plan_work(units, npairs, done, self.cache, self.grader.model_id, self.prompt,
                                     self.grader)
        return self.work

    # -- the work -------------------------------------------------------------------------
    def _load_models(self) -> None:
        for model in _models(self.grader):
            try:
                model.load()
            except (OSError, ValueError, RuntimeError) as exc:  # a library's own words, as one line
                raise InputError(f"cannot load model: {exc}".splitlines()[0], model.model_id or model.name) from None

    def run(self, *, sink=None, batch_size: int | None = None, progress: str | None = None,
            sigterm_interrupts: bool = False, on_ready: Callable[[], None] | None = None) -> engine.Stats:
        """Grade the plan into ``sink`` (default: the output, appended batch by batch).
        ``progress``: the progress bar's label (None: no bar). ``sigterm_interrupts``:
        SIGTERM (SLURM's time limit, ``kill``) stops like Ctrl-C; only from the main thread.
        ``on_ready``: called once the models are loaded, before the first batch (what a
        command writes besides the grades, so that a model that fails to load leaves
        nothing written). The models are closed afterwards, whatever happens."""
        if self.work is None:
            raise RuntimeError("GradingSession.run before plan")
        plan = self.work
        if sink is None:
            sink = GradesAppender(self.output, None if self.lock is None else self.lock.file_id())
        old_term = signal.signal(signal.SIGTERM, _sigterm_as_interrupt) if sigterm_interrupts else None
        try:
            if plan.units_todo:
                self._load_models()
            if on_ready is not None:
                on_ready()
            if progress is None:
                bar = contextlib.nullcontext(None)
            else:
                bar = progress_bar(sum(len(u.pairs) for u in plan.units_todo), progress, "pairs")
            with bar as b:
                return engine.execute(plan, self.grader, self.prompt, sink, self.cache, batch_size=batch_size,
                                      on_batch=None if b is None else b.advance)
        except KeyboardInterrupt:
            sink.close()
            raise Interrupted(sink.lines) from None
        except DeviceMemoryError as exc:
            if self.output in (None, "-") or not sink.lines:
                raise
            raise DeviceMemoryError(f"{exc}; the {sink.lines} grades written to {self.output} are kept, and the "
                                    "same command resumes after them") from None
        except CacheError as exc:  # the output was written before the cache: say it is whole
            if self.output in (None, "-"):
                raise CacheError(f"{exc.reason}; {sink.lines} grades went to standard output", exc.path) from None
            raise CacheError(f"{exc.reason}; the {sink.lines} grades written to {self.output} are kept, make room "
                             "(or use another cache) and run the same command again to resume", exc.path) from None
        finally:
            if old_term is not None:
                signal.signal(signal.SIGTERM, old_term)
            sink.close()
            for model in _models(self.grader):
                model.close()
