"""A dispatch-mode tracker of live tensor storages, by phase and by class.

Every aten op's outputs pass through `__torch_dispatch__`; a storage seen for the first time
is an allocation (keyed by its StorageImpl, so views and shared storages count once) and a
weak reference on its Python object reports the free. The same code runs on real CPU tensors
and under FakeTensorMode, where nothing is allocated but every storage has its real size.

Two things a stack does outside new storages are followed too: a storage resized in place
(FSDP2 frees an unsharded parameter with `untyped_storage().resize_(0)` and allocates it again
with `resize_(size)`: torch/distributed/fsdp/_fully_shard/_fsdp_param.py free_storage,
alloc_storage), and copies of given tensors (`copies_of`: the bf16 copies of fp32 weights that
autocast makes with `aten._to_copy`, aten/src/ATen/autocast_mode.cpp cached_cast), which get a
class of their own.

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

    def __init__(
        self,
        classify: Callable[[torch.Tensor, str], str],
        known: Iterable[Any],
        copies_of: Iterable[torch.Tensor] = (),
        copy_class: str = "copies",
        apart: Iterable[str] = (),
    ):
        super().__init__()
        self.copy_class = copy_class
        self.apart = frozenset(apart)
        self.rest_peak = 0
        """Peak of the live bytes outside the `apart` classes (a stack's buffers): the
        activations' and logits' own peak, which may come at another moment than the peak."""
        self._sources = {storage_key(t) for t in copies_of}
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
        self._resize: Any = None
        self.inside: str | None = None
        """Set by the caller while a stack's own buffer code runs: the class of every storage
        allocated meanwhile (FSDP2's all-gather and reduce-scatter buffers)."""
        for t in known:
            self._remember(t)

    def __enter__(self) -> LiveTracker:
        tracker = self
        original = torch.UntypedStorage.resize_
        self._resize = original

        def resize_(storage: torch.UntypedStorage, size: int) -> Any:
            out = original(storage, size)
            tracker._resized(storage)
            return out

        torch.UntypedStorage.resize_ = resize_  # type: ignore[method-assign,assignment]
        return super().__enter__()  # type: ignore[no-any-return]

    def __exit__(self, *exc: Any) -> None:
        torch.UntypedStorage.resize_ = self._resize  # type: ignore[method-assign]
        super().__exit__(*exc)

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
        self.rest_peak = self._rest()

    def _rest(self) -> int:
        return self.current - sum(self.by_class[c] for c in self.apart)

    def _freed(self, key: int) -> None:
        entry = self.live.pop(key, None)
        if entry is not None:
            nbytes, cls = entry
            self.current -= nbytes
            self.by_class[cls] -= nbytes

    def _add(self, cls: str, nbytes: int) -> None:
        self.current += nbytes
        self.by_class[cls] += nbytes
        if self.by_class[cls] > self.class_peak[cls]:
            self.class_peak[cls] = self.by_class[cls]
        if self.current > self.peak:
            self.peak = self.current
            self.peak_by_class = dict(self.by_class)
        if self.apart and cls not in self.apart:
            self.rest_peak = max(self.rest_peak, self._rest())

    def _resized(self, storage: torch.UntypedStorage) -> None:
        """A storage resized in place: a live one changes size; a known one (allocated before
        entry, e.g. FSDP2's unsharded parameters) becomes live when it grows, classed by the
        phase (`classify` cannot see a tensor here)."""
        key = int(storage._cdata)
        nbytes = storage.nbytes()
        if key in self.live:
            old, cls = self.live[key]
            self.live[key] = (nbytes, cls)
            self.by_class[cls] -= old
            self.current -= old
            self._add(cls, nbytes)
        elif nbytes:
            self._known.discard(key)
            self._new(storage, key, self.resized_class())

    def resized_class(self) -> str:
        """The class of a storage that grows in place (override per stack)."""
        return self.inside or self.phase

    def _new(self, storage: torch.UntypedStorage, key: int, cls: str) -> None:
        nbytes = storage.nbytes()
        self.live[key] = (nbytes, cls)
        self._refs.append(weakref.ref(storage, self._on_free(key)))
        self._add(cls, nbytes)

    def adopt(self, t: torch.Tensor, cls: str) -> None:
        """Count a storage allocated before entry as live from now on, in class `cls` (the
        batch a data loader made before the step)."""
        storage = t.untyped_storage()
        key = int(storage._cdata)
        if key not in self.live:
            self._known.discard(key)
            self._new(storage, key, cls)

    def drop(self, t: torch.Tensor) -> None:
        """Stop counting a live storage (the caller counts it elsewhere: FSDP2's sharded
        gradients, counted with the static state)."""
        key = storage_key(t)
        self._freed(key)
        self._remember(t)

    def _track(self, t: torch.Tensor, copy: bool = False) -> None:
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse or opaque tensors
            return
        key = int(storage._cdata)
        if key in self.live or key in self._known:
            return
        cls = self.copy_class if copy else self.inside or self.classify(t, self.phase)
        self._new(storage, key, cls)

    def _copies_source(self, func: Any, args: Any) -> bool:
        """The op casts one of `copies_of` (autocast's weight cast is aten._to_copy)."""
        if not self._sources or func is not torch.ops.aten._to_copy.default:
            return False
        source = args[0] if args else None
        return isinstance(source, torch.Tensor) and storage_key(source) in self._sources

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        copy = self._copies_source(func, args)
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                self._track(leaf, copy)
        return out
