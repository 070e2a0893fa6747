"""Messages posted up to the dashboard screen (attributes down, messages up): by its widgets,
and by the thread workers of the poller and of memtui/ui/job_keys.py, which hand the screen
their results this way rather than touch its state."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from memtui.telemetry import ClusterSnapshot

if TYPE_CHECKING:  # the attach and import layers load only when a job is looked for
    from memtui.estimator import Plan
    from memtui.plans.attach import Found, Job
    from memtui.plans.imports import Imported


class TelemetryArrived(Message):
    """A poll finished in the worker thread; the screen renders `snapshot`.

    `can_replace` lets Textual drop a stale snapshot still queued behind a newer one
    (toolong's messages): only the latest poll matters.
    """

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TelemetryArrived)


class StepSetting(Message):
    """A settings row asks to move its setting one step (+1 or -1)."""

    def __init__(self, key: str, direction: int) -> None:
        super().__init__()
        self.key = key
        self.direction = direction


class PickModel(Message):
    """The settings panel asks for the model picker."""


class Work(Enum):
    """What a worker was doing when it failed; the value titles the notification."""

    ATTACH = "Attach"
    EXPORT = "Export"
    SAVE = "Save"
    FASTEST = "Fastest plan"


class WorkFailed(Message):
    """A worker could not finish (`reason`: one line); the screen says so and keeps its plan."""

    def __init__(self, work: Work, reason: str) -> None:
        super().__init__()
        self.work = work
        self.reason = reason


class JobsFound(Message):
    """The jobs behind the GPU processes of a poll were looked for (`memtui.plans.attach`)."""

    def __init__(self, found: Found) -> None:
        super().__init__()
        self.found = found


class JobPlanned(Message):
    """A job's config files were read into `plan`; the screen decides whether to take it."""

    def __init__(self, job: Job, plan: Plan, imported: Imported) -> None:
        super().__init__()
        self.job = job
        self.plan = plan
        self.imported = imported


class ExportWritten(Message):
    """The plan was written as a config of format `fmt` to `path`."""

    def __init__(self, fmt: str, path: Path) -> None:
        super().__init__()
        self.fmt = fmt
        self.path = path


class PlanSaved(Message):
    """`plan` was saved as memtui's TOML to `path`."""

    def __init__(self, path: Path, plan: Plan) -> None:
        super().__init__()
        self.path = path
        self.plan = plan


class PlanExists(Message):
    """The save key's file exists: the screen asks before it is overwritten."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path


class EstimatorLoaded(Message):
    """The estimate's half of the estimator finished importing in a thread (after the first
    frame): the screen runs the what-if plan's first estimate."""
