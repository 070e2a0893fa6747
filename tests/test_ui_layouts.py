"""The layouts at 80x24, 100x30, 120x40 and 160x50: what each shows at start, every panel brought
into view by its key, every settings row and every lever reachable, and nothing cut mid-word
(lever costs wrap at words)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from ui_helpers import demo_source, llama_plan, screen_of, text_of, wait_for

from memtui.estimator import estimate
from memtui.ui import make_app
from memtui.ui.plan_edits import SETTINGS
from memtui.ui.screen import PANELS

SIZES = [(80, 24), (100, 30), (120, 40), (160, 50)]
IDS = ["80x24", "100x30", "120x40", "160x50"]

#: Text only that panel draws (the demo node: processes on every GPU).
MARKERS = {
    "settings": "Model",
    "gpus": "Budget per GPU",
    "strategies": "Static Total",
    "processes": "PID",
    "levers": "Lever (largest saving first)",
    "communication": "Communication:",
}

#: What each size shows before any key (the layouts' promise, README's table).
AT_START = {
    (80, 24): ("settings", "gpus", "strategies"),
    (100, 30): ("settings", "gpus", "strategies", "processes"),
    (120, 40): ("settings", "gpus", "strategies", "processes", "levers"),
    (160, 50): ("settings", "gpus", "strategies", "processes", "levers"),
}


def _app() -> Any:
    plan = llama_plan()
    return make_app(plan, demo_source(plan), interval=3600)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_what_each_size_shows_at_start(size: tuple[int, int]) -> None:
    app = _app()
    async with app.run_test(size=size) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        await pilot.pause()
        text = text_of(app)
        for panel in AT_START[size]:
            assert MARKERS[panel] in text, (size, panel)
        assert screen.has_class("-narrow") is (size[0] < 100)
        assert screen.has_class("-wide") is (size[0] >= 160)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_every_panel_is_brought_into_view_by_its_key(size: tuple[int, int]) -> None:
    app = _app()
    async with app.run_test(size=size) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        for order in (PANELS, tuple(reversed(PANELS))):  # down the page and back up
            for key, panel, _ in order:
                await pilot.press(key)
                await pilot.pause()
                assert MARKERS[panel] in text_of(app), (size, key, panel)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_every_settings_row_and_every_lever_is_reachable(size: tuple[int, int]) -> None:
    app = _app()
    async with app.run_test(size=size) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        await pilot.press("1", "end")
        await pilot.pause()
        assert SETTINGS[-1].label in text_of(app)
        assert "(last row)" in text_of(app) or f"{len(SETTINGS)}/{len(SETTINGS)}" in text_of(app)
        await pilot.press("home")
        levers = estimate(screen.plan).levers
        await pilot.press("5")
        for _ in range(10):  # the rest of a long list: page down the main column
            await pilot.pause()
            if levers[-1].name in text_of(app):
                break
            await pilot.press("pagedown")
        assert levers[-1].name in text_of(app), size


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_lever_costs_are_never_cut_mid_word(size: tuple[int, int]) -> None:
    app = _app()
    async with app.run_test(size=size) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        await pilot.press("5")
        await pilot.pause()
        # the part of the list on screen: inside the main column's visible region
        region = screen.query_one("#levers").content_region
        visible = region.intersection(screen.query_one("#main").region)
        lines = text_of(app).splitlines()[visible.y : visible.bottom]
        drawn = " ".join(line[region.x : region.right] for line in lines)
        assert "…" not in drawn
        # every word drawn is a whole word of a lever's name or cost, or of the header: a word
        # cut at the edge ("FLO" of "FLOPs") is none of them
        token = r"[^\s│()]+"
        header = "Lever (largest saving first) Saves GB, time Cost on n/a not applicable"
        whole: set[str] = set(re.findall(token, header))
        for lever in estimate(screen.plan).levers:
            whole |= set(re.findall(token, f"{lever.name} {lever.cost} {lever.why}"))
        longer = [w for w in whole if len(w) > region.width // 2]  # may fold: no word break
        for word in re.findall(token, drawn):
            folded = any(word in w for w in longer)
            number = re.fullmatch(r"[+-]?[\d.,]+%?", word)  # a saving or a step-time change
            assert word in whole or folded or number, (size, word)


@pytest.mark.parametrize("size", SIZES, ids=IDS)
async def test_the_footer_ends_before_the_edge(size: tuple[int, int]) -> None:
    """Every key the footer shows is shown whole: under 120 columns it leaves out the
    secondary keys (the help lists them)."""
    app = _app()
    async with app.run_test(size=size) as pilot:
        # the footer is drawn once the screen has its estimate and its first poll
        await wait_for(pilot, lambda: text_of(app).splitlines()[-1].strip() != "")
        footer = text_of(app).splitlines()[-1]
        assert footer.endswith(" "), footer
        assert ("Theme" in footer) is (size[0] >= 120), footer
