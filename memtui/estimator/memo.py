"""Small caches for the estimator's hot path, keyed by value.

Plans, models and architectures are frozen and hashable by value, so two equal plans share an
entry whoever built them. The lever list, the strategy table and the micro-batch search ask
for the same pieces many times per key press; the caches are bounded (cleared past 256
entries) so a long session never grows them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import TypeVar

T = TypeVar("T")
MAX_ENTRIES = 256


class BoundedCache:
    """`compute()` remembered per key; forgets everything past MAX_ENTRIES entries."""

    def __init__(self) -> None:
        self._entries: dict[Hashable, object] = {}

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        try:
            return self._entries[key]  # type: ignore[return-value]
        except KeyError:
            pass
        value = compute()
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = value
        return value


def memoised(fn: Callable[..., T]) -> Callable[..., T]:
    """Memoise a pure function of hashable arguments (its result must not be mutated by
    callers: return tuples or frozen values)."""
    return functools.lru_cache(maxsize=MAX_ENTRIES)(fn)  # type: ignore[return-value]
