"""`memtui` with no subcommand (or `memtui dashboard`): the Textual dashboard.

    memtui --demo                       a synthetic 8-GPU node running a job (no GPU needed)
    memtui                              live NVML, the plan sized to the GPUs found; without
                                        an NVIDIA driver: plan-only, saying why
    memtui --replay run.jsonl           play back a trace recorded by `memtui watch --record`
    memtui --prometheus URL --job 1234  every GPU of Slurm job 1234, from the cluster's
                                        Prometheus (dcgm-exporter or nvitop-exporter)
    memtui --plan plan.toml --gpus 4    a saved plan, then any plan flag of `memtui estimate`
    memtui --plan a.toml --save b.toml  the save key (w) writes b.toml, leaving a.toml as it is
    memtui --from ds.json train.sh      the plan a job's own files say (j: from the running
                                        job; e: export the plan as its stack's config)
    memtui --snapshot oom.pickle        a PyTorch memory snapshot over the dashboard (key F)

The plan flags are `memtui estimate`'s (one parser: `plan_flags.add_plan_arguments`). This
module imports argparse-level things only; Textual, pynvml and the estimator load in `run`,
so `memtui estimate --json` never pays for them.
"""

from __future__ import annotations

import argparse
import gc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui.commands.plan_flags import add_plan_arguments, plan_and_import
from memtui.commands.source_flags import add_source_arguments, check_source_arguments
from memtui.commands.unit_flag import add_unit_argument
from memtui.errors import UsageError

if TYPE_CHECKING:  # types only: importing them here would load Textual and pydantic models
    from memtui.estimator import Plan
    from memtui.telemetry import TelemetrySource
    from memtui.ui.app import MemtuiApp
    from memtui.ui.budgets import BudgetSource
    from memtui.ui.screen import StackRule

DEFAULT_SAVE = "memtui-plan.toml"


def add_dashboard_arguments(parser: argparse.ArgumentParser) -> None:
    """The dashboard's own flags plus every plan flag."""
    add_source_arguments(parser)
    g = parser.add_argument_group("dashboard")
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
        help="open a PyTorch memory snapshot (or memory_stats JSON) over the dashboard (key F)",
    )
    add_unit_argument(parser, default=None)
    add_plan_arguments(parser)
    # no --interval given: the preferences file's, else 1 s (`build`)
    parser.set_defaults(interval=None)


#: Seconds between polls when neither --interval nor the preferences say.
DEFAULT_INTERVAL = 1.0


def register(sub: Any) -> None:
    """Add the `dashboard` subcommand (what `memtui` with no subcommand runs)."""
    parser = sub.add_parser(
        "dashboard",
        help="the dashboard (also what `memtui` alone runs); try `memtui --demo`",
        description="The planner and live per-GPU bars on one screen. Try `memtui --demo`.",
    )
    add_dashboard_arguments(parser)
    parser.set_defaults(run=run)


def build(
    args: argparse.Namespace, after_first_frame: Callable[[], object] | None = None
) -> MemtuiApp:
    """The app for parsed flags (also used by benchmarks): plan, source, mode, theme.

    The live or replay source is opened and its first poll started (in a thread) before the
    plan is built and Textual imported, so the snapshot is usually in by the time the screen
    composes (docs/architecture.md, "Measuring and checking": start to first full frame).
    `after_first_frame` is called once the first frame is on the terminal."""
    from memtui.telemetry import FirstPoll
    from memtui.ui.preferences import Loaded
    from memtui.ui.preferences import load as load_preferences

    preferences = load_preferences()  # a bad file is a note on screen, never an error here
    if args.interval is None:  # flags win over the preferences
        args.interval = preferences.preferences.interval or DEFAULT_INTERVAL
    if getattr(args, "unit", None) is not None:
        unit = {"gb": "GB", "gib": "GiB"}[args.unit]
        kept = preferences.preferences.model_copy(update={"unit": unit})
        preferences = Loaded(kept, preferences.path, preferences.problem)
    check_source_arguments(args)
    first: FirstPoll | None = None
    if args.replay and not Path(args.replay).is_file():
        raise UsageError(f"--replay {args.replay}: no such file")
    if not args.demo:
        first = FirstPoll(_open(args))
    if args.snapshot and not Path(args.snapshot).is_file():
        raise UsageError(f"--snapshot {args.snapshot}: no such file")

    from memtui.commands.default_stack import choose, named

    # no --stack (and no file naming one): the most demanding framework stack that runs the
    # plan, as `memtui estimate` chooses it (memtui/commands/default_stack.py). Watching a
    # node, the screen applies the rule with the first estimate (after the first frame) and
    # again to the plan sized to the GPUs found, and says it then (its figures are the sized
    # plan's); a demo node is built from the plan, so it is chosen here
    plan, imported = plan_and_import(args)
    rule: StackRule | None = None
    notes: tuple[str, ...] = ()
    if first is not None:
        if not named(args, imported):
            rule = partial(_stack_rule, args)
    else:
        chosen = choose(args, plan, imported)
        plan, notes = chosen.plan, (chosen.why,) if chosen.why else ()
    from memtui.commands.export import launch_origin_of, origin_of

    # the --from config the export key edits, else the --from launch script
    origin = origin_of(args) or launch_origin_of(args)
    fit: set[str] = set()
    if first is not None:
        # live, replay or a cluster: size the plan to the GPUs seen, unless a flag, a plan
        # file or the job's files (--from) said (a demo node is built from the plan)
        said = imported.sets if imported is not None else lambda field: False
        if not args.plan and args.gpus is None and not said("hardware.gpus_per_node"):
            fit.add("gpus")
        cluster = first.source.info.cluster
        if not args.plan and args.nodes is None and cluster and not said("hardware.nodes"):
            fit.add("nodes")  # a source of many hosts also says how many nodes
        if not args.plan and args.gpu_memory is None:
            fit.add("memory")
    else:
        first = FirstPoll(_open(_demo_options(args, plan)))

    from memtui.ui import make_app

    return make_app(
        plan,
        first.source,
        interval=args.interval,
        theme=args.theme,
        fit_to_devices=frozenset(fit),
        save_path=Path(args.save or args.plan or DEFAULT_SAVE),
        first_poll=first,
        snapshot=Path(args.snapshot) if args.snapshot else None,
        origin=origin,
        budget_from=_budget_from(args),
        preferences=preferences,
        start_notes=notes,
        stack_rule=rule,
        after_first_frame=after_first_frame,
    )


def _stack_rule(args: argparse.Namespace, plan: Plan) -> tuple[Plan, str]:
    """The dashboard's what-if plan under the stack `memtui estimate` would choose for it,
    and why (memtui/commands/default_stack.py)."""
    from memtui.commands.default_stack import choose

    chosen = choose(args, plan, None)
    return chosen.plan, chosen.why


def _budget_from(args: argparse.Namespace) -> BudgetSource | None:
    """Where the job's budget comes from: the job's files (`--from`), a saved plan
    (`--plan`); None when neither was given (plan flags alone are a what-if, and the bars
    show the cards' capacity until a job is attached or recognised, memtui/ui/budgets.py)."""
    from memtui.ui.budgets import BudgetFrom, BudgetSource

    files = getattr(args, "from_files", None)
    if files:
        return BudgetSource(BudgetFrom.JOB_FILES, " ".join(Path(f).name for f in files))
    if args.plan:
        return BudgetSource(BudgetFrom.PLAN_FILE, str(args.plan))
    return None


def _open(options: Any) -> TelemetrySource:
    from memtui.telemetry import open_source

    try:
        return open_source(options)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _demo_options(args: argparse.Namespace, plan: Plan) -> argparse.Namespace:
    """A synthetic node of the plan's GPUs whose job is budgeted at the plan's prediction."""
    from memtui.estimator import estimate
    from memtui.estimator.units import GiB

    hw = plan.hardware
    # a plan that does not fit still gets a demo: its job is capped just under the card
    budget = min(max(estimate(plan).budget.total, 2 * GiB), hw.gpu_memory - GiB)
    return argparse.Namespace(
        **vars(args),
        demo_gpus=min(hw.gpus_per_node, 64),
        demo_card=hw.gpu_name,
        demo_total_bytes=hw.gpu_memory,
        demo_budget_bytes=budget,
    )


def _resume_collector() -> None:
    """The objects of the start-up kept out of every later collection, then the collector
    on again (`run`)."""
    gc.freeze()
    gc.enable()


def run(args: argparse.Namespace) -> int:
    """Run the dashboard until the user quits; returns the exit code."""
    # Building the app imports Textual and the telemetry: with the estimator imported while
    # the flags were parsed, some 100,000 objects that live as long as the process. The
    # collector walked them some 90 times before the first frame (60 ms of a 540 ms start,
    # benchmarks/profile_ui.py), so it is paused while they are made and while the first
    # frame is composed, styled and drawn (some 60 young collections more), then they are
    # frozen (never walked again) and it resumes for what the running app allocates. The
    # garbage objects among them stay: a full collection to free them would cost 50 ms.
    gc.disable()
    try:
        app = build(args, after_first_frame=_resume_collector)
    except BaseException:
        gc.enable()  # nothing to keep: the error is reported and memtui ends
        raise
    try:
        app.run()
    finally:
        gc.enable()  # an app that ended before its first frame
    return app.return_code or 0  # 128 + N after signal N (memtui/ui/signals.py)
