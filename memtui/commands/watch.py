"""`memtui watch`: GPU memory and processes as a table or JSON, like `nvidia-smi`/`gpustat`.

    memtui watch --once                 one table of GPUs and processes (GB; --unit gib)
    memtui watch --once --json          the snapshot as JSON (bytes; None is "n/a")
    memtui watch --interval 2           a table every 2 s (JSON lines with --json)
    memtui watch --record run.jsonl     also append every snapshot to a JSONL trace
    memtui watch --replay run.jsonl     play a trace back (--speed 10: ten times faster)
    memtui watch --demo                 a synthetic 8-GPU node running a job
    memtui watch --only 0,GPU-5f3a      only these GPUs (NVML index or UUID prefix)
    memtui watch --prometheus URL --job 1234 --once
                                        every GPU of Slurm job 1234, host by host, from the
                                        cluster's Prometheus (dcgm-exporter, nvitop-exporter)

Exit codes: 0 when the data was read, and also when this machine has no NVIDIA driver (one
line says so); 1 when NVML is present but unusable (driver not loaded, version mismatch,
no permission, timeout), the Prometheus server does not answer as it should, a `--replay`
file cannot be read or holds no snapshot (empty, binary, unrelated), or the `--record`
trace cannot be written (disk full: said once, then memtui stops; the lines written so far
stay intact); 2 for a usage error (e.g. `--only` matches no GPU, or the `--record` file
cannot be created).

The top level imports only argparse: telemetry, psutil, pynvml and rich load in `run`.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from typing import TYPE_CHECKING, Any

from memtui.commands.source_flags import add_source_arguments, check_source_arguments
from memtui.commands.unit_flag import add_unit_argument
from memtui.errors import UsageError
from memtui.text import LINE, shown

if TYPE_CHECKING:
    from rich.text import Text

    from memtui.telemetry import ClusterSnapshot, DeviceSnapshot, TelemetrySource

MiB = 1024**2
GiB = 1024**3
_SCALES = {"gb": ((10**9, "GB"), (10**6, "MB")), "gib": ((GiB, "GiB"), (MiB, "MiB"))}
"""`--unit`'s scales, a size and the smaller one below it: those of
`memtui.estimator.units.SizeUnit`, written here because importing the estimator package would
cost `watch` a third of a second before its first poll."""


def register(subparsers: Any) -> None:
    """Add the `watch` subcommand."""
    p = subparsers.add_parser(
        "watch",
        help="show GPU memory and processes (NVML), once or every few seconds",
        description="Show GPU memory and processes, like nvidia-smi. Sizes in GB (10^9 "
        "bytes) as `memtui estimate` and the dashboard show them, or GiB with --unit gib.",
    )
    add_unit_argument(p)
    p.add_argument("--once", action="store_true", help="poll once, print, exit")
    p.add_argument("--json", action="store_true", help="print snapshots as JSON")
    p.add_argument("--count", type=int, metavar="N", help="stop after N polls")
    p.add_argument("--record", metavar="FILE", help="append each snapshot to a JSONL trace")
    p.add_argument(
        "--attach",
        action="store_true",
        help="also recognise the training jobs on the GPUs (torchrun, accelerate, deepspeed, "
        "tune, axolotl, llamafactory-cli) and compare each with its own plan's budget "
        "(--json: that report instead of the snapshot)",
    )
    p.add_argument(
        "--speed", type=float, default=1.0, metavar="X", help="replay speed; 0 = one line per poll"
    )
    add_source_arguments(p)
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
    p.set_defaults(run=run)


def _open(args: argparse.Namespace) -> TelemetrySource:
    from memtui.telemetry import open_source

    options = args
    if args.demo:
        options = argparse.Namespace(
            **{
                **vars(args),
                # one table: show the job settled (past its ramp), not its first second
                "demo_start": time.time() - 75.0 if args.once else None,
                "demo_total_bytes": args.demo_total_bytes
                if args.demo_total_bytes is not None
                else _card_total_bytes(args.demo_card),
            }
        )
    try:
        return open_source(options)
    except ValueError as err:
        raise UsageError(str(err)) from err


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
    from memtui.telemetry import Recorder, SourceState, as_cluster, parse_only

    check_source_arguments(args)
    if not (math.isfinite(args.speed) and args.speed >= 0):
        raise UsageError(
            f"--speed must be 0 (one line per poll) or a positive number, not {args.speed}"
        )
    if args.count is not None and args.count < 1:
        raise UsageError(f"--count must be at least 1, not {args.count}")
    only = parse_only(args.only)
    source: TelemetrySource | None = None
    recorder: Recorder | None = None
    polls = 0
    snapshot: ClusterSnapshot | None = None
    try:
        if args.record:
            try:
                recorder = Recorder(args.record, [args.replay] if args.replay else [])
            except OSError as err:
                raise UsageError(f"--record {shown(args.record)}: {err.strerror or err}") from None
        source = _open(args)
        # a live loop polls again after a failure; --once or a trace file does not
        retry_s = None if args.once or not source.info.live else args.interval
        while True:
            started = time.monotonic()
            snapshot = as_cluster(source.poll())
            polls += 1
            # recorded before it is shown: a poll the user saw survives a SIGKILL
            if recorder is not None:
                try:
                    recorder.write(snapshot)
                except OSError as err:
                    # disk full, file system gone: a trace with a hole is worse than a clean
                    # stop, and the lines already written stay readable
                    _error(f"cannot write trace {args.record}: {err.strerror or err}; stopped")
                    return 1
            done = args.once or (args.count is not None and polls >= args.count)
            # no driver here, a replay that ended, or a trace file that cannot be read: nothing
            # will change by waiting
            stop = done or source.info.gives_up(snapshot)
            if only and snapshot.state is SourceState.ERROR and not snapshot.devices:
                # --only matched nothing: a usage error, said once on stderr
                _error(snapshot.message)
                return 2
            # the run ends on this failure: its one line goes to stderr (and not the table)
            failed = stop and _exit_code(snapshot) != 0
            if args.json and not args.attach:
                print(snapshot.dump_json(indent=2 if args.once else None), flush=True)
            elif not args.json and not (failed and not snapshot.devices):
                _print_table(
                    snapshot,
                    clear=not args.once and polls > 1,
                    retry_s=retry_s,
                    say_failure=not failed,
                    unit=args.unit,
                )
            if args.attach:
                from memtui.commands.attach_text import print_attach
                from memtui.commands.unit_flag import unit_of

                print_attach(snapshot, source.info, args.json, unit_of(args))
            if failed:
                _error(snapshot.message)
            if stop:
                break
            time.sleep(max(0.0, args.interval - (time.monotonic() - started)))
    except KeyboardInterrupt:
        return 0
    finally:
        if recorder is not None:
            recorder.close()
        if source is not None:
            source.close()
    return _exit_code(snapshot) if snapshot is not None else 0


def _exit_code(snapshot: ClusterSnapshot) -> int:
    # no driver here, a replay that ended, or a failure a trace recorded is not a failure
    # of this run: nothing was left unread
    state = snapshot.state
    return 0 if snapshot.ok or state.terminal or snapshot.recorded else 1


def _error(message: str | None) -> None:
    """The one line an error gets, on stderr (external text escaped)."""
    print(f"memtui watch: {shown(message or 'failed', LINE)}", file=sys.stderr, flush=True)


def format_bytes(value: int | None, unit: str = "gb") -> str:
    """Bytes for people in `--unit`'s family: "n/a", "537 MB" or "68.6 GB" (decimal, the
    default), "512 MiB" or "63.9 GiB" (binary); the unit always said."""
    if value is None:
        return "n/a"
    (scale, name), (small, small_name) = _SCALES[unit]
    if value < scale:
        return f"{value / small:.0f} {small_name}"
    return f"{value / scale:.1f} {name}"


WIDE_CLUSTER_TABLE = 150
"""Columns from which a table of many hosts also shows temperature and power."""


def _sensors(d: DeviceSnapshot) -> tuple[str, str]:
    """The Temp and Power cells of a GPU's row ("67°C", "412/700 W"; "n/a" unread)."""
    from memtui.telemetry.readings import power, temperature

    return temperature(d) or "n/a", power(d) or "n/a"


def _percent(value: int | None) -> str:
    return "n/a" if value is None else f"{value}%"


def _device_name(d: DeviceSnapshot) -> str:
    name = d.name or "n/a"
    if d.mig_enabled:
        name += " [MIG on]"
    if d.host_memory_fallback:
        name += " (host memory)"
    return name


def _text(value: str) -> Text:
    """An external string as a table cell: plain text (never markup), controls escaped."""
    from rich.text import Text

    return Text(shown(value))


@functools.cache
def _console_class() -> Any:
    from rich.console import Console

    class PipeConsole(Console):
        """Rich's console, but a reader that leaves (`memtui watch --once | head -2`) ends
        the run quietly with exit code 0 (the CLI's BrokenPipeError handling), not with
        Rich's SystemExit(1)."""

        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return PipeConsole


def _stamp(seconds: float) -> str:
    """A snapshot's time as local date and time; one past what the clock can show (a
    hostile trace's 1e20) as the bare number."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))
    except (OverflowError, OSError, ValueError):
        return f"time {seconds:g}"


def _print_table(
    snapshot: ClusterSnapshot,
    *,
    clear: bool,
    retry_s: float | None = None,
    say_failure: bool = True,
    unit: str = "gb",
) -> None:
    """The snapshot as tables on stdout, sizes in `unit` (`--unit`); `say_failure`: its
    failure line too (False when the caller says it on stderr)."""
    from rich.table import Table

    console = _console_class()(highlight=False, width=None if sys.stdout.isatty() else 120)
    if clear and console.is_terminal:
        console.clear()
    # a cluster source (Prometheus, a cluster trace): a host column, hosts in the header
    node = snapshot.as_node()
    stamp = _stamp(snapshot.time)
    if node is not None:
        parts = [node.hostname or "", stamp, f"source {snapshot.source}"]
        if node.driver_version:
            parts.append(f"driver {node.driver_version}")
        if node.cuda_version:
            parts.append(f"CUDA {node.cuda_version}")
    else:
        hosts = len(snapshot.nodes)
        gpus = len(snapshot.devices)
        parts = [stamp, f"source {snapshot.source}", f"{hosts} host{'s' * (hosts != 1)}",
                 f"{gpus} GPU{'s' * (gpus != 1)}"]  # fmt: skip
    if not snapshot.ok and say_failure:
        # one clear line: what is wrong and the usual remedy (e.g. no NVIDIA driver here)
        line = f"memtui watch: {snapshot.message}"
        if retry_s is not None and not snapshot.state.terminal:
            line += f" (retrying every {retry_s:g} s)"
        console.print(_text(line), soft_wrap=True)
        if not snapshot.devices:
            return
    console.print(_text("  ".join(p for p in parts if p)), soft_wrap=True)

    gpus_table = Table(box=None, pad_edge=False, header_style="bold")
    columns = [("GPU", "left"), ("Name", "left"), ("Used", "right"), ("Total", "right"),
               ("Free", "right"), ("Reserved", "right"), ("Use%", "right"), ("Util", "right"),
               ("Temp", "right"), ("Power", "right"), ("Procs", "right")]  # fmt: skip
    # many hosts: a host and a peak column; the sensors only where the line has room for
    # them beside the host's name (the JSON has them always)
    sensors = node is not None or console.width >= WIDE_CLUSTER_TABLE
    if not sensors:
        columns = [c for c in columns if c[0] not in ("Temp", "Power")]
    if node is None:
        columns[:0] = [("Host", "left")]
        columns.append(("Peak", "right"))
    for column, justify in columns:
        gpus_table.add_column(column, justify=justify)  # type: ignore[arg-type]
    notes: list[str] = []
    for host_node in snapshot.nodes:
        host = host_node.hostname or ""
        where = "" if node is not None else f"{host} "
        if node is None and not host_node.ok:
            notes.append(f"host {host}: {host_node.message or host_node.state.value}")
        for d in host_node.devices:
            host_cell = [_text(host)] if node is None else []
            peak_cell = [format_bytes(d.memory_peak, unit)] if node is None else []
            if d.lost:
                blank = [""] * (len(columns) - 3 - len(host_cell))
                gpus_table.add_row(*host_cell, d.label, _text(_device_name(d)), "LOST", *blank)
                notes.append(f"{where}GPU {d.label}: {d.error or 'lost'}")
                continue
            frac = d.used_fraction
            gpus_table.add_row(
                *host_cell,
                d.label,
                _text(_device_name(d)),
                format_bytes(d.memory_used, unit),
                format_bytes(d.memory_total, unit),
                format_bytes(d.memory_free, unit),
                format_bytes(d.memory_reserved, unit),
                "n/a" if frac is None else f"{frac:.0%}",
                _percent(d.utilization_gpu),
                *(_sensors(d) if sensors else ()),
                "n/a" if d.processes is None else str(len(d.processes)),
                *peak_cell,
            )
            if d.error:  # partly unreadable (e.g. its MIG devices), yet polled
                notes.append(f"{where}GPU {d.label}: {d.error}")
            if d.host_memory_fallback:
                notes.append(f"{where}GPU {d.label}: unified memory, figures are the host's RAM")
            if d.processes_note:
                notes.append(f"{where}GPU {d.label}: {d.processes_note}")
    if not snapshot.devices:
        console.print("no GPUs found (NVML lists none on this node)" if node is not None
                      else "no GPUs found (no series matched the selection)")  # fmt: skip
        for note in notes:
            console.print(_text(f"note: {note}"), soft_wrap=True)
        return
    console.print(gpus_table)

    procs = Table(box=None, pad_edge=False, header_style="bold")
    proc_columns = [("GPU", "left"), ("PID", "right"), ("User", "left"),
                    ("GPU memory", "right"), ("Command", "left")]  # fmt: skip
    if node is None:
        proc_columns[:0] = [("Host", "left")]
    for column, justify in proc_columns:
        procs.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    # a long command line must not squeeze PID and memory out of view: cut it instead
    room = max(20, console.width - 45)
    rows = 0
    for key, _, d in snapshot.rows():
        for p in d.processes or ():
            command = p.command or p.name or "(not visible here)"
            if len(command) > room:
                command = command[: room - 1] + "…"
            host_cell = [_text(key.host)] if node is None else []
            procs.add_row(*host_cell, d.label, str(p.pid), _text(p.user or "?"),
                          format_bytes(p.used_bytes, unit), _text(command))  # fmt: skip
            rows += 1
    if rows:
        console.print()
        console.print(procs)
    elif snapshot.devices:
        console.print("no compute processes")
    for note in notes:
        console.print(_text(f"note: {note}"), soft_wrap=True)
