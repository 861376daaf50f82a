"""Batches that fit the device's memory.

A batch that runs the device out of memory is graded in two halves instead (each split
again if it must), and every later batch is cut to half the size that failed: a run goes
on at the size the device allows, and says so at its end. One prompt that does not fit
alone ends the run with one line; the grades written before it stay, and a rerun resumes.

Why: on a GPU the engine batches by a token budget sized from the memory free when the
model loaded (hf_common.cuda_token_budget). That is an estimate. Another process may take
memory later, a model may keep more per token than the estimate says, and generation
keeps a cache that grows with every token. Before this, one batch too large ended a run
of hours with a traceback.

A back end says what running out of memory looks like (``out_of_memory(exc)``; torch's
OutOfMemoryError, CTranslate2's "out of memory") and may free what it holds before the
halves run (``release_memory()``). Back ends without the first are never split.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..errors import UsageError
from .types import InterruptedBatch, padded_width


class Batch(list):
    """A batch's units, with their prompts' token counts where the back end made them
    (``lengths``, None otherwise), padded to a multiple of ``multiple``."""

    def __init__(self, units: Sequence, lengths: Sequence[int] | None = None, multiple: int = 1):
        super().__init__(units)
        self.lengths = None if lengths is None else list(lengths)
        self.multiple = multiple

    @property
    def width(self) -> int | None:
        """The padded width, or None where not counted."""
        return padded_width(max(self.lengths), self.multiple) if self.lengths else None

    @property
    def tokens(self) -> int | None:
        """Padded tokens the batch holds, or None where not counted."""
        width = self.width
        return None if width is None else width * len(self)

    def halves(self) -> tuple[Batch, Batch]:
        mid, lengths = len(self) // 2, self.lengths
        return (Batch(self[:mid], lengths and lengths[:mid], self.multiple),
                Batch(self[mid:], lengths and lengths[mid:], self.multiple))


class BatchLimit:
    """The most a batch may hold: ``units``, and ``tokens`` (padded) where the back end
    batches by tokens. The prefetch thread reads it at each cut; the grading thread
    lowers it when the device runs out of memory (an int's assignment is atomic)."""

    def __init__(self, units: int, tokens: int | None = None):
        self.units = units
        self.tokens = tokens
        self.splits = 0  # batches graded in halves
        self.failed: int | None = None  # the smallest batch that ran out of memory (tokens or units)
        self.by_tokens = False

    def fits(self, batch: Batch) -> bool:
        tokens = batch.tokens
        if self.tokens and tokens is not None:
            return tokens <= self.tokens  # by tokens: ``units`` is only the chunks' size
        return len(batch) <= self.units

    def lower(self, batch: Batch) -> None:
        """``batch`` ran out of memory: later batches hold at most half of it."""
        self.splits += 1
        tokens = batch.tokens
        if tokens is not None:
            self.by_tokens = True
            self.failed = tokens if self.failed is None else min(self.failed, tokens)
            self.tokens = min(self.tokens or tokens, max(1, tokens // 2))
        else:
            self.failed = len(batch) if self.failed is None else min(self.failed, len(batch))
            self.units = max(1, min(self.units, len(batch) // 2))

    def note(self, fixed: str = "--batch-size N") -> str | None:
        """What the run should say at its end (None: no batch ran out of memory);
        ``fixed``: the option that sets a fixed batch size."""
        if not self.splits:
            return None
        if self.by_tokens:
            size, now = f"{self.failed:,} padded prompt tokens", f"at most {self.tokens:,} tokens"
        else:
            size, now = f"{self.failed:,} prompts", f"at most {self.units:,} prompts"
        return (f"the device ran out of memory at a batch of {size}: {self.splits} batch"
                f"{'es were' if self.splits > 1 else ' was'} run in halves and later batches held {now} "
                f"({fixed} sets a fixed size)")


def out_of_memory(backend, exc: Exception) -> bool:
    check = getattr(backend, "out_of_memory", None)
    return bool(check is not None and check(exc))


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _release(backend) -> None:
    release = getattr(backend, "release_memory", None)
    if release is not None:
        release()


def submit_fitting(backend, submit: Callable, batch: Batch, limit: BatchLimit, into: list) -> None:
    """Start ``batch`` (``submit(requests)`` returns the call that reads its results) and
    append ``(units, read)`` to ``into``: one entry, or several where the batch was split,
    in order. Each piece is appended once started, so an error later keeps what started."""
    if len(batch) > 1 and not limit.fits(batch):
        # cut before the limit was lowered (the prefetch thread runs ahead)
        for half in batch.halves():
            submit_fitting(backend, submit, half, limit, into)
        return
    try:
        into.append((batch, submit([u.request for u in batch])))
        return
    except InterruptedBatch as cut:
        cut.units = batch  # the units its results belong to (a piece, where the batch was split)
        raise
    except Exception as exc:
        if not out_of_memory(backend, exc):
            raise
        reason = _first_line(exc)
    _release(backend)  # past the handler: the exception, and the tensors its frames held, are gone
    if len(batch) == 1:
        width = batch.width
        raise DeviceMemoryError(
            f"the device ran out of memory on one prompt{f' of {width:,} tokens' if width else ''}, "
            f"alone in its batch ({reason}): free memory on the device, give a lower --max-input-tokens, "
            "or grade with a smaller model, another --dtype or another --device")
    limit.lower(batch)
    for half in batch.halves():
        submit_fitting(backend, submit, half, limit, into)


class TooLarge:
    """What :func:`call_fitting` returns for an item that ran the device out of memory
    alone (``reason``: the device's message)."""

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:
        return f"TooLarge({self.reason!r})"


def call_fitting(backend, call: Callable[[list], list], items: Sequence, limit: BatchLimit) -> list:
    """``call``'s results for ``items``, in order, at most ``limit.units`` items a call:
    the engine's splitting for callers that make their own calls (local generation of
    questions and of chat answers). A call that runs the device out of memory is made in
    halves, each split again if it must, and ``limit`` falls to half its size for the
    calls after it. An item that runs out of memory alone gets a :class:`TooLarge` in
    its place; the others are answered. Any other error is raised."""
    out: list = []
    start = 0
    while start < len(items):  # the limit may fall during a call: each piece is cut anew
        piece = list(items[start:start + max(1, limit.units)])
        out.extend(call_in_halves(backend, call, piece, limit))
        start += len(piece)
    return out


def call_in_halves(backend, call: Callable[[list], list], items: list, limit: BatchLimit) -> list:
    """:func:`call_fitting` for one piece of at most ``limit.units`` items."""
    # over the limit (the other half of a split made before the limit fell again): split unasked
    if len(items) <= max(1, limit.units):
        try:
            return list(call(items))
        except Exception as exc:
            if not out_of_memory(backend, exc):
                raise
            reason = _first_line(exc)
        _release(backend)  # past the handler, as in submit_fitting
        if len(items) == 1:
            return [TooLarge(reason)]
        limit.lower(Batch(items))
    mid = len(items) // 2
    return call_in_halves(backend, call, items[:mid], limit) + call_in_halves(backend, call, items[mid:], limit)


class DeviceMemoryError(UsageError):
    """One prompt does not fit the device's memory: not the input's fault, and nothing a
    smaller batch can mend (exit 1, as the other device problems)."""
