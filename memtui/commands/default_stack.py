"""The stack of a plan whose user named none: chosen by a stated rule, never the textbook step.

The rule, first that applies: the job's files name the stack (`--from`: the plan's own import
decides it); with `--installed-versions` (memtui runs where the job runs), the stacks whose
framework is installed here; otherwise every stack that runs a framework. Of those, the one
that can run the plan as it is (its strategy, precision and offload, memtui's defaults
included, are not adapted; the loss is the stack's own unless a flag names one, `OWN`) and
needs the most memory per GPU: so an estimate without
`--stack` is never the optimistic one. The generic stack (memtui's textbook step, the
reference analyses) is chosen only by name, or when no framework's stack can run the plan.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING

from memtui.estimator.choices import StackName
from memtui.estimator.units import SizeUnit

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan
    from memtui.plans.imports import Imported

FRAMEWORKS: dict[StackName, tuple[str, ...]] = {
    StackName.trainer: ("transformers", "accelerate"),
    StackName.deepspeed: ("transformers", "deepspeed"),
    StackName.fsdp2: ("transformers", "accelerate", "torch"),
    StackName.fsdp1: ("transformers", "accelerate", "torch"),
    StackName.torchtune: ("torchtune",),
    StackName.litgpt: ("litgpt",),
}
"""The distributions each framework stack needs installed (by their metadata names)."""

OWN = ("loss",)
"""Fields a stack decides itself when the user gave none: LitGPT computes the logits in chunks
of 128 tokens and runs no other loss (litgpt/utils.py `chunked_cross_entropy`), so a rule that
asked it to run memtui's default full loss would drop the stack whose loss costs the most."""


@dataclass(frozen=True)
class Chosen:
    """The plan with the stack the rule chose, and the rule's reason (empty: named)."""

    plan: Plan
    imported: Imported | None
    why: str = ""


def _installed(names: tuple[str, ...]) -> bool:
    try:
        return all(metadata.version(name) for name in names)
    except metadata.PackageNotFoundError:
        return False


def named(args: argparse.Namespace, imported: Imported | None) -> bool:
    """True when the plan's stack was named: a flag, the job's files, a saved --plan."""
    return args.stack is not None or imported is not None or bool(getattr(args, "plan", None))


def _own(args: argparse.Namespace, plan: Plan, stack: StackName) -> dict[str, object]:
    """The stack's own choice of the `OWN` fields no flag gave (`StackCapabilities.suited`)."""
    from memtui.estimator.capabilities import CAPABILITIES

    suited = CAPABILITIES[stack].suited(plan.model_copy(update={"stack": stack}))
    return {k: v for k, v in suited.items() if k in OWN and getattr(args, k, None) is None}


def choose(args: argparse.Namespace, plan: Plan, imported: Imported | None) -> Chosen:
    """`plan` as is when its stack was named (`named`), else `plan` under the stack the
    rule chooses."""
    from memtui.estimator.budget import per_gpu_total

    if named(args, imported):
        return Chosen(plan, imported)
    stacks = list(FRAMEWORKS)
    where = "the framework stacks"
    if args.installed_versions:
        stacks = [s for s in stacks if _installed(FRAMEWORKS[s])]
        where = "the stacks whose framework is installed here"
    runs: list[tuple[int, StackName, Plan]] = []
    for stack in stacks:
        try:
            candidate = plan.evolve(stack=stack, **_own(args, plan, stack))
        except ValueError:  # PlanError, or pydantic's ValidationError: it cannot run it
            continue
        runs.append((per_gpu_total(candidate), stack, candidate))
    if not runs:
        why = f"no --stack, and none of {where} can run this plan: memtui's generic step"
        return Chosen(plan, None, why)
    chosen = max(runs, key=lambda run: run[0])[2]
    unit = SizeUnit[getattr(args, "unit", None) or "gb"]  # the text's `--unit`, said with it
    ranked = sorted(runs, reverse=True)
    others = ", ".join(f"{s.value} {t / unit.scale:.1f}" for t, s, _ in ranked)
    why = (
        f"no --stack: the most demanding of {where} that run this plan "
        f"({unit.value} per GPU: {others}); name one with --stack"
    )
    return Chosen(chosen, None, why)
