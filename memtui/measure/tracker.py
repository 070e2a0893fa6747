"""A dispatch-mode tracker of live tensor storages, by phase and by class.

Every aten op's outputs pass through `__torch_dispatch__`; a storage seen for the first time
is an allocation (keyed by its StorageImpl, so views and shared storages count once) and a
weak reference on its Python object reports the free. The same code runs on real CPU tensors
and under FakeTensorMode, where nothing is allocated but every storage has its real size.

Why not `torch.distributed._tools.mem_tracker.MemTracker`: it attributes memory per module
and per category (parameters, gradients, activations, temporaries, optimizer states) but
cannot tell the logits and loss buffers from the layers' saved activations, which are two
separate terms of the estimator; this tracker classifies each storage by its shape instead.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


def storage_key(t: torch.Tensor) -> int:
    """The identity of the tensor's StorageImpl (shared by all views of it)."""
    return int(t.untyped_storage()._cdata)


def storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind `tensors` (a shared storage counts once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        seen.setdefault(storage_key(t), t.untyped_storage().nbytes())
    return sum(seen.values())


class LiveTracker(TorchDispatchMode):
    """Live bytes allocated since entry, their peak, and the live bytes per class at the peak.

    `classify(tensor, phase)` names the class of a new storage; `phase` is set by the caller
    (forward, backward, step). Storages alive before entry are passed to `known` and ignored.
    """

    def __init__(self, classify: Callable[[torch.Tensor, str], str], known: Iterable[Any]):
        super().__init__()
        self.classify = classify
        self.phase = "forward"
        self.live: dict[int, tuple[int, str]] = {}
        self.by_class: Counter[str] = Counter()
        self.current = 0
        self.peak = 0
        self.peak_by_class: dict[str, int] = {}
        self.class_peak: Counter[str] = Counter()
        self._known: set[int] = set()
        self._refs: list[Any] = []
        for t in known:
            self._remember(t)

    def _remember(self, t: torch.Tensor) -> None:
        key = storage_key(t)
        if key in self._known:
            return
        self._known.add(key)
        self._refs.append(weakref.ref(t.untyped_storage(), self._forget(key)))

    def _forget(self, key: int) -> Callable[[Any], None]:
        def callback(_ref: Any) -> None:
            self._known.discard(key)

        return callback

    def _on_free(self, key: int) -> Callable[[Any], None]:
        def callback(_ref: Any) -> None:
            self._freed(key)

        return callback

    def reset_peak(self) -> None:
        """Start a new peak window (the live set carries over)."""
        self.peak = self.current
        self.peak_by_class = dict(self.by_class)
        self.class_peak = Counter(self.by_class)

    def _freed(self, key: int) -> None:
        entry = self.live.pop(key, None)
        if entry is not None:
            nbytes, cls = entry
            self.current -= nbytes
            self.by_class[cls] -= nbytes

    def _track(self, t: torch.Tensor) -> None:
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse or opaque tensors
            return
        key = int(storage._cdata)
        if key in self.live or key in self._known:
            return
        nbytes = storage.nbytes()
        cls = self.classify(t, self.phase)
        self.live[key] = (nbytes, cls)
        self._refs.append(weakref.ref(storage, self._on_free(key)))
        self.current += nbytes
        self.by_class[cls] += nbytes
        if self.by_class[cls] > self.class_peak[cls]:
            self.class_peak[cls] = self.by_class[cls]
        if self.current > self.peak:
            self.peak = self.current
            self.peak_by_class = dict(self.by_class)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                self._track(leaf)
        return out
