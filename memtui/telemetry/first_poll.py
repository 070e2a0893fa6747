"""The first poll, started in a thread as the CLI starts, before Textual is imported.

Importing Textual and building the screen take a few hundred milliseconds; polling NVML (or reading
the first line of a trace) overlaps with them, so the snapshot is usually here when the screen
composes and its first frame already shows the GPU rows and the plan fitted to them
(docs/architecture.md, "Measuring and checking": start to first full frame). Nothing ever waits for
it on the event loop: a screen that finds it unfinished hands it to its poll worker (a thread),
which waits. The wait is bounded by the source itself (`BoundedSource` answers TIMEOUT after its
timeout), so a hung driver delays the first rows by the timeout at most, and the start-up not at
all.

No Textual here (the CLI imports this module first).
"""

from __future__ import annotations

import threading

from memtui.telemetry.models import ClusterSnapshot
from memtui.telemetry.source import TelemetrySource, poll_safely


class FirstPoll:
    """One `source.poll()` running in a daemon thread from construction on.

    `done` says whether it finished; `wait()` blocks (a worker thread only) until it has and
    returns its snapshot. A source that raises (a bug, not an NVML problem) becomes an ERROR
    snapshot (`poll_safely`), as in the dashboard's own poll worker.
    """

    def __init__(self, source: TelemetrySource) -> None:
        self.source = source
        self._finished = threading.Event()
        self._snapshot: ClusterSnapshot | None = None
        # a daemon thread: a source stuck in C must not keep the process from exiting
        self._thread = threading.Thread(target=self._run, name="memtui-first-poll", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._snapshot = poll_safely(self.source)
        finally:
            self._finished.set()

    @property
    def done(self) -> bool:
        """True once the poll has an answer (never blocks)."""
        return self._finished.is_set()

    @property
    def snapshot(self) -> ClusterSnapshot | None:
        """The answer, or None while the poll is still running (never blocks)."""
        return self._snapshot if self.done else None

    def wait(self) -> ClusterSnapshot:
        """Block until the poll has answered and return it (call from a worker thread)."""
        self._finished.wait()
        assert self._snapshot is not None
        return self._snapshot
