"""The summary of snapshots written in PyTorch's exact structure, checked against what each
test allocated and against torch's own torch/cuda/_memory_viz.py reading the same file."""

from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path

import pytest
from snapshot_files import (
    STACKS,
    FakeAllocator,
    MiB,
    OomScenario,
    OutOfMemory,
    round_size,
    settings,
    snapshot_of,
    write,
)

from memtui.forensics import read_summary
from memtui.forensics.model import UNATTRIBUTED
from memtui.forensics.reader import SnapshotError

has_torch = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not has_torch, reason="torch not installed")


def _scenario(tmp_path: Path, expandable: bool = False) -> tuple[Path, OomScenario]:
    sc = OomScenario()
    a = FakeAllocator(sc.capacity)
    sc.run(a)
    return write(tmp_path / "oom.pickle", snapshot_of(a, expandable=expandable)), sc


def test_an_oom_after_fragmentation_is_called_fragmentation(tmp_path: Path) -> None:
    path, sc = _scenario(tmp_path)
    d = read_summary(path).devices[0]
    half = sc.n // 2
    # expected from what the scenario allocated, not from the file
    live_requested = half * sc.big + half * sc.smaller
    live_blocks = half * sc.big + half * round_size(sc.smaller)
    assert d.reserved == sc.n * sc.big  # every 500 MiB segment is still partly in use
    assert d.requested == live_requested
    assert d.allocated == live_blocks
    assert d.free_internal == half * (round_size(sc.smaller) - sc.smaller)
    assert d.free_external == half * (sc.big - round_size(sc.smaller))
    assert d.inactive_blocks == half
    assert d.largest_free_block == sc.big - round_size(sc.smaller)
    assert d.awaiting_free == 0
    # the allocator's identities
    assert d.allocated == d.requested + d.free_internal
    assert d.reserved == d.allocated + d.awaiting_free + d.free_external
    # the failed request and what CUDA had
    assert d.oom is not None and d.ooms == 1
    assert d.oom.requested == sc.failing
    assert d.oom.device_free == sc.capacity - sc.n * sc.big
    assert d.oom.live == live_requested and d.oom.reserved == sc.n * sc.big
    assert d.oom.term == "logits"
    kinds = [f.kind for f in d.findings]
    assert "fragmentation" in kinds
    frag = next(f for f in d.findings if f.kind == "fragmentation")
    assert "caused this OOM" in frag.text and frag.figure == d.free_external
    advice = [f for f in d.findings if f.kind == "advice"]
    assert advice and "expandable_segments:True" in advice[0].text
    # the timeline: peak when all 14 big tensors were live
    tl = d.timeline
    assert tl is not None and tl.peak == sc.n * sc.big
    assert d.peak_allocated == sc.n * sc.big and tl.oom_indices == (tl.events - 1,)
    # attribution: the big tensors came from Module.to, the smaller from Adam's _init_group
    assert d.at_snapshot is not None and d.at_peak is not None and d.at_oom is not None
    assert d.at_snapshot.by_term["weights"] == half * sc.big
    assert d.at_snapshot.by_term["optimizer_states"] == half * round_size(sc.smaller)
    assert d.at_snapshot.total == d.allocated
    assert d.at_peak.by_term["weights"] == sc.n * sc.big
    assert d.at_oom.by_term["optimizer_states"] == half * sc.smaller


def test_with_expandable_segments_on_the_advice_changes(tmp_path: Path) -> None:
    path, _ = _scenario(tmp_path, expandable=True)
    s = read_summary(path)
    assert s.settings.expandable_segments is True and s.settings.max_split_size is None
    texts = " ".join(f.text for f in s.devices[0].findings)
    assert "already on" in texts and "set PYTORCH_CUDA_ALLOC_CONF" not in texts


def test_a_real_shortage_is_not_called_fragmentation(tmp_path: Path) -> None:
    a = FakeAllocator(2048 * MiB)
    for _ in range(3):
        a.malloc(600 * MiB, STACKS["activations"])
    with pytest.raises(OutOfMemory):
        a.malloc(1024 * MiB, STACKS["activations"])
    d = read_summary(write(tmp_path / "s.pickle", snapshot_of(a))).devices[0]
    assert d.oom is not None and d.free_external == 0
    text = " ".join(f.text for f in d.findings)
    assert "not fragmentation" in text
    assert "halve the micro-batch" in text and "activation checkpointing" in text
    short = next(f for f in d.findings if "not fragmentation" in f.text)
    assert short.figure == 1024 * MiB - (2048 - 1800) * MiB


def test_blocks_awaiting_other_streams_keep_the_identities(tmp_path: Path) -> None:
    a = FakeAllocator(8 * 2**30)
    keep = a.malloc(100 * MiB, STACKS["activations"])
    waiting = a.malloc(50 * MiB + 7, STACKS["transient"])
    a.free(waiting, pending=True)
    small = [a.malloc(1000, STACKS["unattributed"]) for _ in range(3)]
    a.free(small[1])
    d = read_summary(write(tmp_path / "p.pickle", snapshot_of(a))).devices[0]
    assert d.awaiting_free == round_size(50 * MiB + 7)
    assert d.allocated == 100 * MiB + 2 * round_size(1000)
    assert d.requested == 100 * MiB + 2 * 1000
    assert d.reserved == d.allocated + d.awaiting_free + d.free_external
    assert d.allocated == d.requested + d.free_internal
    assert keep != waiting
    # the pending block is still live in the trace's books (no free_completed yet)
    assert d.timeline is not None and d.at_peak is not None
    assert d.at_snapshot is not None
    assert d.at_snapshot.by_term[UNATTRIBUTED] == 2 * round_size(1000)


def test_devices_are_summarised_apart_and_can_be_chosen(tmp_path: Path) -> None:
    a0, a1 = FakeAllocator(2**33, device=0), FakeAllocator(2**33, device=1)
    a0.malloc(30 * MiB, STACKS["weights"])
    a1.malloc(70 * MiB, STACKS["gradients"])
    path = write(tmp_path / "two.pickle", snapshot_of(a0, a1))
    s = read_summary(path)
    assert [d.device for d in s.devices] == [0, 1]
    assert [d.allocated for d in s.devices] == [30 * MiB, 70 * MiB]
    assert s.devices[1].at_snapshot is not None
    assert s.devices[1].at_snapshot.by_term["gradients"] == 70 * MiB  # AccumulateGrad (C++)
    assert [d.device for d in read_summary(path, device=1).devices] == [1]
    with pytest.raises(SnapshotError, match=r"no device 3 .*devices: 0, 1"):
        read_summary(path, device=3)


def test_history_older_than_the_trace_is_accounted(tmp_path: Path) -> None:
    # the ring buffer kept only the last events: allocations made before them are live at
    # the start of the timeline, and frees of them appear without their alloc
    a = FakeAllocator(2**33)
    old = [a.malloc(40 * MiB, STACKS["weights"]) for _ in range(3)]
    a.trace.clear()  # what max_entries does to the oldest events
    a.free(old[0])
    a.malloc(10 * MiB, STACKS["activations"])
    d = read_summary(write(tmp_path / "ring.pickle", snapshot_of(a))).devices[0]
    tl = d.timeline
    assert tl is not None
    assert tl.start_allocated == 3 * 40 * MiB
    assert tl.peak == 3 * 40 * MiB  # before the first recorded event
    assert d.at_peak is not None and d.at_peak.by_term["weights"] == 3 * 40 * MiB


def test_lm_head_and_loss_are_logits_and_layers_are_activations(tmp_path: Path) -> None:
    a = FakeAllocator(2**34)
    a.malloc(64 * MiB, STACKS["lm_head"])
    a.malloc(32 * MiB, STACKS["logits"])
    a.malloc(16 * MiB, STACKS["activations"])
    a.malloc(8 * MiB, STACKS["transient"])
    d = read_summary(write(tmp_path / "l.pickle", snapshot_of(a))).devices[0]
    assert d.at_snapshot is not None
    by = d.at_snapshot.by_term
    assert by["logits"] == 96 * MiB
    assert by["activations"] == 16 * MiB and by["transient"] == 8 * MiB
    rules = {r for _, r, _ in d.at_snapshot.by_rule}
    assert "lm_head (Linear called by the outermost model forward)" in rules


@needs_torch
def test_torch_memory_viz_reads_the_files_and_agrees(tmp_path: Path) -> None:
    """torch/cuda/_memory_viz.py (nobody here wrote it) reads the same file: segsum checks the
    segment accounting and reports the totals, trace walks every entry."""
    from torch.cuda import _memory_viz as mv

    path, _ = _scenario(tmp_path)
    data = pickle.loads(path.read_bytes())
    d = read_summary(path).devices[0]
    out = mv.segsum(data)  # raises if a segment's blocks do not add up to its size
    assert f"total_reserved: {mv.Bytes(d.reserved)}" in out
    # segsum's "allocated" is what the program asked for (it sums requested_size)
    assert f"total_allocated: {mv.Bytes(d.requested)}" in out
    assert f"total_free: {mv._report_free(d.free_external, d.free_internal)}" in out
    text = mv.trace(data)
    assert "raise OutOfMemoryError" in text and "cudaMalloc" in text
    lines = mv.memory(data, format_flamegraph=lambda s: s).splitlines()
    accounted = sum(int(line.rsplit(" ", 1)[1]) for line in lines if ";active_allocated;" in line
                    and "<gaps>" not in line)  # fmt: skip
    assert accounted == d.requested
    html = mv.trace_plot(data)
    assert "add_local_files" in html


def test_segments_only_list_from_memory_snapshot(tmp_path: Path) -> None:
    a = FakeAllocator(2**33)
    a.malloc(3 * MiB, STACKS["weights"])
    s = read_summary(write(tmp_path / "segs.pickle", a.segments_dicts()))
    assert s.kind == "segments" and s.devices[0].allocated == 3 * MiB
    assert s.devices[0].timeline is None


def test_settings_are_read(tmp_path: Path) -> None:
    a = FakeAllocator(2**33)
    a.malloc(3 * MiB, STACKS["weights"])
    data = snapshot_of(a)
    data["allocator_settings"] = settings(max_split_size=512 * MiB)
    data["allocator_settings"]["garbage_collection_threshold"] = 0.6
    s = read_summary(write(tmp_path / "s.pickle", data)).settings
    assert s.recorded and s.max_split_size == 512 * MiB
    assert s.garbage_collection_threshold == 0.6 and s.expandable_segments is False


def test_malformed_structures_are_one_line(tmp_path: Path) -> None:
    a = FakeAllocator(2**33)
    a.malloc(3 * MiB, STACKS["weights"])
    data = snapshot_of(a)
    data["segments"][0]["blocks"][0]["state"] = "haunted"
    with pytest.raises(SnapshotError, match="unknown state 'haunted'"):
        read_summary(write(tmp_path / "a.pickle", data))
    data = snapshot_of(a)
    del data["device_traces"][0][0]["action"]
    with pytest.raises(SnapshotError, match="entry 0 is malformed"):
        read_summary(write(tmp_path / "b.pickle", data))
    data = snapshot_of(a)
    data["segments"][0]["total_size"] = "big"
    with pytest.raises(SnapshotError, match="not a whole number"):
        read_summary(write(tmp_path / "c.pickle", data))
