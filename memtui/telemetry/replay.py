"""Replay a recorded JSONL trace as a telemetry source (`memtui watch --replay FILE`).

A trace line is a node (format 1) or a cluster (format 2); either replays as a
`ClusterSnapshot`. At `speed=1` a poll returns the snapshot that was current at the same
offset into the recording; `speed=10` plays ten times faster; `speed=None` steps one line
per poll (tests, benchmarks). Snapshots keep their recorded `time`; `source` becomes
"replay:<file name>"; a recorded failure is marked `recorded` (how the recording machine was
then: shown as such, and the replay goes on past it). At the end the last snapshot is
repeated with state ENDED, or the trace restarts if `loop`; a file without a single readable
snapshot (empty, binary, unrelated) answers state ERROR. The trace is read lazily, so hours
of recording cost no memory up front.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from memtui.bounded import TRACE, TRACE_LINE, Bounded, LineTooLong, lines, open_file
from memtui.errors import MemtuiError
from memtui.telemetry.models import (
    ClusterSnapshot,
    SourceState,
    failed_snapshot,
)
from memtui.telemetry.recorder import iter_snapshots, skipped_note
from memtui.telemetry.source import SourceInfo, SourceKind, select_in_cluster
from memtui.text import shown


def replay_info(path: Path) -> SourceInfo:
    """What a replay of `path` is: not live (a file that cannot be read does not heal)."""
    return SourceInfo(
        SourceKind.RECORDED,
        f"replay:{path.name}",
        f"replay {path.name}",
        f"trace {path.name} is not being read",
        "check the disk holding it",
        live=False,
    )


class ReplaySource:
    """A `TelemetrySource` reading a JSONL trace written by `Recorder`."""

    def __init__(
        self,
        path: str | Path,
        *,
        speed: float | None = 1.0,
        loop: bool = False,
        only: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.speed = speed if speed else None
        self.loop = loop
        self.only = tuple(only)
        self.info = replay_info(self.path)
        self.name = self.info.label
        self._clock = clock
        self._file: Bounded | None = None
        self._skipped: list[int] = []
        self._lines: Iterator[ClusterSnapshot] | None = None
        self._current: ClusterSnapshot | None = None
        self._pending: ClusterSnapshot | None = None
        self._first_time = 0.0
        self._started = 0.0
        self._ended = False

    def _open(self) -> None:
        self.close()
        # bytes, each line decoded on its own, bounded; a FIFO or a device is refused
        self._file = open_file(self.path, TRACE, name=f"cannot read trace {shown(self.path)}")
        self._skipped = []
        self._lines = iter_snapshots(lines(self._file, TRACE_LINE), self._skipped)
        self._current = self._pending = None
        self._ended = False
        self._started = self._clock()

    def _next(self) -> ClusterSnapshot | None:
        assert self._lines is not None
        if self._pending is not None:
            pending, self._pending = self._pending, None
            return pending
        return next(self._lines, None)

    def poll(self) -> ClusterSnapshot:
        """The trace's snapshot for now (or the next one, in step mode)."""
        try:
            if self._lines is None:
                self._open()
            snapshot = self._advance()
            if snapshot is None and self.loop and self._current is not None:
                self._open()
                snapshot = self._advance()
        except OSError as err:
            return self._failed(
                f"cannot read trace {shown(self.path)}: {err.strerror or err}",
                "check the path given to --replay",
            )
        except MemtuiError as err:  # not a regular file, too large
            return self._failed(str(err), "give --replay a trace written by --record")
        except LineTooLong as err:
            return self._failed(
                f"trace {shown(self.path.name)}: {err}; not a memtui trace",
                "give --replay a trace written by --record",
            )
        if snapshot is None:
            if self._current is None:
                # empty, binary or unrelated: an error, not a replay that merely ended
                return self._failed(
                    f"trace {shown(self.path.name)} holds no memtui snapshots "
                    "(empty, or not a JSONL trace)",
                    "record one with `memtui watch --record FILE`",
                )
            self._ended = True
            note = skipped_note(self._skipped)
            reason = f"end of replay; {note}" if note else "end of replay"
            snapshot = self._current.model_copy(
                update={"state": SourceState.ENDED, "reason": reason, "remedy": None}
            )
        chosen = select_in_cluster(snapshot.model_copy(update={"source": self.name}), self.only)
        if not self._ended and not snapshot.ok and chosen.state is snapshot.state:
            chosen = chosen.model_copy(update={"recorded": True})  # data, not our health
        return chosen

    def _failed(self, reason: str, remedy: str) -> ClusterSnapshot:
        # a node-shaped failure, as before traces held clusters (`watch --json` prints it so)
        return ClusterSnapshot.of_node(
            failed_snapshot(SourceState.ERROR, reason, remedy, time=time.time(), source=self.name)
        )

    def _advance(self) -> ClusterSnapshot | None:
        """Move to the snapshot due now; None when the trace is exhausted."""
        if self.speed is None:  # step mode: one line per poll
            snapshot = self._next()
            if snapshot is not None:
                self._current = snapshot
            return snapshot
        if self._current is None:
            first = self._next()
            if first is None:
                return None
            self._current = first
            self._first_time = first.time
            return first
        due = self._first_time + (self._clock() - self._started) * self.speed
        while True:
            candidate = self._next()
            if candidate is None:
                # no more lines: keep the current one until its successor would be due
                return None if self._past_last(due) else self._current
            if candidate.time > due:
                self._pending = candidate
                return self._current
            self._current = candidate

    def _past_last(self, due: float) -> bool:
        # the last snapshot stays on screen for one more second of recorded time
        assert self._current is not None
        return due > self._current.time + 1.0

    @property
    def ended(self) -> bool:
        """True once the whole trace has been played (and `loop` is off)."""
        return self._ended

    def close(self) -> None:
        """Close the trace file. Safe to call twice."""
        if self._file is not None:
            self._file.close()
        self._file = None
        self._lines = None
