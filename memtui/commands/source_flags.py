"""The telemetry-source flags that `memtui` (the dashboard) and `memtui watch` share.

The CLI builds every subcommand's parser on every run, so this module imports argparse-level
things only (never `memtui.telemetry`): `memtui estimate` must not pay for telemetry. The
flags' values go whole to `memtui.telemetry.open_source`, which reads them by name.
"""

from __future__ import annotations

import argparse
import math

from memtui.errors import UsageError

#: What a timing flag may say, in seconds: from 10 ms (a tighter loop only burns CPU: NaN
#: polled some 700 times a second) to a day (sleeps and thread waits overflow long before
#: infinity).
MIN_SECONDS, MAX_SECONDS = 0.01, 86400.0

#: Flags that only mean something with `--prometheus`.
_PROMETHEUS_ONLY = (
    "job",
    "hosts",
    "selector",
    "bearer_token_file",
    "basic_auth_file",
    "stale_after",
)


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """--demo | --replay | --prometheus, then --only, --interval, --timeout, --seed, and the
    Prometheus selection and credential flags in a group of their own."""
    group = parser.add_argument_group("data source (default: live NVML)")
    choice = group.add_mutually_exclusive_group()
    choice.add_argument(
        "--demo", action="store_true", help="a synthetic node running a job; no GPU needed"
    )
    choice.add_argument("--replay", metavar="FILE", help="play back a JSONL trace")
    choice.add_argument(
        "--prometheus",
        metavar="URL",
        help="a Prometheus server scraping dcgm-exporter or nvitop-exporter "
        "(http[s]://host:9090): every GPU of a job, host by host",
    )
    group.add_argument("--only", metavar="GPUS", help="comma-separated NVML indices or UUIDs")
    group.add_argument(
        "--interval", type=float, default=1.0, metavar="S", help="seconds between polls (1)"
    )
    group.add_argument(
        "--timeout", type=float, default=5.0, metavar="S", help="give up on a poll after S s (5)"
    )
    group.add_argument("--seed", type=int, default=0, help="seed of the --demo node (0)")
    prom = parser.add_argument_group(
        "Prometheus (with --prometheus; credentials from a file or the environment, never "
        "the command line: $MEMTUI_PROMETHEUS_TOKEN, $MEMTUI_PROMETHEUS_BASIC_AUTH)"
    )
    prom.add_argument(
        "--job",
        metavar="ID",
        help="a Slurm job: its GPUs by the hpc_job label, else its nodes from squeue",
    )
    prom.add_argument("--hosts", metavar="LIST", help="Slurm-style host list: gpu[01-04],gpu07")
    prom.add_argument(
        "--selector",
        metavar="MATCHERS",
        help='PromQL label matchers of the GPUs\' series: namespace="ml",pod=~"train-.*"',
    )
    prom.add_argument("--bearer-token-file", metavar="FILE", help="a file holding the bearer token")
    prom.add_argument("--basic-auth-file", metavar="FILE", help="a file holding user:password")
    prom.add_argument(
        "--stale-after",
        type=float,
        metavar="S",
        help="samples older than S seconds mark their host lost (default: three of the "
        "scrape intervals seen, at least 30 s until one is seen)",
    )


def check_seconds(flag: str, value: float | None) -> None:
    """A timing flag's value is a number of seconds within reason, else a usage error."""
    if value is not None and not (math.isfinite(value) and MIN_SECONDS <= value <= MAX_SECONDS):
        raise UsageError(
            f"{flag} must be a number of seconds from {MIN_SECONDS:g} to {MAX_SECONDS:g}, "
            f"not {value}"
        )


def check_source_arguments(args: argparse.Namespace) -> None:
    """Usage errors in the source flags, one line each (exit code 2)."""
    check_seconds("--interval", args.interval)
    check_seconds("--timeout", args.timeout)
    if not args.prometheus:
        given = [name for name in _PROMETHEUS_ONLY if getattr(args, name, None) is not None]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise UsageError(f"{flag} needs --prometheus URL")
    check_seconds("--stale-after", getattr(args, "stale_after", None))
