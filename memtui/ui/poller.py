"""The dashboard's telemetry poller: a timer that triggers, a thread worker that polls.

Not a widget: it draws nothing. The timer only triggers; the poll runs in a thread worker of the
screen (exclusive, and never started while one is in flight, so polls never overlap) and comes back
as a `TelemetryArrived` message, which Textual may drop for a newer one (`can_replace`). The event
loop never blocks on NVML or HTTP, so keys keep working while a poll hangs (docs/architecture.md,
"Workers off the event loop"). A first poll the CLI started before Textual was imported is taken by
the screen at compose if it has answered, else waited for here, in the worker.
"""

from __future__ import annotations

from textual.dom import DOMNode
from textual.timer import Timer
from textual.worker import Worker, get_current_worker

from memtui.telemetry import ClusterSnapshot, FirstPoll, TelemetrySource, poll_safely
from memtui.ui.messages import TelemetryArrived


class Poller:
    """Polls `source` every `interval` seconds for `owner` (the screen), which receives each
    answer as a `TelemetryArrived` message."""

    def __init__(
        self,
        owner: DOMNode,
        source: TelemetrySource,
        interval: float,
        first: FirstPoll | None = None,
    ) -> None:
        self.owner = owner
        self.source = source
        self.interval = interval
        self._first = first
        self._timer: Timer | None = None
        self._worker: Worker[None] | None = None

    def take_first(self) -> ClusterSnapshot | None:
        """The first poll's answer if it has come (then it is no longer waited for)."""
        answer = self._first.snapshot if self._first is not None else None
        if answer is not None:
            self._first = None
        return answer

    @property
    def polling(self) -> bool:
        """True while a poll is in flight in the worker thread."""
        worker = self._worker
        return worker is not None and not worker.is_finished

    def gives_up(self, snapshot: ClusterSnapshot | None) -> bool:
        """Whether polling again is pointless after `snapshot` (the source's say)."""
        return snapshot is not None and self.source.info.gives_up(snapshot)

    def start(self, *, now: bool) -> None:
        """Start the timer; `now`: poll at once rather than after the first interval."""
        self._timer = self.owner.set_interval(self.interval, self.tick)
        if now:
            self.tick()

    def stop(self) -> None:
        """Stop the timer (a poll in flight still posts its answer)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def tick(self) -> None:
        """Poll now, unless a poll is still running (a slow driver): never two at once."""
        if self.polling:
            return
        first, self._first = self._first, None
        self._worker = self.owner.run_worker(
            lambda: self._poll(first),
            name="poll",
            group="poll",
            exclusive=True,
            thread=True,
            exit_on_error=False,
        )

    def _poll(self, first: FirstPoll | None) -> None:
        # the CLI's first poll, if it had not answered by compose time: wait for it here (a
        # thread) rather than poll again, so polls never overlap
        snapshot = first.wait() if first is not None else poll_safely(self.source)
        if not get_current_worker().is_cancelled:
            self.owner.post_message(TelemetryArrived(snapshot))
