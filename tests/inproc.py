"""Run an exam-* command in this process, through its real entry point (``main``), as
fast tests of many inputs need: a subprocess costs a second of imports each time.

``run("qrels", "-m", "map", qrels, run)`` returns a :class:`Result`; an exception that
escapes the entry point (what a user would see as a traceback) is kept in ``escaped``
and, as Python would print it, on stderr with exit status 1.

What a subprocess gives a command, this gives it too, so that a test reads the same
answer either way: standard streams with bytes beneath them (``sys.stdout.buffer``),
stdin from a pipe (or /dev/null), ``sys.argv``, its own working directory and
environment, Python's default warning filters printed to its stderr, and library loggers
that write to its stderr. Left to a real process (``run_cli(..., process=True)``):
signals, a closed or full stdout, start-up imports and anything that needs fd 1 itself.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import signal
import subprocess
import sys
import threading
import traceback
import warnings
from dataclasses import dataclass


@dataclass
class Result:
    code: object
    stdout: str
    stderr: str
    escaped: str | None = None  # the traceback of an exception main() let through

    @property
    def last_line(self) -> str:
        lines = self.stderr.strip().splitlines()
        return lines[-1] if lines else ""

    @property
    def returncode(self) -> int:
        """The exit status a shell would see, as subprocess.CompletedProcess names it."""
        if self.escaped is not None:
            return 1
        if self.code is None:
            return 0
        return self.code if isinstance(self.code, int) else 1


# a command owns the process's signal handlers (a second Ctrl-C ends it at once); in this
# process they go back to pytest's afterwards
_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGPIPE", "SIGHUP") if hasattr(signal, name))


class _Stream(io.TextIOWrapper):
    """A text stream over bytes, as a pipe gives a child: text and ``.buffer`` writes land
    in order; never a terminal, no file descriptor."""

    def __init__(self, errors: str):
        super().__init__(io.BytesIO(), encoding="utf-8", errors=errors, write_through=True)

    def text(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode("utf-8", errors="replace")


def _show_warning(message, category, filename, lineno, file=None, line=None):
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


@contextlib.contextmanager
def _python_default_warnings():
    """Python's filters at start-up (no -W): deprecations shown only from __main__, the
    rest once per place, printed on stderr; pytest's own filters are set aside meanwhile."""
    with warnings.catch_warnings():
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.filterwarnings("ignore", category=category)
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
        warnings.showwarning = _show_warning
        yield


@contextlib.contextmanager
def _loggers_to(stream):
    """Library loggers (transformers, say) hold the stderr they found when set up; for the
    run they write to this one."""
    found = []
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for handler in getattr(logger, "handlers", ()):
            if type(handler) is logging.StreamHandler and handler.stream is not None:
                found.append((handler, handler.stream))
                handler.setStream(stream)
    try:
        yield
    finally:
        for handler, before in found:
            handler.setStream(before)


@contextlib.contextmanager
def _library_switches():
    """The progress-bar switches of huggingface_hub and transformers as a new process finds
    them (from HF_HUB_DISABLE_PROGRESS_BARS): a command turns them off
    (exam_eval.progress.silence_library_progress), and in a process of its own that ends
    with it. Entered outside :func:`_environment`, so the environment is the test's again."""
    try:
        yield
    finally:
        off = os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS", "").strip().upper() in ("1", "ON", "YES", "TRUE")
        hub = sys.modules.get("huggingface_hub.utils")
        if hub is not None:
            hub.disable_progress_bars() if off else hub.enable_progress_bars()
        hf = sys.modules.get("transformers.utils.logging")
        if hf is not None:
            hf.disable_progress_bar() if off else hf.enable_progress_bar()


@contextlib.contextmanager
def _stdin(data: str | bytes | None):
    """stdin as a child of subprocess.run(input=...) has it: a pipe that a thread fills and
    closes; /dev/null when nothing is given."""
    if data is None:
        with open(os.devnull, "rb") as raw:
            yield io.TextIOWrapper(raw, encoding="utf-8")
        return
    payload = data.encode() if isinstance(data, str) else data
    read_fd, write_fd = os.pipe()

    def fill():
        with open(write_fd, "wb") as w, contextlib.suppress(BrokenPipeError):
            w.write(payload)

    writer = threading.Thread(target=fill, daemon=True)
    writer.start()
    with open(read_fd, "rb") as raw:
        yield io.TextIOWrapper(raw, encoding="utf-8")
    writer.join(timeout=5)


@contextlib.contextmanager
def _environment(cwd, env):
    before_env, before_cwd = dict(os.environ), os.getcwd()
    try:
        if env:
            os.environ.update({k: str(v) for k, v in env.items()})
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(before_cwd)
        os.environ.clear()
        os.environ.update(before_env)


def run(prog: str, *args, stdin: str | bytes | None = None, cwd: str | os.PathLike | None = None,
        env: dict | None = None) -> Result:
    name = prog.removeprefix("exam-")
    module = importlib.import_module("exam_eval.commands." + name)
    out, err = _Stream("strict"), _Stream("backslashreplace")
    code: object = None
    escaped = None
    handlers = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    saved = sys.stdin, sys.stdout, sys.stderr, sys.argv
    argv = [str(a) for a in args]
    with _library_switches(), _environment(cwd, env), _stdin(stdin) as fake_stdin, _python_default_warnings(), \
            _loggers_to(err):
        sys.stdin, sys.stdout, sys.stderr, sys.argv = fake_stdin, out, err, [f"exam-{name}", *argv]
        try:
            module.main(argv)
        except SystemExit as exc:
            code = exc.code
            if code is not None and not isinstance(code, int):
                print(code, file=err)  # as Python prints a SystemExit that carries a message
        except BaseException:  # noqa: BLE001 - what escapes main() is the finding
            escaped = traceback.format_exc()
            err.write(escaped)
        finally:
            sys.stdin, sys.stdout, sys.stderr, sys.argv = saved
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
    return Result(code, out.text(), err.text(), escaped)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def command(prog: str, *args, input: str | None = None, cwd: str | os.PathLike | None = None,
            env=None, timeout: float = 600, process: bool = False) -> subprocess.CompletedProcess:
    """Run a command as a user would and answer as subprocess.run does (returncode, stdout,
    stderr): in this process through its entry point (:func:`run`: a second of imports, and
    torch's several, saved a call), or with ``process=True`` in a real subprocess, where
    what is under test is the process itself (signals, start-up imports, a closed stdout).
    ``env`` is put over the environment either way. The ``run_cli`` fixture is this."""
    argv = [str(a) for a in args]
    # ir_datasets reads IR_DATASETS_HOME once, when first imported: a home of the test's own
    # needs a process of its own
    if not process and "IR_DATASETS_HOME" not in (env or {}):
        res = run(prog, *argv, stdin=input, cwd=cwd, env=env)
        return subprocess.CompletedProcess([prog, *argv], res.returncode, res.stdout, res.stderr)
    module = "exam_eval.commands." + prog.removeprefix("exam-")
    cmd = [sys.executable, "-c", f"import {module} as m; m.main()", *argv]
    full_env = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    return subprocess.run(cmd, input=input, capture_output=True, text=True, cwd=cwd, env=full_env, timeout=timeout)
