"""glibc's allocator told to keep freed memory for reuse, for numpy-heavy commands.

Scoring a run in numpy allocates and frees temporaries of a few MB thousands of times
(37 runs of a leaderboard: about 1.5 GB in all). glibc hands each freed block back to the
kernel, and the next one is page-faulted in again, zeroed page by page: on a leaderboard
that was a quarter of the time, in the kernel. A top pad makes it keep that much free
memory at the top of its heap instead (the peak is unchanged: the pad is reused, not added).
Elsewhere than glibc this is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_M_TOP_PAD = -2          # glibc's malloc.h
TOP_PAD = 64 << 20


def keep_freed_memory(pad: int = TOP_PAD) -> bool:
    """True when glibc took the setting."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(_M_TOP_PAD, ctypes.c_int(pad)))
    except (OSError, AttributeError):
        return False
