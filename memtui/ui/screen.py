"""The dashboard screen: owns the plan, its report and the latest snapshot; pushes them down.

State flows one way (DESIGN.md section 2): a key or a settings message replaces the frozen
Plan -> `estimate` runs here, the only place the UI calls it -> every widget gets a new view.
Telemetry: a timer only triggers; the poll runs in a thread worker (exclusive, and never
started while one is in flight, so polls never overlap) and comes back as a
`TelemetryArrived` message; the event loop never blocks on NVML, so keys keep working while a
poll hangs (DESIGN.md section 7.3).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer
from textual.worker import Worker, get_current_worker

from memtui.estimator import ModelSpec, Plan, Report, estimate
from memtui.telemetry import NodeSnapshot, SourceState, TelemetrySource
from memtui.telemetry.models import failed_snapshot
from memtui.ui import plan_edits
from memtui.ui.communication import CommunicationLine, CommunicationView
from memtui.ui.first_poll import FirstPoll
from memtui.ui.gpu_panel import GpuPanel, PanelView
from memtui.ui.gpu_state import GpuHistory, RowStatus, classify
from memtui.ui.lever_list import LeverList, LeverView
from memtui.ui.messages import PickModel, StepSetting, TelemetryArrived
from memtui.ui.model_picker import ModelPicker
from memtui.ui.process_table import ProcessTable, ProcessView
from memtui.ui.settings_panel import SettingsPanel
from memtui.ui.status_line import StatusLine, StatusView
from memtui.ui.strategy_table import StrategyTable, StrategyView
from memtui.ui.units import UNITS, size

#: Below this width the screen switches to its narrow layout (settings on top, one line a GPU).
NARROW_BELOW = 100


#: Footer groups: one description for a key pair ("+- mb"), so the footer fits 120 columns.
_MB = Binding.Group("batch", compact=True)
_SEQ = Binding.Group("seq", compact=True)


def _step(key: str, direction: int = 1) -> str:
    return f"step('{key}', {direction})"


class DashboardScreen(Screen[None]):
    """Settings, GPU bars, strategies, levers, communication, processes, status."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # the app-wide keys first: the footer lists bindings in order and crops the rest
        Binding("t", "app.next_theme", "Theme", id="theme"),
        Binding("question_mark", "app.toggle_help", "Keys", id="help"),
        Binding("q", "app.quit", "Quit", id="quit"),
        Binding("s", _step("strategy"), "Strategy", id="strategy"),
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
        Binding("w", "save_plan", "Save", id="save", tooltip="save the plan as TOML"),
        Binding("r", "poll_now", "Poll", id="refresh", tooltip="poll telemetry now"),
        Binding("pageup", "scroll_main(-1)", "Scroll up", id="scroll-up", show=False),
        Binding("pagedown", "scroll_main(1)", "Scroll down", id="scroll-down", show=False),
    ]

    # the default is never used: __init__ sets the real plan before anything reads it
    # repaint=False throughout: the screen draws none of these itself (its widgets do, from
    # the views pushed down); a repainting reactive here redrew the whole screen on every key
    plan: reactive[Plan] = reactive(
        Plan.model_construct,  # type: ignore[arg-type]
        init=False,
        repaint=False,
    )
    """The current plan (frozen); replaced whole on every change."""
    report: reactive[Report | None] = reactive(None, init=False, repaint=False)
    """The estimator's report for `plan`."""
    snapshot: reactive[NodeSnapshot | None] = reactive(None, init=False, repaint=False)
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
    ) -> None:
        super().__init__()
        self.source = source
        self.interval = interval
        self.plan_only_reason = plan_only_reason if source is None else None
        self.fit_to_devices = set(fit_to_devices)
        self.save_path = save_path or Path("memtui-plan.toml")
        self.history = GpuHistory()
        self.statuses: dict[str, RowStatus] = {}
        self.polls = 0
        self._poll_worker: Worker[None] | None = None
        self._timer: Timer | None = None
        self._note: str | None = None
        self._ready = False  # children composed: views may be pushed down
        # the poll the CLI started before importing Textual (None: the timer's first tick)
        self._first_poll = first_poll if source is not None else None
        self._unfitted: Plan | None = None  # the plan as given, when compose fitted it
        self.set_reactive(DashboardScreen.plan, plan)

    # -- layout --------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # the first poll already answered (it usually has: it ran while Textual was imported):
        # take it now, so the rows are composed with the screen and the plan is fitted to the
        # GPUs before its first estimate; the first frame is then the full one
        first = self._first_poll.snapshot if self._first_poll is not None else None
        if first is not None:
            self._first_poll = None
            self._take(first)
            fitted = self._fitted_plan(first)
            if fitted is not None and fitted != self.plan:
                self._unfitted = self.plan
                self.set_reactive(DashboardScreen.plan, fitted)  # estimated once, in on_mount
        devices = len(self.snapshot.devices) if self.snapshot is not None else 0
        # wide: settings and strategies on the left, GPUs, levers, processes on the right;
        # narrow: the strategy table under the GPUs. CSS cannot move a widget between
        # containers, so there is one table in each place and the `-narrow` class shows one;
        # `_push_plan` feeds the one on screen (no remounting on resize: nothing to lose)
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield SettingsPanel(id="settings")
                yield StrategyTable(id="strategies")
            with VerticalScroll(id="main", can_focus=False):
                yield GpuPanel(id="gpus", rows=devices)
                yield StrategyTable(id="strategies-narrow")
                yield LeverList(id="levers")
                yield CommunicationLine(id="communication")
                yield ProcessTable(id="processes")
        yield StatusLine(id="status")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._ready = True
        self._apply_width(self.app.size.width)
        self.query_one(SettingsPanel).focus()
        self._recompute(previous=self._unfitted)
        ended = self.snapshot is not None and self.snapshot.state is SourceState.ENDED
        if self.source is not None and not ended:
            self._timer = self.set_interval(self.interval, self._tick)
            if self.polls == 0:  # no answer taken at compose: poll now, not in a second
                self._tick()

    def on_resize(self) -> None:
        self._apply_width(self.size.width)

    def _apply_width(self, width: int) -> None:
        narrow = width < NARROW_BELOW
        self.set_class(narrow, "-narrow")
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

    def watch_plan(self, old: Plan, new: Plan) -> None:
        self._recompute(previous=old)

    def watch_unit(self) -> None:
        self._push_plan()
        self._push_telemetry()

    def _recompute(self, previous: Plan | None = None) -> None:
        # the one place the UI calls the estimator (not a compute_ method: DESIGN.md 7.5)
        try:
            report = estimate(self.plan)
        except ValueError as err:
            # a plan the estimator cannot size (a bug in a validator upstream): keep the last
            # good one on screen and say why, never a traceback on the event loop
            if previous is None:
                raise
            self.set_reactive(DashboardScreen.plan, previous)
            self.notify(f"kept the previous plan: {err}", title="Not changed", severity="error")
            if self.report is not None:
                return
            report = estimate(previous)  # the plan fitted at start-up: fall back to the given
        self.report = report
        self._reclassify()
        self._push_plan()
        self._push_telemetry()

    def _push_plan(self) -> None:
        report, unit = self.report, self.unit
        if report is None or not self._ready:
            return
        narrow = self.has_class("-narrow")
        self.query_one(SettingsPanel).plan = self.plan
        self.strategy_table.view = StrategyView(report, self.plan.strategy, unit)
        self.query_one(LeverList).view = LeverView(report.levers, unit, narrow)
        self.query_one(CommunicationLine).view = CommunicationView(report.communication, unit)

    def _push_telemetry(self) -> None:
        if self.report is None or not self._ready:
            return
        self.query_one(GpuPanel).view = PanelView(
            budget=self.report.budget,
            unit=self.unit,
            snapshot=self.snapshot,
            statuses=dict(self.statuses),
            history=self.history,
        )
        self.query_one(ProcessTable).view = ProcessView(
            self.snapshot.devices if self.snapshot else None, self.unit
        )
        self.query_one(StatusLine).view = StatusView(
            source=self.source.name if self.source is not None else None,
            snapshot=self.snapshot,
            plan_only_reason=self.plan_only_reason,
            note=self._note,
        )

    # -- keys ----------------------------------------------------------------------

    def action_step(self, key: str, direction: int) -> None:
        """Move one setting one step; an impossible value is said, not applied."""
        try:
            self.plan = plan_edits.step(self.plan, key, direction)
        except plan_edits.PlanEditError as err:
            self.notify(str(err), title="Not changed", severity="warning")

    @on(StepSetting)
    def _on_step(self, message: StepSetting) -> None:
        self.action_step(message.key, message.direction)

    @on(PickModel)
    def _on_pick(self) -> None:
        self.action_pick_model()

    def action_pick_model(self) -> None:
        def chosen(spec: ModelSpec | None) -> None:
            if spec is None:
                return
            try:
                self.plan = plan_edits.with_model(self.plan, spec)
            except plan_edits.PlanEditError as err:
                self.notify(f"kept {self.plan.model.name}: {err}", title="Not changed",
                            severity="warning")  # fmt: skip

        self.app.push_screen(ModelPicker(self.plan.model.name), chosen)

    def action_toggle_unit(self) -> None:
        self.unit = UNITS[(UNITS.index(self.unit) + 1) % len(UNITS)]

    def action_scroll_main(self, direction: int) -> None:
        main = self.query_one("#main", VerticalScroll)
        if direction > 0:
            main.scroll_page_down()
        else:
            main.scroll_page_up()

    def action_save_plan(self) -> None:
        self._save(self.plan, self.save_path)

    @work(thread=True, exclusive=True, group="save")
    def _save(self, plan: Plan, path: Path) -> None:
        # file I/O (and fsync) off the event loop
        from memtui.plans.memtui_toml import save_plan

        try:
            written = save_plan(plan, path)
        except OSError as err:
            self.app.call_from_thread(
                self.notify, f"cannot save {path}: {err}", title="Save", severity="error"
            )
            return
        self.app.call_from_thread(self._saved, written)

    def _saved(self, path: Path) -> None:
        where = path.resolve()  # the whole path: a relative one does not say which folder
        self._note = f"plan saved to {where}"
        self.notify(f"plan saved to {where}", title="Saved")
        self._push_telemetry()

    # -- telemetry -----------------------------------------------------------------

    @property
    def polling(self) -> bool:
        """True while a poll is in flight in the worker thread."""
        worker = self._poll_worker
        return worker is not None and not worker.is_finished

    def action_poll_now(self) -> None:
        """Poll now, without waiting for the timer (ignored while a poll is in flight)."""
        self._tick()

    def _tick(self) -> None:
        if self.source is None or self.polling:
            return  # a poll is still running (a slow driver): never start a second one
        first, self._first_poll = self._first_poll, None
        self._poll_worker = self._poll(self.source, first)

    @work(thread=True, exclusive=True, group="poll", exit_on_error=False)
    def _poll(self, source: TelemetrySource, first: FirstPoll | None = None) -> None:
        # the CLI's first poll, if it had not answered by compose time: wait for it here (a
        # thread) rather than poll again, so polls never overlap
        try:
            snapshot = first.wait() if first is not None else source.poll()
        except Exception as err:  # a bug in a source must not take the dashboard down
            snapshot = failed_snapshot(
                SourceState.ERROR,
                f"telemetry source failed: {type(err).__name__}: {err}",
                "please report this; memtui keeps retrying",
                time=time.time(),
                source=source.name,
            )
        if not get_current_worker().is_cancelled:
            self.post_message(TelemetryArrived(snapshot))

    @on(TelemetryArrived)
    def _on_telemetry(self, message: TelemetryArrived) -> None:
        snapshot = message.snapshot
        self._take(snapshot)
        fitted = self._fitted_plan(snapshot) if self.source is not None else None
        if fitted is not None and fitted != self.plan:
            self.plan = fitted  # watch_plan: one estimate, then every widget with this poll
            if self.plan == fitted:
                return
        self._reclassify()
        self._push_telemetry()

    def _take(self, snapshot: NodeSnapshot) -> None:
        """Keep a poll's answer (history, snapshot, mode); draws nothing."""
        self.polls += 1
        if snapshot.state is SourceState.NO_LIBRARY and not snapshot.devices:
            # no driver here: nothing will change by polling again; plan-only, saying why
            self.plan_only_reason = snapshot.reason or snapshot.message or "NVML not available"
            self.source = None
            self._stop_timer()
            self.snapshot = None
            return
        if snapshot.state is SourceState.ENDED:
            self._stop_timer()  # a replay that ended: keep its last frame on screen
        self.history.record(snapshot)
        self.snapshot = snapshot

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def _fitted_plan(self, snapshot: NodeSnapshot) -> Plan | None:
        """The plan sized to the GPUs the first snapshot with GPUs found (once), unless flags
        said otherwise; None when there is nothing to fit (or it cannot be fitted)."""
        whole = [d for d in snapshot.devices if d.mig_index is None and d.memory_total]
        if not self.fit_to_devices or not whole:
            return None
        hardware: dict[str, Any] = {}
        if "gpus" in self.fit_to_devices:
            hardware["gpus_per_node"] = len(whole)
        if "memory" in self.fit_to_devices:
            smallest = min(whole, key=lambda d: d.memory_total or 0)
            hardware["gpu_memory"] = smallest.memory_total
            hardware["gpu_name"] = smallest.name or self.plan.hardware.gpu_name
        self.fit_to_devices.clear()
        try:
            return self.plan.evolve(hardware=hardware)
        except ValueError as err:
            self.notify(f"kept the planned hardware: {err}", severity="warning")
            return None

    def _reclassify(self) -> None:
        """Row statuses against the current budget; alert on every new crossing."""
        if self.report is None:
            return
        budget = self.report.budget.total
        before = self.statuses
        now: dict[str, RowStatus] = {}
        alerts: dict[RowStatus, list[Any]] = {}
        for device in self.snapshot.devices if self.snapshot else ():
            status = classify(device, budget)
            now[device.label] = status
            was = before.get(device.label)
            if status.alert and was is not status:
                alerts.setdefault(status, []).append(device)
            elif status is RowStatus.LOST and was is not RowStatus.LOST:
                self.notify(
                    f"GPU {device.label} lost: {device.error or 'no answer'}",
                    title="GPU lost",
                    severity="error",
                )
        # one notification per kind of crossing, naming every GPU that crossed
        for status, devices in alerts.items():
            worst = max(devices, key=lambda d: d.memory_used or 0)
            names = ", ".join(d.label for d in devices)
            self.notify(
                f"GPU{'s' if len(devices) > 1 else ''} {names}: {status.value}: "
                f"{'up to ' if len(devices) > 1 else ''}{size(worst.memory_used, self.unit)} "
                f"used, budget {size(budget, self.unit)}, "
                f"card {size(worst.memory_total, self.unit)}",
                title="Memory alert",
                severity="warning" if status is RowStatus.NEAR_CAPACITY else "error",
            )
        self.statuses = now
