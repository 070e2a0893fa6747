"""Every key of the dashboard, driven by Pilot, with telemetry from a replayed trace and from
the fake libnvidia-ml. Each key must change the plan, and the budget on screen must follow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_nvml.harness import node
from rich.console import Console
from textual.binding import Binding
from ui_helpers import (
    budget_of,
    budget_on_screen,
    demo_source,
    llama_plan,
    screen_of,
    text_of,
    wait_for,
    write_trace,
)

from memtui.estimator import Attention, Checkpointing, Method, Optimizer, Precision, Strategy
from memtui.telemetry import NvmlSource, ReplaySource
from memtui.ui import make_app
from memtui.ui.help_screen import HelpScreen
from memtui.ui.widgets.settings_panel import SettingsPanel


def help_text(app: Any) -> str:
    """The text of the help screen's key list and glossary, rendered whole (not cropped to
    the screen)."""
    assert isinstance(app.screen, HelpScreen), app.screen
    console = Console(width=200, record=True, file=__import__("io").StringIO())
    console.print(app.screen.body)
    return console.export_text()


# (key, what it changes, the value before, the value after one press) from the default plan
PLAN_KEYS: list[tuple[str, Any, Any, Any]] = [
    ("s", lambda p: p.strategy, Strategy.fsdp, Strategy.fsdp_shard_grad_op),
    ("o", lambda p: p.optimizer, Optimizer.adamw, Optimizer.adamw8bit),
    ("m", lambda p: p.method, Method.full, Method.lora),
    ("p", lambda p: p.precision, Precision.bf16_mixed, Precision.bf16),
    ("f", lambda p: p.attention, Attention.flash, Attention.eager),
    ("c", lambda p: p.checkpointing, Checkpointing.none, Checkpointing.selective),
    ("plus", lambda p: p.micro_batch, 1, 2),
    ("equals_sign", lambda p: p.micro_batch, 1, 2),
    ("right_square_bracket", lambda p: p.seq_len, 4096, 8192),
    ("left_square_bracket", lambda p: p.seq_len, 4096, 2048),
    ("g", lambda p: p.hardware.gpus_per_node, 8, 9),
    ("G", lambda p: p.hardware.gpus_per_node, 8, 7),
    ("k", lambda p: p.hardware.gpu_name, "H100 80GB SXM", "H100 80GB PCIe"),
    ("a", lambda p: p.grad_accum, 1, 2),
]


@pytest.fixture
def replay_trace(tmp_path: Path) -> Path:
    plan = llama_plan()
    return write_trace(tmp_path / "run.jsonl", [demo_source(plan).poll()])


@pytest.mark.parametrize(
    ("key", "field", "before", "after"), PLAN_KEYS, ids=[k[0] for k in PLAN_KEYS]
)
async def test_plan_key_changes_plan_and_budget_on_screen(
    replay_trace: Path, key: str, field: Any, before: Any, after: Any
) -> None:
    app = make_app(llama_plan(), ReplaySource(replay_trace, speed=None), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
        assert field(screen.plan) == before
        await pilot.press(key)
        await pilot.pause()
        assert field(screen.plan) == after
        # the budget on screen is the new plan's, from the estimator, and the rows are there
        assert budget_on_screen(app) == budget_of(screen.plan)
        assert "GPU 7" in text_of(app)


async def test_minus_and_shift_a_step_down(replay_trace: Path) -> None:
    plan = llama_plan().model_copy(update={"micro_batch": 3, "grad_accum": 2})
    app = make_app(plan, ReplaySource(replay_trace, speed=None), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("minus", "A")
        screen = screen_of(app)
        assert (screen.plan.micro_batch, screen.plan.grad_accum) == (2, 1)
        await pilot.press("minus", "minus")  # at 1 already: said, not applied
        assert screen.plan.micro_batch == 1


def _plan_fields() -> set[str]:
    """Every input of the estimator, dotted for the nested models."""
    from memtui.estimator.plan import Hardware, OverheadSettings, Plan

    top = set(Plan.model_fields) - {"hardware", "overhead"}
    return (
        top
        | {f"hardware.{f}" for f in Hardware.model_fields}
        | {f"overhead.{f}" for f in OverheadSettings.model_fields}
    )


def _field_value(plan: Any, dotted: str) -> Any:
    value = plan
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def test_settings_rows_cover_every_plan_field() -> None:
    from memtui.ui.plan_edits import SETTINGS

    covered = {f for s in SETTINGS for f in s.edits}
    fields = _plan_fields()
    # every input of the estimator has a row, and every row edits a real input
    assert fields - covered == set(), "plan fields without a settings row"
    assert covered - fields == set(), "settings rows naming no plan field"


async def test_settings_rows_reach_every_plan_input(replay_trace: Path) -> None:
    from ui_helpers import region_text

    from memtui.ui.plan_edits import SETTINGS

    app = make_app(llama_plan(), ReplaySource(replay_trace, speed=None), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        panel = app.screen.query_one(SettingsPanel)
        assert panel.has_focus
        for index, setting in enumerate(SETTINGS):
            assert panel.current_key == setting.key
            await pilot.pause()
            assert f"▶ {setting.label}" in region_text(app, panel), setting.key  # on screen
            if setting.step is not None:
                before = screen.plan
                await pilot.press("right")
                # the row moves the very Plan field(s) it names
                now = screen.plan
                changed = [
                    f for f in setting.edits if _field_value(now, f) != _field_value(before, f)
                ]
                assert changed, setting.key
                await pilot.press("left")
                assert setting.show(screen.plan) == setting.show(before), setting.key
            if index < len(SETTINGS) - 1:
                await pilot.press("down")
        await pilot.press("down")  # wraps to the model row
        assert panel.current_key == "model"
        await pilot.press("up")
        assert panel.current_key == SETTINGS[-1].key


async def test_unit_key_switches_gb_and_gib(replay_trace: Path) -> None:
    app = make_app(llama_plan(), ReplaySource(replay_trace, speed=None), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
        assert "GB = 10^9 B" in text_of(app)
        await pilot.press("u")
        await pilot.pause()
        assert screen.unit == "GiB" and "GiB = 2^30 B" in text_of(app)


async def test_theme_help_and_quit_keys(replay_trace: Path) -> None:
    app = make_app(llama_plan(), ReplaySource(replay_trace, speed=None), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.theme == "memtui-dark"
        await pilot.press("t")
        assert app.theme == "memtui-light"
        await pilot.press("t")
        assert app.theme == "memtui-dark"
        screen = screen_of(app)
        await pilot.press("question_mark")
        await pilot.pause()
        # the help panel's own text (the footer shows some of the same words): every key of
        # the screen and the app, the ones hidden from the footer too
        keys = help_text(app)
        for binding in [*screen.BINDINGS, *app.BINDINGS]:
            assert isinstance(binding, Binding)
            assert binding.description in keys, binding
        assert "Accum+" in keys and "GPUs-" in keys  # show=False: not in the footer
        await pilot.press("question_mark")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_keys_are_remappable_by_binding_id(replay_trace: Path) -> None:
    app = make_app(
        llama_plan(),
        ReplaySource(replay_trace, speed=None),
        interval=3600,
        keymap={"strategy": "x"},
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("x")
        assert screen_of(app).plan.strategy is Strategy.fsdp_shard_grad_op


async def test_save_key_writes_the_plan_atomically(replay_trace: Path, tmp_path: Path) -> None:
    from memtui.plans.memtui_toml import load_plan

    target = tmp_path / "saved" / "plan.toml"
    app = make_app(
        llama_plan(), ReplaySource(replay_trace, speed=None), interval=3600, save_path=target
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("s", "w")
        await pilot.pause()
        await pilot.press("enter")  # the file name offered: the save path
        await wait_for(pilot, target.exists)
        saved = load_plan(target)
        assert saved.strategy is Strategy.fsdp_shard_grad_op
        assert saved.model.parameters == llama_plan().model.parameters
        assert [p.name for p in target.parent.iterdir()] == ["plan.toml"]  # no temp left


async def test_every_key_with_the_fake_nvml(fake_nvml_in_process: Any) -> None:
    """Live mode against the fake libnvidia-ml: the plan is sized to the GPUs found, and every
    plan key still moves the budget drawn on the rows."""
    fake_nvml_in_process.write(node(4, 2))
    app = make_app(
        llama_plan(),
        NvmlSource(),
        interval=3600,
        fit_to_devices=frozenset({"gpus", "memory"}),
    )
    async with app.run_test(size=(80, 24)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
        await pilot.pause()
        assert screen.plan.hardware.gpus_per_node == 4
        assert screen.plan.hardware.gpu_name == "NVIDIA H100 80GB HBM3"
        for key, field, _, _ in PLAN_KEYS:
            before = field(screen.plan)
            await pilot.press(key)
            await pilot.pause()
            assert field(screen.plan) != before, key
            assert budget_on_screen(app) == budget_of(screen.plan), key
        assert "live NVML" in text_of(app)


async def test_enter_steps_a_setting_or_opens_the_picker_and_pages_scroll(
    replay_trace: Path,
) -> None:
    from memtui.ui.model_picker import ModelPicker

    app = make_app(llama_plan(), ReplaySource(replay_trace, speed=None), interval=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
        await pilot.press("enter")  # on the model row: the picker
        await pilot.pause()
        assert isinstance(app.screen, ModelPicker)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        from memtui.ui.plan_edits import BY_KEY, SETTINGS

        rows_down = ["down"] * SETTINGS.index(BY_KEY["gpus_per_node"])
        # a number row: enter asks for the value (it no longer steps it)
        await pilot.press(*rows_down, "enter")
        await pilot.pause()
        await pilot.press("ctrl+a", "ctrl+k", "9", "enter")
        await pilot.pause()
        assert screen.plan.hardware.gpus_per_node == 9
        main = app.screen.query_one("#main")
        assert main.scroll_y == 0
        await pilot.press("pagedown")
        await pilot.pause()
        assert main.scroll_y > 0
        await pilot.press("pageup")
        await pilot.pause()
        assert main.scroll_y == 0


async def test_resizing_across_the_narrow_width_keeps_the_strategy_table(
    replay_trace: Path,
) -> None:
    """120 -> 90 -> 120 columns: the strategy table on screen is filled at every width, with
    no plan change in between (the table is never left empty until the next key)."""
    app = make_app(llama_plan(), ReplaySource(replay_trace, speed=None), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
        assert "shard-grad-op" in text_of(app)
        for width in (90, 120, 80):
            await pilot.resize_terminal(width, 40)
            await wait_for(pilot, lambda: app.size.width == width)  # noqa: B023
            await pilot.pause()
            table = screen.strategy_table
            assert table.display and table.view is not None, width
            assert "shard-grad-op" in text_of(app), width


async def test_plan_verdict_is_readable_at_100x30() -> None:
    """docs/architecture.md, "The screen": readable at 100x30, where the GPU pane is about 48
    columns."""
    from memtui.estimator import Plan

    app = make_app(llama_plan(), None, plan_only_reason="no NVML here")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert "FITS" in text_of(app)
    big = Plan(model=llama_plan().model, strategy=Strategy.ddp)
    app = make_app(big, None, plan_only_reason="no NVML here")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert "DOES NOT FIT" in text_of(app)


@pytest.mark.parametrize(
    ("width", "wanted"),
    [
        (80, ("? Keys", "q Quit", "s Strategy", "+- batch", "/ Model", "w Save")),
        (120, ("t Theme", "? Keys", "q Quit", "Ckpt +- batch ][ seq / Model", "w Save", "r Poll")),
    ],
)
async def test_footer_shows_the_app_keys_first(
    replay_trace: Path, width: int, wanted: tuple[str, ...]
) -> None:
    app = make_app(llama_plan(), ReplaySource(replay_trace, speed=None), interval=3600)
    async with app.run_test(size=(width, 40)) as pilot:
        # the footer is drawn once the screen has its estimate and its first poll
        await wait_for(pilot, lambda: text_of(app).splitlines()[-1].strip() != "")
        footer = text_of(app).splitlines()[-1]
        for key in wanted:
            assert key in footer, (key, footer)
        # every key shown is shown whole: the last one ends before the edge (80 columns
        # cannot hold them all: the secondary ones are left to `?`)
        assert footer.endswith(" "), footer
        assert "Accum" not in footer  # secondary keys: listed by `?`, not in the footer
