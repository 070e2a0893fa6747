"""The dashboard's attach (j) and export (e) keys, with Pilot: a real torchrun-style launch holds
memory on the fake NVML, the status line offers its plan, `j` takes it (the bars then compare
the job with its own budget), `e` writes the plan as its stack's config under a new name."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from attach_harness import direct, launchers
from fake_nvml.harness import GiB, gpu
from ui_helpers import budget_total, llama_plan, screen_of, text_of, wait_for

from memtui.estimator import estimate
from memtui.telemetry.nvml import NvmlSource
from memtui.ui import make_app
from memtui.ui.widgets.gpu_panel import GpuPanel

CONFIGS = Path(__file__).resolve().parent / "plans_configs"

ARGV = [
    "torchrun", "--nproc_per_node", "2", "train.py", "--deepspeed", "deepspeed/zero2_auto.json",
    "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "2", "--bf16",
    "--model_name_or_path", "meta-llama/Llama-3.2-1B",
]  # fmt: skip


async def test_j_plans_from_the_running_job_and_e_exports_it(
    fake_nvml_in_process: Any, tmp_path: Path
) -> None:
    job = tmp_path / "job"
    shutil.copytree(CONFIGS, job)
    direct(job, "train.py")
    with launchers(tmp_path) as fakes:
        started = fakes.start(ARGV, job, workers=2)
        fake_nvml_in_process.write(
            {"gpus": [gpu(i, used=20 * GiB, procs=[(pid, 19 * GiB)])
                      for i, pid in enumerate(started.gpu_pids)]}
        )  # fmt: skip
        app = make_app(
            llama_plan(),
            NvmlSource(),
            interval=3600,
            fit_to_devices=frozenset({"gpus", "memory"}),
            save_path=tmp_path / "out" / "plan.toml",
        )
        async with app.run_test(size=(160, 40)) as pilot:
            screen = screen_of(app)
            await wait_for(pilot, lambda: screen.jobs.found is not None)
            await pilot.pause()
            assert "job: torchrun train.py" in text_of(app)
            assert "j: plan from it" in text_of(app)
            await pilot.press("j")
            await wait_for(pilot, lambda: screen.plan.stack.value == "deepspeed")
            plan = screen.plan
            assert plan.model.name == "meta-llama/Llama-3.2-1B"
            assert (plan.strategy.value, plan.micro_batch, plan.grad_accum) == ("zero2", 4, 2)
            assert plan.hardware.gpus_per_node == 2
            view = app.screen.query_one(GpuPanel).view
            assert view is not None and view.budget.total == budget_total(plan)
            assert "plan from torchrun train.py" in text_of(app)
            await pilot.press("e")
            exported = tmp_path / "out" / "memtui-deepspeed.json"
            await wait_for(pilot, exported.exists)
            await pilot.press("e")  # a second export never replaces the first
            await wait_for(pilot, (tmp_path / "out" / "memtui-deepspeed-2.json").exists)
    data = json.loads(exported.read_text())
    assert data["zero_optimization"]["stage"] == 2
    assert data["train_micro_batch_size_per_gpu"] == 4
    assert estimate(plan).budget.total > 0


async def test_j_without_a_recognised_job_says_why(fake_nvml_in_process: Any) -> None:
    fake_nvml_in_process.write({"gpus": [gpu(0, used=GiB, procs=[(10_000_007, GiB)])]})
    app = make_app(llama_plan(), NvmlSource(), interval=3600)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.jobs.found is not None)
        await pilot.pause()
        assert "no training job recognised" in text_of(app)
        before = screen.plan
        await pilot.press("j")
        await pilot.pause()
        assert screen.plan == before
