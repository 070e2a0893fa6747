"""`memtui snapshot FILE`: after the OOM, say where the memory went.

    memtui snapshot oom.pickle                 the summary, per device (GiB)
    memtui snapshot oom.pickle --model meta-llama/Meta-Llama-3-8B --micro-batch 8
                                               ...with the plan's terms beside it
    memtui snapshot oom.pickle --plan plan.toml --json
    memtui snapshot stats.json                 a torch.cuda.memory_stats() dump (or JSON lines)
    memtui snapshot oom.pickle --export-viz oom-viz.html
                                               the file memory_viz opens, coloured by plan term

FILE is what `torch.cuda.memory._dump_snapshot()` writes (read without torch: a pickle that
names any class is refused, nothing in it runs), the list `torch.cuda.memory_snapshot()`
returns, pickled, or `torch.cuda.memory_stats()` as JSON. Any plan flag (or --plan) adds the
plan's prediction beside the attribution. A bad file or flag: one line, exit code 2.
The JSON path imports neither rich nor Textual.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING, Any

from memtui.commands.plan_flags import add_plan_arguments, plan_from_args
from memtui.commands.unit_flag import add_unit_argument, unit_of
from memtui.errors import UsageError

if TYPE_CHECKING:
    from memtui.estimator import Plan, Report


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "snapshot",
        help="after an OOM: read a PyTorch memory snapshot and say where the memory went",
        description="Read a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) or a "
        "torch.cuda.memory_stats() JSON without importing torch, and say per GPU where the "
        "reserved memory is, why a request failed, and which plan term the allocations were "
        "for. Give a plan (--plan or any plan flag) to see its prediction beside them.",
    )
    parser.add_argument("file", metavar="FILE", help="snapshot pickle or memory_stats JSON")
    parser.add_argument("--device", type=int, metavar="N", help="only this device")
    parser.add_argument("--json", action="store_true", help="one JSON object per device (bytes)")
    add_unit_argument(parser, default="gib")
    parser.add_argument(
        "--export-viz",
        metavar="OUT",
        help="also write the snapshot for PyTorch's memory_viz: OUT.html (a page) or "
        "OUT.pickle (drop it on pytorch.org/memory_viz), allocations coloured by plan term",
    )
    parser.add_argument(
        "--force", action="store_true", help="let --export-viz overwrite an existing OUT"
    )
    add_plan_arguments(parser)
    parser.set_defaults(run=run)


def _plan_given(args: argparse.Namespace) -> bool:
    probe = argparse.ArgumentParser(add_help=False)
    add_plan_arguments(probe)
    # a flag differs from its default when given (--installed-versions defaults to False)
    dests = {a.dest for a in probe._actions}
    return any(getattr(args, d, None) != probe.get_default(d) for d in dests)


def plan_and_report(args: argparse.Namespace) -> tuple[Plan, Report] | tuple[None, None]:
    """The plan of the flags and its report, or (None, None) when no plan was asked for."""
    if not _plan_given(args):
        return None, None
    from memtui.estimator import estimate

    plan = plan_from_args(args)
    return plan, estimate(plan)


def run(args: argparse.Namespace) -> int:
    from memtui.forensics import load, summarise
    from memtui.forensics.compare import compare_plan, comparison_json
    from memtui.forensics.model import device_json

    if args.device is not None and args.device < 0:
        raise UsageError(f"--device must be 0 or more, not {args.device}")
    plan, report = plan_and_report(args)  # flags first: a bad flag fails before a long read
    if args.export_viz:
        from memtui.plans.files import new_target

        new_target(args.export_viz, args.force, [args.file])
    started = time.perf_counter()
    raw = load(args.file)
    summary = summarise(raw, args.device)
    seconds = time.perf_counter() - started
    exported = None
    if args.export_viz:
        from memtui.forensics.export import export

        exported = export(raw, args.export_viz, args.force)
    del raw
    comparisons = {
        d.device: compare_plan(d, plan, report) if plan is not None and report is not None else None
        for d in summary.devices
    }
    if args.json:
        out = []
        for d in summary.devices:
            obj = device_json(summary, d)
            c = comparisons[d.device]
            obj["plan"] = comparison_json(c) if c is not None else None
            out.append(obj)
        print(json.dumps(out, indent=2))
        return 0
    from rich.console import Console
    from rich.text import Text

    from memtui.text import LINE, shown
    from memtui.ui import snapshot_render as render

    console, unit = Console(), unit_of(args).value
    console.print(render.header(summary, seconds))
    console.print(render.settings_line(summary.settings))
    for d in summary.devices:
        console.print()
        console.print(render.device_view(summary, d, unit, comparisons[d.device], console.width))
    if exported is not None:
        console.print(
            Text(
                f"\nwrote {shown(exported, LINE)} for memory_viz "
                "(allocations coloured by plan term)"
            )
        )
    return 0
