"""Name, user and command line of GPU processes, from psutil where the PID is visible.

NVML reports host PIDs. Inside a container without `--pid=host` those PIDs do not exist in
our namespace (or, worse, belong to someone else), so a lookup can fail; the caller turns
"nothing visible" into a note rather than an empty list (`nvidia-smi` shows the same PIDs).
"""

from __future__ import annotations

from typing import Any

#: The note shown when a GPU has processes (or used memory) we cannot see.
OTHER_NAMESPACE_NOTE = (
    "processes run in another PID namespace (e.g. a container without --pid=host): "
    "PIDs are host PIDs, names unknown"
)


class ProcessInfoCache:
    """psutil lookups cached by PID; a reused PID is detected by its creation time."""

    def __init__(self) -> None:
        import psutil  # imported here: `memtui estimate` must not pay for it

        self._psutil = psutil
        self._cache: dict[int, tuple[Any, tuple[str | None, str | None, str | None]]] = {}

    def lookup(self, pid: int) -> tuple[str | None, str | None, str | None]:
        """(name, user, command) of `pid`; (None, None, None) when it is not visible here."""
        psutil = self._psutil
        cached = self._cache.get(pid)
        if cached is not None:
            proc, info = cached
            try:
                if proc.is_running():  # compares creation time: catches PID reuse
                    return info
            except psutil.Error:
                pass
            del self._cache[pid]
        try:
            proc = psutil.Process(pid)
        except (psutil.Error, ValueError):
            return (None, None, None)
        info = self._read(proc)
        if info[0] is not None:
            self._cache[pid] = (proc, info)
        return info

    def _read(self, proc: Any) -> tuple[str | None, str | None, str | None]:
        psutil = self._psutil
        name = user = command = None
        with proc.oneshot():
            try:
                name = proc.name()
            except psutil.Error:
                return (None, None, None)
            try:
                user = proc.username()
            except (psutil.Error, KeyError):  # KeyError: UID without a passwd entry
                user = None
            try:
                command = " ".join(proc.cmdline()) or None
            except psutil.Error:
                command = None
        return (name, user, command)

    def forget_except(self, live: set[int]) -> None:
        """Drop cached PIDs that no GPU reports any more (keeps the cache small)."""
        for pid in [p for p in self._cache if p not in live]:
            del self._cache[pid]
