"""The Textual dashboard (DESIGN.md section 4): one screen, one widget per module.

`make_app(plan, source, ...)` builds the app for the CLI and the tests. Importing this package
imports Textual; the CLI imports it only when the dashboard runs.
"""

from memtui.ui.app import MemtuiApp, make_app

__all__ = ["MemtuiApp", "make_app"]
