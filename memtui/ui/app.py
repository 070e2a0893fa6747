"""The thin App: registers themes, makes the dashboard its first screen, starts and stops the
source.

It parses nothing: `memtui/commands/dashboard.py` turns flags into a Plan and a source and calls
`make_app`, which the tests call too (docs/architecture.md, "A thin App"). App-wide keys: `t` next
theme, `?` the help (every key and a glossary, memtui/ui/help_screen.py), `q` quit. The
preferences (memtui/ui/preferences.py) give the unit, theme and hidden panels at start; the
`u`, `t` and `H` keys write them back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.reactive import Initialize, Reactive

from memtui.estimator import Plan
from memtui.telemetry import FirstPoll, TelemetrySource
from memtui.text import LINE, shown
from memtui.ui.budgets import GIVEN, BudgetSource
from memtui.ui.preferences import Loaded, Remember
from memtui.ui.preferences import save as save_preferences
from memtui.ui.screen import DashboardScreen, StackRule
from memtui.ui.signals import TerminalSignals
from memtui.ui.themes import DEFAULT_THEME, load_themes, variable_defaults

if TYPE_CHECKING:
    from memtui.plans.launch_edit import LaunchOrigin
    from memtui.plans.roundtrip import Origin

#: Used when no theme file could be loaded at all; memtui's variables get their defaults.
FALLBACK_THEME = "textual-dark"


class MemtuiApp(App[None]):
    """memtui's dashboard application."""

    CSS_PATH = "memtui.tcss"
    TITLE = "memtui"
    ENABLE_COMMAND_PALETTE = False  # every action has a key; the palette would shadow ctrl+p
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "next_theme", "Theme", id="theme"),
        Binding("question_mark", "toggle_help", "Keys", id="help"),
        Binding("q", "quit", "Quit", id="quit"),
        # off the footer (it is full at 120 columns); `?` lists it
        Binding("F", "open_snapshot", "Snapshot", id="snapshot", show=False),
    ]

    def __init__(
        self,
        plan: Plan,
        source: TelemetrySource | None,
        *,
        interval: float,
        plan_only_reason: str | None,
        theme: str | None,
        theme_dirs: list[Path] | None,
        fit_to_devices: frozenset[str],
        save_path: Path | None,
        keymap: Mapping[str, str] | None,
        first_poll: FirstPoll | None,
        snapshot: Path | None = None,
        origin: Origin | LaunchOrigin | None = None,
        budget_from: BudgetSource | None = GIVEN,
        preferences: Loaded | None = None,
        start_notes: tuple[str, ...] = (),
        stack_rule: StackRule | None = None,
        after_first_frame: Callable[[], object] | None = None,
    ) -> None:
        # `_start_theme` reads these while App.__init__ runs
        self._theme_asked, self._theme_dirs = theme, theme_dirs
        self.preferences = preferences
        """The preferences read at start (None: none are read or written, as in tests)."""
        super().__init__()
        self._stack_rule = stack_rule
        self.start_notes = start_notes
        """What the plan rests on, said once at start (the stack memtui chose, and why)."""
        self._origin = origin
        self._budget_from = budget_from
        self._snapshot = snapshot
        self._plan = plan
        self.source = source
        self._interval = interval
        self._plan_only_reason = plan_only_reason
        self._fit = fit_to_devices
        self._save_path = save_path
        self._first_poll = first_poll
        self._after_first_frame = after_first_frame
        if keymap:
            self.set_keymap(dict(keymap))

    def _start_theme(self) -> str:
        """The theme at start: memtui's themes registered and the one asked for (the flag,
        else the preferences', else memtui's default), validated. This is the `theme`
        reactive's initial value (`Initialize`, textual/reactive.py 8.2.8), which
        App.__init__ reads once the built-in themes are registered: the stylesheet is then
        parsed once, with this theme's variables. Setting `theme` after App.__init__ queued
        a second parse and restyle of every widget before the first frame."""
        loaded = load_themes(self._theme_dirs)
        self.theme_problems = list(loaded.errors)
        self.memtui_themes = [t.name for t in loaded.themes]
        for theme_obj in loaded.themes:
            self.register_theme(theme_obj)
        preferences, asked = self.preferences, self._theme_asked
        if preferences is not None and preferences.problem:
            self.theme_problems.append(preferences.problem)
        remembered = preferences.preferences.theme if preferences is not None else None
        wanted = asked or remembered or DEFAULT_THEME
        if wanted in self.available_themes:
            return wanted
        if asked:
            known = ", ".join(self.memtui_themes) or "none found"
            self.theme_problems.append(f"no theme {asked!r} (themes: {known})")
        return DEFAULT_THEME if DEFAULT_THEME in self.available_themes else FALLBACK_THEME

    theme: Reactive[str] = Reactive(Initialize(_start_theme))

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every notification as plain text, controls escaped: they carry hostnames, GPU
        errors, paths and theme files from elsewhere (`[bold]` in one was Rich markup, an
        escape sequence reached the terminal). `markup` is accepted and ignored."""
        super().notify(
            shown(message, LINE),
            title=shown(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def get_theme_variable_defaults(self) -> dict[str, str]:
        # the stylesheet and the terms' styles use memtui's variables; any theme (even a
        # built-in) has them
        return variable_defaults(self.current_theme.dark)

    def get_default_screen(self) -> DashboardScreen:
        # the dashboard is the first screen itself (Textual's documented hook), not pushed
        # over the blank default one: the blank screen was laid out and fully drawn first,
        # a frame nobody needed on the way to the first one (benchmarks/profile_ui.py)
        screen = DashboardScreen(
            self._plan,
            self.source,
            interval=self._interval,
            plan_only_reason=self._plan_only_reason,
            fit_to_devices=self._fit,
            save_path=self._save_path,
            first_poll=self._first_poll,
            origin=self._origin,
            budget_from=self._budget_from,
            stack_rule=self._stack_rule,
        )
        if self.preferences is not None:
            kept = self.preferences.preferences
            screen.set_reactive(DashboardScreen.unit, kept.unit)
            for panel in kept.hidden:  # memtui.tcss hides a panel by these classes
                screen.add_class(f"-hide-{panel.value}")
        return screen

    def on_mount(self) -> None:
        # on a real terminal the event loop handles the signals, not Textual's driver
        self.signals = TerminalSignals.install(self)
        if self._snapshot is not None:
            self.action_open_snapshot(self._snapshot)
        for problem in self.theme_problems:  # reported, never fatal
            self.notify(problem, title="Theme", severity="warning", timeout=8)
        for note in self.start_notes:
            self.notify(note, title="Plan", timeout=12)

    def on_ready(self) -> None:
        # Textual's `Ready`: the DOM is ready and the first frame is on the terminal
        if self._after_first_frame is not None:
            self._after_first_frame()

    def on_unmount(self) -> None:
        if self.source is not None:
            self.source.close()

    def action_open_snapshot(self, path: Path | None = None) -> None:
        """The snapshot view over the dashboard, with the dashboard's current plan."""
        from memtui.ui.snapshot_screen import SnapshotScreen

        if isinstance(self.screen, SnapshotScreen):  # already there: read another file
            self.screen.action_ask_path()
            return
        self.push_screen(SnapshotScreen(path, getattr(self.screen, "plan", self._plan)))

    def action_next_theme(self) -> None:
        """Cycle through memtui's themes (the files in themes/ and the user's folder)."""
        names = self.memtui_themes or [self.theme]
        index = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(index + 1) % len(names)]
        self.post_message(Remember(theme=self.theme))

    async def action_quit(self) -> None:
        """Quit from any screen (`q`, ctrl+q); a what-if plan that changed since it was
        loaded or saved is offered for saving first (the dashboard asks)."""
        dashboard = next((s for s in self.screen_stack if isinstance(s, DashboardScreen)), None)
        if dashboard is None:
            self.exit()
        else:
            dashboard.action_request_quit()

    def action_toggle_help(self) -> None:
        """Open the help over the current screen (every binding, then the glossary); the
        help's own keys close it."""
        from memtui.ui.help_screen import HelpScreen, key_rows

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(key_rows(self, self.screen)))

    def on_remember(self, message: Remember) -> None:
        """A key changed the unit or the theme: keep it in the preferences file (in a
        thread: a file write never runs on the event loop)."""
        if self.preferences is None:
            return
        kept = self.preferences.preferences.model_copy(update=message.changes)
        self.preferences = Loaded(kept, self.preferences.path)
        self.run_worker(partial(self._save_preferences, self.preferences), thread=True,
                        exclusive=True, group="preferences")  # fmt: skip

    def _save_preferences(self, loaded: Loaded) -> None:
        problem = save_preferences(loaded.preferences, loaded.path)
        if problem is not None:
            self.call_from_thread(self.notify, problem, title="Preferences", severity="warning")


def make_app(
    plan: Plan,
    source: TelemetrySource | None = None,
    *,
    interval: float = 1.0,
    plan_only_reason: str | None = None,
    theme: str | None = None,
    theme_dirs: list[Path] | None = None,
    fit_to_devices: frozenset[str] = frozenset(),
    save_path: Path | None = None,
    keymap: Mapping[str, str] | None = None,
    first_poll: FirstPoll | None = None,
    snapshot: Path | None = None,
    origin: Origin | LaunchOrigin | None = None,
    budget_from: BudgetSource | None = GIVEN,
    preferences: Loaded | None = None,
    start_notes: tuple[str, ...] = (),
    stack_rule: StackRule | None = None,
    after_first_frame: Callable[[], object] | None = None,
) -> MemtuiApp:
    """The dashboard for `plan`, watching `source` (None: plan-only, saying
    `plan_only_reason`). `fit_to_devices` ({"gpus", "memory"}) sizes the plan to the GPUs of
    the first snapshot; `keymap` remaps binding ids to keys (e.g. {"strategy": "S"});
    `first_poll` is a poll of `source` already running (the CLI starts it before importing
    Textual), taken as the first snapshot; `snapshot` a PyTorch memory snapshot to open
    over the dashboard (memtui/ui/snapshot_screen.py); `origin` the user's config the plan
    came from (`--from`), which the export key edits (memtui.plans.roundtrip); `budget_from`
    where `plan` came from when it is the running job's budget (`GIVEN` by default; None: no
    job's budget, the GPU rows show capacity only, memtui/ui/budgets.py); `preferences` the
    user's preferences file as read (memtui/ui/preferences.py), which `u`, `t`, `H` update;
    `start_notes` what the plan rests on, said once at start; `stack_rule` the stack for a
    plan whose user named none (memtui/commands/default_stack.py), applied with the first
    estimate and to the plan sized to the GPUs found, and said then; `after_first_frame` is
    called once the first frame is on the terminal (the CLI resumes the garbage collector)."""
    return MemtuiApp(
        plan,
        source,
        interval=interval,
        plan_only_reason=plan_only_reason,
        theme=theme,
        theme_dirs=theme_dirs,
        fit_to_devices=fit_to_devices,
        save_path=save_path,
        keymap=keymap,
        first_poll=first_poll,
        snapshot=snapshot,
        origin=origin,
        budget_from=budget_from,
        preferences=preferences,
        start_notes=start_notes,
        stack_rule=stack_rule,
        after_first_frame=after_first_frame,
    )
