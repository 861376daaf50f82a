"""The console entry points (exam-grade = exam_eval.launch:grade, and bin/exam-*): the
command's module is imported here, under a guard, so that Ctrl-C while its imports run
(before the command's own handling is in place) ends with one line and exit 130, not a
KeyboardInterrupt traceback. Nothing is imported at the top: this module is the first."""

from __future__ import annotations

import importlib
import sys

EXIT_INTERRUPTED = 130  # as exam_eval.commands._base


def run(name: str, argv: list[str] | None = None) -> None:
    try:
        main = importlib.import_module(f"exam_eval.commands.{name}").main
    except KeyboardInterrupt:
        print(f"exam-{name}: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    main(argv)


def qrels() -> None:
    run("qrels")


def cover() -> None:
    run("cover")


def grade() -> None:
    run("grade")


def genq() -> None:
    run("genq")


def correlate() -> None:
    run("correlate")


def verify() -> None:
    run("verify")


def nuggets() -> None:
    run("nuggets")
