"""Record snapshots as a JSONL trace: one JSON object per line, a `NodeSnapshot` for a
single-node source (format 1) or a `ClusterSnapshot` for many hosts (format 2).

Each poll is appended and flushed at once, so killing memtui (even with SIGKILL) loses at
most the poll in flight; a truncated last line is skipped by the reader. Readers take the
file as bytes and decode each line on its own, tolerantly: a line cut inside a multibyte
character (SIGKILL mid-write of a non-ASCII command line), or a binary file, yields lines
that simply fail to parse and are skipped, never a UnicodeDecodeError. The format is
documented in docs/telemetry.md and read back by `ReplaySource`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType

from pydantic import ValidationError

from memtui.telemetry.models import ClusterSnapshot, NodeSnapshot, as_cluster


class Recorder:
    """Append snapshots to a JSONL file (created if missing, never truncated)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        # line-buffered text: one write + flush per poll, no partial lines left in our buffer
        self._file = self.path.open("a", encoding="utf-8", buffering=1)

    def write(self, snapshot: ClusterSnapshot | NodeSnapshot) -> None:
        """Append one snapshot as one line and flush it to the OS."""
        self._file.write(as_cluster(snapshot).dump_json() + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file. Safe to call twice; never raises (after a failed write the close
        would retry the same doomed flush, e.g. on a full disk)."""
        with contextlib.suppress(OSError):
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


def parse_line(line: str | bytes) -> ClusterSnapshot | None:
    """One trace line as a cluster snapshot (a format-1 line is a cluster of its node); None
    for a blank, truncated, binary or foreign line."""
    if isinstance(line, bytes):
        # per line and tolerant: a half-written character spoils its own line only
        line = line.decode("utf-8", errors="replace")
    line = line.strip()
    if not line:
        return None
    try:
        data = json.loads(line)
        if not isinstance(data, dict):
            return None
        if "nodes" in data:  # a cluster line (format 2); a node line has no such key
            return ClusterSnapshot.model_validate(data)
        return ClusterSnapshot.of_node(NodeSnapshot.model_validate(data))
    except (ValidationError, ValueError, RecursionError):  # json recurses once per level
        return None


def iter_snapshots(lines: Iterable[bytes]) -> Iterator[ClusterSnapshot]:
    """The readable snapshots among raw trace lines (a file opened "rb"), in order."""
    for line in lines:
        snapshot = parse_line(line)
        if snapshot is not None:
            yield snapshot


def read_trace(path: str | Path) -> Iterator[ClusterSnapshot]:
    """Every readable snapshot of a trace, in order (bad lines are skipped)."""
    with Path(path).open("rb") as file:
        yield from iter_snapshots(file)
