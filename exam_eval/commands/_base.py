"""What every exam-* command shares: error handling, exit codes, common options.

Exit codes follow trec_eval: 0 success, 1 usage error, 2 bad input or an output that
cannot be written. Errors are one line on stderr (``exam-qrels: runs/a.run:12:
duplicate ...``, ``exam-qrels: out/x.qrels: cannot write: no such directory: out``),
never a traceback. Click's own usage errors exit 2 by default; we map them to 1. A closed
standard output (``exam-qrels ... | head``) ends the command silently by SIGPIPE, as it
ends trec_eval.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import stat
import sys
import threading
from typing import Callable, Iterator, NoReturn

import click

from .. import __version__
from ..errors import EXIT_INPUT, EXIT_USAGE, ExamEvalError, OutputClosed, UsageError, missing_library, printable
from ..io import unfinished
from ..io.outputs import StdoutGuard, check_database_file, check_output, existing_non_regular, silence_stdout
from ..progress import silence_library_progress

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C ended

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class FiniteRange(click.FloatRange):
    """click's FloatRange without nan and inf, which its comparisons let through (a
    socket timeout of nan was a traceback)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def fail(prog: str, message: str, code: int) -> NoReturn:
    click.echo(f"{prog}: {message}", err=True)
    sys.exit(code)


def stderr_log(prog: str):
    """A library call's ``log`` (notices as it reads) for a command: a line on stderr."""
    return lambda msg: print(f"{prog}: {msg}", file=sys.stderr)


def _say(prog: str, message: str) -> None:
    try:
        sys.stderr.write(f"{prog}: {printable(message)}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # stderr itself is gone: nothing to tell
        pass


def _os_error_line(exc: OSError) -> str:
    """Last resort for an OSError no reader or writer turned into a named error."""
    reason = exc.strerror or str(exc)
    if exc.filename is not None:
        where = os.fsdecode(exc.filename)
        if exc.filename2 is not None:
            where += " -> " + os.fsdecode(exc.filename2)
        return f"{where}: {reason}"
    return reason


def _end_by_sigpipe() -> NoReturn:
    """What trec_eval (any C filter) does when its reader goes away: die of SIGPIPE,
    silently; the shell sees status 141, `set -o pipefail` included."""
    import signal  # here, not at the top: building its enums costs every start-up

    silence_stdout()
    sys.stderr.flush()
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(0)


def _exit_interrupted(signum, frame) -> None:
    unfinished.remove_all()  # what the skipped endings would have removed: temp files, an empty -o
    os._exit(EXIT_INTERRUPTED)


def _signals(handler) -> None:
    import signal

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            # an ignored SIGINT stays ignored, as Python itself leaves it: a shell starts a
            # script's background job (`cmd &`, cron, some CI runners) with Ctrl-C ignored so
            # that the keyboard's interrupt, meant for the foreground, does not reach it
            if sig == signal.SIGINT and signal.getsignal(sig) == signal.SIG_IGN:
                continue
            signal.signal(sig, handler)


def _first_signal(signum, frame) -> None:
    _signals(_exit_interrupted)
    raise KeyboardInterrupt


def stop_on_signals() -> None:
    """For every command (run_guarded): Ctrl-C and SIGTERM (``kill``, SLURM's time limit)
    both interrupt, and only the first does: it raises KeyboardInterrupt, the work stops, finished grades are
    kept and the command reports; a second signal, wherever it lands in that ending, ends
    the process at once with status 130 instead of breaking in with a traceback. A kill
    at any moment is safe for the outputs (a torn last batch is cut on resume; the other
    outputs are renamed into place). A command started with SIGINT ignored (a background
    job of a script) keeps ignoring it; SIGTERM stops it all the same."""
    _signals(_first_signal)


@contextlib.contextmanager
def interrupted_says(prog: str, hint: str):
    """Around long work whose interrupt has more to say than "interrupted" (how to go on,
    what was kept): the line with ``hint``, exit status 130, and a further signal ends
    the process at once, as everywhere."""
    try:
        yield
    except KeyboardInterrupt:
        exit_on_next_signal()
        _say(prog, f"interrupted; {hint}")
        raise SystemExit(EXIT_INTERRUPTED) from None


def exit_on_next_signal() -> None:
    """Once interrupted: a further Ctrl-C or SIGTERM ends the process at once (status 130)."""
    _signals(_exit_interrupted)


def _ignore_signals() -> None:
    """The interpreter's own exit puts Python handlers back to the defaults (death by the
    signal, or a traceback from threading._shutdown); an interrupted command is ending
    anyway, so while it does, further signals are ignored."""
    import signal

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)


def run_guarded(prog: str, body: Callable[[], object]) -> NoReturn:
    """Run ``body`` as a command: one line and an exit code for every failure, stdout
    failures included (reported while we can still say so, not at interpreter exit).
    Ctrl-C and SIGTERM interrupt every command alike (:func:`stop_on_signals`): an output
    being written is not left as a temp file, and the exit status is 130."""
    stop_on_signals()
    silence_library_progress()
    guard = StdoutGuard()
    guard.install()
    code: object = 0
    closed = False
    try:
        try:
            rv = body()
            code = rv if isinstance(rv, int) else 0
        except SystemExit as exc:  # fail(), --help, argparse: flush what they printed too
            code = exc.code
        guard.flush()
    except OutputClosed:
        closed = True
    except ExamEvalError as exc:
        _say(prog, str(exc))
        for more in getattr(exc, "more_lines", list)():  # every problem, not only the first
            _say(prog, more)
        code = exc.exit_code
    except KeyboardInterrupt:
        exit_on_next_signal()
        _say(prog, "interrupted")
        code = EXIT_INTERRUPTED
    except OSError as exc:
        _say(prog, _os_error_line(exc))
        code = EXIT_INPUT
    except ModuleNotFoundError as exc:  # imported where first needed (pytrec_eval, torch)
        _say(prog, missing_library(exc))
        code = EXIT_USAGE
    finally:
        guard.restore()
    if closed:
        _end_by_sigpipe()
    if code == EXIT_INTERRUPTED:
        _ignore_signals()
    sys.exit(code)


#: a command's attribute: (input flag, output flag) pairs that may name one file, where
#: the command reads the input whole before it writes (exam-genq --merge-with BANK -o BANK)
IN_PLACE = "exam_eval_in_place"


def check_outputs_are_not_inputs(ctx: click.Context) -> None:
    """An output that is one of the files the command reads (``exam-qrels grades.jsonl -o
    grades.jsonl``, a link to it, a hard link) would be replaced while, or before, it is
    read: a usage error before any work, as two outputs naming one file are. Run when all
    of a command's parameters are parsed (:func:`make_main` puts it before every callback)."""
    outputs = ctx.meta.get("exam_eval.outputs") or {}
    refuse_inputs_as_outputs(ctx, outputs, allowed=getattr(ctx.command, IN_PLACE, ()))


def refuse_inputs_as_outputs(ctx: click.Context, outputs: dict[str, str], allowed=()) -> None:
    """Usage error where a file of ``outputs`` (path -> the flag writing it) is a file the
    command reads; also for outputs known only once the inputs are read (the run files that
    exam-grade --responses-run-out DIR names after the responses' run ids)."""
    written = {}
    inside: list[tuple[str, str]] = []  # (real path, flag) of each existing output file
    for path, flag in outputs.items():
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            continue  # not there yet: no input can be it
        if stat.S_ISREG(st.st_mode):
            written[(st.st_dev, st.st_ino)] = flag
            inside.append((os.path.realpath(path), flag))
    if not written:
        return
    for flag, v in _input_values(ctx):
        if str(v) == "-":
            continue
        try:
            st = os.stat(v)
        except (OSError, ValueError):
            continue
        out = written.get((st.st_dev, st.st_ino))
        if out is None and stat.S_ISDIR(st.st_mode):
            # a folder of inputs (--reports DIR, a folder of evaluations): a file in it is read
            folder = os.path.realpath(v) + os.sep
            out = next((f for real, f in inside if real.startswith(folder)), None)
        if out is not None and (flag, out) not in allowed:
            raise UsageError(f"{out} names a file the command reads ({flag} {v}): writing it would "
                             "replace its input; write to another file")


def check_stdin_read_once(ctx: click.Context) -> None:
    """Standard input can be read once: two inputs given as ``-`` (``exam-cover - -``)
    would leave the second empty, and its message ("run is empty") would mislead."""
    named = [flag for flag, v in _input_values(ctx) if str(v) == "-"]
    if len(named) > 1:
        raise UsageError(f"standard input (-) is given {len(named)} times ({', '.join(named)}): it can be read "
                         "once; give files for all but one")


def _input_values(ctx: click.Context) -> Iterator[tuple[str, str | os.PathLike]]:
    """(flag, value) of every path a command and the groups above it were given, outputs
    left out (:func:`claim_output` names them, "-" there being standard output)."""
    c: click.Context | None = ctx
    while c is not None:
        outputs = c.meta.get("exam_eval.output_params") or set()
        for param in c.command.params:
            value = c.params.get(param.name)
            if param.name in outputs or value is None:
                continue
            for v in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(v, (str, os.PathLike)) and str(v):
                    yield _flag(param), v
        c = c.parent


def _guard_callbacks(cmd: click.Command) -> None:
    """:func:`check_outputs_are_not_inputs` before the callback of ``cmd`` and of every
    subcommand (a group's own callback runs before its subcommand is parsed, so the
    subcommand's check is the one that sees everything)."""
    if cmd.callback is not None and not getattr(cmd.callback, "_exam_eval_guarded", False):
        body = cmd.callback

        @functools.wraps(body)
        def guarded(*args, **kwargs):
            check_outputs_are_not_inputs(click.get_current_context())
            check_stdin_read_once(click.get_current_context())
            return body(*args, **kwargs)

        guarded._exam_eval_guarded = True  # type: ignore[attr-defined]
        cmd.callback = guarded
    for sub in getattr(cmd, "commands", {}).values():
        _guard_callbacks(sub)


def make_main(cli: click.Command, prog: str) -> Callable[..., None]:
    """Entry point wrapper: runs the click command with our exit-code contract. Every
    command gets --version here (trec_eval has -v), so none can lack it."""
    _guard_callbacks(cli)
    if not any("--version" in getattr(p, "opts", ()) for p in cli.params):
        click.version_option(__version__, "--version", prog_name=prog, message="%(prog)s (exam_eval) %(version)s",
                             help="Print the version and exit.")(cli)

    def invoke(argv: list[str] | None) -> object:
        try:
            return cli.main(args=argv, prog_name=prog, standalone_mode=False)
        except click.exceptions.Exit as exc:  # --help, --version
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            fail(prog, "interrupted", EXIT_INTERRUPTED)
        except click.UsageError as exc:
            hint = ""
            if exc.ctx is not None:
                hint = f" (try '{exc.ctx.command_path} --help')"
            fail(prog, exc.format_message() + hint, EXIT_USAGE)
        except click.ClickException as exc:
            fail(prog, exc.format_message(), EXIT_INPUT)

    def main(argv: list[str] | None = None) -> None:
        run_guarded(prog, lambda: invoke(argv))

    return main


def _flag(param: click.Parameter) -> str:
    if isinstance(param, click.Option):
        return max(param.opts, key=len)
    return param.human_readable_name.strip("[]. ")  # "[RUN ...]" is the argument RUN


def claim_output(ctx: click.Context, param: click.Parameter, value):
    """Callback for every output of a command (-o, --plot, --assignments, --cache, ...): two
    of them naming one file would overwrite each other, or append grades to the cache's
    database, and the command would still exit 0; that is a usage error before any work.
    A device or FIFO (/dev/null) may take several."""
    ctx.meta.setdefault("exam_eval.output_params", set()).add(param.name)  # "-" there is stdout
    if value is None or str(value) in ("", "-") or ctx.resilient_parsing or existing_non_regular(value):
        return value
    claimed = ctx.meta.setdefault("exam_eval.outputs", {})
    key = os.path.realpath(value)
    flag = _flag(param)
    if claimed.get(key, flag) != flag:
        raise UsageError(f"{claimed[key]} and {flag} name the same file: {value}")
    claimed[key] = flag
    return value


def claim_cache(ctx: click.Context, param: click.Parameter, value):
    """Callback of --cache: with --no-cache (whichever comes second on the command line
    sees the other) which one the user meant cannot be guessed."""
    if value and ctx.params.get("no_cache"):
        raise UsageError(f"--cache {value} and --no-cache: give one of them")
    folder = os.path.dirname(os.path.abspath(value)) if value and not ctx.resilient_parsing else None
    if folder and not os.path.isdir(folder):  # a typo would make a new, empty cache and regrade all
        raise UsageError(f"--cache {value}: no such folder {folder} (the default cache's folder is made, "
                         "a given one must exist)")
    if folder:
        check_database_file(value, f"--cache {value}")
    return claim_output(ctx, param, value)


def check_no_cache(ctx: click.Context, param: click.Parameter, value):
    if value and ctx.params.get("cache_path"):
        raise UsageError(f"--cache {ctx.params['cache_path']} and --no-cache: give one of them")
    return value


def refuse_given(ctx: click.Context, names, why: str, *, short: bool = False) -> None:
    """Options of ``names`` given on the command line where they would change nothing:
    a usage error ("--depth is the pool depth of RUNs"), not a silent exit 0. ``short``:
    named by their short flag (exam-qrels' trec_eval flags: -q, -m)."""
    for param in ctx.command.params:
        if param.name in names and ctx.get_parameter_source(param.name) == click.core.ParameterSource.COMMANDLINE:
            raise UsageError(f"{min(param.opts, key=len) if short else _flag(param)} {why}")


def check_output_param(ctx: click.Context, param: click.Parameter, value):
    if value is not None and not ctx.resilient_parsing:
        check_output(value)  # before any input is read or model loaded
    return claim_output(ctx, param, value)


def check_appended_output(ctx: click.Context, param: click.Parameter, value):
    """Callback for an output that is appended to (exam-grade -o): checked at parsing."""
    if value is not None and not ctx.resilient_parsing:
        check_output(value, append=True)
    return claim_output(ctx, param, value)


def output_option(f):
    return click.option(
        "-o", "--output", "output", default=None, metavar="FILE", callback=check_output_param,
        help="Write results to FILE (atomically: temp file, then rename) instead of stdout; "
             "a missing folder or an unwritable FILE is an error before any work.",
    )(f)


def grader_options(f):
    """Which grades to use when a grades file holds several graders."""
    f = click.option("--kind", type=click.Choice(["question", "nugget"]), default=None,
                     help="Use only grades of bank items of this kind.")(f)
    f = click.option("--prompt", default=None, metavar="NAME",
                     help="Use only grades from this prompt (id or workbench prompt class).")(f)
    f = click.option("--model", default=None, metavar="NAME", help="Use only grades from this model.")(f)
    return f
