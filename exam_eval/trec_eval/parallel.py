"""Independent pieces of work spread over the machine's cores by ``fork``.

Each forked worker sees the parent's memory as it was (the read run, the qrels, the
built evaluators), copy on write, so nothing is sent to it; it sends back its results
(pickled, through a pipe). The parent works on the first share itself. A worker that
fails in any way (bad input, a signal, an exception) sends nothing usable, and the
parent redoes that share itself, in order: whatever error it meets is then raised in the
parent, exactly as without workers. How many: the idle cores (see :func:`worker_count`)
or ``EXAM_EVAL_WORKERS`` (1: none); without ``fork`` (Windows) the parent does it all.
"""

from __future__ import annotations

import os
import pickle
import time
from typing import Callable, Sequence, TypeVar

from ..errors import UsageError

T = TypeVar("T")
R = TypeVar("R")

_MAX_WORKERS = 8
_in_worker = False   # a worker does its share itself: no workers of workers
_sharing = False     # so does the parent while its workers run (they hold the other cores)
_LOOK_AGAIN_S = 1.0  # how long a look at the machine's load stands
_looked: tuple[float, float] | None = None


def _busy_cores() -> float:
    """How many cores other work is using: the smaller of the 1-minute load average and the
    processes running right now besides this one (/proc/loadavg's fourth field, on Linux).
    The average alone lags: after a burst of short processes (a Makefile's, a benchmark's)
    it still counts cores that are idle again; the snapshot alone misses work that is
    between two time slices. Both must say a core is busy for it to count as busy."""
    global _looked
    now = time.monotonic()
    if _looked is not None and now - _looked[0] < _LOOK_AGAIN_S:
        return _looked[1]
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 0.0
    others = _running_others()
    busy = load if others is None else min(load, others)
    _looked = (now, busy)
    return busy


def _running_others(samples: int = 5, gap_s: float = 0.001) -> int | None:
    """Threads running besides this process's own: the fewest of a few looks over a few ms
    (one look may catch a shell or a kernel thread in its time slice). Our own threads are
    not others: numpy's BLAS pool spins for a while after numpy is imported."""
    seen = []
    try:
        for k in range(samples):
            if k:
                time.sleep(gap_s)
            with open("/proc/loadavg", encoding="ascii") as fh:
                running = int(fh.read().split()[3].split("/")[0])
            seen.append(max(running - _own_running(), 0))
    except (OSError, ValueError, IndexError):
        return None
    return min(seen)


def _own_running() -> int:
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        count += stat[stat.rindex(")") + 2:stat.rindex(")") + 3] == "R"
    return max(count, 1)


def worker_count() -> int:
    """EXAM_EVAL_WORKERS if set, else the cores this process may use that are idle now
    (the cores less :func:`_busy_cores`, rounded): on a machine busy with other work a
    forked worker gets no core of its own, and only adds the cost of the fork."""
    if _in_worker or _sharing or not hasattr(os, "fork"):
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    env = os.environ.get("EXAM_EVAL_WORKERS", "").strip()
    if env:
        if not (env.isascii() and env.isdigit() and int(env) > 0):  # a typo fell back to the default unsaid
            raise UsageError(f"EXAM_EVAL_WORKERS={env!r}: give a whole number of processes, 1 or more")
        return min(int(env), _MAX_WORKERS)
    idle = int(cores - _busy_cores() + 0.5)
    return max(1, min(cores, idle, _MAX_WORKERS))


def _shares(costs: Sequence[float], n: int) -> list[range]:
    """n contiguous ranges of about equal total cost."""
    total = float(sum(costs)) or 1.0
    bounds, acc, k = [0], 0.0, 1
    for i, c in enumerate(costs):
        acc += c
        if k < n and acc >= total * k / n and i + 1 < len(costs):
            bounds.append(i + 1)
            k += 1
    bounds.append(len(costs))
    return [range(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def _child(fn: Callable[[T], R], items: Sequence[T], share: range, wfd: int) -> None:
    global _in_worker
    _in_worker = True
    status = 1
    try:
        data = pickle.dumps([fn(items[i]) for i in share], protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(wfd, "wb") as out:
            out.write(data)
        status = 0
    except BaseException:  # noqa: BLE001 - the parent redoes this share and reports
        pass
    finally:
        os._exit(status)  # no atexit handlers, no flushing of the parent's buffers


def fork_map(fn: Callable[[T], R], items: Sequence[T], costs: Sequence[float] | None = None) -> list[R]:
    """[fn(item) for item in items], the later shares in forked workers."""
    global _sharing
    n = min(worker_count(), len(items))
    if n <= 1:
        return [fn(item) for item in items]
    shares = _shares(costs if costs is not None else [1.0] * len(items), n)
    children = []
    try:
        for share in shares[1:]:
            rfd, wfd = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(rfd)
                _child(fn, items, share, wfd)
            os.close(wfd)
            children.append((pid, rfd, share))
        _sharing = True
        try:
            results = [fn(items[i]) for i in shares[0]]
        finally:
            _sharing = False
        for k, (pid, rfd, share) in enumerate(children):
            with os.fdopen(rfd, "rb") as inp:
                data = inp.read()
            _, status = os.waitpid(pid, 0)
            children[k] = (None, None, share)
            got = pickle.loads(data) if status == 0 and data else None
            if got is None or len(got) != len(share):
                got = [fn(items[i]) for i in share]   # raises here what the worker met
            results.extend(got)
        return results
    finally:
        for pid, rfd, _ in children:
            if pid is not None:
                try:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                except OSError:
                    pass
            if rfd is not None:
                try:
                    os.close(rfd)
                except OSError:
                    pass
