"""The help screen: every binding of the app, the dashboard and the widgets on it, each with the
key the app shows for it; a glossary of every abbreviation on screen; scrolled by keyboard."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from textual.binding import Binding
from textual.containers import VerticalScroll
from ui_helpers import demo_source, llama_plan, screen_of, text_of

from memtui.estimator.terms import TermKind
from memtui.ui import make_app
from memtui.ui.help_screen import HelpScreen, glossary


def _rendered(app: Any, width: int = 200) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(app.screen.body)
    return console.export_text()


def _all_bindings(app: Any, screen: Any) -> list[Binding]:
    """Every binding declared by memtui's classes on screen, the app's included."""
    found: list[Binding] = []
    for node in [app, screen, *screen.walk_children(with_self=False)]:
        for cls in type(node).__mro__:
            if cls.__module__.startswith("memtui."):
                found.extend(Binding.make_bindings(cls.__dict__.get("BINDINGS", [])))
    return found


async def test_the_help_lists_every_binding_with_its_key() -> None:
    plan = llama_plan()
    app = make_app(plan, demo_source(plan), interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        bindings = _all_bindings(app, screen)
        assert len(bindings) > 40
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        lines = _rendered(app).splitlines()
        for binding in bindings:
            key = app.get_key_display(binding)
            wanted = binding.description or binding.tooltip
            assert any(key in line and wanted in line for line in lines), (key, wanted)


async def test_the_help_shows_keys_as_remapped() -> None:
    app = make_app(llama_plan(), keymap={"strategy": "x"})
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        lines = [ln.split() for ln in _rendered(app).splitlines()]
        assert ["x", "Strategy"] in lines and ["s", "Strategy"] not in lines


def test_the_glossary_names_every_abbreviation_on_screen() -> None:
    words = {short for short, _ in glossary()}
    assert {kind.short for kind in TermKind} <= words
    for abbreviation in ("cap", "head", "static", "mb", "seq", "poll N ms", "PID", "peak"):
        assert abbreviation in words, abbreviation


async def test_every_term_short_label_on_screen_is_in_the_glossary() -> None:
    """What the legend shows at 80 columns (the shortest labels) is explained."""
    plan = llama_plan()
    app = make_app(plan, demo_source(plan), interval=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen_text = text_of(app)
        await pilot.press("question_mark")
        await pilot.pause()
        explained = _rendered(app)
    shown = [kind.short for kind in TermKind if f"■{kind.short} " in screen_text]
    assert shown  # the legend is there
    for short in shown:
        assert any(line.split()[:1] == [short] for line in explained.splitlines()), short


async def test_the_help_scrolls_by_keyboard_and_closes() -> None:
    app = make_app(llama_plan())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        scroll = app.screen.query_one("#help-scroll", VerticalScroll)
        assert scroll.max_scroll_y > 0  # taller than 24 lines: it must scroll
        await pilot.press("pagedown")
        await pilot.pause()
        assert scroll.scroll_y > 0
        await pilot.press("end")
        await pilot.pause()
        assert scroll.scroll_y == scroll.max_scroll_y
        assert glossary()[-1][0] in text_of(app)  # the last line of the help is on screen
        await pilot.press("home")
        await pilot.pause()
        assert scroll.scroll_y == 0
        await pilot.press("down", "down")
        await pilot.pause()
        assert scroll.scroll_y == 2
        await pilot.press("up")
        await pilot.pause()
        assert scroll.scroll_y == 1
        await pilot.press("pageup")
        await pilot.pause()
        assert scroll.scroll_y == 0
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
