"""A labelling server (exam-verify label) as a user starts it: a real process, its URL read
from its first line of output, stopped by the test (SIGTERM, or SIGKILL to test the log)."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Iterator, Sequence

from child_env import ChildEnv


class Server:
    def __init__(self, proc: subprocess.Popen, url: str):
        self.proc = proc
        self.url = url            # the printed URL: the chooser page, or an assessor's page
        self.base = url.split("/a/")[0].rstrip("/") + "/"

    def api(self, assessor: str, action: str, body: dict | None = None) -> dict:
        url = f"{self.base}api/{assessor}/{action}"
        data = None if action == "state" else json.dumps(body or {}).encode()
        req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        _, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, err


def _first_line(proc: subprocess.Popen, timeout: float) -> str:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if sel.select(0.2):
            line = proc.stdout.readline()
            if line:
                return line.strip()
        if proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"no URL from exam-verify label (exit {proc.poll()}): {proc.stderr.read()}")


@contextlib.contextmanager
def serving(*args: str, timeout: float = 60, wrap: Sequence[str] = ()) -> Iterator[Server]:
    """``exam-verify label ARGS`` until the block ends (then SIGTERM, unless stopped already).
    WRAP: a command the server's command line is given to (strace, the bench's server of
    before)."""
    # SIGTERM stops it as Ctrl-C does; a background job's ignored SIGINT would not
    proc = subprocess.Popen([*wrap, sys.executable, "-m", "exam_eval.commands.verify", "label", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ChildEnv(),
                            start_new_session=True)
    server = Server(proc, _first_line(proc, timeout))
    try:
        yield server
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=30)
