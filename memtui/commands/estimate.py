"""`memtui estimate`: the plan's per-GPU budget, every strategy, the levers, as text or JSON.

The JSON path imports neither rich nor Textual: scripts and CI gates call it often.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from memtui.commands.plan_flags import add_plan_arguments, plan_from_args


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "estimate",
        help="predict the per-GPU memory of a fine-tune",
        description="Predict the per-GPU memory of a fine-tune, for every strategy.",
    )
    add_plan_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object (bytes)")
    parser.set_defaults(run=run)


def report_json(plan: Any, report: Any) -> dict[str, Any]:
    """The report as the documented JSON object: bytes as integers."""
    budget = report.budget
    per_gpu = {t.key: t.bytes for t in budget.terms}
    per_gpu["static"] = budget.static
    per_gpu["total"] = budget.total
    return {
        "model": plan.model.name,
        "parameters": report.parameters.model_dump(),
        "bytes_per_param": report.bytes_per_param,
        "per_gpu": per_gpu,
        "sources": {t.key: t.source for t in budget.terms},
        "capacity": budget.capacity,
        "headroom": budget.headroom,
        "fits": budget.fits,
        "fits_static": budget.fits_static,
        "cpu_ram_per_gpu": budget.cpu_ram,
        "strategies": {
            row.strategy.value: row.model_dump(exclude={"strategy"}) for row in report.strategies
        },
        "communication": report.communication.model_dump(),
        "levers": [lever.model_dump() for lever in report.levers],
        "max_micro_batch": report.max_micro_batch,
        "assumptions": list(report.assumptions),
        "plan": plan.model_dump(mode="json", exclude={"model": {"architecture"}}),
    }


def run(args: argparse.Namespace) -> int:
    from memtui.estimator import estimate

    plan = plan_from_args(args)
    report = estimate(plan)
    if args.json:
        print(json.dumps(report_json(plan, report), indent=2))
        return 0
    from memtui.commands.estimate_text import print_report

    print_report(plan, report)
    return 0
