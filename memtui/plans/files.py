"""Writing a plan or an exported config to disk: atomically, with the mode a user expects.

A temporary file in the same folder, fsynced, then `os.replace`: a crash mid-write never
leaves half a file. The file gets the mode a plain `open()` would give it (0666 less the
umask; an existing file keeps its own), not mkstemp's 0600. A symlink is followed: its target
is written and the link stays (replacing the link left the target as it was while the screen
said "saved"). Only a regular file or a path not made yet is written: a device, a pipe or a
folder is refused (`--save /dev/full` as root replaced the device with a text file).
`write_new` adds the rules of every file a command writes on request (`export -o`,
`snapshot --export-viz`): an existing file only with `--force`, never one of the inputs.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from memtui.errors import UsageError
from memtui.text import shown


def _file_mode(target: Path) -> int:
    """The mode a new file would get from open(): 0666 less the umask; an existing file's own."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    # read, not set-and-restore: saving runs in a worker thread, and os.umask is process-wide
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # no /proc (macOS): the brief set-and-restore is all there is
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, content: str | bytes) -> Path:
    """Write `content` (text as UTF-8) to `path` atomically (creating its folder); returns the
    path written (a symlink's target). Raises OSError for a path that is not a regular file."""
    target = Path(os.path.realpath(Path(path).expanduser()))
    try:
        kind = target.stat().st_mode
    except FileNotFoundError:
        kind = None  # a new file
    if kind is not None and not stat.S_ISREG(kind):
        raise OSError(errno.EINVAL, "not a regular file, left as it is", str(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = _file_mode(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, mode)  # mkstemp makes it 0600
        with os.fdopen(fd, "wb") as handle:
            handle.write(content.encode("utf-8") if isinstance(content, str) else content)
            handle.flush()
            os.fsync(handle.fileno())  # the rename must not publish an empty file after a crash
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def new_target(path: str | Path, force: bool, inputs: Iterable[str | Path] = ()) -> Path:
    """`path` checked as a file to write on request: a folder, a device or a pipe is refused,
    so is any of `inputs` (the file being read), and an existing file unless `force`; the
    check a command makes before its work, so a long read is not wasted."""
    target = Path(path).expanduser()
    name = shown(target)
    if target.is_dir():
        raise UsageError(f"{name}: is a folder; give a file name")
    if not target.exists():
        return target
    if not stat.S_ISREG(target.stat().st_mode):
        raise UsageError(f"{name}: not a regular file (a device or a pipe), left as it is")
    for source in inputs:
        if str(source) != "-" and os.path.exists(source) and os.path.samefile(target, source):
            raise UsageError(f"{name}: is the input file; give another name")
    if not force:
        raise UsageError(f"{name}: already exists; give --force to overwrite it")
    return target


def write_new(
    path: str | Path, content: str | bytes, force: bool, inputs: Iterable[str | Path] = ()
) -> Path:
    """`content` written atomically to `path` after `new_target`'s checks; returns the path
    written. Any problem is one UsageError line."""
    target = new_target(path, force, inputs)
    try:
        return write_atomic(target, content)
    except OSError as err:
        raise UsageError(f"{shown(target)}: cannot write it ({err.strerror or err})") from None
