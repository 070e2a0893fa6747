"""The Textual dashboard (docs/architecture.md, "The screen").

Here: the app, the screens (`screen`, `snapshot_screen`, the `model_picker` modal), the poller
and the workers of the attach, export and save keys (`job_keys`), the messages they post, the
themes, and the pure logic the screen calls (`plan_edits`, `fit`, `gpu_state`, `alerts`,
`outliers`, `snapshot_render`, `units`). `widgets/`: the Widget subclasses, one per module.

`make_app(plan, source, ...)` builds the app for the CLI and the tests. Importing this package
does not import Textual: `make_app` and `MemtuiApp` load `memtui.ui.app` on first use, so the
CLI can start the first poll (`memtui.telemetry.FirstPoll`) and read a plan file
(`memtui.plans.memtui_toml`) before Textual's import is paid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memtui.ui.app import MemtuiApp, make_app

__all__ = ["MemtuiApp", "make_app"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        import memtui.ui.app

        return getattr(memtui.ui.app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
