"""The dashboard's stack row, driven by Pilot: switching stack changes the plan's books and
the budget on screen follows the estimator."""

from __future__ import annotations

from pathlib import Path

import pytest
from ui_helpers import (
    budget_of,
    budget_on_screen,
    demo_source,
    llama_plan,
    region_text,
    screen_of,
    wait_for,
    write_trace,
)

from memtui.estimator import StackName, Strategy
from memtui.estimator.capabilities import CAPABILITIES
from memtui.telemetry import ReplaySource
from memtui.ui import make_app
from memtui.ui.widgets.settings_panel import SettingsPanel
from memtui.ui.widgets.strategy_table import StrategyTable


@pytest.fixture
def replay_trace(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "run.jsonl", [demo_source(llama_plan()).poll()])


async def test_the_stack_row_switches_the_books_and_the_budget(replay_trace: Path) -> None:
    app = make_app(llama_plan(), ReplaySource(replay_trace, speed=None), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
        panel = app.screen.query_one(SettingsPanel)
        await pilot.press("down")
        assert panel.current_key == "stack"
        before = budget_on_screen(app)
        seen = {screen.plan.stack}
        for _ in range(len(StackName) - 1):
            await pilot.press("right")
            await pilot.pause()
            plan = screen.plan
            seen.add(plan.stack)
            # the stack's own strategy and precision were chosen for it
            assert plan.strategy in CAPABILITIES[plan.stack].strategies
            assert plan.precision in CAPABILITIES[plan.stack].precisions
            assert budget_on_screen(app) == budget_of(plan)
            assert f"Stack {plan.stack.value}" in " ".join(region_text(app, panel).split())
        assert seen == set(StackName)  # every stack reached from the row
        assert budget_on_screen(app) != before


async def test_the_strategy_table_marks_what_the_stack_cannot_run(replay_trace: Path) -> None:
    plan = llama_plan().evolve(stack=StackName.deepspeed, strategy=Strategy.zero3)
    app = make_app(plan, ReplaySource(replay_trace, speed=None), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
        table = " ".join(region_text(app, app.screen.query_one(StrategyTable)).split())
        assert "fsdp - - n/a -" in table  # DeepSpeed runs ZeRO only
        assert "zero2 - -" not in table
