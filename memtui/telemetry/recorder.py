"""Record snapshots as a JSONL trace: one `NodeSnapshot` JSON object per line.

Each poll is appended and flushed at once, so killing memtui (even with SIGKILL) loses at
most the poll in flight; a truncated last line is skipped by the reader. Readers take the
file as bytes and decode each line on its own, tolerantly: a line cut inside a multibyte
character (SIGKILL mid-write of a non-ASCII command line), or a binary file, yields lines
that simply fail to parse and are skipped, never a UnicodeDecodeError. The format is
documented in docs/telemetry.md and read back by `ReplaySource`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
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


def parse_line(line: str | bytes) -> NodeSnapshot | None:
    """One trace line as a snapshot; None for a blank, truncated, binary or foreign line."""
    if isinstance(line, bytes):
        # per line and tolerant: a half-written character spoils its own line only
        line = line.decode("utf-8", errors="replace")
    line = line.strip()
    if not line:
        return None
    try:
        return NodeSnapshot.model_validate_json(line)
    except (ValidationError, ValueError):
        return None


def iter_snapshots(lines: Iterable[bytes]) -> Iterator[NodeSnapshot]:
    """The readable snapshots among raw trace lines (a file opened "rb"), in order."""
    for line in lines:
        snapshot = parse_line(line)
        if snapshot is not None:
            yield snapshot


def read_trace(path: str | Path) -> Iterator[NodeSnapshot]:
    """Every readable snapshot of a trace, in order (bad lines are skipped)."""
    with Path(path).open("rb") as file:
        yield from iter_snapshots(file)
