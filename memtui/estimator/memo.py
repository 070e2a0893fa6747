"""A small cache for the estimator's hot path, keyed by a model's identity plus settings.

Architectures hold a dict (module names), so they are not hashable; plans are replaced, not
mutated, and keep their model object, so the model's identity is a sound key as long as the
cache holds the model itself (an id is never reused while its object is alive).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")
_MAX = 256


class IdentityMemo:
    """Remembers `compute()` per (anchor object, key); forgets everything past 256 entries."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, Hashable], tuple[object, object]] = {}

    def get(self, anchor: object, key: Hashable, compute: Callable[[], T]) -> T:
        slot = (id(anchor), key)
        hit = self._entries.get(slot)
        if hit is not None and hit[0] is anchor:
            return hit[1]  # type: ignore[return-value]
        value = compute()
        if len(self._entries) >= _MAX:
            self._entries.clear()
        self._entries[slot] = (anchor, value)
        return value


def per_anchor(fn: Callable[..., T]) -> Callable[..., T]:
    """Memoise a pure function of (anchor, *hashable args, **hashable kwargs); the result
    must not be mutated by callers (return tuples)."""
    memo = IdentityMemo()

    @functools.wraps(fn)
    def wrapper(anchor: Any, *args: Hashable, **kwargs: Hashable) -> T:
        key = (args, tuple(sorted(kwargs.items())))
        return memo.get(anchor, key, lambda: fn(anchor, *args, **kwargs))

    return wrapper
