"""The snapshot view in the dashboard, driven with Textual's Pilot: `--snapshot FILE` at
start-up, the `x` key with a typed path, devices and units, and a bad file said in one line."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from snapshot_files import STACKS, FakeAllocator, MiB, OomScenario, snapshot_of, write
from ui_helpers import llama_plan, screen_of, text_of, wait_for

from memtui.cli import build_parser
from memtui.commands import dashboard
from memtui.errors import UsageError
from memtui.ui import make_app
from memtui.ui.snapshot_screen import SnapshotScreen


@pytest.fixture
def oom_file(tmp_path: Path) -> Path:
    a = FakeAllocator(OomScenario().capacity)
    OomScenario().run(a)
    b = FakeAllocator(2**33, device=1)
    b.malloc(300 * MiB, STACKS["gradients"])
    return write(tmp_path / "oom.pickle", snapshot_of(a, b))


def _view_text(app: object) -> str:
    return text_of(app)  # type: ignore[arg-type]


async def test_snapshot_flag_opens_the_view_over_the_dashboard(oom_file: Path) -> None:
    app = make_app(llama_plan(), snapshot=oom_file)
    async with app.run_test(size=(120, 50)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SnapshotScreen))
        screen = app.screen
        assert isinstance(screen, SnapshotScreen)
        await wait_for(pilot, lambda: screen.summary is not None, steps=800)
        await pilot.pause()
        text = _view_text(app)
        assert "GPU 0: the allocator's memory" in text
        assert "fragmentation caused this OOM" in text
        assert "plan GiB" in text and "Llama-2-7b" in text  # the dashboard's plan beside it
        await pilot.press("u")
        await pilot.pause()
        assert "plan GB" in _view_text(app)
        await pilot.press("d")
        await pilot.pause()
        assert "GPU 1: the allocator's memory" in _view_text(app)
        await pilot.press("escape")
        await pilot.pause()
        screen_of(app)  # back on the dashboard


async def test_the_snapshot_key_asks_for_a_path_and_reads_it(
    oom_file: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(pickle.dumps({"segments": [], "x": Path("/")}))
    app = make_app(llama_plan())
    seen: list[str] = []
    original = app.notify
    app.notify = lambda message, *a, **k: (seen.append(message), original(message, *a, **k))  # type: ignore[method-assign]
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.press("F")
        await wait_for(pilot, lambda: isinstance(app.screen, SnapshotScreen))
        screen = app.screen
        assert isinstance(screen, SnapshotScreen) and screen.has_class("-asking")
        await pilot.press(*str(bad), "enter")
        await wait_for(pilot, lambda: screen.error is not None, steps=800)
        assert "refuses every class" in screen.error
        assert any("refuses every class" in m for m in seen)
        await pilot.press("o")
        field = screen.query_one("#snapshot-path")
        field.value = str(oom_file)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.summary is not None, steps=800)
        await pilot.pause()
        assert "Where it went" in _view_text(app)
        assert screen.summary is not None and screen.summary.path == str(oom_file)


def test_dashboard_flag_parses_and_checks_the_file(tmp_path: Path) -> None:
    parser = build_parser()
    args = parser.parse_args(["dashboard", "--snapshot", str(tmp_path / "none.pickle")])
    with pytest.raises(UsageError, match=r"--snapshot .*no such file"):
        dashboard.build(args)
