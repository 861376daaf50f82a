"""Run ``exam-qrels`` on many argument lists, each in its own forked process.

Used by the trec_eval parity tests: starting one Python per case would take minutes
for the 1,296 recorded cases, so this process imports the command once and forks a
child per case. The child runs the real entry point (``exam_eval.commands.qrels.main``)
with its stdout and stderr on files, exactly as a shell would see them, and the parent
reports how it ended: exit status, or the signal that killed it (a segfault in C code
must show up as such, not be hidden by an in-process call).

stdin: a JSON list of argument lists. stdout: a JSON list of
``{"exit": int | null, "signal": int | null, "stdout": str, "stderr": str}``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback


def run_one(entry, args: list[str]) -> dict:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # child: never returns
            code = 1
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                try:
                    entry(args)
                    code = 0
                except SystemExit as exc:
                    if exc.code is None:
                        code = 0
                    elif isinstance(exc.code, int):
                        code = exc.code
                    else:
                        print(exc.code, file=sys.stderr)
                        code = 1
                except BaseException:  # what the interpreter would print
                    traceback.print_exc()
                    code = 1
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return {
            "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "stdout": out.read().decode("utf-8", "replace"),
            "stderr": err.read().decode("utf-8", "replace"),
        }


def verdict(trec_exit: int, trec_stdout: str, trec_stderr: str, ours: dict) -> str | None:
    """None when ``ours`` answers as the parity rules ask, else what is wrong.

    trec_eval exit 0: same bytes. Refused (4, 7): exit 2, no stdout, one stderr line that
    carries trec_eval's message (its last line). Stopped on its input or command line
    (any other exit status): exit 1 or 2, no stdout, one stderr line. Crashed (a signal,
    recorded as a negative exit): exit 0 or 2. Never a signal or a traceback.
    """
    if ours["signal"] is not None:
        return f"killed by signal {ours['signal']}"
    if "Traceback" in ours["stderr"]:
        return "traceback on stderr"
    if trec_exit == 0:
        if ours["exit"] != 0:
            return f"exit {ours['exit']} where trec_eval succeeded: {ours['stderr'].strip()}"
        return None if ours["stdout"] == trec_stdout else "stdout differs"
    if trec_exit in (4, 7):
        lines = ours["stderr"].splitlines()
        said = (trec_stderr.strip().splitlines() or [""])[-1].split(": ", 1)[-1]
        if ours["exit"] != 2 or ours["stdout"] or len(lines) != 1 or said not in lines[0]:
            return f"refusal differs: exit {ours['exit']}, stderr {ours['stderr']!r}, trec_eval said {said!r}"
        return None
    if trec_exit > 0:
        if ours["exit"] not in (1, 2) or ours["stdout"] or len(ours["stderr"].splitlines()) != 1:
            return f"trec_eval stopped (exit {trec_exit}: {trec_stderr.strip()!r}); we gave exit {ours['exit']}, " \
                   f"stderr {ours['stderr']!r}"
        return None
    if ours["exit"] not in (0, 2) or (ours["exit"] == 2 and len(ours["stderr"].splitlines()) != 1):
        return f"exit {ours['exit']} where trec_eval crashed"
    return None


def main() -> None:
    # Loaded once here rather than in every child (exam-qrels imports it lazily when it
    # scores); the children still run the whole command.
    import pytrec_eval  # noqa: F401

    from exam_eval.commands.qrels import main as entry

    jobs = json.load(sys.stdin)
    results = [run_one(entry, args) for args in jobs]
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
