"""Every file memtui reads, read bounded: the one reader of job configs, model configs, plans,
themes, token files, memory snapshots, memory_stats dumps and recorded traces.

A path names anything: a FIFO (whose `open()` waits for a writer forever: one in the themes
folder blocked every dashboard start), a device (`/dev/zero`, `/dev/urandom` never end), a
4 GB sparse file, a folder. So a file is opened with O_NONBLOCK (a FIFO opens at once instead
of waiting; for a regular file the flag changes nothing, open(2)), and only a regular file is
read; `-` is standard input, read with the same bound. Each kind of file has a size past which
it is not that kind of file: the error says the kind and its bound, checked on the size the
file claims before reading (a sparse file is refused at once) and again on the bytes read (a
/proc file claims 0 bytes, a growing file more than it said). Error messages name the file
through `memtui.text.shown` and never quote its content.

The dashboard reads through this module in worker threads (the snapshot screen, the job keys)
or before the event loop starts (themes, --plan, --from), never inside it.
"""

from __future__ import annotations

import io
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from memtui.errors import MemtuiError, UsageError
from memtui.text import shown

KiB, MiB, GiB = 2**10, 2**20, 2**30


@dataclass(frozen=True)
class Kind:
    """A kind of file memtui reads, and the size past which a file is not one."""

    what: str
    limit: int
    """Bytes."""

    def bound(self) -> str:
        """The limit as people write it: "8 MiB", "2 GiB"."""
        for unit, name in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
            if self.limit >= unit and self.limit % unit == 0:
                return f"{self.limit // unit} {name}"
        return f"{self.limit} bytes"


# A job config (YAML, JSON, a launch script): some thousand times the largest config or launch
# script in the upstream repositories (DeepSpeed and accelerate configs are a few KiB).
JOB_CONFIG = Kind("job config", 8 * MiB)
# A model's config.json (the Hub's, or the HF cache's copy): tens of KiB for the largest MoE.
MODEL_CONFIG = Kind("model config.json", 8 * MiB)
# What `memtui estimate --save` / the dashboard's `s` write: about a KiB.
PLAN = Kind("memtui plan", 1 * MiB)
THEME = Kind("theme", 1 * MiB)
# The dashboard's preferences.toml: a few lines.
PREFERENCES = Kind("preferences", 64 * KiB)
# A bearer token or `user:password`: a few hundred bytes.
TOKEN = Kind("token file", 64 * KiB)
# torch.cuda.memory._dump_snapshot's pickle: its size grows with the trace entries kept
# (torch/cuda/memory.py `_record_memory_history`, max_entries) and the stack frames of each;
# the snapshots we have seen are tens to hundreds of MiB. 2 GiB is generous by an order of
# magnitude, and still a bound the unpickled objects (several times the bytes) fit in.
SNAPSHOT = Kind("memory snapshot", 2 * GiB)
# torch.cuda.memory_stats() is about 5 KiB per device as JSON; JSON lines of one per step
# for hours of a run stay far below this.
MEMORY_STATS = Kind("memory_stats JSON", 256 * MiB)
# What a `memtui measure` worker writes in its run folder (one rank's numbers, the job).
MEASUREMENT = Kind("measurement", 8 * MiB)
# A recorded trace (`watch --record`), read line by line: a poll a second of a 64-GPU cluster
# for a month stays below the file bound; a line is one cluster snapshot of many hosts with
# their processes.
TRACE = Kind("recorded trace", 64 * GiB)
TRACE_LINE = Kind("trace line", 16 * MiB)


class _Limit(io.RawIOBase):
    """`raw`, ending after `limit` bytes; `over` says whether there was more."""

    def __init__(self, raw: BinaryIO, limit: int, owned: bool) -> None:
        super().__init__()
        self._raw = raw
        self._owned = owned  # standard input is not closed with it
        self._left = limit
        self.limit = limit
        self.over = False

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if self._owned:
            self._raw.close()
        super().close()

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._left <= 0:
            # one byte past the limit tells a file of exactly `limit` bytes from a longer one
            self.over = self.over or bool(self._raw.read(1))
            return 0
        view = memoryview(buffer)[: self._left]
        count = self._raw.readinto(view) or 0  # type: ignore[attr-defined]
        self._left -= count
        return count


class Bounded(io.BufferedReader):
    """A file opened by `opened`: it ends after its kind's limit, and `too_large` is the error
    to raise when `over` says the file went on."""

    def __init__(self, raw: _Limit, kind: Kind, name: str, error: type[MemtuiError]) -> None:
        super().__init__(raw)
        self._limit = raw
        self.kind = kind
        self.label = name
        self.error = error

    @property
    def over(self) -> bool:
        return self._limit.over

    @property
    def count(self) -> int:
        """The bytes taken from the file so far (read ahead into the buffer included)."""
        return self._limit.limit - self._limit._left

    def too_large(self) -> MemtuiError:
        kind = self.kind
        return self.error(f"{self.label}: over {kind.bound()}, larger than any {kind.what}")


def open_file(
    path: str | Path,
    kind: Kind,
    error: type[MemtuiError] = UsageError,
    name: str | None = None,
) -> Bounded:
    """`path` (`-`: standard input) opened for reading at most `kind.limit` bytes; a file that
    is not regular, cannot be opened or claims more is `error`, one line naming it as `name`
    (default: the path, shown safely). The caller closes it (`opened` does)."""
    label = shown(path) if name is None else name
    if str(path) == "-":
        if sys.stdin is None:
            raise error(f"{label}: no standard input to read")
        return Bounded(_Limit(sys.stdin.buffer, kind.limit, owned=False), kind, label, error)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{label}: no such file (cannot read it)") from None
    except OSError as err:
        raise error(f"{label}: cannot read it ({err.strerror or type(err).__name__})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > kind.limit:
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise error(f"{label}: is a folder, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{label}: not a regular file (a FIFO, a device or a socket), not read")
        # a sparse 4 GB file is refused before a byte is read
        raise error(f"{label}: over {kind.bound()}, larger than any {kind.what}")
    raw = os.fdopen(fd, "rb", buffering=0)
    return Bounded(_Limit(raw, kind.limit, owned=True), kind, label, error)


@contextmanager
def opened(
    path: str | Path,
    kind: Kind,
    error: type[MemtuiError] = UsageError,
    name: str | None = None,
) -> Iterator[Bounded]:
    """`open_file`, closed after the block; an OSError while reading is `error` too."""
    with open_file(path, kind, error, name) as file:
        try:
            yield file
        except OSError as err:  # EIO, a file on a vanished network mount
            raise error(
                f"{file.label}: cannot read it ({err.strerror or type(err).__name__})"
            ) from None


def read_bytes(
    path: str | Path,
    kind: Kind,
    error: type[MemtuiError] = UsageError,
    name: str | None = None,
) -> bytes:
    """The whole file (see `opened`), at most `kind.limit` bytes, else `error`."""
    with opened(path, kind, error, name) as file:
        data = file.read()
        if file.over:
            raise file.too_large()
    return data


def read_text(
    path: str | Path,
    kind: Kind,
    error: type[MemtuiError] = UsageError,
    name: str | None = None,
) -> str:
    """The whole file as UTF-8 text (see `read_bytes`); bytes that are not UTF-8 are `error`."""
    data = read_bytes(path, kind, error, name)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        label = shown(path) if name is None else name
        raise error(f"{label}: not a UTF-8 text file") from None


class LineTooLong(Exception):
    """A line of a line-by-line file longer than its kind allows; `number` is 1-based."""

    def __init__(self, number: int, kind: Kind) -> None:
        super().__init__(f"line {number} is over {kind.bound()}, longer than any {kind.what}")
        self.number = number


def lines(file: BinaryIO, kind: Kind) -> Iterator[bytes]:
    """The file's lines, each at most `kind.limit` bytes (`LineTooLong` on a longer one: a file
    of zeros, or no newline in gigabytes, is not read whole into one line)."""
    number = 0
    while True:
        line = file.readline(kind.limit + 1)
        if not line:
            return
        number += 1
        if len(line) > kind.limit:
            raise LineTooLong(number, kind)
        yield line
