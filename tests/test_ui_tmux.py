"""The installed command in a real terminal multiplexer at each layout size: `memtui --demo` in a
tmux window of 80x24, 100x30, 120x40 and 160x50, keys typed with `tmux send-keys` and the screen
read back with `tmux capture-pane`. Every panel comes into view by its key, the last settings row
and the last lever are reached by keyboard, the help opens, scrolls to its glossary and closes,
and `q` quits. Waits are on what the screen shows, never on a fixed time."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ui_helpers import llama_plan

from memtui.estimator import estimate
from memtui.ui.help_screen import glossary
from memtui.ui.plan_edits import SETTINGS
from memtui.ui.screen import PANELS

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 60.0  # seconds for one thing to appear (start-up on a loaded machine included)
SIZES = [(80, 24), (100, 30), (120, 40), (160, 50)]
IDS = ["80x24", "100x30", "120x40", "160x50"]
MARKERS = {
    "settings": "Model",
    "gpus": "Budget per GPU",
    "strategies": "Static Total",
    "processes": "PID",
    "levers": "Lever (largest saving first)",
    "communication": "Communication:",
}


class Tmux:
    """One tmux server of our own (`-L`), one window running `memtui --demo`."""

    def __init__(self, socket: str, size: tuple[int, int], home: Path) -> None:
        tmux = shutil.which("tmux")
        assert tmux is not None, "tmux is needed (apt-get install tmux)"
        self.base = [tmux, "-L", socket]
        env = {
            "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "XDG_CONFIG_HOME": str(home),  # no preferences of the user running the tests
            "HOME": str(home),
            "PATH": os.environ.get("PATH", ""),
        }
        command = ["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m",
                   "memtui", "--demo", "--interval", "3600"]  # fmt: skip
        width, height = size
        subprocess.run(
            [*self.base, "-f", os.devnull, "new-session", "-d", "-x", str(width), "-y",
             str(height), "-c", str(home), *command],
            check=True, timeout=30,
        )  # fmt: skip

    def screen(self) -> str:
        result = subprocess.run([*self.base, "capture-pane", "-p"], capture_output=True,
                                text=True, timeout=30)  # fmt: skip
        return result.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.base, "send-keys", *keys], check=True, timeout=30)

    def shows(self, text: str, timeout: float = TIMEOUT) -> str:
        """Wait until `text` is on screen; the screen then."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never showed:\n{self.screen()}")

    def running(self) -> bool:
        result = subprocess.run([*self.base, "list-panes", "-F", "#{pane_dead}"],
                                capture_output=True, text=True, timeout=30)  # fmt: skip
        return result.returncode == 0 and result.stdout.strip() == "0"

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def tmux_at(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Tmux]:
    size = request.param
    term = Tmux(f"memtui-test-{os.getpid()}-{size[0]}x{size[1]}", size, tmp_path)
    try:
        yield term
    finally:
        term.close()


@pytest.mark.parametrize("tmux_at", SIZES, ids=IDS, indirect=True)
def test_every_panel_is_reachable_by_keyboard(tmux_at: Tmux) -> None:
    term = tmux_at
    term.shows("GPU")
    term.shows("demo")  # the first poll is drawn
    for key, panel, _ in [*PANELS, *reversed(PANELS)]:
        term.keys(key)
        term.shows(MARKERS[panel])
    # the settings: the last row and back to the first
    term.keys("1", "End")
    term.shows(SETTINGS[-1].label)
    term.keys("Home")
    term.shows(SETTINGS[0].label)
    # the levers: the last one, paging down the main column
    last = estimate(llama_plan()).levers[-1].name
    term.keys("5")
    term.shows(MARKERS["levers"])
    for _ in range(10):
        if last in term.screen():
            break
        term.keys("PageDown")
        time.sleep(0.3)
    term.shows(last, timeout=5)
    # the help: opens full screen, scrolls to its last line, closes
    term.keys("?")
    term.shows("memtui help")
    term.keys("End")
    term.shows(glossary()[-1][0])
    term.keys("Escape")
    term.shows("demo (synthetic node)")  # the dashboard's status line: the help is gone
    # an unchanged plan: q quits at once
    term.keys("q")
    end = time.monotonic() + TIMEOUT
    while term.running() and time.monotonic() < end:
        time.sleep(0.2)
    assert not term.running()
