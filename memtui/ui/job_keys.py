"""The dashboard's attach, export and save keys: `j` plans from the training job running on the
GPUs, `e` writes the plan as the config its stack is launched with, `w` saves it as memtui's TOML.

After each poll whose GPU processes changed, the jobs behind them are looked for in a thread
(memtui.plans.attach: psutil reads command lines, working folders, environments) and the
status line says what was found ("job: torchrun train.py (pid 4242 on GPU 0,1) - j: plan from
it") or why nothing was ("no training job recognised: pid 5150: not visible here (another
PID namespace...)"). `j` reads that job's config files into a plan (the bars then compare
the job with its own budget); `e` writes the plan beside the save file under a new name,
never over an existing one: the user's own config edited when the plan came from one
(`--from`, memtui.plans.roundtrip), or its launch script (memtui.plans.launch_edit: the same
edit as `memtui export --from run.sh`), else a fresh config of the plan's stack.

Nothing here reads or writes the screen: `JobWatch` keeps what the last look found, `export_of`
renders an export, and the thread workers (`look_for_jobs`, `plan_from_job`, `write_export`,
`write_plan`) get what they need as arguments and post their answer as a message
(memtui/ui/messages.py), which the screen handles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from memtui.errors import MemtuiError
from memtui.telemetry import ClusterSnapshot, SourceKind, TelemetrySource
from memtui.ui.alerts import Notice
from memtui.ui.messages import (
    ExportWritten,
    JobPlanned,
    JobsFound,
    PlanExists,
    PlanSaved,
    Work,
    WorkFailed,
)

if TYPE_CHECKING:
    from memtui.estimator import Plan
    from memtui.plans.attach import Found, Job
    from memtui.plans.imports import Imported
    from memtui.plans.launch_edit import LaunchOrigin
    from memtui.plans.roundtrip import Origin

#: How a worker hands its answer to the screen: the screen's `post_message` (thread-safe).
Post = Callable[[Message], object]


class JobWatch:
    """The jobs on the GPUs as last looked for, and the status line's word on them."""

    def __init__(self) -> None:
        self.found: Found | None = None
        """The last look's answer (None until looked for)."""
        self.line: str | None = None
        """The status line's word on the jobs (None until looked for)."""
        self._pids: frozenset[int] | None = None

    def to_look_for(
        self, snapshot: ClusterSnapshot, source: TelemetrySource | None
    ) -> dict[int, set[str]] | None:
        """The GPU processes of `snapshot` (PID -> the GPUs it is on) when they changed since
        the last look; None when there is nothing new to look for."""
        if source is None or source.info.kind is not SourceKind.LOCAL:
            return None  # a demo's, a replay's or a cluster's PIDs are no processes of this machine
        from memtui.plans.attach import pids_on_gpus

        pids = pids_on_gpus(snapshot)
        if frozenset(pids) == self._pids:
            return None
        self._pids = frozenset(pids)
        return pids

    def take(self, found: Found) -> None:
        """A look answered: the status line offers its first job."""
        self.found = found
        self.line = found.summary + (" - j: plan from it" if found.jobs else "")

    def first_job(self) -> Job | Notice:
        """`j`'s job: the first one on the GPUs, or why there is none."""
        if self.found is None or not self.found.jobs:
            why = self.found.summary if self.found is not None else "no GPU processes seen yet"
            return Notice(why, title="Attach", severity="warning")
        return self.found.jobs[0]

    def attached(self, job: Job, imported: Imported) -> Notice:
        """The screen took `job`'s plan: the status line says so; what to notify."""
        self.line = f"plan from {job.label}"
        assumed = f"; {len(imported.assumptions)} assumptions" if imported.assumptions else ""
        return Notice(
            f"plan from {job.launch.label}: {len(imported.provenance)} settings from its "
            f"files{assumed}",
            title="Attached",
            severity="information",
        )


@dataclass(frozen=True)
class Export:
    """A plan rendered as the config its stack is launched with, to be written."""

    fmt: str
    suffix: str
    text: str


def export_of(plan: Plan, origin: Origin | LaunchOrigin | None = None) -> Export | Notice:
    """`e`'s config for `plan`, or why there is none: `origin`'s file edited to say it when
    the plan came from a config memtui writes or from a launch script, else a fresh one of
    its stack's (rendering is quick and pure: the event loop does it; only the write goes to
    a thread)."""
    from memtui.plans.formats import FORMATS, spoken
    from memtui.plans.launch_edit import LaunchOrigin

    if isinstance(origin, LaunchOrigin):
        from memtui.plans.launch_edit import edit as edit_launch

        try:
            script = edit_launch(origin, plan)
        except MemtuiError as err:
            return Notice(str(err), title="Export", severity="error")
        return Export("launch", origin.file.path.suffix or ".sh", script.text)
    fmt = FORMATS.launched_with(plan.stack)
    if origin is not None and origin.file.fmt.exports:
        from memtui.plans.roundtrip import edit

        try:
            edited = edit(origin, plan)
        except MemtuiError as err:
            return Notice(str(err), title="Export", severity="error")
        return Export(origin.file.fmt.name, origin.file.path.suffix, edited.text)
    if fmt is None:
        stacks = spoken([stack.value for f in FORMATS for stack in f.launches])
        return Notice(
            f"no config format for the {plan.stack.value} stack: choose {stacks}",
            title="Export",
            severity="warning",
        )
    try:
        text = fmt.export(plan)
    except MemtuiError as err:
        return Notice(str(err), title="Export", severity="error")
    return Export(fmt.name, fmt.suffix, text)


# -- thread workers: each posts one message ----------------------------------------------


def look_for_jobs(post: Post, pids: dict[int, set[str]]) -> None:
    """The jobs behind `pids` (PID -> GPUs), as `JobsFound`."""
    from memtui.plans.attach import find_jobs

    post(JobsFound(find_jobs(pids)))


def plan_from_job(post: Post, job: Job, base: Plan) -> None:
    """The plan `job` was launched with, over `base`, as `JobPlanned` (its files are read)."""
    from memtui.plans.attach import plan_for

    try:
        plan, imported = plan_for(job, base)
    except MemtuiError as err:
        post(WorkFailed(Work.ATTACH, f"{job.label}: {err}"))
        return
    post(JobPlanned(job, plan, imported))


def write_export(post: Post, export: Export, folder: Path) -> None:
    """`export` written in `folder` under a new name, as `ExportWritten`."""
    from memtui.plans.files import write_atomic

    fmt, suffix = export.fmt, export.suffix
    number = 1
    while True:  # a new name: an export never replaces a file
        name = f"memtui-{fmt}{suffix}" if number == 1 else f"memtui-{fmt}-{number}{suffix}"
        path = folder / name
        if not path.exists():
            break
        number += 1
    try:
        written = write_atomic(path, export.text)
    except OSError as err:
        post(WorkFailed(Work.EXPORT, f"cannot write {path}: {err}"))
        return
    post(ExportWritten(fmt, written.resolve()))


def write_plan(post: Post, plan: Plan, path: Path, force: bool = False) -> None:
    """`plan` saved to `path` as memtui's TOML, as `PlanSaved` (file I/O and fsync here, off
    the event loop); an existing file only with `force`, else `PlanExists`, and never a
    folder, a device or a pipe (`memtui.plans.files.new_target`'s rules)."""
    from memtui.plans.files import new_target
    from memtui.plans.memtui_toml import save_plan

    try:
        if not force and path.expanduser().is_file():
            post(PlanExists(path))
            return
        written = save_plan(plan, new_target(path, force=True))
    except (OSError, MemtuiError) as err:
        post(WorkFailed(Work.SAVE, f"cannot save {path}: {err}"))
        return
    # the whole path: a relative one does not say which folder
    post(PlanSaved(written.resolve(), plan))
