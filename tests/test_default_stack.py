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
