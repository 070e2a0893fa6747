"""The dashboard screen: owns the plan, its report and the latest snapshot; pushes them down.

State flows one way (docs/architecture.md, "Data flow"): a key or a settings message replaces the
frozen Plan -> `estimate` runs here, the only place the UI calls it -> every widget gets a new view.
Telemetry comes from the `Poller` (a timer and a thread worker) as `TelemetryArrived` messages; the
plan is sized to the GPUs found by `fit_plan`, and the notifications a poll raises are decided by
the `AlertTracker`, against the job's budget (memtui/ui/budgets.py: the given plan, `--plan`,
`--from`, the attached or recognised job, or the what-if plan promoted with `b`), never against
the what-if plan the settings edit. The attach, export and save keys run the workers of
memtui/ui/job_keys.py, whose answers come back as messages too (`JobsFound`, `JobPlanned`,
`ExportWritten`, `PlanSaved`, `WorkFailed`): the screen lays out, keeps state and shows.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive

from memtui.estimator import ModelSpec, Plan
from memtui.telemetry import (
    ClusterSnapshot,
    DeviceKey,
    FirstPoll,
    SourceState,
    TelemetrySource,
)
from memtui.ui.alerts import AlertTracker, Notice
from memtui.ui.budgets import GIVEN, BudgetFrom, BudgetSource, JobBudget
from memtui.ui.fit import fit_plan
from memtui.ui.gpu_state import GpuHistory, RowStatus
from memtui.ui.job_keys import (
    JobWatch,
    export_of,
    look_for_jobs,
    plan_from_job,
    write_export,
    write_plan,
)
from memtui.ui.messages import (
    EstimatorLoaded,
    ExportWritten,
    JobPlanned,
    JobsFound,
    PickModel,
    PlanExists,
    PlanSaved,
    StepSetting,
    TelemetryArrived,
    WorkFailed,
)
from memtui.ui.monitor_screen import MonitorScreen
from memtui.ui.plan_edits import (
    BY_KEY,
    PlanEditError,
    PlanHistory,
    set_typed,
    step,
    with_model,
    wrap_note,
)
from memtui.ui.poller import Poller
from memtui.ui.preferences import Panel, Remember
from memtui.ui.units import UNITS, size
from memtui.ui.widgets.budget_compare import BudgetCompare, CompareView
from memtui.ui.widgets.communication import CommunicationLine, CommunicationView
from memtui.ui.widgets.footer import KeyFooter
from memtui.ui.widgets.gpu_panel import GpuPanel, PanelView
from memtui.ui.widgets.lever_list import LeverList, LeverView
from memtui.ui.widgets.oom_line import OomLine
from memtui.ui.widgets.process_table import ProcessTable, ProcessView
from memtui.ui.widgets.settings_panel import SettingsPanel, TypeValue
from memtui.ui.widgets.status_line import StatusLine, StatusView
from memtui.ui.widgets.strategy_table import StrategyTable, StrategyView

if TYPE_CHECKING:
    from memtui.estimator import Report
    from memtui.plans.launch_edit import LaunchOrigin
    from memtui.plans.roundtrip import Origin
    from memtui.ui.fastest_screen import FastestFound

#: The what-if plan under the stack a rule chooses, and the rule's words (the CLI's, for a
#: plan whose user named no stack: memtui/commands/default_stack.py).
StackRule = Callable[[Plan], tuple[Plan, str]]

#: The estimate's half of the estimator (memtui/estimator/__init__.py): imported after the
#: first frame, in a thread, when nothing loaded it before.
ESTIMATE_MODULE = "memtui.estimator.budget"

#: Below this width the screen switches to its narrow layout (settings on top, one line a GPU).
NARROW_BELOW = 100
#: From this width the main column lays its panels out two side by side (the `-wide` class).
WIDE_FROM = 160
#: From this width the footer shows every key it shows (below it, `FOOTER_SECONDARY` hides).
FULL_FOOTER_FROM = 120
#: Below this height the process list is shorter, so the levers start above the fold.
TALL_FROM = 50

#: The panel keys, in the order the panels are drawn: key, panel id, name.
PANELS = (
    ("1", "settings", "settings"),
    ("2", "gpus", "GPUs"),
    ("3", "strategies", "strategies"),
    ("4", "processes", "processes"),
    ("5", "levers", "levers"),
    ("6", "communication", "communication"),
)


#: Keys the footer leaves out under 120 columns, where not every key fits (`?` lists them all,
#: and every key still works).
FOOTER_SECONDARY = frozenset({"theme", "precision", "flash", "checkpointing", "unit", "refresh"})

#: Footer groups: one description for a key pair ("+- mb"), so the footer fits 120 columns.
_MB = Binding.Group("batch", compact=True)
_SEQ = Binding.Group("seq", compact=True)


def _step(key: str, direction: int = 1) -> str:
    return f"step('{key}', {direction})"


class DashboardScreen(MonitorScreen):
    """Settings, GPU bars, strategies, levers, communication, processes, status."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # the app-wide keys first: the footer lists bindings in order and crops the rest
        Binding("t", "app.next_theme", "Theme", id="theme"),
        Binding("question_mark", "app.toggle_help", "Keys", id="help"),
        Binding("q", "request_quit", "Quit", id="quit", tooltip="asks to save a changed plan"),
        Binding("s", _step("strategy"), "Strategy", id="strategy"),
        Binding("S", _step("strategy", -1), "Strategy back", id="strategy-back", show=False),
        Binding("O", _step("optimizer", -1), "Optim back", id="optimizer-back", show=False),
        Binding("M", _step("method", -1), "Method back", id="method-back", show=False),
        Binding("P", _step("precision", -1), "Prec back", id="precision-back", show=False),
        Binding("C", _step("checkpointing", -1), "Ckpt back", id="checkpointing-back",
                show=False),
        Binding("K", _step("gpu", -1), "Card back", id="card-back", show=False),
        Binding("z", "undo", "Undo", id="undo", show=False, tooltip="undo the last plan edit"),
        Binding("Z", "redo", "Redo", id="redo", show=False, tooltip="redo what z undid"),
        Binding("R", "reset_plan", "Reset", id="reset", show=False,
                tooltip="back to the plan the dashboard started with (z undoes it)"),
        *(Binding(key, f"show_panel('{panel}')", f"Show {name}", id=f"panel-{panel}",
                  show=False) for key, panel, name in PANELS),
        Binding("H", "toggle_panel", "Panels", id="panels", show=False,
                tooltip="hide or show a panel (kept in the preferences)"),
        Binding("o", _step("optimizer"), "Optim", id="optimizer", tooltip="next optimizer"),
        Binding("m", _step("method"), "Method", id="method"),
        Binding("p", _step("precision"), "Prec", id="precision", tooltip="next precision"),
        Binding("f", _step("attention"), "Flash", id="flash"),
        Binding("c", _step("checkpointing"), "Ckpt", id="checkpointing"),
        Binding("plus,equals_sign", _step("micro_batch"), "+mb", id="micro-batch-up", group=_MB),
        Binding("minus", _step("micro_batch", -1), "-mb", id="micro-batch-down", group=_MB),
        Binding("right_square_bracket", _step("seq_len"), "Seq+", id="seq-up", group=_SEQ),
        Binding("left_square_bracket", _step("seq_len", -1), "Seq-", id="seq-down", group=_SEQ),
        Binding("g", _step("gpus_per_node"), "GPUs+", id="gpus-up", show=False),
        Binding("G", _step("gpus_per_node", -1), "GPUs-", id="gpus-down", show=False),
        Binding("k", _step("gpu"), "Card", id="card", show=False),
        Binding("a", _step("grad_accum"), "Accum+", id="accum-up", show=False),
        Binding("A", _step("grad_accum", -1), "Accum-", id="accum-down", show=False),
        Binding("slash", "pick_model", "Model", id="model"),
        Binding("u", "toggle_unit", "Unit", id="unit", tooltip="GB (10^9) or GiB (2^30)"),
        Binding("w", "save_plan", "Save", id="save",
                tooltip="save the plan as TOML (asks for the file name)"),
        Binding("r", "poll_now", "Poll", id="refresh", tooltip="poll telemetry now"),
        Binding(
            "x",
            "toggle_hosts",
            "Hosts",
            id="hosts",
            show=False,
            tooltip="across hosts: every GPU, or one row per host",
        ),
        Binding("pageup", "scroll_main(-1)", "Scroll up", id="scroll-up", show=False),
        Binding("pagedown", "scroll_main(1)", "Scroll down", id="scroll-down", show=False),
        Binding("j", "attach_job", "Attach", id="attach", show=False,
                tooltip="plan from the training job running on the GPUs"),
        Binding("e", "export_plan", "Export", id="export", show=False,
                tooltip="write the plan as its stack's config (DeepSpeed, accelerate...)"),
        Binding("b", "promote_budget", "To budget", id="promote", show=False,
                tooltip="make the what-if plan the job's budget (what the GPU bars judge)"),
        Binding("v", "fastest", "Fastest", id="fastest", show=False,
                tooltip="the fastest plan that fits: search, then enter adopts it"),
    ]  # fmt: skip

    # repaint=False throughout: the screen draws none of these itself (its widgets do, from
    # the views pushed down); a repainting reactive here redrew the whole screen on every key
    report: reactive[Report | None] = reactive(None, init=False, repaint=False)
    """The estimator's report for `plan`."""
    snapshot: reactive[ClusterSnapshot | None] = reactive(None, init=False, repaint=False)
    """The latest telemetry snapshot; None before the first poll and in plan-only mode."""
    unit: reactive[str] = reactive("GB", init=False, repaint=False)
    """GB (10^9 bytes) or GiB (2^30), said on every figure."""

    def __init__(
        self,
        plan: Plan,
        source: TelemetrySource | None = None,
        *,
        interval: float = 1.0,
        plan_only_reason: str | None = None,
        fit_to_devices: frozenset[str] = frozenset(),
        save_path: Path | None = None,
        first_poll: FirstPoll | None = None,
        origin: Origin | LaunchOrigin | None = None,
        budget_from: BudgetSource | None = GIVEN,
        stack_rule: StackRule | None = None,
    ) -> None:
        super().__init__()
        # applied with the first estimate, again when the plan is sized to the GPUs found,
        # and said then: its figures are the sized plan's
        self._stack_rule = stack_rule
        self.job_budget: JobBudget | None = None
        """What the GPU rows and alarms are judged against (None: capacity only); never
        changed by editing the what-if plan (`plan`)."""
        # where the plan given at start came from, when it is the job's: taken with its first
        # estimate, sized to the GPUs like the what-if plan (None: nobody planned the job)
        self._budget_from = budget_from
        self._untouched: Plan | None = None  # the what-if plan as started, until edited
        self._recognising = False  # the attach worker runs for the job found at start
        self.origin = origin
        """The user's config the plan came from (`--from`): `e` writes it edited."""
        self.source = source
        self.interval = interval
        self.plan_only_reason = plan_only_reason if source is None else None
        self.fit_to_devices = set(fit_to_devices)
        self.save_path = save_path or Path("memtui-plan.toml")
        self.history = GpuHistory()
        self.alerts = AlertTracker()
        self.expand_hosts = False
        """Across hosts: every GPU's row even when the screen has no room for them all."""
        self.polls = 0
        # the poll the CLI started before importing Textual (None: the timer's first tick)
        self.poller = Poller(self, source, interval, first_poll) if source is not None else None
        self._note: str | None = None
        self._ready = False  # children composed: views may be pushed down
        self._unfitted: Plan | None = None  # the plan as given, when compose fitted it
        self.jobs = JobWatch()
        """The jobs on the GPUs, for the attach key (j) and the status line."""
        self._plan = plan
        self.edits = PlanHistory.starting(plan)
        """The what-if plan's edits: undo, redo, reset, and whether quitting asks to save."""
        self._quit_after_save = False

    @property
    def plan(self) -> Plan:
        """The current plan (frozen); replaced whole, by `_adopt`, on every change."""
        return self._plan

    # -- layout --------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # the first poll already answered (it usually has: it ran while Textual was imported):
        # take it now, so the rows are composed with the screen and the plan is fitted to the
        # GPUs before its first estimate; the first frame is then the full one
        first = self.poller.take_first() if self.poller is not None else None
        if first is not None:
            self._take(first)
            fitted = self._fitted_plan(first)
            if fitted is not None and fitted != self.plan:
                self.edits.follow(self.plan, fitted)
                self._unfitted, self._plan = self.plan, fitted  # estimated once (_first_estimate)
        devices = len(self.snapshot.devices) if self.snapshot is not None else 0
        self._layout_classes(self.app.size.width)
        # wide: settings and strategies on the left, GPUs, processes, levers on the right;
        # narrow: the strategy table under the GPUs. CSS cannot move a widget between
        # containers, so there is one table in each place and the `-narrow` class shows one;
        # `_push_plan` feeds the one on screen (no remounting on resize: nothing to lose)
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield SettingsPanel(id="settings")
                yield BudgetCompare(id="budgets")
                yield StrategyTable(id="strategies")
            with VerticalScroll(id="main", can_focus=False):
                yield OomLine(id="oom")
                yield GpuPanel(id="gpus", rows=devices)
                yield StrategyTable(id="strategies-narrow")
                # during a run, which process it is matters most after the GPUs: the list
                # comes before the levers, at most a dozen lines tall (it scrolls inside)
                # not a tab stop: the table inside keeps its own window and selection
                with VerticalScroll(id="processes", can_focus=False):
                    yield ProcessTable(id="process-table")
                yield LeverList(id="levers")
                yield CommunicationLine(id="communication")
        yield StatusLine(id="status")
        secondary = [
            b.action for b in self.BINDINGS if isinstance(b, Binding) and b.id in FOOTER_SECONDARY
        ]
        yield KeyFooter(secondary, compact=True)

    def on_mount(self) -> None:
        self._ready = True
        self._apply_width(self.app.size.width)
        self.query_one(SettingsPanel).focus()
        if self._budget_from is not None:
            # the start plan is the job's: its budget judges the rows, so the first frame
            # has it
            self._first_estimate()
        else:
            # no job's budget: the first frame is the monitor's (GPU rows against the cards,
            # processes, status) and says the what-if plan is being estimated; the estimate
            # follows right after it
            self._reclassify()
            self._push_telemetry()
            self.call_after_refresh(self._load_estimator)
        if self.poller is not None and not self.poller.gives_up(self.snapshot):
            # no answer taken at compose: poll now, not in a second
            self.poller.start(now=self.polls == 0)

    def _load_estimator(self) -> None:
        """After the first frame: the first estimate, once the estimate's half of the
        estimator is loaded (in a thread when it is not: a third of the estimator's import
        time, which the first frame did not wait for and the event loop does not either)."""
        if ESTIMATE_MODULE in sys.modules:  # e.g. the demo node was sized by an estimate
            self._first_estimate()
            return

        def load() -> None:
            importlib.import_module(ESTIMATE_MODULE)
            self.post_message(EstimatorLoaded())

        self.run_worker(load, thread=True, group="estimator")

    def on_estimator_loaded(self, _message: EstimatorLoaded) -> None:
        self._first_estimate()

    def _first_estimate(self) -> None:
        if self.report is not None:
            return  # a key or the plan's sizing to the GPUs estimated it first
        self._recompute(previous=self._unfitted)

    def _choose_stack(self, plan: Plan) -> Plan:
        """`plan` under the stack rule's choice (as it is with no rule). The rule's words
        are said once the plan is sized to the GPUs found (or nothing is left to size), so
        its figures are the plan's on screen."""
        if self._stack_rule is None:
            return plan
        chosen, why = self._stack_rule(plan)
        if self._sized:
            self._stack_rule = None
            if why:
                self.notify(why, title="Plan", timeout=12)
        return chosen

    @property
    def _sized(self) -> bool:
        """Nothing is left to size the plan to: it was sized to the GPUs found, could not
        be, or there is no telemetry to size it by (plan-only)."""
        return not self.fit_to_devices or self.source is None

    def on_resize(self) -> None:
        self._apply_width(self.size.width)

    def _layout_classes(self, width: int) -> None:
        """The layout's classes for the terminal's size (memtui.tcss). Set in `compose` too,
        so the first styling has them: each one set later restyles every widget."""
        self.set_class(width < NARROW_BELOW, "-narrow")
        self.set_class(width >= WIDE_FROM, "-wide")
        # under 120 columns the footer's secondary keys do not fit; under 50 lines the
        # process list gives the levers room
        self.set_class(width < FULL_FOOTER_FROM, "-short-footer")
        self.set_class(self.app.size.height < TALL_FROM, "-short")

    def _apply_width(self, width: int) -> None:
        narrow = width < NARROW_BELOW
        self._layout_classes(width)
        self.query_one(SettingsPanel).narrow = narrow
        self.query_one(GpuPanel).narrow = narrow
        for row in self.query("GpuRow"):
            row.narrow = narrow  # type: ignore[attr-defined]
        if self.report is not None:
            self._push_plan()

    @property
    def strategy_table(self) -> StrategyTable:
        """The strategy table on screen: beside the settings, or under the GPUs when narrow."""
        table_id = "#strategies-narrow" if self.has_class("-narrow") else "#strategies"
        return self.query_one(table_id, StrategyTable)

    # -- plan -> report -> widgets -------------------------------------------------

    def watch_unit(self) -> None:
        self._push_plan()
        self._push_telemetry()

    def _adopt(self, plan: Plan) -> bool:
        """Make `plan` the current plan; False when the estimator refused it (the previous
        one stays, and the screen said why)."""
        if plan == self._plan:
            return True
        previous, self._plan = self._plan, plan
        return self._recompute(previous)

    def _recompute(self, previous: Plan | None = None) -> bool:
        """Estimate the current plan and push every view down; False when the estimator
        refused it and `previous` was put back."""
        # the one place the UI calls the estimator:
        # docs/architecture.md, "One call to the estimator in the UI"
        from memtui.estimator import estimate  # loaded after the first frame (`_load_estimator`)

        if self.report is None:  # the first estimate: the stack the rule chooses, if any
            unchosen, self._plan = self._plan, self._choose_stack(self._plan)
            self.edits.follow(unchosen, self._plan)  # not an edit to undo
        accepted = True
        try:
            report = estimate(self._plan)
        except ValueError as err:
            # a plan the estimator cannot size (a bug in a validator upstream): keep the last
            # good one on screen and say why, never a traceback on the event loop
            if previous is None:
                raise
            self._plan, accepted = previous, False
            self.notify(f"kept the previous plan: {err}", title="Not changed", severity="error")
            if self.report is not None:
                return accepted
            report = estimate(previous)  # the plan fitted at start-up: fall back to the given
        if self.report is None:
            self._untouched = self._plan  # the what-if plan as started, until edited
        self.report = report
        if self._budget_from is not None:  # the plan given at start is the job's
            self.job_budget = JobBudget(self._plan, report.budget, self._budget_from)
            self._budget_from = None
        self._reclassify()
        self._push_plan()
        self._push_telemetry()
        return accepted

    def _push_plan(self) -> None:
        report, unit = self.report, self.unit
        if report is None or not self._ready:
            return
        narrow = self.has_class("-narrow")
        self.query_one(SettingsPanel).plan = self.plan
        self.strategy_table.view = StrategyView(report, self.plan.strategy, unit)
        self.query_one(LeverList).view = LeverView(report.levers, unit, narrow)
        self.query_one(CommunicationLine).view = CommunicationView(report.communication, unit)
        self.query_one(BudgetCompare).view = CompareView(
            self.job_budget, report.budget, unit, narrow
        )

    def _push_telemetry(self) -> None:
        if not self._ready:
            return
        self.query_one(GpuPanel).view = PanelView(
            budget=self.report.budget if self.report is not None else None,
            unit=self.unit,
            snapshot=self.snapshot,
            statuses=dict(self.statuses),
            history=self.history,
            expand_hosts=self.expand_hosts,
            job=self.job_budget,
        )
        self.query_one(ProcessTable).view = ProcessView.of(self.snapshot, self.unit)
        self.query_one(StatusLine).view = StatusView(
            source=self.source.info if self.source is not None else None,
            snapshot=self.snapshot,
            plan_only_reason=self.plan_only_reason,
            note=self._note or self.jobs.line,
        )
        self._push_monitor(self.snapshot, self.unit, self.alerts.log)

    # -- keys ----------------------------------------------------------------------

    def action_step(self, key: str, direction: int) -> None:
        """Move one setting one step; an impossible value is said, not applied, and a step
        round the end of a list says so."""
        before = self.plan
        try:
            self._edit(step(before, key, direction))
        except PlanEditError as err:
            self._show(self.alerts.refused(str(err)))
            return
        wrapped = wrap_note(key, before, self.plan, direction)
        if wrapped is not None:
            self.notify(wrapped, title="Wrapped", timeout=3)

    def _edit(self, plan: Plan) -> bool:
        """Adopt an edit of the what-if plan, kept for undo; False when it was refused."""
        before = self.plan
        accepted = self._adopt(plan)
        if accepted and self.plan != before:
            self.edits.record(before)
        return accepted

    def action_undo(self) -> None:
        """`z`: the plan before the last edit."""
        self._travel(self.edits.undo(self.plan), "nothing to undo")

    def action_redo(self) -> None:
        """`Z`: the edit the last undo took back."""
        self._travel(self.edits.redo(self.plan), "nothing to redo")

    def _travel(self, plan: Plan | None, none: str) -> None:
        if plan is None:
            self.notify(none, title="Plan", timeout=3)
        else:
            self._adopt(plan)

    def action_reset_plan(self) -> None:
        """`R`: the plan the dashboard started with (an edit itself: `z` undoes it)."""
        if self._edit(self.edits.start):
            self.notify("plan reset to the one the dashboard started with", title="Plan")

    @on(TypeValue)
    def _on_type_value(self, message: TypeValue) -> None:
        """Enter on a number row: ask for the value; the dialog keeps a bad one to itself."""
        from memtui.ui.prompts import Ask

        setting = BY_KEY[message.key]
        self.app.push_screen(
            Ask(
                f"{setting.label} (now {setting.show(self.plan)}):",
                setting.show(self.plan),
                partial(set_typed, self.plan, message.key),
                "enter sets it, escape keeps the plan as it is",
            ),
            self._typed,
        )

    def _typed(self, plan: Plan | None) -> None:
        if plan is not None:
            self._edit(plan)

    def action_show_panel(self, panel: str) -> None:
        """`1`-`6`: bring a panel into view (the settings take the focus)."""
        widget = self.strategy_table if panel == "strategies" else self.query_one(f"#{panel}")
        if panel == "settings":
            widget.focus()
        if widget.display:
            widget.scroll_visible(top=True, animate=False)
        else:
            self.notify(f"the {panel} panel is hidden by the preferences", timeout=3)

    def action_toggle_panel(self) -> None:
        """`H`: hide or show a panel by its number (memtui.tcss hides it by a class of the
        screen); the panels hidden are kept in the preferences."""
        from memtui.ui.prompts import Confirm

        hideable = {panel.value for panel in Panel}
        answers = {key: name for key, panel, name in PANELS if panel in hideable}

        def answered(key: str | None) -> None:
            if key is None:
                return
            self.toggle_class(next(f"-hide-{p}" for k, p, _ in PANELS if k == key))
            hidden = tuple(p for p in Panel if self.has_class(f"-hide-{p.value}"))
            self.post_message(Remember(hidden=hidden))

        self.app.push_screen(Confirm("Hide or show which panel?", answers), answered)

    def action_request_quit(self) -> None:
        """`q`: quit, asking first to save a what-if plan that changed since it was loaded
        or saved."""
        if self.app.screen.is_modal:
            return  # a question is already asked (the key reached the app from a dialog)
        if not self.edits.changed(self.plan):
            self.app.exit()
            return
        from memtui.ui.prompts import Confirm

        def answered(key: str | None) -> None:
            if key == "n":
                self.app.exit()
            elif key == "y":
                self._quit_after_save = True
                self.action_save_plan()

        self.app.push_screen(
            Confirm("The plan changed. Save it before quitting?",
                    {"y": "save", "n": "quit without saving"}),
            answered,
        )  # fmt: skip

    @on(StepSetting)
    def _on_step(self, message: StepSetting) -> None:
        self.action_step(message.key, message.direction)

    @on(PickModel)  # the settings panel's model row, as the `/` key
    def action_pick_model(self) -> None:
        # imported on the first `/`: the first frame does not need the picker
        from memtui.ui.model_picker import ModelPicker

        def chosen(spec: ModelSpec | None) -> None:
            if spec is None:
                return
            try:
                self._edit(with_model(self.plan, spec))
            except PlanEditError as err:
                self.notify(f"kept {self.plan.model.name}: {err}", title="Not changed",
                            severity="warning")  # fmt: skip

        self.app.push_screen(ModelPicker(self.plan.model.name), chosen)

    def action_toggle_unit(self) -> None:
        self.unit = UNITS[(UNITS.index(self.unit) + 1) % len(UNITS)]
        self.post_message(Remember(unit=self.unit))  # the app keeps it in the preferences

    def action_scroll_main(self, direction: int) -> None:
        main = self.query_one("#main", VerticalScroll)
        if direction > 0:
            main.scroll_page_down()
        else:
            main.scroll_page_up()

    def action_toggle_hosts(self) -> None:
        """Across hosts: every GPU (the screen scrolls), or one summary row per host."""
        self.expand_hosts = not self.expand_hosts
        self._push_telemetry()

    # -- the attach, export and save keys: thread workers, answered by messages -------

    def action_attach_job(self) -> None:
        """`j`: the plan the first job on the GPUs was launched with, as the job's budget and
        the what-if plan."""
        job = self.jobs.first_job()
        if isinstance(job, Notice):
            self._show(job)
            return
        self._recognising = False
        self.run_worker(partial(plan_from_job, self.post_message, job, self.plan),
                        thread=True, exclusive=True, group="attach")  # fmt: skip

    def action_export_plan(self) -> None:
        """`e`: the plan as its stack's config, beside the save file, under a new name."""
        export = export_of(self.plan, self.origin)
        if isinstance(export, Notice):
            self._show(export)
            return
        self.run_worker(partial(write_export, self.post_message, export, self.save_path.parent),
                        thread=True, group="export")  # fmt: skip

    def action_fastest(self) -> None:
        """`v`: the fastest plans that fit, searched in a thread worker (FastestFound)."""
        from memtui.ui.fastest_screen import find_fastest

        self.run_worker(partial(find_fastest, self.post_message, self.plan),
                        thread=True, exclusive=True, group="fastest")  # fmt: skip

    def on_fastest_found(self, message: FastestFound) -> None:
        # by its handler name: the search's module loads with the `v` key, not at start
        from memtui.ui.fastest_screen import FastestScreen

        if message.found.base != self.plan:
            return  # the plan moved while the search ran: its answer is for another plan

        def chosen(plan: Plan | None) -> None:
            if plan is not None:
                self._adopt(plan)

        self.app.push_screen(FastestScreen(message.found, self.unit), chosen)

    def action_save_plan(self) -> None:
        """`w`: ask for the file name (the last one offered), then write it; an existing file
        is overwritten only when the user says so (`PlanExists`)."""
        from memtui.ui.prompts import Ask, file_name

        def named(path: Path | None) -> None:
            if path is None:
                self._quit_after_save = False
            else:
                self._write_plan(path, force=False)

        self.app.push_screen(
            Ask("Save the plan as:", str(self.save_path), file_name,
                "enter saves (an existing file is not replaced without asking), escape cancels"),
            named,
        )  # fmt: skip

    def _write_plan(self, path: Path, force: bool) -> None:
        self.save_path = path
        self.run_worker(partial(write_plan, self.post_message, self.plan, path, force),
                        thread=True, exclusive=True, group="save")  # fmt: skip

    def action_promote_budget(self) -> None:
        """`b`: the what-if plan becomes the job's budget (for the job's same GPUs)."""
        job, report = self.job_budget, self.report
        if report is None:
            return
        if job is not None and job.plan == self.plan:
            self._show(Notice("the what-if plan is the job's budget already", "Budget",
                              "information"))  # fmt: skip
            return
        devices = job.source.devices if job is not None else None
        self._take_budget(BudgetSource(BudgetFrom.PROMOTED, devices=devices))

    def _take_budget(self, source: BudgetSource) -> None:
        """The what-if plan, as it is now, becomes the job's budget: rows, alarms and the
        comparison are judged again."""
        assert self.report is not None
        self.job_budget = JobBudget(self.plan, self.report.budget, source)
        self._reclassify()
        self._push_plan()
        self._push_telemetry()
        self.notify(f"{size(self.report.budget.total, self.unit)} per GPU, from {source}",
                    title="Job's budget")  # fmt: skip

    @on(PlanExists)
    def _on_plan_exists(self, message: PlanExists) -> None:
        from memtui.ui.prompts import Confirm

        def answered(key: str | None) -> None:
            if key == "y":
                self._write_plan(message.path, force=True)
            else:
                self._quit_after_save = False

        self.app.push_screen(
            Confirm(f"{message.path} exists. Overwrite it?",
                    {"y": "overwrite", "n": "keep it"}),
            answered,
        )  # fmt: skip

    @on(JobsFound)
    def _on_jobs_found(self, message: JobsFound) -> None:
        first_look = self.jobs.found is None
        self.jobs.take(message.found)
        self._push_telemetry()  # the status line's word on the jobs
        job = self.jobs.first_job()
        unplanned = first_look and self.job_budget is None and self.plan == self._untouched
        if unplanned and not isinstance(job, Notice):
            # a job recognised at start, nobody planned, nothing edited: its budget, unasked
            self._recognising = True
            self.run_worker(partial(plan_from_job, self.post_message, job, self.plan),
                            thread=True, exclusive=True, group="attach")  # fmt: skip

    @on(JobPlanned)
    def _on_job_planned(self, message: JobPlanned) -> None:
        kind = BudgetFrom.RECOGNISED if self._recognising else BudgetFrom.ATTACHED
        self._recognising = False
        if self._adopt(message.plan):
            self.origin = None  # the plan is the job's now, not the --from file's
            self._untouched = self.plan
            self._show(self.jobs.attached(message.job, message.imported))
            job = message.job
            self._take_budget(BudgetSource(kind, job.label, frozenset(job.devices)))

    @on(ExportWritten)
    def _on_export_written(self, message: ExportWritten) -> None:
        self.notify(f"{message.fmt} config written to {message.path}", title="Exported")

    @on(PlanSaved)
    def _on_plan_saved(self, message: PlanSaved) -> None:
        self.edits.saved = message.plan
        if self._quit_after_save:
            self.app.exit()
            return
        self._note = f"plan saved to {message.path}"
        self.notify(self._note, title="Saved")
        self._push_telemetry()

    @on(WorkFailed)
    def _on_work_failed(self, message: WorkFailed) -> None:
        self._quit_after_save = False
        self.notify(message.reason, title=message.work.value, severity="error")

    # -- telemetry -----------------------------------------------------------------

    @property
    def statuses(self) -> dict[DeviceKey, RowStatus]:
        """Every row's status against the current budget (the alert tracker's)."""
        return self.alerts.statuses

    @property
    def polling(self) -> bool:
        """True while a poll is in flight in the worker thread."""
        return self.poller is not None and self.poller.polling

    def action_poll_now(self) -> None:
        """Poll now, without waiting for the timer (ignored while a poll is in flight)."""
        if self.poller is not None:
            self.poller.tick()

    @on(TelemetryArrived)
    def _on_telemetry(self, message: TelemetryArrived) -> None:
        snapshot = message.snapshot
        self._take(snapshot)
        pids = self.jobs.to_look_for(snapshot, self.source)
        if pids is not None:
            self.run_worker(partial(look_for_jobs, self.post_message, pids), thread=True,
                            exclusive=True, group="jobs")  # fmt: skip
        fitted = self._fitted_plan(snapshot) if self.source is not None else None
        before = self.plan
        if self._stack_rule is not None and self.report is not None and self._sized:
            # sized: the stack chosen again for the sized plan (its figures are said now),
            # unless the plan was edited since the start (the first estimate chooses it else)
            if before == self._untouched:
                fitted = self._choose_stack(fitted if fitted is not None else before)
            else:
                self._stack_rule = None
        if fitted is not None and fitted != self.plan:
            job = self.job_budget
            if job is not None and job.source.kind.at_start and job.plan == self.plan:
                self._budget_from = job.source  # the start plan is the job's: sized too
            adopted = self._adopt(fitted)
            self._budget_from = None
            if adopted:
                self.edits.follow(before, fitted)  # sized to the GPUs: not an edit to undo
                self._untouched = self.plan
                return  # estimated: every widget already has this poll
        self._reclassify()
        self._push_telemetry()

    def _take(self, snapshot: ClusterSnapshot) -> None:
        """Keep a poll's answer (history, snapshot, mode); draws nothing."""
        self.polls += 1
        no_driver = snapshot.state is SourceState.NO_LIBRARY and not snapshot.recorded
        if no_driver and not snapshot.devices:
            # no driver here: nothing will change by polling again; plan-only, saying why
            self.plan_only_reason = snapshot.reason or snapshot.message or "NVML not available"
            self.source = None
            if self.poller is not None:
                self.poller.stop()
                self.poller = None
            self.snapshot = None
            return
        if self.poller is not None and self.poller.gives_up(snapshot):
            self.poller.stop()  # e.g. a replay that ended: keep its last frame on screen
        self.history.record(snapshot)
        self.trends.record(snapshot)
        self.snapshot = snapshot

    def _fitted_plan(self, snapshot: ClusterSnapshot) -> Plan | None:
        """The plan sized to the GPUs the first snapshot with GPUs found (once), unless flags
        said otherwise; None when there is nothing to fit (or it cannot be fitted)."""
        try:
            fitted = fit_plan(self.plan, snapshot, self.fit_to_devices)
        except ValueError as err:
            self.fit_to_devices.clear()
            self.notify(f"kept the planned hardware: {err}", severity="warning")
            return None
        if fitted is not None:
            self.fit_to_devices.clear()
        return fitted

    def _reclassify(self) -> None:
        """Row statuses against the job's budget (the card's where there is none); notify
        what the tracker says crossed."""
        job = self.job_budget
        budget, judged = (job.budget.total, job.judges) if job is not None else (None, None)
        for notice in self.alerts.update(self.snapshot, budget, self.unit, judged):
            self._show(notice)

    def _show(self, notice: Notice | None) -> None:
        if notice is not None:
            self.notify(notice.message, title=notice.title, severity=notice.severity)
