"""`memtui estimate`: the plan's per-GPU budget, every strategy, the levers, as text or JSON.

The JSON path imports neither rich nor Textual: scripts and CI gates call it often.
"""

from __future__ import annotations

import argparse
from typing import Any

from memtui.commands.plan_flags import add_plan_arguments, count_argument, plan_and_import


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "estimate",
        help="predict the per-GPU memory of a fine-tune",
        description="Predict the per-GPU memory of a fine-tune, for every strategy.",
    )
    add_plan_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object (bytes)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when the plan does not fit (a CI gate); 0 when it does",
    )
    parser.add_argument(
        "--tokens",
        type=count_argument,
        metavar="N",
        help="also say how long training N tokens takes (2B, 5e8): whole optimizer steps",
    )
    parser.add_argument(
        "--levers-by",
        choices=("pull", "memory", "efficiency"),
        default="pull",
        help="order the levers: pull (the order to pull them, default), memory (most saved "
        "first), efficiency (most GB saved per %% slower first)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from memtui.commands.default_stack import choose
    from memtui.estimator import estimate
    from memtui.estimator.levers import LeverOrder, ordered
    from memtui.estimator.report import EstimateDocument, TokensTime

    chosen = choose(args, *plan_and_import(args))
    plan, imported = chosen.plan, chosen.imported
    report = estimate(plan)
    report = report.model_copy(
        update={"levers": ordered(report.levers, LeverOrder(args.levers_by))}
    )
    tokens = TokensTime.of(report.step_time, args.tokens) if args.tokens else None
    if args.json:
        sources = (imported.provenance, imported.assumptions, imported.ignored) if imported else ()
        document = EstimateDocument.of(plan, report, *sources)
        document = document.model_copy(
            update={"stack_choice": chosen.why, "time_for_tokens": tokens}
        )
        print(document.model_dump_json(indent=2))
        return _verdict(args, report.budget.fits)
    from memtui.commands.estimate_text import print_report

    if imported is not None:
        from memtui.commands.import_text import print_imported

        print_imported(imported)
    print_report(
        plan,
        report,
        gpu_assumption=imported.gpu_assumption if imported else None,
        why_stack=chosen.why,
        tokens=tokens,
    )
    return _verdict(args, report.budget.fits)


def _verdict(args: argparse.Namespace, fits: bool) -> int:
    """The exit code: 1 for a plan that does not fit under --check, else 0 (the report was
    printed either way; usage errors exit 2 before it)."""
    return 1 if args.check and not fits else 0
