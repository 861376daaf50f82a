"""How many requests to have in flight at a server: the window the HTTP client adapts to
the latency of the replies (exam_eval.backends.http_client, "In flight", says how and
why): doubled each round trip while the latency holds, shrunk where each request waits
for more than about one other, halved at once by a timeout or a 429."""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

#: requests in flight before anything is known of the server: few enough that a server
#: answering one at a time keeps each within 4 of its service times
START_WINDOW = 4
#: the latency, relative to the fastest seen, up to which the window grows: 2 lets each
#: request wait for about one other (the server is never idle between requests)
TOLERANCE = 2.0
#: the most one round may grow or shrink the window by (doubling: slow start)
MAX_GAIN, MIN_GAIN = 2.0, 0.5
#: the most it grows by above the window a timeout or 429 left (TCP's ssthresh): near
#: the size that failed, carefully
CAREFUL_GAIN = 1.25
#: the replies, each the only request in flight, whose latency spread is taken as the
#: server's own (the last so many)
ALONE_REPLIES = 8


@dataclass(frozen=True)
class Slot:
    """A request on the wire: the window's round when it was sent, the time, and whether
    the window allowed no other request in flight with it."""

    round: int
    sent: float
    alone: bool = False


def _size(usage: dict[str, int] | None) -> tuple[tuple, int]:
    """A reply's size class and its work. Replies whose prompt and completion are within a
    factor of two of each other's are compared with each other only, per generated token
    (decoding is most of the time of a long answer, and a long answer is no sign of load)."""
    if not usage:
        return (), 1
    completion = usage["completion_tokens"]
    return (usage["prompt_tokens"].bit_length(), completion.bit_length()), completion + 1


class Window:
    """How many requests may be in flight (:attr:`allowed`, 1 to ``maximum``), adapted to
    the server's latency under load: a gradient limiter in the manner of TCP Vegas and
    Netflix's Gradient2, with slow start.

    Each answered request gives its latency (per generated token) relative to the fastest
    seen for replies of its size. Once per round (as many answers as the window allowed
    when the round began, one of them to a request sent in this round: about one round
    trip) the window is multiplied by ``TOLERANCE * excess / median ratio``, clamped to
    ``MIN_GAIN..MAX_GAIN``: flat latency doubles it; a server that queues (latency grows
    with the number in flight) settles at about ``TOLERANCE`` in flight. It grows only
    where it was used up (a run's tail says nothing of a larger window).

    A timeout or a 429 halves it at once, once per round: the requests sent before the cut
    report the window before it. Above the window a cut left, it grows by
    ``CAREFUL_GAIN`` a round at most (TCP's ssthresh: a queue that drained while the
    timeouts were waited out looks flat). A request that timed out is still counted in
    flight, as the server is still computing it, until a request sent after it is answered
    (a server that queues has finished it by then) or for as long again as it was waited
    for.

    ``excess`` (at first 1) guards a server whose replies differ in latency by more than
    their size says (no usage reported, prompts that hit a cache): there the median is
    many times the fastest at any load, and the window would shrink to 1 and stay. At one
    in flight nothing of ours queues, so the median ratio of the last ``ALONE_REPLIES``
    replies to requests sent alone is the server's own spread, and the window grows
    again until the latency is ``TOLERANCE`` times that.

    ``clock`` is injectable for tests; the callers' threads wait in :meth:`enter`.
    """

    def __init__(self, maximum: int, clock: Callable[[], float] = time.monotonic):
        self.maximum = maximum
        self.limit = float(min(START_WINDOW, maximum))
        self.in_flight = 0
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._fastest: dict[tuple, float] = {}  # the no-load seconds per token, per size class
        self._round = 0
        self._cut_round = 0  # the round a cut began: older requests cannot cut again
        self._round_size = self.allowed
        self._ratios: list[float] = []
        self._full = False
        self._alone: deque[float] = deque(maxlen=ALONE_REPLIES)
        self.excess = 1.0
        self._lingering: list[tuple[float, float]] = []  # timed-out requests: (sent, counted until)
        self._threshold = float("inf")  # the window the last cut left

    @property
    def allowed(self) -> int:
        return max(1, min(self.maximum, int(self.limit)))

    def try_enter(self) -> Slot | None:
        """A slot if the window has room now, else None."""
        with self._cond:
            return self._enter()

    def enter(self, stop: threading.Event) -> Slot | None:
        """A slot once the window has room; None once ``stop`` is set. Only worker threads
        wait here: the caller's thread must stay in its interruptible wait."""
        with self._cond:
            while not stop.is_set():
                slot = self._enter()
                if slot is not None:
                    return slot
                self._cond.wait(0.25)  # an interrupt sets stop without notifying: look again
        return None

    def answered(self, slot: Slot, usage: dict[str, int] | None = None) -> None:
        """A reply came; ``usage`` (its token counts) tells what size of work it was."""
        with self._cond:
            self._leave()
            self._end_lingering(lambda sent, until: sent < slot.sent)
            size, work = _size(usage)
            pace = max(self._clock() - slot.sent, 1e-9) / work
            fastest = self._fastest[size] = min(self._fastest.get(size, pace), pace)
            ratio = pace / fastest
            self._ratios.append(ratio)
            if slot.alone:
                self._alone.append(ratio)
                if len(self._alone) == ALONE_REPLIES:
                    self.excess = max(1.0, statistics.median(self._alone))
            if slot.round == self._round and len(self._ratios) >= self._round_size:
                self._adapt()

    def congested(self, slot: Slot, linger: float = 0.0) -> None:
        """The request timed out (``linger``: how long it was waited for) or was answered 429."""
        with self._cond:
            if linger > 0:
                self._lingering.append((slot.sent, self._clock() + linger))
            else:
                self._leave()
            if slot.round >= self._cut_round:
                self.limit = self._threshold = max(1.0, self.limit / 2)
                self._next_round()
                self._cut_round = self._round

    def release(self, slot: Slot) -> None:
        """The slot is given back with nothing learnt (another failure, or never used)."""
        with self._cond:
            self._leave()

    def _enter(self) -> Slot | None:
        if self._lingering:
            now = self._clock()
            self._end_lingering(lambda sent, until: until <= now)
        if self.in_flight >= self.allowed:
            return None
        self.in_flight += 1
        self._full = self._full or self.in_flight >= self.allowed
        return Slot(self._round, self._clock(), self.allowed == 1)

    def _leave(self) -> None:
        self.in_flight -= 1
        self._cond.notify(max(0, self.allowed - self.in_flight))

    def _end_lingering(self, over: Callable[[float, float], bool]) -> None:
        kept = [x for x in self._lingering if not over(*x)]
        for _ in range(len(self._lingering) - len(kept)):
            self._leave()
        self._lingering = kept

    def _adapt(self) -> None:
        ratio = statistics.median(self._ratios)
        most = MAX_GAIN if self.limit < self._threshold else CAREFUL_GAIN
        gain = min(most, max(MIN_GAIN, TOLERANCE * self.excess / ratio))
        if not self._full:
            gain = min(gain, 1.0)
        self.limit = min(float(self.maximum), max(1.0, self.limit * gain))
        self._next_round()
        self._cond.notify(max(0, self.allowed - self.in_flight))

    def _next_round(self) -> None:
        self._round += 1
        self._round_size = self.allowed
        self._ratios = []
        self._full = self.in_flight >= self.allowed
