"""Themes, saved plans, the model picker, NO_COLOR and the `memtui` entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input
from ui_helpers import llama_plan, screen_of, segments_of, text_of, wait_for

from memtui.cli import build_parser, main
from memtui.commands import dashboard
from memtui.errors import UsageError
from memtui.estimator import Method, Strategy
from memtui.plans.memtui_toml import load_plan, plan_to_toml, save_plan
from memtui.telemetry import ReplaySource, SyntheticSource
from memtui.ui import make_app
from memtui.ui.themes import load_themes, theme_dirs, variable_defaults

REPO = Path(__file__).resolve().parent.parent


# A small LLaMA-style config.json, as a user's local model folder would hold it.
TINY_LLAMA_CONFIG = {
    "model_type": "llama",
    "hidden_size": 512,
    "intermediate_size": 1376,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "num_hidden_layers": 4,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
}


# -- themes ---------------------------------------------------------------------------


def test_shipped_themes_parse_and_define_every_variable() -> None:
    loaded = load_themes([REPO / "themes"])
    assert loaded.errors == []
    names = [t.name for t in loaded.themes]
    assert names[:2] == ["memtui-dark", "memtui-light"]
    for theme in loaded.themes:
        assert set(variable_defaults()) <= set(theme.variables)


def test_theme_folders_cover_the_wheel_and_the_checkout() -> None:
    package = REPO / "memtui"
    dirs = theme_dirs()
    assert dirs[0] == package / "themes"  # the wheel force-includes themes/ here
    assert dirs[1] == REPO / "themes"  # an editable or source checkout
    assert any(d.is_dir() and (d / "dark.toml").is_file() for d in dirs)


def test_a_broken_theme_is_reported_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('name = "bad"\nprimary = "not-a-colour"\n')
    (tmp_path / "typo.toml").write_text(
        'name = "typo"\nprimary = "#fff"\n[variables]\nterm-wait = "#000"\n'
    )
    (tmp_path / "broken.toml").write_text("name = \n")
    loaded = load_themes([REPO / "themes", tmp_path])
    assert len(loaded.errors) == 3
    assert any("bad.toml: primary" in e and "not a colour" in e for e in loaded.errors)
    assert any("unknown variable 'term-wait'" in e for e in loaded.errors)
    assert any("not valid TOML" in e for e in loaded.errors)
    assert [t.name for t in loaded.themes] == ["memtui-dark", "memtui-light"]


async def test_app_notifies_about_bad_themes_and_unknown_names(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('name = "bad"\nprimary = "#zzz"\n')
    app = make_app(llama_plan(), theme="nope", theme_dirs=[REPO / "themes", tmp_path])
    seen: list[str] = []
    original = app.notify
    app.notify = lambda message, *a, **k: (seen.append(message), original(message, *a, **k))  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == "memtui-dark"
    assert any("bad.toml" in m for m in seen)
    assert any("no theme 'nope'" in m for m in seen)


async def test_the_dashboard_is_the_first_screen_with_no_blank_one_below() -> None:
    """The dashboard is the app's first screen: a blank default screen under it was laid out
    and drawn in full before the dashboard's first frame (benchmarks/bench_ui.py)."""
    app = make_app(llama_plan())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.screen_stack == [screen_of(app)]


async def test_theme_flag_selects_the_light_theme() -> None:
    app = make_app(llama_plan(), theme="memtui-light")
    async with app.run_test(size=(80, 24)):
        assert app.theme == "memtui-light"
        assert app.get_css_variables()["term-weights"] == "#0050c8"


async def test_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(llama_plan(), plan_only_reason="no NVML here")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.no_color
        # what reaches the terminal carries no hue: Textual's NO_COLOR filter (Monochrome on a
        # truecolor terminal) leaves greys only, on every segment, foreground and background
        for text, style in segments_of(app):
            for colour in (style.color, style.bgcolor) if style is not None else ():
                if colour is None:
                    continue
                r, g, b = colour.get_truecolor()
                assert max(r, g, b) - min(r, g, b) <= 2, (text, colour)
        screen = text_of(app)
        # without colour the verdict and the bar still read: words and distinct glyphs
        assert "FITS" in screen and "░" in screen and "│" in screen and "plan-only" in screen


# -- saved plans ----------------------------------------------------------------------


def test_plan_round_trips_through_toml(tmp_path: Path) -> None:
    plan = llama_plan().model_copy(update={"strategy": Strategy.zero2, "method": Method.lora})
    path = save_plan(plan, tmp_path / "p.toml")
    assert load_plan(path) == plan
    assert 'ref = "meta-llama/Llama-2-7b-hf"' in plan_to_toml(plan)
    assert [p.name for p in tmp_path.iterdir()] == ["p.toml"]


def test_bad_plan_files_are_one_line_usage_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('strategy = "zero9"\n[model]\nref = "meta-llama/Llama-2-7b-hf"\n')
    with pytest.raises(UsageError, match="strategy"):
        load_plan(bad)
    with pytest.raises(UsageError, match="cannot read"):
        load_plan(tmp_path / "missing.toml")


# -- model picker ---------------------------------------------------------------------


async def test_model_picker_searches_the_catalog_and_loads_a_config(tmp_path: Path) -> None:
    config = TINY_LLAMA_CONFIG
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    app = make_app(llama_plan())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await pilot.press("slash")
        await pilot.press(*"mistral 7b")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "istral" in screen.plan.model.name)
        assert app.screen is screen
        await pilot.press("slash")
        await pilot.pause()
        app.screen.query_one(Input).value = str(path)  # typing a long path is slow, not new
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.plan.model.name == str(path))
        await pilot.press("slash")
        await pilot.pause()
        app.screen.query_one(Input).value = "/no/such/config.json"
        await pilot.press("enter")
        await wait_for(pilot, lambda: "not found" in text_of(app))
        await pilot.press("escape")
        assert app.screen is screen and screen.plan.model.name == str(path)


async def test_model_picker_survives_a_300_character_entry_and_takes_a_bare_count() -> None:
    app = make_app(llama_plan())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await pilot.press("slash")
        await pilot.pause()
        app.screen.query_one(Input).value = "x" * 300  # OSError 36: file name too long
        await pilot.press("enter")
        await wait_for(pilot, lambda: "cannot read it" in text_of(app))
        assert app.is_running and screen.plan.model == llama_plan().model
        app.screen.query_one(Input).value = "13B"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen)
        assert screen.plan.model.parameters == 13_000_000_000


async def test_a_model_loaded_after_escape_does_not_pop_the_dashboard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Enter then escape typed fast: escape closes the picker, then the load's answer arrives
    from its thread and closed "its" screen again, which was the dashboard: a blank, dead
    screen (5 runs in 9 of fast random keys). Here the answer is handed to the picker right
    after escape, as the worker does: the dashboard stays, unchanged, and answers keys."""
    import threading

    from memtui.estimator import model_source

    loading, release = threading.Event(), threading.Event()
    real = model_source.load_model

    def slow(ref: str, fetch: model_source.ConfigFetch | None = None) -> object:
        loading.set()
        release.wait(10)
        return real(ref, fetch)

    monkeypatch.setattr(model_source, "load_model", slow)
    app = make_app(llama_plan())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await pilot.press("slash")
        await pilot.pause()
        picker = app.screen
        picker.query_one(Input).value = "13B"
        await pilot.press("enter")
        await wait_for(pilot, loading.is_set)  # the load has begun, in its thread
        await pilot.press("escape")
        assert app.screen is screen
        picker._loaded(real("13B"))  # type: ignore[attr-defined]  # the worker's late answer
        release.set()
        await pilot.pause(0.2)
        assert app.screen is screen and app.is_running
        assert screen.plan.model == llama_plan().model  # escape won: nothing was picked
        await pilot.press("s")
        assert screen.plan.strategy is not llama_plan().strategy


async def test_picking_a_model_the_lora_targets_miss_keeps_the_plan() -> None:
    plan = llama_plan().model_copy(
        update={"method": Method.lora, "lora_targets": ("q_proj", "v_proj")}
    )
    app = make_app(plan)
    seen: list[str] = []
    original = app.notify
    app.notify = lambda message, *a, **k: (seen.append(message), original(message, *a, **k))  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await pilot.press("slash")
        await pilot.pause()
        app.screen.query_one(Input).value = "openai-community/gpt2"  # c_attn, no q_proj
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen and bool(seen))
        assert app.is_running
        assert screen.plan == plan
        assert any("kept meta-llama/Llama-2-7b-hf" in m for m in seen)


async def test_a_plan_the_estimator_rejects_keeps_the_previous_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import memtui.estimator as estimator_module  # the screen calls its `estimate`

    app = make_app(llama_plan())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        real = estimator_module.estimate

        def picky(plan: Any) -> Any:
            if plan.micro_batch > 1:
                raise ValueError("no such micro-batch here")
            return real(plan)

        monkeypatch.setattr(estimator_module, "estimate", picky)
        await pilot.press("plus")
        await pilot.pause()
        assert app.is_running and screen.plan.micro_batch == 1
        assert screen.report is not None
        assert screen.report.budget == real(llama_plan()).budget


def test_plan_file_with_an_overlong_ref_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "long.toml"
    bad.write_text(f'[model]\nref = "{"y" * 300}"\n')
    with pytest.raises(UsageError, match="cannot read it"):
        load_plan(bad)
    assert main(["--plan", str(bad)]) == 2


# -- entry point ----------------------------------------------------------------------


def _args(*argv: str) -> Any:
    return build_parser().parse_args(["dashboard", *argv])


def test_demo_flags_build_a_synthetic_node_budgeted_at_the_plan() -> None:
    from memtui.estimator import estimate

    app = dashboard.build(_args("--demo", "--gpus", "4", "--strategy", "zero3"))
    assert isinstance(app.source, SyntheticSource)
    assert app.source.gpus == 4
    plan = app._plan
    assert plan.strategy is Strategy.zero3 and plan.hardware.gpus_per_node == 4
    assert app.source.budget_bytes == estimate(plan).budget.total


def test_plan_file_then_flags(tmp_path: Path) -> None:
    path = save_plan(
        llama_plan().model_copy(update={"strategy": Strategy.zero1}), tmp_path / "p.toml"
    )
    app = dashboard.build(_args("--plan", str(path), "--micro-batch", "3", "--demo"))
    assert app._plan.strategy is Strategy.zero1 and app._plan.micro_batch == 3


def test_replay_flag_and_usage_errors(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    assert isinstance(dashboard.build(_args("--replay", str(trace))).source, ReplaySource)
    with pytest.raises(UsageError, match="no such file"):
        dashboard.build(_args("--replay", str(tmp_path / "missing.jsonl")))
    with pytest.raises(UsageError, match="interval"):
        dashboard.build(_args("--demo", "--interval", "0"))
    assert main(["--demo", "--interval", "-1"]) == 2


async def test_replay_fits_the_plan_to_the_traces_gpus(tmp_path: Path) -> None:
    """4 x A100 40GB in the trace: the plan is sized to them (not the default 8 x 80 GB), so
    Llama-2-7B full fine-tuning says DOES NOT FIT against 40 GB."""
    from ui_helpers import write_trace

    a100 = SyntheticSource(4, card="NVIDIA A100-SXM4-40GB", total_bytes=42_949_672_960, seed=0)
    trace = write_trace(tmp_path / "a100.jsonl", [a100.poll()])
    app = dashboard.build(_args("--replay", str(trace), "--interval", "3600"))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.polls >= 1 and screen.report is not None)
        await pilot.pause()
        assert screen.plan.hardware.gpus_per_node == 4
        assert screen.plan.hardware.gpu_memory == 42_949_672_960
        assert screen.plan.hardware.gpu_name == "NVIDIA A100-SXM4-40GB"
        assert "DOES NOT FIT" in text_of(app)
    # a flag wins over the trace
    app = dashboard.build(_args("--replay", str(trace), "--gpus", "8"))
    assert app._fit == frozenset({"memory"})


def _has_nvml() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


_PLAN_ONLY_SCRIPT = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
from ui_helpers import screen_of, text_of, wait_for
from memtui.cli import build_parser
from memtui.commands import dashboard

async def main():
    app = dashboard.build(build_parser().parse_args(["dashboard"]))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.plan_only_reason is not None)
        await pilot.pause()
        print(screen.plan_only_reason)
        print(text_of(app))

asyncio.run(main())
"""


@pytest.mark.skipif(_has_nvml(), reason="this machine has an NVIDIA driver")
def test_no_nvml_here_means_plan_only_saying_why() -> None:
    """Without libnvidia-ml, `memtui` alone shows the plan and says why. In a fresh process:
    the fake NVML other tests load in-process would answer to the library's name."""
    out = subprocess.run(
        [sys.executable, "-c", _PLAN_ONLY_SCRIPT, str(Path(__file__).parent)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    reason, _, screen = out.partition("\n")
    assert "no NVIDIA driver" in reason
    assert "plan-only" in screen and "memtui --demo" in screen and "FITS" in screen


def test_estimate_json_does_not_import_textual() -> None:
    code = (
        "import sys, io, contextlib; from memtui.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['estimate', '--json', '--params', '7B'])\n"
        "assert 'textual' not in sys.modules, 'textual imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_theme_switch_recolours_every_widget() -> None:
    """After `t`, no widget keeps a colour of the dark theme that the light one changes."""
    from ui_helpers import colours_in

    from memtui.ui.themes import load_themes
    from memtui.ui.widgets.gpu_panel import GpuPanel
    from memtui.ui.widgets.lever_list import LeverList
    from memtui.ui.widgets.status_line import StatusLine
    from memtui.ui.widgets.strategy_table import StrategyTable

    themes = {t.name: t for t in load_themes([REPO / "themes"]).themes}
    light = themes["memtui-light"]
    light_colours = {
        str(getattr(light, name)).lower()
        for name in ("primary", "secondary", "accent", "warning", "error", "success",
                     "foreground", "background", "surface", "panel")
    } | {str(c).lower() for c in light.variables.values()}  # fmt: skip
    app = make_app(llama_plan(), plan_only_reason="no NVML here")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        widgets = [
            app.screen.query_one("#strategies", StrategyTable),
            app.screen.query_one(LeverList),
            app.screen.query_one(StatusLine),
            app.screen.query_one(GpuPanel).query_one("#legend"),
        ]
        # colours of the dark theme the light one does not have (dark's foreground is light's
        # panel, the border colour, so that one is left out)
        before = {w: colours_in(app, w) - light_colours for w in widgets}
        assert all(before.values()), before
        await pilot.press("t")
        await pilot.pause()
        await pilot.pause()
        assert app.theme == light.name
        for widget in widgets:
            stale = colours_in(app, widget) & before[widget]
            assert not stale, (widget, stale)


# -- saving: mode, --save, paths relative to the plan file ------------------------------


def test_a_saved_plan_gets_the_umask_mode_not_0600(tmp_path: Path) -> None:
    import os

    old = os.umask(0o027)
    try:
        path = save_plan(llama_plan(), tmp_path / "new.toml")
        assert path.stat().st_mode & 0o777 == 0o640
        os.umask(0o022)
        path = save_plan(llama_plan(), tmp_path / "other.toml")
        assert path.stat().st_mode & 0o777 == 0o644
        # an existing file keeps its own mode
        path.chmod(0o600)
        save_plan(llama_plan(), path)
        assert path.stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def test_saving_through_a_symlink_writes_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    target = tmp_path / "real" / "plan.toml"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "plan.toml"
    link.symlink_to(target)
    written = save_plan(llama_plan(), link)
    assert link.is_symlink() and link.resolve() == target
    assert load_plan(target) == load_plan(link) and written == target
    dangling = tmp_path / "new.toml"
    dangling.symlink_to(tmp_path / "real" / "new-target.toml")
    save_plan(llama_plan(), dangling)  # a link to a path not made yet: made, through the link
    assert dangling.is_symlink() and (tmp_path / "real" / "new-target.toml").is_file()


def test_saving_onto_a_device_pipe_or_folder_is_refused(tmp_path: Path) -> None:
    """`--save /dev/full` as root replaced the device with a text file: anything but a
    regular file (or a path not made yet) is refused, through a link or not, and left as
    it was."""
    import os
    import stat

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    to_null = tmp_path / "null.toml"
    to_null.symlink_to(os.devnull)
    for path in (fifo, to_null, tmp_path):
        with pytest.raises(OSError, match="not a regular file"):
            save_plan(llama_plan(), path)
    assert stat.S_ISFIFO(fifo.stat().st_mode) and to_null.is_symlink()
    assert stat.S_ISCHR(Path(os.devnull).stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null.toml", "pipe"]  # no temp left


async def test_the_save_key_says_why_a_path_cannot_take_the_plan(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    app = make_app(llama_plan(), save_path=fifo)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("w")
        await pilot.pause()
        await pilot.press("enter")  # the file name offered: the save path
        await wait_for(pilot, lambda: "not a regular file" in text_of(app))
        assert "saved" not in text_of(app)


def test_save_flag_and_its_defaults(tmp_path: Path) -> None:
    source = save_plan(llama_plan(), tmp_path / "source.toml")
    out = tmp_path / "out.toml"
    app = dashboard.build(_args("--demo", "--plan", str(source), "--save", str(out)))
    assert app._save_path == out
    assert dashboard.build(_args("--demo", "--plan", str(source)))._save_path == source
    default = dashboard.build(_args("--demo"))._save_path
    assert default == Path(dashboard.DEFAULT_SAVE)


async def test_save_key_writes_the_save_path_and_says_where(tmp_path: Path) -> None:
    """`--save` leaves the --plan file (and its comments) alone; the screen says the whole
    path it wrote."""
    source = tmp_path / "source.toml"
    source.write_text("# my notes\n" + plan_to_toml(llama_plan()))
    out = tmp_path / "out" / "saved.toml"
    app = dashboard.build(
        _args("--demo", "--plan", str(source), "--save", str(out), "--interval", "3600")
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("s", "w")
        await pilot.pause()
        await pilot.press("enter")  # the file name offered: the --save path
        await wait_for(pilot, out.exists)
        await pilot.pause()
        assert load_plan(out).strategy is Strategy.fsdp_shard_grad_op
        assert source.read_text().startswith("# my notes\n")
        from ui_helpers import region_text

        from memtui.ui.widgets.status_line import StatusLine

        def status() -> str:
            return "".join(region_text(app, app.screen.query_one(StatusLine)).split())

        await wait_for(pilot, lambda: "plansavedto" in status())
        await pilot.pause()
        assert f"plansavedto{out.resolve()}" in status()


def test_relative_config_refs_resolve_against_the_plan_files_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memtui.estimator.model_source import load_model

    config = TINY_LLAMA_CONFIG
    plans = tmp_path / "plans"
    (plans / "tiny").mkdir(parents=True)
    (plans / "tiny" / "config.json").write_text(json.dumps(config))
    # loaded from the working folder as `plans/tiny/config.json`, saved beside it
    monkeypatch.chdir(tmp_path)
    plan = llama_plan().model_copy(update={"model": load_model("plans/tiny/config.json")})
    saved = save_plan(plan, plans / "plan.toml")
    assert 'ref = "tiny/config.json"' in saved.read_text()
    # read from anywhere else: the ref is found beside the plan file
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    loaded = load_plan(Path("..") / "plans" / "plan.toml")
    assert loaded.model.parameters == plan.model.parameters
    # a hand-written relative ref too
    (plans / "hand.toml").write_text('strategy = "zero2"\n[model]\nref = "tiny"\n')
    assert load_plan(plans / "hand.toml").model.parameters == plan.model.parameters
