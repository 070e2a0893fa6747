"""Name, user and command line of GPU processes, from psutil where the PID is visible.

NVML reports host PIDs. Inside a container without `--pid=host` those PIDs do not exist in
our namespace (or, worse, belong to someone else), so a lookup can fail; the caller turns
"nothing visible" into a note rather than an empty list (`nvidia-smi` shows the same PIDs).
"""

from __future__ import annotations

#: The note shown when a GPU has processes (or used memory) we cannot see.
OTHER_NAMESPACE_NOTE = (
    "processes run in another PID namespace (e.g. a container without --pid=host): "
    "PIDs are host PIDs, names unknown"
)

#: The most of a command line kept for display (the screen cuts it shorter still).
MAX_COMMAND = 4096


class ProcessInfoCache:
    """psutil lookups cached by PID, hits and misses alike.

    An entry lives exactly as long as NVML keeps listing the PID (`forget_except` runs after
    each poll), so a PID is looked up once per process lifetime, not once per poll: 64 GPU
    processes would otherwise cost a /proc read each, every second. A PID can only be reused
    after its process ended, and then NVML stops listing it and the entry goes.
    """

    def __init__(self) -> None:
        import psutil  # imported here: `memtui estimate` must not pay for it

        self._psutil = psutil
        self._cache: dict[int, tuple[str | None, str | None, str | None]] = {}

    def lookup(self, pid: int) -> tuple[str | None, str | None, str | None]:
        """(name, user, command) of `pid`; (None, None, None) when it is not visible here."""
        info = self._cache.get(pid)
        if info is None:
            info = self._cache[pid] = self._read(pid)
        return info

    def _read(self, pid: int) -> tuple[str | None, str | None, str | None]:
        psutil = self._psutil
        try:
            proc = psutil.Process(pid)
        except (psutil.Error, ValueError):
            return (None, None, None)
        with proc.oneshot():
            try:
                name = proc.name()
            except psutil.Error:
                return (None, None, None)
            try:
                user: str | None = proc.username()
            except (psutil.Error, KeyError):  # KeyError: a UID without a passwd entry
                user = None
            try:
                # cut: a neighbour's command line may be megabytes, cached per process
                command: str | None = " ".join(proc.cmdline())[:MAX_COMMAND] or None
            except psutil.Error:
                command = None
        return (name, user, command)

    def forget_except(self, live: set[int]) -> None:
        """Drop PIDs that no GPU lists any more (their process ended; the PID may be reused)."""
        for pid in [p for p in self._cache if p not in live]:
            del self._cache[pid]
