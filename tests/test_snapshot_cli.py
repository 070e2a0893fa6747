"""`memtui snapshot` as a user runs it: text, --json, a plan beside the attribution, and the
export memory_viz opens."""

from __future__ import annotations

import base64
import importlib.util
import json
import pickle
import pickletools
import re
import subprocess
import sys
from pathlib import Path

import pytest
from snapshot_files import FakeAllocator, MiB, OomScenario, snapshot_of, write

from memtui.cli import main
from memtui.forensics.export import VIEWER_OPCODES

GiB = 2**30


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memtui", "snapshot", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"},
    )


@pytest.fixture
def oom_file(tmp_path: Path) -> Path:
    a = FakeAllocator(OomScenario().capacity)
    OomScenario().run(a)
    return write(tmp_path / "oom.pickle", snapshot_of(a))


def test_text_says_what_happened_in_gib(oom_file: Path) -> None:
    out = _run(str(oom_file))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for needle in (
        "PyTorch memory snapshot",
        "expandable_segments off",
        "reserved",
        "6.84",  # 14 x 500 MiB in GiB
        "fragmentation caused this OOM",
        "expandable_segments:True",
        "heuristic",
        "Timeline",
        "x = OOM (1)",
    ):
        assert needle in text, needle


def test_json_is_one_object_per_device_in_bytes(
    oom_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["snapshot", str(oom_file), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, list) and len(data) == 1
    d = data[0]
    sc = OomScenario()
    for key in ("reserved", "allocated", "requested", "free_internal", "free_external",
                "largest_free_block", "oom", "by_term"):  # fmt: skip
        assert key in d
    assert d["reserved"] == sc.n * sc.big
    assert d["reserved"] == d["allocated"] + d["awaiting_free"] + d["free_external"]
    assert d["allocated"] == d["requested"] + d["free_internal"]
    assert d["oom"]["requested"] == sc.failing and d["oom"]["term"] == "logits"
    assert d["by_term"]["weights"] == sc.n // 2 * sc.big
    assert sum(d["by_term"].values()) == d["allocated"]
    assert d["plan"] is None
    assert len(d["timeline"]["allocated"]) == d["timeline"]["events"]  # 50 events, 50 points


def test_a_plan_shows_which_term_grew_past_its_budget(
    oom_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a 100M-parameter plan on one 7.4 GiB card: 0.2 GB of weights planned, 3.4 GiB seen
    args = ["snapshot", str(oom_file), "--params", "100M", "--gpus", "1",
            "--gpu-memory", "7400MiB", "--json"]  # fmt: skip
    assert main(args) == 0
    plan = json.loads(capsys.readouterr().out)[0]["plan"]
    assert plan["terms"]["weights"]["over"] is True
    assert plan["terms"]["weights"]["observed"] == OomScenario().n // 2 * 500 * MiB
    assert plan["terms"]["gradients"]["over"] is False
    assert "at the OOM" in plan["basis"]
    texts = [f["text"] for f in plan["findings"]]
    assert any(t.startswith("weights grew past the budget") for t in texts)
    assert any("fragmentation allowance" in t for t in texts)
    # the advice: of the levers that would cover the shortfall, the least slowing first,
    # each with its step-time change
    from memtui.estimator import ModelSpec, Plan, estimate

    advice = [f["text"] for f in plan["findings"] if f["kind"] == "advice"]
    assert advice and all("step time" in t for t in advice)
    named = [t.split(":")[0] for t in advice]
    report = estimate(Plan(model=ModelSpec.from_parameters(10**8)).evolve(
        hardware={"gpus_per_node": 1, "gpu_memory": 7400 * MiB}))  # fmt: skip
    slower = {lv.name: lv.percent_change for lv in report.levers}
    assert [slower[n] for n in named] == sorted(slower[n] for n in named)
    assert main(args[:-1]) == 0
    text = capsys.readouterr().out
    assert "Against the plan" in text and "over +" in text


def test_a_saved_plan_file_is_compared(
    oom_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memtui.estimator import ModelSpec, Plan
    from memtui.plans.memtui_toml import save_plan

    plan = Plan(model=ModelSpec.from_parameters(10**9)).evolve(hardware={"gpus_per_node": 1})
    path = save_plan(plan, tmp_path / "plan.toml")
    assert main(["snapshot", str(oom_file), "--plan", str(path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)[0]["plan"]
    assert got["plan"].startswith("1B")
    assert set(got["terms"]) >= {"weights", "activations", "logits", "transient"}


def test_memory_stats_through_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "stats.json"
    f.write_text(json.dumps({"allocated_bytes.all.current": GiB, "reserved_bytes.all.current":
                             2 * GiB, "active_bytes.all.current": GiB,
                             "requested_bytes.all.current": GiB - 512}))  # fmt: skip
    assert main(["snapshot", str(f), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)[0]
    assert d["source"] == "memory_stats" and d["free_external"] == GiB and d["free_internal"] == 512
    assert d["largest_free_block"] is None and d["oom"] is None and d["by_term"] == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--unit", "TB"], "invalid choice"),
        (["--device", "-1"], "--device must be 0 or more"),
        (["--device", "4"], "no device 4"),
        (["--micro-batch", "0"], "must be at least 1"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(oom_file: Path, args: list[str], message: str) -> None:
    out = _run(str(oom_file), *args)
    assert out.returncode == 2
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def _categories(data: dict) -> set[str]:  # type: ignore[type-arg]
    return {e["category"] for t in data["device_traces"] for e in t if "category" in e}


def test_export_for_memory_viz_uses_only_what_its_decoder_reads(
    oom_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "viz.pickle"
    assert main(["snapshot", str(oom_file), "--export-viz", str(out)]) == 0
    payload = out.read_bytes()
    used = {op.name for op, _, _ in pickletools.genops(payload)}
    assert used <= VIEWER_OPCODES, used - VIEWER_OPCODES
    assert payload[:2] == b"\x80\x04"  # protocol 4: the page refuses 5
    data = pickle.loads(payload)
    # each allocation carries its plan term; `unknown` is present, as the page needs
    assert {"weights", "optimizer_states", "unknown"} <= _categories(data)
    allocs = [e for e in data["device_traces"][0] if e["action"] == "alloc"]
    assert all("category" in e for e in allocs)
    page = tmp_path / "viz.html"
    assert main(["snapshot", str(oom_file), "--export-viz", str(page)]) == 0
    html = page.read_text()
    assert "add_local_files" in html and "MemoryViz.js" in html
    files = json.loads(re.search(r"const local_files = (\[.*\])", html)[1])  # type: ignore[index]
    decoded = base64.b64decode(files[0]["base64"])
    assert pickle.loads(decoded) == data


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_torch_memory_viz_reads_the_export(oom_file: Path, tmp_path: Path) -> None:
    from torch.cuda import _memory_viz as mv

    out = tmp_path / "viz.pickle"
    main(["snapshot", str(oom_file), "--export-viz", str(out)])
    data = pickle.loads(out.read_bytes())
    original = pickle.loads(oom_file.read_bytes())
    assert mv.segsum(data) == mv.segsum(original)
    assert mv.trace(data) == mv.trace(original)
    # the same embedding torch writes for its own trace_plot page
    ours = json.loads(re.search(r"const local_files = (\[.*\])", mv.trace_plot(data))[1])  # type: ignore[index]
    assert set(ours[0]) == {"name", "base64"}


def test_export_refuses_a_stats_dump(tmp_path: Path) -> None:
    f = tmp_path / "stats.json"
    f.write_text(json.dumps({"allocated_bytes.all.current": 1}))
    out = _run(str(f), "--export-viz", str(tmp_path / "x.html"))
    assert out.returncode == 2 and "memory_stats dump has no segments" in out.stderr
    assert not (tmp_path / "x.html").exists()


def test_many_allocations_of_every_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from snapshot_files import STACKS

    a = FakeAllocator(64 * GiB)
    held = []
    for i in range(300):
        kind = list(STACKS)[i % len(STACKS)]
        held.append(a.malloc((i % 17 + 1) * MiB + i, STACKS[kind]))
        if i % 3 == 0:
            a.free(held.pop(0))
    path = write(tmp_path / "many.pickle", snapshot_of(a))
    assert main(["snapshot", str(path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)[0]
    assert d["reserved"] == d["allocated"] + d["awaiting_free"] + d["free_external"]
    assert d["allocated"] == d["requested"] + d["free_internal"]
    assert sum(d["by_term"].values()) == d["allocated"]
    assert len(d["timeline"]["allocated"]) == 240
