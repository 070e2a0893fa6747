"""Strings from elsewhere on the dashboard (security): hostnames, GPU names and
errors from NVML or a trace, user names and command lines of other users' processes. Each is
drawn as text with its control characters escaped: an `ESC ] 0 ; title BEL` in a command
line retitled the terminal, and `[b]` in a GPU's error was taken as markup."""

from __future__ import annotations

from pathlib import Path

from ui_helpers import demo_source, llama_plan, screen_of, text_of, wait_for, write_trace

from memtui.telemetry import ReplaySource
from memtui.ui import make_app

TITLE = "\x1b]0;pwned\x07"  # what retitled the terminal
SHOWN = "\\x1b]0;pwned\\x07"  # the same, escaped: what the screen must show instead


def _hostile_trace(path: Path) -> Path:
    """The demo node, every external string of it poisoned."""
    plan = llama_plan()
    snap = demo_source(plan, 1.2).poll()
    devices = list(snap.devices)
    process = devices[0].processes[0]  # type: ignore[index]
    devices[0] = devices[0].model_copy(
        update={
            "name": f"H100{TITLE}",
            "processes": (process.model_copy(update={"command": f"py{TITLE}[b]x", "user": "u"}),),
        }
    )
    devices[1] = devices[1].model_copy(
        update={"lost": True, "error": "x\x1b[2J[b]y", "memory_used": None}
    )
    snap = snap.model_copy(update={"hostname": f"h{TITLE}[b]", "devices": tuple(devices)})
    return write_trace(path, [snap])


async def test_external_strings_are_escaped_text_everywhere_on_the_dashboard(
    tmp_path: Path,
) -> None:
    trace = _hostile_trace(tmp_path / "hostile.jsonl")
    app = make_app(
        llama_plan(),
        ReplaySource(trace, speed=None),
        interval=3600,
        fit_to_devices=frozenset({"gpus", "memory"}),  # the poisoned GPU name sizes the plan
    )
    # wide enough for the process table's whole command
    async with app.run_test(size=(240, 60), notifications=True) as pilot:
        screen = screen_of(app)
        await wait_for(pilot, lambda: screen.snapshot is not None and screen.report is not None)
        await wait_for(pilot, lambda: "x\\x1b[2J[b]y" in text_of(app))  # the lost GPU's toast
        shown = text_of(app)
        assert "\x1b" not in shown and "\x07" not in shown
        assert f"H100{SHOWN}" in shown  # the settings panel's GPU, from NVML's name
        assert f"py{SHOWN}[b]x" in shown  # the process table
        assert f"h{SHOWN}[b]" in shown  # the status line's host
        # the notification says "[b]y" literally: not bold markup (which would eat "[b]")
        assert "GPU 1 lost: x\\x1b[2J[b]y" in shown
