"""Messages posted up to the dashboard screen (attributes down, messages up)."""

from __future__ import annotations

from textual.message import Message

from memtui.telemetry import ClusterSnapshot


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
