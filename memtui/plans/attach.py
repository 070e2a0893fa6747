"""Attach: the training jobs behind the processes on the GPUs, and the plan each was launched
with.

NVML gives the PIDs on each GPU (the telemetry snapshot); here psutil reads, for each PID and
its ancestors, the command line, the working folder and the environment (where readable: a
process of another user hides its environment, one in another PID namespace is not visible
at all). The outermost ancestor that `launchers.recognise` knows is the job's launch (a
torchrun whose workers are on the GPUs, an `axolotl train` that started accelerate); the
processes under one launch are one job across GPUs. Only the environment variables the
launchers set are kept (`_KEPT`): tokens and secrets in a job's environment are never read
into memtui's memory beyond that filter, and never shown.

Other users' processes are untrusted: anyone on a shared node can start a process on a GPU
with any command line. So a command line is read only up to `MAX_COMMAND_LINE` bytes, and of
the files a command line names (its configs, a `--deepspeed` JSON, torchtune's shipped
configs in the job's environment) only those of the user running memtui (or root) are read
(`admit_own_files`: a neighbour's file, or a path under /proc, /sys or /dev, is one line;
`memtui --from FILE` reads one the user vouches for), through the bounded reader
(`memtui.plans.facts.read_text`). Looking for jobs and reading a job's files each run under a
time limit (`ATTACH_TIMEOUT_S`), in a thread abandoned when it hangs (a /proc read of a
process whose memory map is locked, a config on a stalled network folder).

psutil is read here (the plans layer may; the telemetry layer's process cache joins command
lines with spaces, which loses the argv a launch is recognised from), imported only when a
job is looked for.
"""

from __future__ import annotations

import glob
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memtui.errors import one_line
from memtui.plans.facts import ConfigError
from memtui.plans.launchers import Launch, recognise

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan
    from memtui.plans.imports import Imported

_KEPT_PREFIXES = ("ACCELERATE_", "FSDP_", "PARALLELISM_CONFIG_")
_KEPT = frozenset(
    {"WORLD_SIZE", "LOCAL_WORLD_SIZE", "PYTORCH_CUDA_ALLOC_CONF", "HF_HOME", "XDG_CACHE_HOME",
     "HOME"}
)  # fmt: skip
_MAX_ANCESTORS = 16
MAX_COMMAND_LINE = 256 * 2**10
"""The most of a command line attach reads: 256 KiB, far beyond any launch (Linux's own limit
for one argument is 128 KiB, MAX_ARG_STRLEN in include/uapi/linux/binfmts.h)."""
ATTACH_TIMEOUT_S = 10.0
"""How long looking for jobs, or reading one job's files, may take before it is given up."""
_PSEUDO = frozenset({"proc", "sys", "dev"})
_T = TypeVar("_T")


@dataclass(frozen=True)
class Job:
    """One training job: its launch and the GPU processes under it."""

    launch: Launch
    root: int
    """The PID of the launch (the launcher, or the process itself when started directly)."""
    pids: tuple[int, ...]
    """Its processes on the GPUs."""
    devices: tuple[str, ...]
    """The GPUs they are on (row labels: "0", "0:1")."""
    env: Mapping[str, str] = field(default_factory=dict)
    """A worker's environment, the launchers' variables only."""
    executable: str | None = None
    """The launch's interpreter (to find the configs torchtune ships)."""

    @property
    def label(self) -> str:
        pids = ",".join(str(p) for p in self.pids[:4]) + ("..." if len(self.pids) > 4 else "")
        gpus = ",".join(self.devices)
        return f"{self.launch.label} (pid {pids} on GPU {gpus})"


#: PIDs a one-line summary names before saying how many more (the process table lists all).
SUMMARY_PIDS = 3


@dataclass(frozen=True)
class Unread:
    """The processes memtui could read no job from, for one reason."""

    why: str
    pids: tuple[int, ...]

    def line(self, most: int | None = None) -> str:
        """`pid 1,2: why`; with `most` and more PIDs than that, the reason first, then the
        count and the first `most` PIDs, apart so that a narrow line wraps between them."""
        if most is None or len(self.pids) <= most:
            return f"pid {','.join(map(str, self.pids))}: {self.why}"
        listed = ", ".join(map(str, self.pids[:most]))
        more = len(self.pids) - most
        return f"{self.why}: {len(self.pids)} processes, pid {listed} and {more} more"


@dataclass(frozen=True)
class Found:
    """The jobs on the GPUs, and why any process was not recognised."""

    jobs: tuple[Job, ...]
    notes: tuple[str, ...]
    """One line per process (or kind of process) memtui could not read a job from."""
    unread: tuple[Unread, ...] = ()
    """The processes behind the notes that name PIDs, by reason (the notes' order)."""

    @property
    def summary(self) -> str:
        """One line for the status bar (a few PIDs of the first reason, and their count)."""
        if self.jobs:
            first = self.jobs[0]
            more = f" (+{len(self.jobs) - 1} more)" if len(self.jobs) > 1 else ""
            return f"job: {first.label}{more}"
        if self.unread:
            return f"no training job recognised: {self.unread[0].line(SUMMARY_PIDS)}"
        if self.notes:
            return f"no training job recognised: {self.notes[0]}"
        return "no training job recognised: no processes on the GPUs"


def pids_on_gpus(snapshot: Any) -> dict[int, set[str]]:
    """PID -> the GPUs (row labels) NVML lists it on, from a telemetry snapshot (read by its
    attributes: this layer does not import telemetry)."""
    found: dict[int, set[str]] = {}
    for device in snapshot.devices:
        for proc in device.processes or ():
            found.setdefault(proc.pid, set()).add(device.label)
    return found


def _filtered(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k in _KEPT or k.startswith(_KEPT_PREFIXES)}


@dataclass
class _Proc:
    pid: int
    argv: list[str]
    cwd: Path | None
    env: dict[str, str]
    exe: str | None
    parent: int | None


def _read(psutil: Any, pid: int) -> tuple[_Proc | None, str | None]:
    """One process through psutil, or why it cannot be read."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            if _command_line_bytes(pid) > MAX_COMMAND_LINE:
                return None, f"its command line is over {MAX_COMMAND_LINE // 2**10} KiB: not read"
            argv = proc.cmdline()
            parent = proc.ppid()
            try:
                cwd: Path | None = Path(proc.cwd())
            except (psutil.AccessDenied, psutil.ZombieProcess):
                cwd = None
            try:
                env = _filtered(proc.environ())
            except (psutil.AccessDenied, psutil.ZombieProcess):
                env = {}
            try:
                exe: str | None = proc.exe()
            except (psutil.AccessDenied, psutil.ZombieProcess):
                exe = None
    except psutil.NoSuchProcess:
        return None, "not visible here (another PID namespace, e.g. a container)"
    except psutil.AccessDenied:
        return None, "its command line is not readable (another user's process)"
    return _Proc(pid, argv, cwd, env, exe, parent), None


def _command_line_bytes(pid: int) -> int:
    """How long `pid`'s command line is, read bounded from /proc (0 where there is no /proc:
    psutil then reads it its own way)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return len(file.read(MAX_COMMAND_LINE + 1))
    except OSError:
        return 0


def _within(seconds: float, what: str, work: Callable[[], _T]) -> _T:
    """`work()` in a daemon thread, given up after `seconds` (a thread stuck in a read cannot
    be stopped, so it is abandoned); its error re-raised here; ConfigError on time out."""
    box: list[_T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            box.append(work())
        except BaseException as err:  # re-raised in the caller's thread
            errors.append(err)

    thread = threading.Thread(target=run, name="memtui-attach", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise ConfigError(f"{what} took over {seconds:g} s: given up")
    if errors:
        raise errors[0]
    return box[0]


def find_jobs(processes: Mapping[int, Iterable[str]]) -> Found:
    """The jobs behind `processes` (PID -> the GPUs it is on, as NVML lists them), looked
    for within ATTACH_TIMEOUT_S (past it: no job, and a note saying so)."""
    try:
        return _within(ATTACH_TIMEOUT_S, "reading the GPU processes", lambda: _find_jobs(processes))
    except ConfigError as err:
        return Found((), (str(err),))


def _find_jobs(processes: Mapping[int, Iterable[str]]) -> Found:
    import psutil  # here only: attach is rare, memtui's start must not pay for it

    by_root: dict[int, tuple[Launch, list[int], set[str], dict[str, str], str | None]] = {}
    notes: dict[str, list[int]] = {}
    cache: dict[int, tuple[_Proc | None, str | None]] = {}

    def read(pid: int) -> tuple[_Proc | None, str | None]:
        if pid not in cache:
            cache[pid] = _read(psutil, pid)
        return cache[pid]

    for pid, devices in sorted(processes.items()):
        proc, why = read(pid)
        if proc is None:
            notes.setdefault(str(why), []).append(pid)
            continue
        try:
            found = _outermost(proc, read)
        except ConfigError as err:  # its launch line is no job (torchrun --nproc_per_node 10^12)
            notes.setdefault(str(err), []).append(pid)
            continue
        if found is None:
            name = os.path.basename(proc.argv[0]) if proc.argv else "?"
            notes.setdefault(f"{name}: no launcher or Trainer arguments memtui knows", []).append(
                pid
            )
            continue
        launch, root, exe = found
        entry = by_root.setdefault(root, (launch, [], set(), dict(proc.env), exe))
        entry[1].append(pid)
        entry[2].update(devices)
        if not entry[3] and proc.env:
            entry[3].update(proc.env)
    jobs = tuple(
        Job(launch, root, tuple(pids), tuple(sorted(gpus, key=_gpu_order)), env, exe)
        for root, (launch, pids, gpus, env, exe) in sorted(by_root.items())
    )
    unread = tuple(Unread(why, tuple(pids)) for why, pids in notes.items())
    return Found(jobs, tuple(u.line() for u in unread), unread)


def _gpu_order(label: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in label.split(":"))


def _outermost(proc: _Proc, read: Any) -> tuple[Launch, int, str | None] | None:
    """The outermost recognised launch among `proc` and its ancestors: a launcher tool beats
    a script started directly, which is only taken when nothing above it is a launcher."""
    best: tuple[Launch, int, str | None] | None = None
    current: _Proc | None = proc
    for _ in range(_MAX_ANCESTORS):
        if current is None or not current.argv:
            break
        launch = recognise(current.argv, current.cwd or Path("/"), current.env or proc.env)
        if launch is not None and (best is None or launch.launcher != "python"):
            best = (launch, current.pid, current.exe)
        if current.parent in (None, 0, 1):
            break
        current, _why = read(current.parent)
    return best


def torchtune_configs(*executables: str | None) -> list[Path]:
    """Folders where torchtune keeps the configs it ships (its wheel's recipes/configs),
    in the environments of the given interpreters and of memtui's own."""
    prefixes = {Path(e).resolve().parent.parent for e in executables if e} | {Path(sys.prefix)}
    found = []
    for prefix in sorted(prefixes):
        pattern = str(prefix / "lib" / "python*" / "site-packages" / "recipes" / "configs")
        found += [Path(p) for p in sorted(glob.glob(pattern))]
    return found


def admit_own_files(path: Path, shown: str) -> None:
    """Refuse (ConfigError) a file a command line names unless it belongs to the user running
    memtui, or to root (the system's files: no neighbour can write them; torchtune's shipped
    configs in a system-wide environment): a neighbour's process may name a FIFO, an alias
    bomb or a file they keep growing. stat never opens the file, so a FIFO cannot block."""
    if len(path.parts) > 1 and path.parts[1] in _PSEUDO:
        raise ConfigError(f"{shown}: under /{path.parts[1]}, not a config file")
    try:
        owner = path.stat().st_uid
    except OSError:
        return  # missing or unreadable: the reader says which
    if owner not in (os.getuid(), 0):
        raise ConfigError(
            f"{shown}: belongs to another user (uid {owner}); attach reads only your own "
            "files (give it with --from to read it anyway)"
        )


def plan_for(job: Job, base: Plan) -> tuple[Plan, Imported]:
    """The plan `job` was launched with, over `base`, its files read within
    ATTACH_TIMEOUT_S (ConfigError: one line)."""
    return _within(
        ATTACH_TIMEOUT_S, f"reading the files of {job.label}", lambda: _plan_for(job, base)
    )


def _plan_for(job: Job, base: Plan) -> tuple[Plan, Imported]:
    from pydantic import ValidationError

    from memtui.estimator.precedence import merge
    from memtui.plans.imports import import_facts
    from memtui.plans.registry import read_launch

    folders = torchtune_configs(job.executable, *_script_interpreters(job))

    def builtin(name: str) -> Path | None:
        for folder in folders:
            path = folder / f"{name}.yaml"
            if path.is_file():
                return path
        return None

    label = f"pid {job.root} {job.launch.launcher}"
    facts = read_launch(job.launch, job.env, label, builtin, admit_own_files)
    if "hardware.gpus_per_node" not in facts.values and "world_size" not in facts.values:
        facts.default("hardware.gpus_per_node", len(job.devices), f"on {len(job.devices)} GPUs")
    imported = import_facts(facts, base, set(), job.launch.cwd, model_given=False)
    try:
        merged = merge(base, [imported.layer])
    except (ValidationError, ValueError) as err:  # torchrun --nproc_per_node 10^12
        raise ConfigError(f"{label}: {one_line(err)}") from None
    imported.notes += merged.notes
    return merged.plan, imported


def _script_interpreters(job: Job) -> list[str]:
    """The interpreter a console script (tune, accelerate...) runs under, from its argv."""
    argv = job.launch.argv
    return [argv[0]] if argv and os.path.isabs(argv[0]) else []
