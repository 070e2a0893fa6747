"""The stack of a plan whose user named none: the most demanding framework stack that runs
the plan (memtui.commands.default_stack), said on the verdict; a named one is kept."""

from __future__ import annotations

import contextlib
import io
import json
from importlib import metadata

from memtui.cli import main

ONE_GPU_LORA = ("--params", "7B", "--gpus", "1", "--strategy", "ddp", "--precision", "bf16",
                "--method", "lora", "--overhead", "none")  # fmt: skip


def run_json(*flags: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["estimate", *flags, "--json"]) == 0
    return json.loads(out.getvalue())


def total(*flags: str) -> int:
    return int(run_json(*flags)["per_gpu"]["total"])


def test_no_stack_takes_the_most_demanding_stack_that_runs_the_plan():
    doc = run_json(*ONE_GPU_LORA)
    runs = {
        stack: total(*ONE_GPU_LORA, "--stack", stack)
        for stack in ("trainer", "deepspeed", "fsdp1", "fsdp2", "torchtune", "litgpt")
        if stack in doc["stack_choice"]
    }
    assert len(runs) >= 2  # several framework stacks run a one-GPU bf16 LoRA
    assert doc["per_gpu"]["total"] == max(runs.values())
    assert doc["stack_choice"].startswith("no --stack: the most demanding of")
    assert "generic" not in doc["stack_choice"]  # the textbook step only by name


def test_a_named_stack_is_kept_and_needs_no_reason():
    doc = run_json(*ONE_GPU_LORA, "--stack", "generic")
    assert doc["stack"] == "generic"
    assert doc["stack_choice"] == ""


def test_installed_versions_narrow_the_choice_to_the_frameworks_installed_here():
    doc = run_json(*ONE_GPU_LORA, "--installed-versions")
    for stack, dist in (("torchtune", "torchtune"), ("litgpt", "litgpt")):
        try:
            metadata.version(dist)
        except metadata.PackageNotFoundError:
            assert f"{stack} " not in doc["stack_choice"]
    assert "installed here" in doc["stack_choice"]


def test_the_dashboard_starts_on_the_stack_estimate_chooses(monkeypatch, tmp_path):
    # the same rule on the dashboard: its what-if plan without --stack is the estimate's,
    # said once at start; a named stack is kept and nothing is said
    import argparse

    from memtui.commands import dashboard

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no preferences of this machine
    parser = argparse.ArgumentParser()
    dashboard.add_dashboard_arguments(parser)
    app = dashboard.build(parser.parse_args(["--demo", *ONE_GPU_LORA]))
    doc = run_json(*ONE_GPU_LORA)
    assert app._plan.stack.value == doc["plan"]["stack"] != "generic"
    assert app.start_notes == (doc["stack_choice"],)
    named = dashboard.build(parser.parse_args(["--demo", *ONE_GPU_LORA, "--stack", "generic"]))
    assert named._plan.stack.value == "generic" and named.start_notes == ()


async def test_the_dashboard_says_the_stack_it_chose_for_the_plan_sized_to_the_gpus(
    monkeypatch, tmp_path
):
    # watching 4 GPUs with no --gpus: the plan is sized to them first, then the stack is
    # chosen, and the words said are `memtui estimate --gpus 4`'s (the 8-GPU plan's figures,
    # quoted before the sizing, were another plan's)
    import argparse

    from ui_helpers import screen_of, wait_for, write_trace

    from memtui.commands import dashboard
    from memtui.telemetry import SyntheticSource

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    flags = ("--params", "7B", "--precision", "bf16", "--overhead", "none")
    parser = argparse.ArgumentParser()
    dashboard.add_dashboard_arguments(parser)
    eight = run_json(*flags)
    assert eight["plan"]["hardware"]["gpus_per_node"] == 8  # the plan before it is sized
    card = eight["plan"]["hardware"]
    four = SyntheticSource(4, card=card["gpu_name"], total_bytes=card["gpu_memory"], seed=0)
    trace = write_trace(tmp_path / "four.jsonl", [four.poll()])
    app = dashboard.build(parser.parse_args(["--replay", str(trace), "--interval", "3600", *flags]))
    assert app.start_notes == ()  # said by the screen once the plan is sized
    said: list[tuple[str, str]] = []
    notify = app.notify

    def seen(message, *args, title="", **kwargs):
        said.append((title, message))
        notify(message, *args, title=title, **kwargs)

    app.notify = seen
    sized = run_json(*flags, "--gpus", "4")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.report is not None)
        await pilot.pause()
        assert screen.plan.hardware.gpus_per_node == 4
        assert screen.plan.stack.value == sized["plan"]["stack"]
        assert screen.report is not None
        assert screen.report.budget.total == sized["per_gpu"]["total"]
    assert [m for t, m in said if t == "Plan"] == [sized["stack_choice"]]
    assert sized["stack_choice"] != eight["stack_choice"]
