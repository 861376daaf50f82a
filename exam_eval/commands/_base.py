"""What every exam-* command shares: error handling, exit codes, common options.

Exit codes follow trec_eval: 0 success, 1 usage error, 2 bad input. Errors are one
line on stderr (``exam-qrels: runs/a.run:12: duplicate ...``), never a traceback.
Click's own usage errors exit 2 by default; we map them to 1.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

import click

from ..errors import EXIT_INPUT, EXIT_USAGE, ExamEvalError

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def fail(prog: str, message: str, code: int) -> "NoReturn":  # noqa: F821
    click.echo(f"{prog}: {message}", err=True)
    sys.exit(code)


def make_main(cli: click.Command, prog: str) -> Callable[..., None]:
    """Entry point wrapper: runs the click command with our exit-code contract."""

    def main(argv: list[str] | None = None) -> None:
        try:
            rv = cli.main(args=argv, prog_name=prog, standalone_mode=False)
        except click.exceptions.Exit as exc:  # --help, --version
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            fail(prog, "interrupted", 130)
        except click.UsageError as exc:
            hint = ""
            if exc.ctx is not None:
                hint = f" (try '{exc.ctx.command_path} --help')"
            fail(prog, exc.format_message() + hint, EXIT_USAGE)
        except click.ClickException as exc:
            fail(prog, exc.format_message(), EXIT_INPUT)
        except ExamEvalError as exc:
            fail(prog, str(exc), exc.exit_code)
        except KeyboardInterrupt:
            fail(prog, "interrupted", 130)
        except BrokenPipeError:
            # `exam-qrels ... | head`: not an error; silence the flush at exit too
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(0)
        sys.exit(rv if isinstance(rv, int) else 0)

    return main


def output_option(f):
    return click.option(
        "-o", "--output", "output", default=None, metavar="FILE",
        help="Write results to FILE (atomically: temp file, then rename) instead of stdout.",
    )(f)


def grader_options(f):
    """Which grades to use when a grades file holds several graders."""
    f = click.option("--kind", type=click.Choice(["question", "nugget"]), default=None,
                     help="Use only grades of bank items of this kind.")(f)
    f = click.option("--prompt", default=None, metavar="NAME",
                     help="Use only grades from this prompt (id or workbench prompt class).")(f)
    f = click.option("--model", default=None, metavar="NAME", help="Use only grades from this model.")(f)
    return f
