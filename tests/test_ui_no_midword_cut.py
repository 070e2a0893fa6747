"""Nothing cut mid-word on the nearest-to-OOM line: the real `--demo` app with Pilot at
80x24, 100x30, 120x40 and 160x50, and the shared cut (`cut_text`) at widths no variant fits."""

from __future__ import annotations

import pytest
from ui_helpers import demo_source, llama_plan, region_text, screen_of, wait_for

from memtui.text import shown
from memtui.ui import make_app
from memtui.ui.plan_edits import SETTINGS
from memtui.ui.widgets.lever_list import LeverList
from memtui.ui.widgets.oom_line import OomLine
from memtui.ui.widgets.process_table import ProcessTable, process_rows
from memtui.ui.widgets.settings_panel import SettingsPanel
from memtui.ui.widgets.word_fit import MORE, cut_text

SAID = "Nearest to OOM: GPU 6, 77.8 GB free"


def _not_whole(shown: str, said: str) -> list[str]:
    words = set(said.split())
    return [w for w in shown.split() if w.removesuffix(MORE) not in words]


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (120, 40), (160, 50)])
async def test_the_oom_line_shows_only_whole_words(size: tuple[int, int]) -> None:
    plan = llama_plan()
    app = make_app(plan, demo_source(plan), interval=3600)
    async with app.run_test(size=size) as pilot:
        screen = screen_of(app)
        line = screen.query_one(OomLine)
        await wait_for(pilot, lambda: line.view is not None and bool(line.view.variants))
        await pilot.pause()
        assert line.view is not None
        shown = region_text(app, line).strip()
        assert shown.startswith("Nearest to OOM")
        assert any(_not_whole(shown, v) == [] for v in line.view.variants)


@pytest.mark.parametrize("width", [12, 20, 30, 60])
def test_cut_text_ends_after_a_whole_word(width: int) -> None:
    cut = cut_text(SAID, width)
    assert len(cut) <= width
    assert _not_whole(cut, SAID) == []
    assert cut == SAID if len(SAID) <= width else cut.endswith(MORE)


def _cut_inside_a_word(shown: str, said: list[str]) -> list[str]:
    """The shown words ending with `MORE` that are not a whole word of the strings given."""
    words = {w for s in said for w in s.split()}
    return [w for w in shown.split() if w.endswith(MORE) and w.removesuffix(MORE) not in words]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_levers_settings_and_processes_cut_only_after_whole_words(
    size: tuple[int, int],
) -> None:
    plan = llama_plan()
    app = make_app(plan, demo_source(plan), interval=3600)
    async with app.run_test(size=size) as pilot:
        screen = screen_of(app)
        levers = screen.query_one(LeverList)
        processes = screen.query_one(ProcessTable)
        settings = screen.query_one(SettingsPanel)
        await wait_for(pilot, lambda: levers.view is not None and processes.view is not None)
        await pilot.pause()
        assert levers.view is not None and processes.view is not None
        lever_said = [s for lv in levers.view.levers for s in (lv.name, lv.cost, lv.why or "")]
        rows, notes = process_rows(processes.view)
        process_said = [c for r in rows for c in r.cells] + notes
        assert settings.plan is not None
        # the values as the settings give them, before any fitting, and the row labels
        settings_said = [s.label for s in SETTINGS] + [
            shown(s.show(settings.plan)) for s in SETTINGS
        ]
        for widget, said in ((levers, lever_said), (processes, process_said)):
            drawn = region_text(app, widget)  # empty where the layout hides the widget
            assert _cut_inside_a_word(drawn, said) == [], type(widget).__name__
        assert _cut_inside_a_word(region_text(app, settings), settings_said) == []
