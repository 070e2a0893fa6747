"""Snapshots PyTorch itself produced, with the CPU build of torch the measure extra installs.

The CPU build cannot record a CUDA snapshot (first test: the recorder does not exist there).
What it can produce is a snapshot converted from a torch.profiler memory profile by
torch/cuda/_memory_viz.py `_profile_to_snapshot` (what `profile_plot` draws): the same
structure, with real Python frames from a real training step, and each allocation labelled
by PyTorch's own memory profiler (torch/profiler/_memory_profiler.py `Category`), which
judges from the data flow, not from frames. Those labels are the check on memtui's frame
rules: code nobody here wrote, deciding independently.
"""

from __future__ import annotations

import importlib.util
import pickle
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from memtui.forensics import read_summary
from memtui.forensics.attribution import Attributor

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "transformers")),
    reason="memtui[measure] not installed",
)


def test_the_cpu_build_cannot_record_a_cuda_snapshot() -> None:
    import torch

    assert not torch.cuda.is_available()
    assert not hasattr(torch._C, "_cuda_record_memory_history")
    assert not hasattr(torch._C, "_cuda_memorySnapshot")
    with pytest.raises((AttributeError, RuntimeError, AssertionError)):
        torch.cuda.memory._record_memory_history()


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Two training steps of a tiny Llama (built inside the profile, so its parameters have
    frames), AdamW with foreach, the loss from Transformers' ForCausalLMLoss."""
    import torch
    from torch.cuda import _memory_viz
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=4,
        num_hidden_layers=2,
        vocab_size=1000,
        use_cache=False,
    )
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(
        activities=activities, profile_memory=True, record_shapes=True, with_stack=True
    ) as prof:
        model = LlamaForCausalLM(config)
        optimizer = torch.optim.AdamW(model.parameters(), foreach=True)
        ids = torch.randint(0, 1000, (2, 32))
        for _ in range(2):
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    snapshot = _memory_viz._profile_to_snapshot(prof)
    path = tmp_path_factory.mktemp("real") / "profile.pickle"
    with path.open("wb") as f:
        pickle.dump(snapshot, f)
    return path, snapshot


def test_the_summary_of_a_real_snapshot_keeps_the_identities(
    profiled: tuple[Path, dict[str, Any]],
) -> None:
    path, snapshot = profiled
    s = read_summary(path)
    assert s.notes and "torch.profiler" in s.notes[0]
    d = s.devices[0]
    assert d.allocated == d.requested + d.free_internal
    assert d.reserved == d.allocated + d.awaiting_free + d.free_external
    blocks = [b for seg in snapshot["segments"] for b in seg["blocks"]]
    assert d.allocated == sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    assert d.free_external == sum(b["size"] for b in blocks if b["state"] == "inactive")
    # the timeline's peak against a running sum computed here, from the raw trace
    trace = snapshot["device_traces"][0]
    running, peak = 0, 0
    for e in trace:
        running += e["size"] if e["action"] == "alloc" else 0
        running -= e["size"] if e["action"] == "free_completed" else 0
        peak = max(peak, running)
    end = d.requested
    start = end - running
    assert d.timeline is not None
    assert d.timeline.peak == start + peak
    assert d.findings == ()  # address spans are not segments: no fragmentation verdicts


def test_frame_rules_agree_with_pytorchs_memory_profiler(
    profiled: tuple[Path, dict[str, Any]],
) -> None:
    _, snapshot = profiled
    attributor = Attributor()
    bytes_by: dict[str, Counter[str]] = defaultdict(Counter)
    for e in snapshot["device_traces"][0]:
        if e["action"] == "alloc" and e.get("category"):
            bytes_by[e["category"]][attributor.classify(e["frames"]).term] += e["size"]

    def share(category: str, *terms: str) -> float:
        got = bytes_by[category]
        return sum(got[t] for t in terms) / sum(got.values())

    assert share("parameter", "weights") == 1.0
    assert share("optimizer_state", "optimizer_states") == 1.0
    # PyTorch calls the logits an activation; memtui keeps them apart (its own term)
    assert share("activation", "activations", "logits") > 0.95
    assert bytes_by["activation"]["logits"] >= 2 * 32 * 1000 * 4  # the lm_head's output
    # Python-only frames of a backward run cannot tell a gradient: it stays unattributed
    assert share("gradient", "unattributed") == 1.0
    assert bytes_by["gradient"]["weights"] == 0
