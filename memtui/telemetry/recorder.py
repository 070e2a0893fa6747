"""Record snapshots as a JSONL trace: one JSON object per line, a `NodeSnapshot` for a
single-node source (format 1) or a `ClusterSnapshot` for many hosts (format 2).

Each poll is appended and flushed at once, so killing memtui (even with SIGKILL) loses at
most the poll in flight; a truncated last line is skipped by the reader (which counts it), and
recording into that trace again starts on a new line first, so the cut line does not swallow
the next session's first snapshot. Only a regular file (or a new one) is recorded into, never
the trace being replayed. Reading is bounded (`memtui.bounded`): a line over 16 MiB ends the
read (a file of zeros is not one line read whole). Readers take the
file as bytes and decode each line on its own, tolerantly: a line cut inside a multibyte
character (SIGKILL mid-write of a non-ASCII command line), or a binary file, yields lines
that simply fail to parse and are skipped, never a UnicodeDecodeError. The format is
documented in docs/telemetry.md and read back by `ReplaySource`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType

from pydantic import ValidationError

from memtui.bounded import TRACE, TRACE_LINE, LineTooLong, lines, opened
from memtui.errors import UsageError
from memtui.telemetry.models import ClusterSnapshot, NodeSnapshot, as_cluster
from memtui.text import shown


class Recorder:
    """Append snapshots to a JSONL file (created if missing, never truncated); OSError for a
    path that is not a regular file or is one of `inputs` (the trace replayed)."""

    def __init__(self, path: str | Path, inputs: Iterable[str | Path] = ()) -> None:
        self.path = Path(path)
        # O_NONBLOCK: a FIFO opens at once instead of waiting (and is refused); read and write:
        # the last byte is read to see whether the last line was cut
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK
        fd = os.open(self.path, flags, 0o666)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(
                    errno.EINVAL, "not a regular file (a device or a pipe), left as it is"
                )
            for source in inputs:
                other = os.stat(source)
                if (other.st_dev, other.st_ino) == (info.st_dev, info.st_ino):
                    raise OSError(errno.EINVAL, "is the trace being replayed; record elsewhere")
            if info.st_size and os.pread(fd, 1, info.st_size - 1) != b"\n":
                os.write(fd, b"\n")  # the last line was cut (a kill mid-write): end it
            # line-buffered text: one write + flush per poll, no partial line left in a buffer
            self._file = os.fdopen(fd, "a", encoding="utf-8", buffering=1)
        except BaseException:
            os.close(fd)
            raise

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


def iter_snapshots(
    lines: Iterable[bytes], skipped: list[int] | None = None
) -> Iterator[ClusterSnapshot]:
    """The readable snapshots among raw trace lines, in order; the numbers (1-based) of the
    lines that are not blank but hold no snapshot (cut, binary, foreign) go to `skipped`."""
    for number, line in enumerate(lines, 1):
        snapshot = parse_line(line)
        if snapshot is not None:
            yield snapshot
        elif skipped is not None and line.strip():
            skipped.append(number)


def skipped_note(skipped: list[int]) -> str:
    """What a reader says of the lines it skipped: "" when none."""
    if not skipped:
        return ""
    where = ", ".join(map(str, skipped[:5])) + (", ..." if len(skipped) > 5 else "")
    return f"{len(skipped):,} unreadable line(s) skipped (cut or not a snapshot: line {where})"


def read_trace(path: str | Path, skipped: list[int] | None = None) -> Iterator[ClusterSnapshot]:
    """Every readable snapshot of a trace, in order (bad lines are skipped, and counted in
    `skipped`); UsageError for a file that is not a regular one or a line over 16 MiB."""
    with opened(path, TRACE, UsageError, f"trace {shown(path)}") as file:
        try:
            yield from iter_snapshots(lines(file, TRACE_LINE), skipped)
        except LineTooLong as err:
            raise UsageError(f"{file.label}: {err}; not a memtui trace") from None
