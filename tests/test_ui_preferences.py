"""The dashboard's preferences file: read through memtui.bounded at start (unit, theme, refresh
interval, hidden panels), a bad file one line and the defaults, written back by the `u` and `t`
keys; flags win over it."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from ui_helpers import llama_plan, screen_of, text_of, wait_for

from memtui.commands import dashboard
from memtui.ui import make_app
from memtui.ui.preferences import Panel, Preferences, load, preferences_path, save, to_toml


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    dashboard.add_dashboard_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    return tmp_path


def test_the_file_lives_under_the_users_config_folder(
    config_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert preferences_path() == config_home / "memtui" / "preferences.toml"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert preferences_path() == Path.home() / ".config" / "memtui" / "preferences.toml"


def test_no_file_is_the_defaults(config_home: Path) -> None:
    loaded = load()
    assert loaded.preferences == Preferences() and loaded.problem is None


def test_a_file_round_trips(config_home: Path) -> None:
    wanted = Preferences(unit="GiB", theme='odd "name"', interval=2.5, hidden=(Panel.levers,))
    assert save(wanted, preferences_path()) is None
    assert load().preferences == wanted
    assert to_toml(Preferences()).count("\n") == 1  # the defaults: the comment alone


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("unit = ", "not TOML"),
        ('unit = "MB"', "unit"),
        ("interval = 0", "interval"),
        ('hidden = ["gpus"]', "hidden"),
        ("colour = 1", "colour"),
        ("\x1b[31m = 1", "not TOML"),
    ],
)
def test_a_bad_file_is_one_line_and_the_defaults(config_home: Path, text: str, says: str) -> None:
    path = preferences_path()
    path.parent.mkdir(parents=True)
    path.write_text(text)
    loaded = load()
    assert loaded.preferences == Preferences()
    assert loaded.problem is not None and says in loaded.problem
    assert "\n" not in loaded.problem and "\x1b" not in loaded.problem


def test_a_fifo_or_a_huge_file_is_refused_at_once(config_home: Path) -> None:
    path = preferences_path()
    path.parent.mkdir(parents=True)
    os.mkfifo(path)  # a writer never comes: a blocking open would hang here
    problem = load().problem
    assert problem is not None and "regular file" in problem
    path.unlink()
    path.write_text("# " + "x" * 100_000)
    problem = load().problem
    assert problem is not None and "KiB" in problem


async def test_the_dashboard_starts_with_the_preferences(config_home: Path) -> None:
    save(Preferences(unit="GiB", theme="memtui-light", hidden=(Panel.levers,)), preferences_path())
    app = make_app(llama_plan(), preferences=load())
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = screen_of(app)
        await pilot.pause()
        assert screen.unit == "GiB" and "GiB = 2^30 B" in text_of(app)
        assert app.theme == "memtui-light"
        assert not screen.query_one("#levers").display
        assert "Lever (largest saving first)" not in text_of(app)
        await pilot.press("5")  # the panel key says why nothing shows
        await wait_for(pilot, lambda: "hidden by the preferences" in text_of(app))


async def test_the_unit_and_theme_keys_write_the_file(config_home: Path) -> None:
    app = make_app(llama_plan(), preferences=load())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("u")
        await wait_for(pilot, lambda: load().preferences.unit == "GiB")
        await pilot.press("t")
        await wait_for(pilot, lambda: load().preferences.theme == "memtui-light")
        assert load().preferences.unit == "GiB"  # one change keeps the others


async def test_a_bad_file_is_a_note_on_screen_never_a_crash(config_home: Path) -> None:
    path = preferences_path()
    path.parent.mkdir(parents=True)
    path.write_text("unit = [")
    app = make_app(llama_plan(), preferences=load())
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await wait_for(pilot, lambda: "not TOML" in text_of(app))
        assert screen_of(app).unit == "GB"


def test_flags_win_over_the_preferences(config_home: Path) -> None:
    save(Preferences(interval=2.5, theme="memtui-light"), preferences_path())
    app = dashboard.build(_args("--demo"))
    assert app._interval == 2.5 and app.theme == "memtui-light"
    app = dashboard.build(_args("--demo", "--interval", "3", "--theme", "memtui-dark"))
    assert app._interval == 3.0 and app.theme == "memtui-dark"
    path = preferences_path()
    path.write_text("interval = 'soon'")
    app = dashboard.build(_args("--demo"))
    assert app._interval == dashboard.DEFAULT_INTERVAL


async def test_the_unit_flag_wins_over_the_kept_unit(config_home: Path) -> None:
    # one unit convention across commands: --unit on the dashboard as on estimate and watch
    save(Preferences(unit="GiB"), preferences_path())
    for argv, unit in ((("--demo",), "GiB"), (("--demo", "--unit", "gb"), "GB"),
                       (("--demo", "--unit", "GIB"), "GiB")):  # fmt: skip
        app = dashboard.build(_args(*argv))
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            assert screen_of(app).unit == unit, argv


async def test_the_panels_key_hides_and_shows_a_panel_and_keeps_it(config_home: Path) -> None:
    app = make_app(llama_plan(), preferences=load())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await pilot.press("H")
        await pilot.pause()
        assert "Hide or show which panel?" in text_of(app)
        await pilot.press("5")
        await wait_for(pilot, lambda: load().preferences.hidden == (Panel.levers,))
        assert not screen.query_one("#levers").display
        await pilot.press("H", "5")
        await wait_for(pilot, lambda: load().preferences.hidden == ())
        assert screen.query_one("#levers").display
