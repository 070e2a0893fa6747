"""`memtui` with no subcommand (or `memtui dashboard`): the Textual dashboard.

    memtui --demo                       a synthetic 8-GPU node running a job (no GPU needed)
    memtui                              live NVML, the plan sized to the GPUs found; without
                                        an NVIDIA driver: plan-only, saying why
    memtui --replay run.jsonl           play back a trace recorded by `memtui watch --record`
    memtui --plan plan.toml --gpus 4    a saved plan, then any plan flag of `memtui estimate`
    memtui --plan a.toml --save b.toml  the save key (w) writes b.toml, leaving a.toml as it is
    memtui --snapshot oom.pickle        a PyTorch memory snapshot over the dashboard (key x)

The plan flags are `memtui estimate`'s (one parser: `plan_flags.add_plan_arguments`). This
module imports argparse-level things only; Textual, pynvml and the estimator load in `run`,
so `memtui estimate --json` never pays for them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from memtui.commands.plan_flags import add_plan_arguments, plan_from_args
from memtui.errors import UsageError

DEFAULT_SAVE = "memtui-plan.toml"


def add_dashboard_arguments(parser: argparse.ArgumentParser) -> None:
    """The dashboard's own flags plus every plan flag."""
    g = parser.add_argument_group("data source (default: live NVML, plan-only without it)")
    source = g.add_mutually_exclusive_group()
    source.add_argument(
        "--demo", action="store_true", help="a synthetic node running a job; no GPU needed"
    )
    source.add_argument("--replay", metavar="FILE", help="play back a JSONL trace")
    g.add_argument("--only", metavar="GPUS", help="comma-separated NVML indices or UUIDs")
    g.add_argument(
        "--interval", type=float, default=1.0, metavar="S", help="seconds between polls (1)"
    )
    g.add_argument(
        "--timeout", type=float, default=5.0, metavar="S", help="give up on a poll after S s (5)"
    )
    g.add_argument("--seed", type=int, default=0, help="seed of the --demo node (0)")
    g = parser.add_argument_group("dashboard")
    g.add_argument(
        "--plan",
        metavar="FILE",
        help="load a saved plan (TOML); relative config.json refs in it are read from its folder",
    )
    g.add_argument(
        "--save",
        metavar="PATH",
        help=f"where the save key (w) writes the plan (default: the --plan file, else "
        f"./{DEFAULT_SAVE})",
    )
    g.add_argument("--theme", metavar="NAME", help="memtui-dark (default), memtui-light, ...")
    g.add_argument(
        "--snapshot",
        metavar="FILE",
        help="open a PyTorch memory snapshot (or memory_stats JSON) over the dashboard (key x)",
    )
    add_plan_arguments(parser)


def register(sub: Any) -> None:
    """Add the `dashboard` subcommand (what `memtui` with no subcommand runs)."""
    parser = sub.add_parser(
        "dashboard",
        help="the dashboard (also what `memtui` alone runs); try `memtui --demo`",
        description="The planner and live per-GPU bars on one screen. Try `memtui --demo`.",
    )
    add_dashboard_arguments(parser)
    parser.set_defaults(run=run)


def build(args: argparse.Namespace) -> Any:
    """The app for parsed flags (also used by benchmarks): plan, source, mode, theme.

    The live or replay source is opened and its first poll started (in a thread) before the
    plan is built and Textual imported, so the snapshot is usually in by the time the screen
    composes (DESIGN.md section 6: start to first full frame)."""
    from memtui import telemetry
    from memtui.ui.first_poll import FirstPoll

    if args.interval <= 0:
        raise UsageError(f"--interval must be positive, not {args.interval}")
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, not {args.timeout}")
    only = telemetry.parse_only(args.only)
    source: Any = None
    if args.replay:
        if not Path(args.replay).is_file():
            raise UsageError(f"--replay {args.replay}: no such file")
        source = telemetry.ReplaySource(args.replay, only=only)
    elif not args.demo:
        source = telemetry.open_nvml(only, timeout_s=args.timeout)
    first = FirstPoll(source) if source is not None else None
    if args.snapshot and not Path(args.snapshot).is_file():
        raise UsageError(f"--snapshot {args.snapshot}: no such file")

    from memtui.plans.memtui_toml import load_plan

    base = load_plan(args.plan) if args.plan else None
    plan = plan_from_args(args, base=base)
    fit: set[str] = set()
    if not args.demo:
        # live or replay: size the plan to the GPUs seen, unless a flag or a plan file said
        # (a demo node is built from the plan, so it already matches)
        if base is None and args.gpus is None:
            fit.add("gpus")
        if base is None and args.gpu_memory is None:
            fit.add("memory")
    else:
        source = _demo_source(plan, only, args.seed)
        first = FirstPoll(source)

    from memtui.ui import make_app

    return make_app(
        plan,
        source,
        interval=args.interval,
        theme=args.theme,
        fit_to_devices=frozenset(fit),
        save_path=Path(args.save or args.plan or DEFAULT_SAVE),
        first_poll=first,
        snapshot=Path(args.snapshot) if args.snapshot else None,
    )


def _demo_source(plan: Any, only: tuple[str, ...], seed: int) -> Any:
    """A synthetic node of the plan's GPUs whose job is budgeted at the plan's prediction."""
    from memtui.estimator import estimate
    from memtui.estimator.units import GiB
    from memtui.telemetry import SyntheticSource

    hw = plan.hardware
    # a plan that does not fit still gets a demo: its job is capped just under the card
    budget = min(max(estimate(plan).budget.total, 2 * GiB), hw.gpu_memory - GiB)
    try:
        return SyntheticSource(
            min(hw.gpus_per_node, 64),
            card=hw.gpu_name,
            total_bytes=hw.gpu_memory,
            budget_bytes=budget,
            seed=seed,
            only=only,
        )
    except ValueError as err:
        raise UsageError(f"--demo: {err}") from None


def run(args: argparse.Namespace) -> int:
    """Run the dashboard until the user quits; returns the exit code."""
    build(args).run()
    return 0
