"""`memtui watch`: GPU memory and processes as a table or JSON, like `nvidia-smi`/`gpustat`.

    memtui watch --once                 one table of GPUs and processes
    memtui watch --once --json          the snapshot as JSON (bytes; None is "n/a")
    memtui watch --interval 2           a table every 2 s (JSON lines with --json)
    memtui watch --record run.jsonl     also append every snapshot to a JSONL trace
    memtui watch --replay run.jsonl     play a trace back (--speed 10: ten times faster)
    memtui watch --demo                 a synthetic 8-GPU node running a job
    memtui watch --only 0,GPU-5f3a      only these GPUs (NVML index or UUID prefix)

Exit codes: 0 when the data was read, and also when this machine has no NVIDIA driver (one
line says so); 1 when NVML is present but unusable (driver not loaded, version mismatch,
no permission, timeout) or a `--replay` file cannot be read or holds no snapshot (empty,
binary, unrelated) or the `--record` trace cannot be written (disk full: said once, then
memtui stops; the lines written so far stay intact); 2 for a usage error (e.g. `--only`
matches no GPU, or the `--record` file cannot be created).

The top level imports only argparse: telemetry, psutil, pynvml and rich load in `run`.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from memtui.errors import UsageError

if TYPE_CHECKING:
    from memtui.telemetry import DeviceSnapshot, NodeSnapshot, TelemetrySource

MiB = 1024**2
GiB = 1024**3


def register(subparsers: Any) -> None:
    """Add the `watch` subcommand."""
    p = subparsers.add_parser(
        "watch",
        help="show GPU memory and processes (NVML), once or every few seconds",
        description="Show GPU memory and processes, like nvidia-smi. Sizes in MiB/GiB.",
    )
    p.add_argument("--once", action="store_true", help="poll once, print, exit")
    p.add_argument("--json", action="store_true", help="print snapshots as JSON")
    p.add_argument(
        "--interval", type=float, default=1.0, metavar="S", help="seconds between polls (1)"
    )
    p.add_argument("--count", type=int, metavar="N", help="stop after N polls")
    p.add_argument("--only", metavar="GPUS", help="comma-separated NVML indices or UUIDs")
    p.add_argument("--record", metavar="FILE", help="append each snapshot to a JSONL trace")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--replay", metavar="FILE", help="play back a recorded JSONL trace")
    source.add_argument("--demo", action="store_true", help="a synthetic node running a job")
    p.add_argument(
        "--speed", type=float, default=1.0, metavar="X", help="replay speed; 0 = one line per poll"
    )
    p.add_argument(
        "--timeout", type=float, default=5.0, metavar="S", help="give up on a poll after S s (5)"
    )
    p.add_argument("--demo-gpus", type=int, default=8, metavar="N", help="GPUs in --demo (8)")
    p.add_argument(
        "--demo-card",
        default="NVIDIA H100 80GB HBM3",
        help="card name in --demo, e.g. 'NVIDIA A100-SXM4-40GB'; its memory comes from the "
        "GPU presets (or give --demo-total-bytes)",
    )
    p.add_argument(
        "--demo-total-bytes", type=int, metavar="B", help="memory per GPU in --demo (the card's)"
    )
    p.add_argument("--demo-budget-bytes", type=int, metavar="B", help="job budget per GPU")
    p.add_argument("--seed", type=int, default=0, help="seed of the --demo node (0)")
    p.set_defaults(run=run)


def _open(args: argparse.Namespace, only: tuple[str, ...]) -> TelemetrySource:
    from memtui import telemetry

    if args.replay:
        return telemetry.ReplaySource(args.replay, speed=args.speed or None, only=only)
    if args.demo:
        kwargs: dict[str, Any] = {"card": args.demo_card, "seed": args.seed, "only": only}
        if args.once:
            # one table: show the job settled (past its ramp), not its first second
            kwargs["start"] = time.time() - 75.0
        kwargs["total_bytes"] = (
            args.demo_total_bytes
            if args.demo_total_bytes is not None
            else _card_total_bytes(args.demo_card)
        )
        if args.demo_budget_bytes is not None:
            kwargs["budget_bytes"] = args.demo_budget_bytes
        try:
            return telemetry.SyntheticSource(args.demo_gpus, **kwargs)
        except ValueError as err:
            raise UsageError(str(err)) from err
    return telemetry.open_nvml(only, timeout_s=args.timeout)


def _card_total_bytes(card: str) -> int:
    """NVML's memory.total for a card name such as "NVIDIA A100-SXM4-40GB", from the GPU
    presets (memtui.estimator.hardware: the telemetry layer may not import the estimator).

    A preset matches when every word of its name, but the form factor, is a word of the
    card's ("A100 40GB" in "NVIDIA A100-SXM4-40GB"); a size the card does not name is not
    required ("NVIDIA H200"), and every matching preset must agree on the size.
    """
    import re

    from memtui.estimator.hardware import GPUS, gpu_preset

    preset = gpu_preset(card)
    if preset is not None:
        return preset.memory
    words = set(re.split(r"[^a-z0-9]+", card.lower()))
    sizes = {w for w in words if re.fullmatch(r"\d+gb", w)}
    found = set()
    for p in GPUS.values():
        want = {w for w in re.split(r"[^a-z0-9]+", p.name.lower()) if w}
        want -= {"sxm", "pcie"}  # form factor: NVML names spell it differently, if at all
        if not sizes:
            want = {w for w in want if not re.fullmatch(r"\d+gb", w)}
        if want <= words:
            found.add(p.memory)
    if len(found) == 1:
        return found.pop()
    raise UsageError(
        f"--demo-card {card!r}: unknown memory size for this card; give it with --demo-total-bytes"
    )


def run(args: argparse.Namespace) -> int:
    """Poll the chosen source once or in a loop; print tables or JSON."""
    from memtui.telemetry import Recorder, SourceState, parse_only

    if args.interval <= 0:
        raise UsageError(f"--interval must be positive, not {args.interval}")
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, not {args.timeout}")
    if args.speed < 0:
        raise UsageError(f"--speed must be 0 (one line per poll) or positive, not {args.speed}")
    if args.count is not None and args.count < 1:
        raise UsageError(f"--count must be at least 1, not {args.count}")
    only = parse_only(args.only)
    source: TelemetrySource | None = None
    recorder: Recorder | None = None
    polls = 0
    snapshot = None
    # a live loop polls again after a failure; --once, a replay or a demo does not
    retry_s = None if args.once or args.replay or args.demo else args.interval
    try:
        if args.record:
            try:
                recorder = Recorder(args.record)
            except OSError as err:
                raise UsageError(f"--record {args.record}: {err.strerror or err}") from err
        source = _open(args, only)
        while True:
            started = time.monotonic()
            snapshot = source.poll()
            polls += 1
            # recorded before it is shown: a poll the user saw survives a SIGKILL
            if recorder is not None:
                try:
                    recorder.write(snapshot)
                except OSError as err:
                    # disk full, file system gone: a trace with a hole is worse than a clean
                    # stop, and the lines already written stay readable
                    print(
                        f"memtui watch: cannot write trace {args.record}: "
                        f"{err.strerror or err}; stopped",
                        file=sys.stderr,
                    )
                    return 1
            if args.json:
                indent = 2 if args.once else None
                print(snapshot.model_dump_json(indent=indent), flush=True)
            else:
                _print_table(snapshot, clear=not args.once and polls > 1, retry_s=retry_s)
            if only and snapshot.state is SourceState.ERROR and not snapshot.devices:
                return 2  # --only matched nothing: a usage error, say it once and stop
            done = args.once or (args.count is not None and polls >= args.count)
            if done or snapshot.state is SourceState.ENDED:
                break
            if snapshot.state is SourceState.NO_LIBRARY:
                break  # no driver on this machine: nothing will change by waiting
            if args.replay and snapshot.state is not SourceState.OK:
                break  # unreadable, empty or unrelated trace: a file does not heal itself
            time.sleep(max(0.0, args.interval - (time.monotonic() - started)))
    except KeyboardInterrupt:
        return 0
    finally:
        if recorder is not None:
            recorder.close()
        if source is not None:
            source.close()
    return _exit_code(snapshot.state if snapshot is not None else SourceState.OK)


def _exit_code(state: Any) -> int:
    from memtui.telemetry import SourceState

    if state in (SourceState.OK, SourceState.NO_LIBRARY, SourceState.ENDED):
        return 0
    return 1


def format_bytes(value: int | None) -> str:
    """Bytes for people: "n/a", "512 MiB" or "63.9 GiB" (binary units, said explicitly)."""
    if value is None:
        return "n/a"
    if value < GiB:
        return f"{value / MiB:.0f} MiB"
    return f"{value / GiB:.1f} GiB"


def _percent(value: int | None) -> str:
    return "n/a" if value is None else f"{value}%"


def _device_name(d: DeviceSnapshot) -> str:
    name = d.name or "n/a"
    if d.mig_enabled:
        name += " [MIG on]"
    if d.host_memory_fallback:
        name += " (host memory)"
    return name


def _print_table(snapshot: NodeSnapshot, *, clear: bool, retry_s: float | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
    if clear and console.is_terminal:
        console.clear()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snapshot.time))
    parts = [snapshot.hostname or "", stamp, f"source {snapshot.source}"]
    if snapshot.driver_version:
        parts.append(f"driver {snapshot.driver_version}")
    if snapshot.cuda_version:
        parts.append(f"CUDA {snapshot.cuda_version}")
    if snapshot.state.value != "ok":
        # one clear line: what is wrong and the usual remedy (e.g. no NVIDIA driver here)
        line = f"memtui watch: {snapshot.message}"
        if retry_s is not None and snapshot.state.value not in ("no_library", "ended"):
            line += f" (retrying every {retry_s:g} s)"
        console.print(line, markup=False, soft_wrap=True)
        if not snapshot.devices:
            return
    console.print("  ".join(p for p in parts if p), markup=False, soft_wrap=True)

    gpus = Table(box=None, pad_edge=False, header_style="bold")
    for column, justify in (
        ("GPU", "left"),
        ("Name", "left"),
        ("Used", "right"),
        ("Total", "right"),
        ("Free", "right"),
        ("Reserved", "right"),
        ("Use%", "right"),
        ("Util", "right"),
        ("Procs", "right"),
    ):
        gpus.add_column(column, justify=justify)  # type: ignore[arg-type]
    notes: list[str] = []
    for d in snapshot.devices:
        if d.lost:
            gpus.add_row(d.label, _device_name(d), "LOST", "", "", "", "", "", "")
            notes.append(f"GPU {d.label}: {d.error or 'lost'}")
            continue
        frac = d.used_fraction
        gpus.add_row(
            d.label,
            _device_name(d),
            format_bytes(d.memory_used),
            format_bytes(d.memory_total),
            format_bytes(d.memory_free),
            format_bytes(d.memory_reserved),
            "n/a" if frac is None else f"{frac:.0%}",
            _percent(d.utilization_gpu),
            "n/a" if d.processes is None else str(len(d.processes)),
        )
        if d.error:  # partly unreadable (e.g. its MIG devices), yet polled
            notes.append(f"GPU {d.label}: {d.error}")
        if d.host_memory_fallback:
            notes.append(f"GPU {d.label}: unified memory, figures are the host's RAM")
        if d.processes_note:
            notes.append(f"GPU {d.label}: {d.processes_note}")
    if not snapshot.devices:
        console.print("no GPUs found (NVML lists none on this node)")
        return
    console.print(gpus)

    procs = Table(box=None, pad_edge=False, header_style="bold")
    for column, justify in (
        ("GPU", "left"),
        ("PID", "right"),
        ("User", "left"),
        ("GPU memory", "right"),
        ("Command", "left"),
    ):
        procs.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    # a long command line must not squeeze PID and memory out of view: cut it instead
    room = max(20, console.width - 45)
    rows = 0
    for d in snapshot.devices:
        for p in d.processes or ():
            command = p.command or p.name or "(not visible here)"
            if len(command) > room:
                command = command[: room - 1] + "…"
            procs.add_row(d.label, str(p.pid), p.user or "?", format_bytes(p.used_bytes), command)
            rows += 1
    if rows:
        console.print()
        console.print(procs)
    elif snapshot.devices:
        console.print("no compute processes")
    for note in notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
