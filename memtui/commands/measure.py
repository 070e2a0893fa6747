"""`memtui measure`: run one real training step and print predicted beside measured bytes.

Takes the same plan flags as `memtui estimate`. Needs the `memtui[measure]` extra (torch,
transformers, peft); without it, one line says how to install it and the exit code is 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from memtui.commands.plan_flags import add_plan_arguments, plan_from_args

if TYPE_CHECKING:
    from memtui.estimator import Plan
    from memtui.estimator.choices import StackName
    from memtui.measure import Measurement, Result

INSTALL_HINT = (
    "memtui measure needs torch, transformers and peft: pip install 'memtui[measure]' "
    "(for a CPU-only torch, install it first from the CPU wheel index: pip install torch "
    "--index-url https://download.pytorch.org/whl/cpu)"
)


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "measure",
        help="measure a real training step and compare it with the estimate",
        description=(
            "Build the model with random weights, run one training step with the plan's "
            "settings (on CPU, or under FakeTensorMode without allocating), and print the "
            "predicted and measured bytes of every term. Measured as one process: one GPU, "
            "no sharding, no runtime overhead. With --stack trainer the step is a real "
            "transformers.Trainer step (PEFT's default LoRA for --method lora); with --stack "
            "fsdp2 Trainer + accelerate's FSDP2 over two CPU processes, compared per GPU "
            "with the plan on two GPUs."
        ),
    )
    add_plan_arguments(parser)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--fake",
        dest="fake",
        action="store_true",
        default=None,
        help="trace under FakeTensorMode (no memory allocated; default above 300M parameters)",
    )
    mode.add_argument(
        "--real", dest="fake", action="store_false", help="run the step for real on the CPU"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object (bytes)")
    parser.set_defaults(run=run)


def _missing_dependency(plan: Plan) -> str | None:
    """The extra's packages that cannot be imported, or None."""
    import importlib

    from memtui.estimator.choices import Method, StackName

    needed = ["torch", "transformers"] + (["peft"] if plan.method is not Method.full else [])
    # transformers.Trainer runs on accelerate
    if plan.stack in (StackName.trainer, StackName.fsdp2):
        needed.append("accelerate")
    missing = []
    for name in needed:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
            if name == "torch":  # transformers without torch only prints a notice
                break
    return ", ".join(missing) if missing else None


def result_json(result: Result) -> dict[str, Any]:
    """The comparison as one JSON object: bytes as integers, errors as fractions."""
    m = result.measurement
    return {
        "model": result.plan.model.name,
        "mode": "fake" if m.fake else "real",
        "stack": result.plan.stack.value,
        "world_size": m.world_size,
        "plan": result.plan.model_dump(mode="json", exclude={"model": {"architecture"}}),
        "terms": {row.key: row.as_dict() for row in result.rows},
        "peak_detail": m.peak_detail,
        "notes": result.notes,
    }


def _print_table(result: Result) -> None:
    from rich.console import Console
    from rich.table import Table

    from memtui.estimator.units import GB

    plan, m = result.plan, result.measurement
    console = Console()
    console.print(
        f"[bold]{plan.model.name}[/]: {plan.method.value}, {plan.precision.value}, "
        f"{plan.optimizer.value}, micro-batch {plan.micro_batch} x seq {plan.seq_len}, "
        f"{plan.attention.value} attention, checkpointing {plan.checkpointing.value}; "
        f"{_how(plan.stack, m)}"
    )
    table = Table(title="Predicted vs measured (GB = 10^9 bytes)", title_justify="left")
    table.add_column("Term", no_wrap=True)
    for name in ("Predicted", "Measured", "Difference", "Error"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("Why they can differ", overflow="fold")
    for row in result.rows:
        table.add_row(
            row.label,
            f"{row.predicted / GB:,.4f}",
            f"{row.measured / GB:,.4f}",
            f"{row.difference / GB:+,.4f}",
            f"{row.error:+.2%}",
            row.note,
        )
    console.print(table)
    for note in result.notes:
        console.print(f"[dim]note: {note}[/]")


def _how(stack: StackName, m: Measurement) -> str:
    """How the step was measured, for the table's first line."""
    from memtui.estimator.choices import StackName

    if m.fake:
        return "FakeTensorMode (nothing allocated), one GPU"
    if stack is StackName.trainer:
        return "a real transformers.Trainer step on CPU, one GPU"
    if stack is StackName.fsdp2:
        return f"Trainer + accelerate FSDP2 over {m.world_size} CPU processes, per GPU (rank 0)"
    return "real step on CPU, one GPU"


def run(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    missing = _missing_dependency(plan)
    if missing:
        print(f"memtui measure: {missing} not installed. {INSTALL_HINT}", file=sys.stderr)
        return 2
    if plan.model.architecture.assumed:
        print(
            "memtui measure: error: needs an architecture (--model), not a bare --params count",
            file=sys.stderr,
        )
        return 2
    from memtui.commands.plan_flags import DEFAULT_MODEL
    from memtui.estimator.configs import ModelConfigError
    from memtui.measure import Unsupported, measure

    try:
        result = measure(args.model or DEFAULT_MODEL, plan, fake=args.fake)
    except (Unsupported, ModelConfigError) as err:
        print(f"memtui measure: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result_json(result), indent=2))
    else:
        _print_table(result)
    return 0
