"""Safe editing of the what-if plan: undo, redo and reset, backward keys, typed values on number
rows, lists that say where they wrap, the quit key asking to save a changed plan, the save key
asking for a file name and before overwriting one. The pure parts first (plan_edits), then the
real app through Pilot."""

from __future__ import annotations

from pathlib import Path

import pytest
from ui_helpers import llama_plan, screen_of, text_of, wait_for

from memtui.estimator import Optimizer, Strategy
from memtui.plans.memtui_toml import load_plan, plan_to_toml
from memtui.ui import make_app
from memtui.ui.plan_edits import (
    BY_KEY,
    SETTINGS,
    PlanEditError,
    PlanHistory,
    position,
    set_typed,
    step,
    wrap_note,
)
from memtui.ui.prompts import Ask, Confirm

# -- pure ---------------------------------------------------------------------------


def test_history_undoes_redoes_and_forgets_the_redo_after_a_new_edit() -> None:
    start = llama_plan()
    history = PlanHistory.starting(start)
    a = step(start, "strategy")
    history.record(start)
    b = step(a, "optimizer")
    history.record(a)
    assert history.undo(b) == a and history.undo(a) == start and history.undo(start) is None
    assert history.redo(start) == a
    c = step(a, "method")
    history.record(a)  # a new edit: what was undone cannot be redone any more
    assert history.redo(c) is None
    assert history.changed(c) and not history.changed(start)
    history.saved = c
    assert not history.changed(c)


def test_history_follows_a_fit_nobody_typed() -> None:
    start = llama_plan()
    fitted = start.evolve(hardware={"gpus_per_node": 4})
    history = PlanHistory.starting(start)
    history.follow(start, fitted)
    assert history.start == fitted and not history.changed(fitted)


def test_history_keeps_at_most_its_limit() -> None:
    plan = llama_plan()
    history = PlanHistory(start=plan, saved=plan, limit=3)
    for _ in range(10):
        history.record(plan)
    undone = 0
    while history.undo(plan) is not None:
        undone += 1
    assert undone == 3


def test_a_step_round_the_end_of_a_list_says_so_either_way() -> None:
    plan = llama_plan()
    strategy = BY_KEY["strategy"]
    assert strategy.listed is not None
    values, _ = strategy.listed(plan)
    last = plan.evolve(strategy=values[-1])
    wrapped = step(last, "strategy", 1)
    assert position(strategy, wrapped) == (1, len(values))
    note = wrap_note("strategy", last, wrapped, 1)
    assert note is not None and "back to the first" in note and values[0].value in note
    back = step(wrapped, "strategy", -1)
    assert back.strategy == values[-1]
    note = wrap_note("strategy", wrapped, back, -1)
    assert note is not None and "round to the last" in note
    # a step inside the list says nothing
    assert wrap_note("strategy", plan, step(plan, "strategy", 1), 1) is None


def test_backward_from_a_value_not_in_the_list_goes_to_the_last() -> None:
    plan = llama_plan().evolve(hardware={"gpu_name": "NVIDIA Some Card"})
    gpu = BY_KEY["gpu"]
    assert gpu.listed is not None and position(gpu, plan) is None
    names, _ = gpu.listed(plan)
    assert step(plan, "gpu", -1).hardware.gpu_name == names[-1]
    assert step(plan, "gpu", 1).hardware.gpu_name == names[0]


@pytest.mark.parametrize(
    ("key", "text", "read"),
    [
        ("micro_batch", "4", lambda p: p.micro_batch),
        ("seq_len", "8,192", lambda p: p.seq_len),
        ("gpus_per_node", "4", lambda p: p.hardware.gpus_per_node),
        ("lora_dropout", "0.05", lambda p: p.lora_dropout),
        ("fragmentation", "5%", lambda p: p.overhead.fragmentation),
        ("cuda_context", "512MiB", lambda p: p.overhead.cuda_context),
    ],
)
def test_a_typed_value_sets_a_number_row(key: str, text: str, read: object) -> None:
    expected = {"4": 4, "8,192": 8192, "0.05": 0.05, "5%": 0.05, "512MiB": 512 * 2**20}[text]
    assert read(set_typed(llama_plan(), key, text)) == expected  # type: ignore[operator]


@pytest.mark.parametrize(
    ("key", "text", "says"),
    [
        ("micro_batch", "four", "not a whole number"),
        ("micro_batch", "0", "Micro-batch 0"),
        ("micro_batch", "-2", "not a whole number"),
        ("lora_dropout", "lots", "not a number"),
        ("cuda_context", "512", "has no unit"),
        ("strategy", "zero3", "not a number row"),
    ],
)
def test_a_bad_typed_value_is_one_line_and_changes_nothing(key: str, text: str, says: str) -> None:
    with pytest.raises(PlanEditError, match=says) as caught:
        set_typed(llama_plan(), key, text)
    assert "\n" not in str(caught.value)


def test_every_number_row_takes_a_typed_value_and_no_list_row_does() -> None:
    for setting in SETTINGS:
        assert not (setting.listed is not None and setting.typed is not None), setting.key
    typed = {s.key for s in SETTINGS if s.typed is not None}
    assert {"micro_batch", "seq_len", "grad_accum", "gpus_per_node", "nodes", "lora_rank"} <= typed


# -- the app --------------------------------------------------------------------------


async def test_undo_redo_and_reset_keys() -> None:
    app = make_app(llama_plan())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        start = screen.plan
        await pilot.press("s", "o")
        await pilot.pause()
        assert screen.plan.strategy is Strategy.fsdp_shard_grad_op
        assert screen.plan.optimizer is Optimizer.adamw8bit
        await pilot.press("z")
        assert screen.plan.optimizer is Optimizer.adamw
        assert screen.plan.strategy is Strategy.fsdp_shard_grad_op
        await pilot.press("z")
        assert screen.plan == start
        await pilot.press("Z")
        assert screen.plan.strategy is Strategy.fsdp_shard_grad_op
        await pilot.press("m", "R")
        await pilot.pause()
        assert screen.plan == start
        await pilot.press("z")  # reset is an edit too
        assert screen.plan.method is not start.method


async def test_shift_keys_cycle_backward() -> None:
    app = make_app(llama_plan())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        start = screen.plan
        for forward, backward in (("s", "S"), ("o", "O"), ("m", "M"), ("p", "P"), ("c", "C"),
                                  ("k", "K")):  # fmt: skip
            await pilot.press(forward)
            assert screen.plan != start, forward
            await pilot.press(backward)
            assert screen.plan == start, backward
        await pilot.press("S")
        assert screen.plan.strategy is Strategy.zero3  # the one before fsdp


async def test_a_step_that_wraps_is_said_on_screen() -> None:
    plan = llama_plan().evolve(strategy=Strategy.hsdp)
    app = make_app(plan)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = screen_of(app)
        values, _ = BY_KEY["strategy"].listed(screen.plan)  # type: ignore[misc]
        last = values[-1]
        while screen.plan.strategy is not last:
            await pilot.press("s")
        await pilot.press("s")
        await wait_for(pilot, lambda: "back to the first" in text_of(app))
        assert screen.plan.strategy is values[0]


async def test_enter_on_a_number_row_asks_and_checks_the_value() -> None:
    app = make_app(llama_plan())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await pilot.press(*["down"] * SETTINGS.index(BY_KEY["micro_batch"]), "enter")
        await pilot.pause()
        assert isinstance(app.screen, Ask)
        assert screen.plan.micro_batch == 1  # enter did not step it
        await pilot.press("ctrl+a", "ctrl+k", *"two", "enter")
        await pilot.pause()
        assert isinstance(app.screen, Ask) and "not a whole number" in text_of(app)
        await pilot.press("ctrl+a", "ctrl+k", "3", "enter")
        await pilot.pause()
        assert app.screen is screen and screen.plan.micro_batch == 3
        await pilot.press("enter", "ctrl+a", "ctrl+k", "7", "escape")
        await pilot.pause()
        assert app.screen is screen and screen.plan.micro_batch == 3  # escape keeps it
        await pilot.press("z")
        assert screen.plan.micro_batch == 1  # a typed value is undone like a step


async def test_quit_without_a_change_asks_nothing() -> None:
    app = make_app(llama_plan())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("s", "z", "q")  # changed and changed back: nothing to save
        await pilot.pause()
    assert app.return_code == 0


async def test_quit_after_a_change_asks_to_save(tmp_path: Path) -> None:
    target = tmp_path / "plan.toml"
    app = make_app(llama_plan(), save_path=target)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await pilot.press("s", "q")
        await pilot.pause()
        assert isinstance(app.screen, Confirm) and "Save it before quitting" in text_of(app)
        await pilot.press("escape")  # stay
        await pilot.pause()
        assert app.screen is screen and app.is_running
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("y")  # save: the file name is asked, then the plan written
        await pilot.pause()
        assert isinstance(app.screen, Ask)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not app.is_running)
    assert load_plan(target).strategy is Strategy.fsdp_shard_grad_op


async def test_quit_without_saving_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "plan.toml"
    app = make_app(llama_plan(), save_path=target)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("s", "q")
        await pilot.pause()
        await pilot.press("n")
        await wait_for(pilot, lambda: not app.is_running)
    assert not target.exists()


async def test_save_asks_the_name_and_before_overwriting(tmp_path: Path) -> None:
    existing = tmp_path / "mine.toml"
    existing.write_text("# my own notes\n" + plan_to_toml(llama_plan()))
    before = existing.read_text()
    app = make_app(llama_plan(), save_path=tmp_path / "default.toml")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = screen_of(app)
        await pilot.press("s", "w")
        await pilot.pause()
        assert isinstance(app.screen, Ask) and "default.toml" in text_of(app)
        await pilot.press("ctrl+a", "ctrl+k", *str(existing), "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, Confirm))
        await pilot.pause()
        assert "Overwrite it?" in text_of(app)
        await pilot.press("n")
        await pilot.pause()
        assert existing.read_text() == before and app.screen is screen
        await pilot.press("w")
        await pilot.pause()
        assert str(existing) in text_of(app)  # the name offered is the last one given
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, Confirm))
        await pilot.press("y")
        await wait_for(pilot, lambda: existing.read_text() != before)
        assert load_plan(existing).strategy is Strategy.fsdp_shard_grad_op
        await pilot.press("q")  # saved: nothing to ask
        await pilot.pause()
    assert app.return_code == 0
    assert not (tmp_path / "default.toml").exists()


async def test_an_empty_file_name_is_refused_in_the_dialog(tmp_path: Path) -> None:
    app = make_app(llama_plan(), save_path=tmp_path / "p.toml")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("w")
        await pilot.pause()
        await pilot.press("ctrl+a", "ctrl+k", "enter")
        await pilot.pause()
        assert isinstance(app.screen, Ask) and "give a file name" in text_of(app)


async def test_quit_from_another_screen_still_asks_to_save() -> None:
    from textual.screen import Screen

    app = make_app(llama_plan())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("s")
        await app.push_screen(Screen())
        await pilot.press("q")  # the app's own key, over a screen that is not the dashboard
        await pilot.pause()
        assert isinstance(app.screen, Confirm) and app.is_running
        await pilot.press("q")  # asked already: not a second question
        await pilot.pause()
        assert len([s for s in app.screen_stack if isinstance(s, Confirm)]) == 1
        await pilot.press("n")
        await wait_for(pilot, lambda: not app.is_running)
