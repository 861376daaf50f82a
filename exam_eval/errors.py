"""Errors that the command layer turns into one line and an exit code.

trec_eval's convention: 1 for a usage error, 2 for bad input. Everything that reads a
user's file raises InputError with the file and (1-based) line so the message can say
exactly where to look.
"""

from __future__ import annotations

EXIT_USAGE = 1
EXIT_INPUT = 2


def missing_library(exc: ModuleNotFoundError) -> str:
    """The one line for a library this Python lacks (a checkout's commands run with the
    python3 first on PATH, not the one ``make install`` set up)."""
    import sys

    return (f"the library {exc.name or exc} is not installed in {sys.executable}: run `make install` in the "
            "checkout and use its .venv/bin/exam-* (or pip install the package into this Python)")


def printable(text: str) -> str:
    """``text`` as one printable line: a newline, NUL or lone surrogate taken from the
    input (an id, a file name) is shown escaped, never written raw to the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


#: the longest reason a message repeats whole: a value quoted from the input (a 10 MB field)
#: is cut in the middle beyond it, so that the one line stays one readable line
MAX_REASON = 1000


def elide(text: str, limit: int = MAX_REASON) -> str:
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}...[{len(text) - 2 * keep:,} characters left out]...{text[-keep:]}"


class ExamEvalError(Exception):
    exit_code = EXIT_INPUT


class InputError(ExamEvalError):
    """Bad input data: rendered as ``file:line: reason``."""

    exit_code = EXIT_INPUT

    def __init__(self, reason: str, path: str | None = None, line: int | None = None, *,
                 also: tuple[str, ...] | list[str] = ()):
        self.reason = reason
        self.path = path
        self.line = line
        #: the further problems found at the same place (a report that fails several
        #: checks); ``reason`` says how many, the commands list them after the first line
        self.also = tuple(also)
        if self.also:
            self.reason = f"{reason} (and {len(self.also)} more problem{'s' if len(self.also) > 1 else ''})"
        super().__init__(self.render())

    def where(self) -> str:
        if self.path is None:
            return ""
        return str(self.path) + (f":{self.line}" if self.line is not None else "") + ": "

    def render(self) -> str:
        return printable(self.where() + elide(self.reason))

    def more_lines(self) -> list[str]:
        """One line per further problem, each naming the file and line again."""
        return [printable(f"{self.where()}also: {elide(problem)}") for problem in self.also]

    @classmethod
    def of_problems(cls, problems: list[str], path: str | None = None, line: int | None = None,
                    prefix: str = "") -> "InputError":
        """The error for a list of problems: the first in the message, the others listed."""
        return cls(prefix + problems[0], path, line, also=problems[1:])


class UsageError(ExamEvalError):
    """The command line itself is wrong (unknown measure, conflicting options)."""

    exit_code = EXIT_USAGE


class OutputError(InputError):
    """An output cannot be written (missing folder, no permission, disk full): rendered
    ``file: reason`` like bad input, and with the same exit status (2)."""


class OutputClosed(BaseException):
    """The reader of standard output (or of a FIFO given as ``-o``) went away, as in
    ``exam-qrels ... | head``. Not an Exception: nothing may catch it on the way up and
    carry on writing; the entry point ends the process quietly, as trec_eval does."""
