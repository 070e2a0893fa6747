"""The dashboard's attach and export keys: `j` plans from the training job running on the GPUs,
`e` writes the plan as the config its stack is launched with.

After each poll whose GPU processes changed, the jobs behind them are looked for in a thread
(memtui.plans.attach: psutil reads command lines, working folders, environments) and the
status line says what was found ("job: torchrun train.py (pid 4242 on GPU 0,1) - j: plan from
it") or why nothing was ("no training job recognised: pid 5150: not visible here (another
PID namespace...)"). `j` reads that job's config files into a plan (the bars then compare
the job with its own budget); `e` writes the plan beside the save file under a new name,
never over an existing one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memtui.errors import MemtuiError

if TYPE_CHECKING:
    from memtui.estimator import Plan
    from memtui.plans.attach import Found, Job
    from memtui.plans.imports import Imported
    from memtui.telemetry import ClusterSnapshot
    from memtui.ui.screen import DashboardScreen


class JobKeys:
    """The screen's attach and export, kept apart from its layout."""

    def __init__(self, screen: DashboardScreen) -> None:
        self.screen = screen
        self.found: Found | None = None
        self.line: str | None = None
        """The status line's word on the jobs (None until looked for)."""
        self._pids: frozenset[int] | None = None

    def seen(self, snapshot: ClusterSnapshot) -> None:
        """A poll arrived: look for jobs again when its GPU processes changed."""
        from memtui.telemetry import SourceKind

        source = self.screen.source
        if source is None or source.info.kind is not SourceKind.NVML:
            return  # a demo's, a replay's or a cluster's PIDs are no processes of this machine
        from memtui.plans.attach import pids_on_gpus

        pids = pids_on_gpus(snapshot)
        if frozenset(pids) == self._pids:
            return
        self._pids = frozenset(pids)
        self.screen.run_worker(lambda: self._look(pids), thread=True, exclusive=True,
                               group="jobs")  # fmt: skip

    def _look(self, pids: dict[int, set[str]]) -> None:
        from memtui.plans.attach import find_jobs

        found = find_jobs(pids)
        self.screen.app.call_from_thread(self._show, found)

    def _show(self, found: Found) -> None:
        self.found = found
        self.line = found.summary + (" - j: plan from it" if found.jobs else "")
        self.screen.refresh_status()

    def attach(self) -> None:
        """`j`: the plan the first job on the GPUs was launched with."""
        if self.found is None or not self.found.jobs:
            why = self.found.summary if self.found is not None else "no GPU processes seen yet"
            self.screen.notify(why, title="Attach", severity="warning")
            return
        job, plan = self.found.jobs[0], self.screen.plan
        self.screen.run_worker(lambda: self._plan(job, plan), thread=True, exclusive=True,
                               group="attach")  # fmt: skip

    def _plan(self, job: Job, base: Plan) -> None:
        from memtui.plans.attach import plan_for

        try:
            plan, imported = plan_for(job, base)
        except MemtuiError as err:
            self.screen.app.call_from_thread(
                self.screen.notify, f"{job.label}: {err}", title="Attach", severity="error"
            )
            return
        self.screen.app.call_from_thread(self._attached, job, plan, imported)

    def _attached(self, job: Job, plan: Plan, imported: Imported) -> None:
        self.screen.plan = plan
        if self.screen.plan is plan:
            self.line = f"plan from {job.label}"
            assumed = f"; {len(imported.assumptions)} assumptions" if imported.assumptions else ""
            self.screen.notify(
                f"plan from {job.launch.label}: {len(imported.provenance)} settings from its "
                f"files{assumed}",
                title="Attached",
            )
            self.screen.refresh_status()

    def export(self) -> None:
        """`e`: the plan as its stack's config, beside the save file, under a new name."""
        from memtui.plans.formats import FORMATS, spoken

        plan = self.screen.plan
        fmt = FORMATS.launched_with(plan.stack)
        if fmt is None:
            stacks = spoken([stack.value for f in FORMATS for stack in f.launches])
            self.screen.notify(
                f"no config format for the {plan.stack.value} stack: choose {stacks}",
                title="Export",
                severity="warning",
            )
            return
        try:
            text = fmt.export(plan)
        except MemtuiError as err:
            self.screen.notify(str(err), title="Export", severity="error")
            return
        folder = self.screen.save_path.parent
        self.screen.run_worker(lambda: self._write(folder, fmt.name, fmt.suffix, text),
                               thread=True, group="export")  # fmt: skip

    def _write(self, folder: Path, fmt: str, suffix: str, text: str) -> None:
        from memtui.plans.files import write_atomic

        number = 1
        while True:  # a new name: an export never replaces a file
            name = f"memtui-{fmt}{suffix}" if number == 1 else f"memtui-{fmt}-{number}{suffix}"
            path = folder / name
            if not path.exists():
                break
            number += 1
        try:
            written = write_atomic(path, text)
        except OSError as err:
            self.screen.app.call_from_thread(
                self.screen.notify, f"cannot write {path}: {err}", title="Export", severity="error"
            )
            return
        self.screen.app.call_from_thread(
            self.screen.notify, f"{fmt} config written to {written.resolve()}", title="Exported"
        )
