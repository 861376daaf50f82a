"""The check every refusal test makes: a command that refuses its input or its options
ends with one line on stderr, the exit status that says why (2 bad input, 1 a usage
error), and no traceback.

``one_line_refusal`` takes what either way of running a command gives back: the
in-process :class:`inproc.Result` (``code``, ``stdout``, ``stderr``, ``escaped``) or a
:class:`subprocess.CompletedProcess` (``returncode``, ``stdout``, ``stderr``).
"""

from __future__ import annotations


def one_line_refusal(res, prog: str | None = None, code: int = 2) -> str:
    """Assert that RES is a clean refusal and return its one line: exit status CODE,
    stderr exactly one non-empty line (starting with "PROG: " when PROG is given), no
    traceback; for an in-process result, no exception escaped the entry point."""
    escaped = getattr(res, "escaped", None)
    assert escaped is None, escaped
    status = res.returncode if hasattr(res, "returncode") else res.code
    assert status == code, (status, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].strip(), res.stderr
    if prog is not None:
        assert lines[0].startswith(f"{prog}: "), (prog, res.stderr)
    return lines[0]


def last_line_refusal(res, prog: str | None = None, code: int = 2) -> str:
    """As ``one_line_refusal``, for a command that may say notices first (a bank's ids
    given, a method left out): the refusal is stderr's last line, and it is returned."""
    escaped = getattr(res, "escaped", None)
    assert escaped is None, escaped
    status = res.returncode if hasattr(res, "returncode") else res.code
    assert status == code, (status, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert lines and lines[-1].strip(), res.stderr
    if prog is not None:
        assert lines[-1].startswith(f"{prog}: "), (prog, res.stderr)
    return lines[-1]
