"""Values derived from one qrels object, kept while a leaderboard scores many runs with it.

Keyed by the object's id and holding the object itself, so that the id cannot be reused
by another qrels while the entry lives; a few entries at most per store.
"""

from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T")
_ENTRIES = 8


def per_qrels(store: dict, qrels: object, key: tuple, build: Callable[[], T]) -> T:
    """``build()`` for (this qrels object, key), made once while the entry lasts."""
    full = (id(qrels), *key)
    hit = store.get(full)
    if hit is None or hit[0] is not qrels:
        if len(store) >= _ENTRIES:
            store.clear()
        hit = store[full] = (qrels, build())
    return hit[1]
