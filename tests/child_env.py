"""The environment a test gives the commands it starts, read when each child starts."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

# The start of ``python -c`` code for a child that a test sends Ctrl-C (SIGINT): the child
# takes it as at a terminal. A shell starts a script's background job (`make test &`,
# nohup, cron, some CI runners) with SIGINT ignored, every child inherits that, and the
# commands keep an ignored SIGINT ignored, as they should for a background job.
CTRL_C_REACHES = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "


class ChildEnv(Mapping):
    """``os.environ`` as it is at the moment a child starts, with ``fixed`` over it.

    A ``dict(os.environ, ...)`` built when a test module is imported holds the user's
    environment before any fixture ran, so its children missed what conftest.py and the
    fixtures set (a cache of the test's own, under its temporary folder) and wrote into
    the user's ~/.cache. subprocess, ``dict(ENV, ...)`` and ``{**ENV}`` all read a Mapping."""

    def __init__(self, **fixed: str):
        self.fixed = fixed

    def _now(self) -> dict[str, str]:
        return {**os.environ, **self.fixed}

    def __getitem__(self, key: str) -> str:
        return self._now()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())
