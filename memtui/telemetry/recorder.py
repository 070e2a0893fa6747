"""Record snapshots as a JSONL trace: one `NodeSnapshot` JSON object per line.

Each poll is appended and flushed at once, so killing memtui (even with SIGKILL) loses at
most the poll in flight; a truncated last line is skipped by the reader. The format is
documented in docs/telemetry.md and read back by `ReplaySource`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from pydantic import ValidationError

from memtui.telemetry.models import NodeSnapshot


class Recorder:
    """Append snapshots to a JSONL file (created if missing, never truncated)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        # line-buffered text: one write + flush per poll, no partial lines left in our buffer
        self._file = self.path.open("a", encoding="utf-8", buffering=1)

    def write(self, snapshot: NodeSnapshot) -> None:
        """Append one snapshot as one line and flush it to the OS."""
        self._file.write(snapshot.model_dump_json() + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file. Safe to call twice."""
        self._file.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def parse_line(line: str) -> NodeSnapshot | None:
    """One trace line as a snapshot; None for a blank, truncated or foreign line."""
    line = line.strip()
    if not line:
        return None
    try:
        return NodeSnapshot.model_validate_json(line)
    except ValidationError:
        return None


def read_trace(path: str | Path) -> Iterator[NodeSnapshot]:
    """Every readable snapshot of a trace, in order (bad lines are skipped)."""
    with Path(path).open(encoding="utf-8") as file:
        for line in file:
            snapshot = parse_line(line)
            if snapshot is not None:
                yield snapshot
