"""The console entry points (exam-grade = exam_eval.launch:grade, and bin/exam-eval): the
command's module is imported here, under a guard, so that Ctrl-C while its imports run
(before the command's own handling is in place) ends with one line and exit 130, not a
KeyboardInterrupt traceback; SIGTERM (``kill``, make, a batch system) is made the same
interrupt here, so that it too ends with that line rather than a silent death (exit 143)
before the command's handlers are in place. Nothing is imported at the top: this module
is the first."""

from __future__ import annotations

import functools
import importlib
import sys

EXIT_INTERRUPTED = 130  # as exam_eval.commands._base


def _term_as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def run(name: str, argv: list[str] | None = None) -> None:
    import signal

    signal.signal(signal.SIGTERM, _term_as_interrupt)
    try:
        main = importlib.import_module(f"exam_eval.commands.{name}").main
    except KeyboardInterrupt:
        print(f"exam-{name}: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except ModuleNotFoundError as exc:  # click itself, say: one line, not a traceback
        from .errors import EXIT_USAGE, missing_library

        print(f"exam-{name}: {missing_library(exc)}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    main(argv)


def __getattr__(name: str):
    """The console scripts (pyproject.toml's [project.scripts]): exam-qrels is launch:qrels,
    and so on for every module of exam_eval.commands whose name has no leading underscore;
    a new command needs no line here."""
    import importlib.util

    if name.startswith("_") or importlib.util.find_spec(f"exam_eval.commands.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return functools.partial(run, name)
