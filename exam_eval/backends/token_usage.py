"""Token totals of a run's replies, as the server reported them (``usage`` in each reply).

One :class:`TokenUsage` is added to from many worker threads at once, and the totals of
several clients (a grader and its verifier, say) are merged for one report line.
"""

from __future__ import annotations

import threading

__all__ = ["TokenUsage"]

_FIELDS = ("prompt", "completion", "reasoning", "replies", "with_usage")


def _replies(n: int) -> str:
    return f"{n:,} {'reply' if n == 1 else 'replies'}"


class TokenUsage:
    """Totals over successful replies: ``prompt``, ``completion`` and ``reasoning`` tokens,
    ``replies`` (every successful reply) and ``with_usage`` (those that said their usage:
    a server need not, and the totals then cover only some replies)."""

    def __init__(self) -> None:
        self.prompt = 0
        self.completion = 0
        self.reasoning = 0
        self.replies = 0
        self.with_usage = 0
        self._lock = threading.Lock()

    def add(self, usage: dict | None) -> None:
        """One successful reply, with its ``usage`` dict (http_replies.usage_counts) or None."""
        with self._lock:
            self.replies += 1
            if usage:
                self.with_usage += 1
                self.prompt += usage.get("prompt_tokens", 0)
                self.completion += usage.get("completion_tokens", 0)
                self.reasoning += usage.get("reasoning_tokens", 0)

    def as_dict(self) -> dict[str, int]:
        """A consistent snapshot of the totals (a report's JSON, or a merge)."""
        with self._lock:
            return {name: getattr(self, name) for name in _FIELDS}

    def merge(self, other: TokenUsage) -> None:
        """Add another's totals to these."""
        theirs = other.as_dict()  # taken before our lock: two merging each other cannot deadlock
        with self._lock:
            for name, value in theirs.items():
                setattr(self, name, getattr(self, name) + value)

    def __bool__(self) -> bool:
        return self.replies > 0

    def __repr__(self) -> str:
        return f"TokenUsage({', '.join(f'{k}={v}' for k, v in self.as_dict().items())})"

    def line(self) -> str:
        """The totals as one line of a run's report."""
        t = self.as_dict()
        if not t["replies"]:
            return "tokens: no replies"
        if not t["with_usage"]:
            return f"tokens: the server reported no usage for {_replies(t['replies'])}"
        reasoning = f" ({t['reasoning']:,} reasoning)" if t["reasoning"] else ""
        text = (f"tokens: {t['prompt']:,} prompt, {t['completion']:,} completion{reasoning} over "
                f"{_replies(t['with_usage'])}")
        silent = t["replies"] - t["with_usage"]
        if silent:
            text += f" ({_replies(silent)} said no usage)"
        return text
