"""The dashboard's two plans, with Pilot on the real app: the job's budget (what the GPU rows and
the alarms are judged against, and where it came from) apart from the what-if plan the settings
edit. Sources: the fake libnvidia-ml with real processes (tests/attach_harness.py) and the
synthetic node; the CLI's own `dashboard.build` for the start-up flags."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from attach_harness import direct, launchers
from fake_nvml.harness import GiB, gpu
from ui_helpers import budget_total, demo_source, llama_plan, screen_of, text_of, wait_for

from memtui.cli import build_parser
from memtui.commands import dashboard
from memtui.estimator import Strategy, estimate
from memtui.plans.memtui_toml import save_plan
from memtui.telemetry.nvml import NvmlSource
from memtui.ui import make_app
from memtui.ui.budgets import BudgetFrom, comparison
from memtui.ui.gpu_state import RowStatus
from memtui.ui.widgets.budget_compare import BudgetCompare
from memtui.ui.widgets.gpu_row import GpuRow

CONFIGS = Path(__file__).resolve().parent / "plans_configs"

TORCHRUN = [
    "torchrun", "--nproc_per_node", "2", "train.py", "--deepspeed", "deepspeed/zero2_auto.json",
    "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "2", "--bf16",
    "--model_name_or_path", "meta-llama/Llama-3.2-1B",
]  # fmt: skip


def _args(*argv: str) -> Any:
    return build_parser().parse_args(["dashboard", *argv])


def _record_notifications(app: Any) -> list[str]:
    seen: list[str] = []
    original = app.notify

    def notify(message: str, *args: Any, **kwargs: Any) -> None:
        seen.append(message)
        original(message, *args, **kwargs)

    app.notify = notify
    return seen


def _rows(app: Any) -> dict[str, GpuRow]:
    rows = app.screen.query(".device-row").results(GpuRow)
    return {row.data.device.label: row for row in rows if row.data and row.data.device}


def _compare_text(app: Any) -> str:
    widget = app.screen.query_one(BudgetCompare)
    return "\n".join(
        line[widget.region.x : widget.region.right]
        for line in text_of(app).split("\n")[widget.region.y : widget.region.bottom]
    )


# -- start-up: nobody planned the job -------------------------------------------------


async def test_a_job_running_and_no_plan_given_raises_no_budget_alarm(
    fake_nvml_in_process: Any,
) -> None:
    """`memtui` on a node where a process holds 70 GB of GPU 0 and GPU 1 is 97% full: no
    "OVER BUDGET" (nobody planned this job), the bars show capacity, near capacity still
    alarms."""
    fake_nvml_in_process.write(
        {
            "gpus": [
                gpu(0, used=70 * 10**9, procs=[(10_000_007, 70 * 10**9)]),
                gpu(1, used=int(85.5e9 * 0.97)),
            ]
        }
    )
    app = dashboard.build(_args())
    seen = _record_notifications(app)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.jobs.found is not None)
        await pilot.pause()
        assert screen.job_budget is None
        statuses = {row.data.device.label: row.data.status for row in _rows(app).values()}
        assert statuses == {"0": RowStatus.UNBUDGETED, "1": RowStatus.NEAR_CAPACITY}
        assert all(row.data.budget is None for row in _rows(app).values())
        shown = text_of(app)
        assert "OVER BUDGET" not in shown and "under budget" not in shown
        assert "no job budget" in shown  # the row says why it has no verdict
        assert "capacity only" in _compare_text(app)
        # GPU 0's figures are used/card, not used/the what-if plan's budget
        assert "70.0/85.5 GB" in shown
    assert not any("BUDGET" in m for m in seen)
    assert any("GPU 1: NEAR CAPACITY" in m and "budget" not in m for m in seen)


async def test_a_demo_over_the_default_plan_raises_no_budget_alarm() -> None:
    """`memtui --demo` builds no job's budget; a node running 12-16% past the default plan
    (the reported "GPUs 5, 6, 7: OVER BUDGET" on an untouched node) is under no alarm."""
    built = dashboard.build(_args("--demo"))
    async with built.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: screen_of(built).polls >= 1)
        assert screen_of(built).job_budget is None
    plan = llama_plan()
    app = make_app(plan, demo_source(plan, 1.2), interval=3600, budget_from=None)
    seen = _record_notifications(app)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        await pilot.pause()
        assert set(screen.statuses.values()) == {RowStatus.UNBUDGETED}
        assert "OVER" not in text_of(app)
        assert "job's budget: none, capacity only" in text_of(app)  # the narrow line
    assert not any("OVER BUDGET" in m for m in seen)


# -- start-up: a plan file or the job's files ---------------------------------------


async def test_plan_file_at_start_is_the_jobs_budget_with_its_source_named(
    tmp_path: Path,
) -> None:
    path = save_plan(
        llama_plan().model_copy(update={"strategy": Strategy.zero1}), tmp_path / "p.toml"
    )
    app = dashboard.build(_args("--plan", str(path), "--demo"))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        await pilot.pause()
        job = screen.job_budget
        assert job is not None and job.source.kind is BudgetFrom.PLAN_FILE
        assert str(job.source) == f"--plan {path}"
        assert job.plan == screen.plan and job.budget.total == budget_total(screen.plan)
        assert "--plan" in _compare_text(app)
        assert all(row.data.budget == job.budget for row in _rows(app).values())


async def test_job_files_at_start_are_the_jobs_budget_with_their_source_named() -> None:
    config = CONFIGS / "deepspeed" / "zero2_auto.json"
    app = dashboard.build(_args("--from", str(config), "--demo"))
    async with app.run_test(size=(160, 50)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        await pilot.pause()
        job = screen.job_budget
        assert job is not None and job.source.kind is BudgetFrom.JOB_FILES
        assert str(job.source) == "--from zero2_auto.json"
        assert job.plan.strategy is Strategy.zero2  # what the file says
        assert "--from zero2_auto.json" in _compare_text(app)


# -- the what-if plan and the promote key ---------------------------------------------


async def test_editing_the_what_if_plan_never_changes_the_jobs_budget_on_the_bars() -> None:
    plan = llama_plan()
    app = make_app(plan, demo_source(plan, 1.2), interval=3600)  # the job runs over its plan
    seen = _record_notifications(app)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        await pilot.pause()
        job = screen.job_budget
        assert job is not None and set(screen.statuses.values()) == {RowStatus.OVER}
        # what-ifs, planning another card (k) among them: the reported "every healthy GPU
        # OVER BUDGET" came from the what-if plan judging the rows
        for key in ("s", "m", "plus", "right_square_bracket", "o", "k"):
            await pilot.press(key)
            await pilot.pause()
            assert screen.job_budget == job
            assert set(screen.statuses.values()) == {RowStatus.OVER}
            assert all(row.data.budget == job.budget for row in _rows(app).values())
        assert screen.plan.hardware.gpu_name != plan.hardware.gpu_name  # another card
        what_if = estimate(screen.plan).budget
        assert what_if.total != job.budget.total
        # side by side: the job's figure and the what-if's, each named
        rows = {row.label: row for row in comparison(job, what_if, "GB")}
        compare = _compare_text(app)
        assert rows["per GPU"].job in compare and rows["per GPU"].what_if in compare
        assert "job's budget from given plan" in compare and "what-if plan" in compare

        await pilot.press("b")  # promote: the what-if plan is the job's budget now
        await pilot.pause()
        promoted = screen.job_budget
        assert promoted is not None and promoted.source.kind is BudgetFrom.PROMOTED
        assert promoted.plan == screen.plan and promoted.budget == what_if
        assert all(row.data.budget == what_if for row in _rows(app).values())
        assert "job's budget from what-if plan" in _compare_text(app)
        await pilot.press("b")  # again: nothing to promote, said so
        await pilot.pause()
        assert screen.job_budget == promoted
        assert any("already" in m for m in seen)


async def test_the_promote_key_is_in_the_key_list() -> None:
    plan = llama_plan()
    app = make_app(plan, None, plan_only_reason="no driver")
    async with app.run_test(size=(160, 60)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert "To budget" in text_of(app)


# -- the job on the GPUs: recognised at start, attached with j -------------------------


async def test_a_job_recognised_at_start_is_the_budget_of_its_own_gpus(
    fake_nvml_in_process: Any, tmp_path: Path
) -> None:
    job_dir = tmp_path / "job"
    shutil.copytree(CONFIGS, job_dir)
    direct(job_dir, "train.py")
    with launchers(tmp_path) as fakes:
        started = fakes.start(TORCHRUN, job_dir, workers=2)
        gpus = [gpu(i, used=20 * GiB, procs=[(pid, 19 * GiB)])
                for i, pid in enumerate(started.gpu_pids)]  # fmt: skip
        fake_nvml_in_process.write({"gpus": [*gpus, gpu(2, used=30 * GiB)]})
        app = make_app(
            llama_plan(),
            NvmlSource(),
            interval=3600,
            fit_to_devices=frozenset({"gpus", "memory"}),
            budget_from=None,  # plain `memtui`: nobody planned it
        )
        async with app.run_test(size=(160, 40)) as pilot:
            screen = screen_of(app)
            await wait_for(pilot, lambda: screen.job_budget is not None)
            await pilot.pause()
            job = screen.job_budget
            assert job is not None and job.source.kind is BudgetFrom.RECOGNISED
            assert "torchrun train.py" in str(job.source)
            assert job.source.devices == frozenset({"0", "1"})
            assert job.plan == screen.plan and job.plan.strategy is Strategy.zero2
            rows = _rows(app)
            assert rows["0"].data.budget == rows["1"].data.budget == job.budget
            assert rows["2"].data.budget is None  # not the job's GPU: capacity only
            assert rows["2"].data.status is RowStatus.UNBUDGETED
            assert "job's budget from job on the node torchrun" in _compare_text(app)


async def test_attaching_a_job_past_its_card_is_never_under_budget(
    fake_nvml_in_process: Any, tmp_path: Path
) -> None:
    """The job holds 94% of a 24 GB card and its files plan more than the card per GPU: its
    rows say so (compared per GPU with each GPU's use), never a green "under budget"."""
    card = 24 * 10**9
    job_dir = tmp_path / "job"
    shutil.copytree(CONFIGS, job_dir)
    direct(job_dir, "train.py")
    with launchers(tmp_path) as fakes:
        started = fakes.start(TORCHRUN, job_dir, workers=2)
        used = int(card * 0.94)
        fake_nvml_in_process.write(
            {"gpus": [gpu(i, name="NVIDIA GeForce RTX 4090", total=card, used=used,
                          procs=[(pid, used)]) for i, pid in enumerate(started.gpu_pids)]}
        )  # fmt: skip
        app = make_app(
            llama_plan(),
            NvmlSource(),
            interval=3600,
            fit_to_devices=frozenset({"gpus", "memory"}),
        )
        async with app.run_test(size=(160, 40)) as pilot:
            screen = screen_of(app)
            await wait_for(pilot, lambda: screen.jobs.found is not None)
            await pilot.press("j")
            await wait_for(
                pilot,
                lambda: (
                    screen.job_budget is not None
                    and screen.job_budget.source.kind is BudgetFrom.ATTACHED
                ),
            )
            await pilot.pause()
            job = screen.job_budget
            assert job is not None and job.plan.hardware.gpu_memory == card
            assert job.budget.total > card  # per GPU, and more than one card holds
            for row in _rows(app).values():
                assert row.data.budget == job.budget
                assert row.data.status is RowStatus.BUDGET_OVER_CARD
                assert row.has_class("-alert")
            assert "under budget" not in text_of(app)
            assert "BUDGET > CARD" in text_of(app)
