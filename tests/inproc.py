"""Run an exam-* command in this process, through its real entry point (``main``), as
fast tests of many inputs need: a subprocess costs a second of imports each time.

``run("qrels", "-m", "map", qrels, run)`` returns a :class:`Result`; an exception that
escapes the entry point (what a user would see as a traceback) is kept in ``escaped``.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import signal
import traceback
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


def run(prog: str, *args, stdin: str | None = None) -> Result:
    module = importlib.import_module("exam_eval.commands." + prog.removeprefix("exam-"))
    out, err = io.StringIO(), io.StringIO()
    code: object = None
    escaped = None
    # a command owns the process's signal handlers (a second Ctrl-C ends it at once); in
    # this process they must go back to pytest's afterwards
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            module.main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code
        except BaseException:  # noqa: BLE001 - what escapes main() is the finding
            escaped = traceback.format_exc()
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
    return Result(code, out.getvalue(), err.getvalue(), escaped)
