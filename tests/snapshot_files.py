"""Snapshot files in the exact structure PyTorch writes, for the forensics tests and the
benchmark (no tests here).

The CPU build of torch cannot record a CUDA snapshot: torch._C has no
`_cuda_record_memory_history` or `_cuda_memorySnapshot` there (tests/test_snapshot_real.py
checks that, and uses what the CPU build *can* produce: a snapshot converted from a
torch.profiler trace). So `FakeAllocator` plays PyTorch's caching allocator (the rules of
c10/cuda/CUDACachingAllocator.cpp that shape a snapshot: rounding to 512 bytes, small and
large pools, new segments of get_allocation_size, best-fit reuse of inactive blocks,
splitting, merging on free, releasing free segments before an OOM) and writes what
torch/csrc/cuda/Module.cpp `THCPModule_memorySnapshot` would: segments with blocks and
frames, `device_traces` with alloc / free_requested / free_completed / segment_alloc /
segment_free / oom entries, and `allocator_settings`. The tests compute what they expect
from what they allocated, not from this class, and torch's own _memory_viz reads the files.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MiB = 2**20
GiB = 2**30
SMALL = 1 * MiB


def frame(path: str, line: int, name: str) -> dict[str, Any]:
    """A Python frame as a CUDA snapshot records it (full path, line, function)."""
    return {"filename": f"/usr/lib/python3.11/site-packages/{path}", "line": line, "name": name}


def cpp(name: str) -> dict[str, Any]:
    """A C++ frame (stacks='all')."""
    return {"filename": "??", "line": 0, "name": name}


#: Stacks as real training code makes them, innermost frame first.
STACKS = {
    "weights": [
        frame("torch/nn/modules/module.py", 1341, "convert"),
        frame("torch/nn/modules/module.py", 942, "_apply"),
        frame("torch/nn/modules/module.py", 1355, "to"),
        frame("train.py", 40, "main"),
    ],
    "optimizer_states": [
        frame("torch/optim/adam.py", 178, "_init_group"),
        frame("torch/optim/adam.py", 214, "step"),
        frame("torch/optim/optimizer.py", 485, "wrapper"),
        frame("train.py", 60, "main"),
    ],
    "gradients": [
        cpp("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(...)"),
        cpp("at::native::empty_like(...)"),
        cpp("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor>&&)"),
        cpp("torch::autograd::Engine::evaluate_function(...)"),
        cpp("torch::autograd::Engine::thread_main(...)"),
    ],
    "activations": [
        frame("torch/nn/modules/linear.py", 125, "forward"),
        frame("torch/nn/modules/module.py", 1747, "_call_impl"),
        frame("transformers/models/llama/modeling_llama.py", 190, "forward"),
        frame("transformers/models/llama/modeling_llama.py", 580, "forward"),
        frame("transformers/models/llama/modeling_llama.py", 850, "forward"),
        frame("train.py", 55, "main"),
    ],
    "logits": [
        frame("torch/nn/functional.py", 3494, "cross_entropy"),
        frame("transformers/loss/loss_utils.py", 36, "fixed_cross_entropy"),
        frame("transformers/loss/loss_utils.py", 66, "ForCausalLMLoss"),
        frame("train.py", 56, "main"),
    ],
    "lm_head": [
        frame("torch/nn/modules/linear.py", 125, "forward"),
        frame("torch/nn/modules/module.py", 1747, "_call_impl"),
        frame("transformers/models/llama/modeling_llama.py", 850, "forward"),
        frame("train.py", 55, "main"),
    ],
    "transient": [
        frame("torch/optim/adam.py", 620, "_multi_tensor_adam"),
        frame("torch/optim/adam.py", 900, "adam"),
        frame("torch/optim/adam.py", 240, "step"),
        frame("train.py", 60, "main"),
    ],
    "unattributed": [frame("mylib/cache.py", 12, "build_cache"), frame("train.py", 30, "main")],
}


class OutOfMemory(Exception):
    pass


@dataclass
class _Block:
    addr: int
    size: int
    requested: int = 0
    state: str = "inactive"
    frames: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Segment:
    addr: int
    size: int
    small: bool
    blocks: list[_Block]


def round_size(n: int) -> int:
    return 512 if n < 512 else 512 * -(-n // 512)


def allocation_size(n: int) -> int:
    if n <= SMALL:
        return 2 * MiB
    if n < 10 * MiB:
        return 20 * MiB
    return 2 * MiB * -(-n // (2 * MiB))


class FakeAllocator:
    """One device's caching allocator, recording a trace as PyTorch does."""

    def __init__(self, capacity: int, *, device: int = 0, expandable: bool = False) -> None:
        self.capacity = capacity
        self.device = device
        self.expandable = expandable
        self.segments: list[_Segment] = []
        self.trace: list[dict[str, Any]] = []
        self._next_addr = 0x7F0000000000 + device * 0x10000000000
        self.time_us = 1_000_000

    @property
    def reserved(self) -> int:
        return sum(s.size for s in self.segments)

    def _record(self, **entry: Any) -> None:
        self.time_us += 10
        entry.setdefault("stream", 0)
        entry["time_us"] = self.time_us
        self.trace.append(entry)

    def malloc(self, requested: int, frames: list[dict[str, Any]]) -> int:
        size = round_size(requested)
        small = size <= SMALL
        block = self._best_fit(size, small)
        if block is None:
            need = allocation_size(size)
            if self.capacity - self.reserved < need:
                self._release_free_segments(frames)
            if self.capacity - self.reserved < need:
                self._record(
                    action="oom",
                    device_free=self.capacity - self.reserved,
                    size=size,
                    frames=frames,
                )
                raise OutOfMemory(size)
            seg = _Segment(self._next_addr, need, small, [_Block(self._next_addr, need)])
            self._next_addr += need + 64 * MiB
            self.segments.append(seg)
            self.segments.sort(key=lambda s: s.addr)
            self._record(action="segment_alloc", addr=seg.addr, size=need, frames=frames)
            block = seg.blocks[0]
        seg = self._segment_of(block.addr)
        remaining = block.size - size
        if (small and remaining >= 512) or (not small and remaining > SMALL):
            i = seg.blocks.index(block)
            seg.blocks.insert(i + 1, _Block(block.addr + size, remaining))
            block.size = size
        block.state, block.requested, block.frames = "active_allocated", requested, frames
        self._record(action="alloc", addr=block.addr, size=requested, frames=frames)
        return block.addr

    def free(self, addr: int, *, pending: bool = False) -> None:
        seg = self._segment_of(addr)
        block = next(b for b in seg.blocks if b.addr == addr)
        self._record(action="free_requested", addr=addr, size=block.requested, frames=block.frames)
        if pending:  # recorded on another stream: waits for its event
            block.state = "active_pending_free"
            return
        self._record(action="free_completed", addr=addr, size=block.requested, frames=block.frames)
        block.state, block.frames = "inactive", []
        i = seg.blocks.index(block)
        if i + 1 < len(seg.blocks) and seg.blocks[i + 1].state == "inactive":
            block.size += seg.blocks.pop(i + 1).size
        if i > 0 and seg.blocks[i - 1].state == "inactive":
            seg.blocks[i - 1].size += seg.blocks.pop(i).size

    def _segment_of(self, addr: int) -> _Segment:
        return next(s for s in self.segments if s.addr <= addr < s.addr + s.size)

    def _best_fit(self, size: int, small: bool) -> _Block | None:
        fits = [
            b
            for s in self.segments
            if s.small == small
            for b in s.blocks
            if b.state == "inactive" and b.size >= size
        ]
        return min(fits, key=lambda b: (b.size, b.addr), default=None)

    def _release_free_segments(self, frames: list[dict[str, Any]]) -> None:
        for seg in [s for s in self.segments if all(b.state == "inactive" for b in s.blocks)]:
            self.segments.remove(seg)
            self._record(action="segment_free", addr=seg.addr, size=seg.size, frames=frames)

    def segments_dicts(self) -> list[dict[str, Any]]:
        out = []
        for s in self.segments:
            blocks = []
            for b in s.blocks:
                blocks.append(
                    {
                        "address": b.addr,
                        "size": b.size,
                        "requested_size": b.requested if b.state != "inactive" else 0,
                        "state": b.state,
                        "frames": b.frames,
                    }
                )
            out.append(
                {
                    "device": self.device,
                    "address": s.addr,
                    "total_size": s.size,
                    "allocated_size": sum(
                        b.size for b in s.blocks if b.state == "active_allocated"
                    ),
                    "active_size": sum(b.size for b in s.blocks if b.state != "inactive"),
                    "requested_size": sum(
                        b.requested for b in s.blocks if b.state == "active_allocated"
                    ),
                    "stream": 0,
                    "segment_type": "small" if s.small else "large",
                    "segment_pool_id": (0, 0),
                    "is_expandable": self.expandable,
                    "frames": [],
                    "blocks": blocks,
                }
            )
        return out


def settings(expandable: bool = False, max_split_size: int = -1) -> dict[str, Any]:
    """`allocator_settings` as Module.cpp writes it (max_split_size -1: SIZE_MAX, no limit)."""
    return {
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True" if expandable else "",
        "max_split_size": max_split_size,
        "garbage_collection_threshold": 0.0,
        "expandable_segments": expandable,
        "pinned_num_register_threads": 1,
        "release_lock_on_cudamalloc": False,
        "pinned_use_cuda_host_register": False,
        "roundup_power2_divisions": {"1": 0, "2": 0, "4": 0},
    }


def snapshot_of(*allocators: FakeAllocator, expandable: bool = False) -> dict[str, Any]:
    devices = max(a.device for a in allocators) + 1
    traces: list[list[dict[str, Any]]] = [[] for _ in range(devices)]
    segments = []
    for a in allocators:
        traces[a.device] = a.trace
        segments.extend(a.segments_dicts())
    return {
        "segments": segments,
        "device_traces": traces,
        "allocator_settings": settings(expandable),
        "external_annotations": [],
    }


def write(path: Path, data: Any) -> Path:
    """Pickle `data` the way torch.cuda.memory._dump_snapshot does (pickle.dump)."""
    with path.open("wb") as f:
        pickle.dump(data, f)
    return path


@dataclass(frozen=True)
class OomScenario:
    """A job that fragments its segments, then fails a request that the free memory as a
    whole could hold: what the test expects, computed from what it allocated."""

    capacity: int = 7000 * MiB + 400 * MiB
    big: int = 500 * MiB
    smaller: int = 300 * MiB + 1
    failing: int = 600 * MiB
    n: int = 14

    def run(self, allocator: FakeAllocator) -> None:
        held = [allocator.malloc(self.big, STACKS["weights"]) for _ in range(self.n)]
        for addr in held[: self.n // 2]:
            allocator.free(addr)
        for _ in range(self.n // 2):  # each lands in a freed 500 MiB segment and splits it
            allocator.malloc(self.smaller, STACKS["optimizer_states"])
        try:
            allocator.malloc(self.failing, STACKS["logits"])
        except OutOfMemory:
            pass
        else:  # pragma: no cover - the scenario is built to fail
            raise AssertionError("the scenario's last request should not fit")
