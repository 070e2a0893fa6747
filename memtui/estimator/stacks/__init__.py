"""Training stacks: the software that runs a plan, each keeping its own books.

A stack turns a plan and a strategy into a `Breakdown`: every term of the per-GPU budget
(`TermKind`) in bytes, and where each number comes from. `estimate` sums what the plan's stack
contributes and never looks inside it, so a new stack (its buffers, where its master weights
live, its gradient dtype) is one module here plus its entry in `STACKS`; what it can run is
its record in `memtui.estimator.capabilities.CAPABILITIES`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memtui.estimator.choices import StackName
from memtui.estimator.stacks.base import BookStack, Breakdown
from memtui.estimator.stacks.deepspeed import DEEPSPEED
from memtui.estimator.stacks.fsdp1 import FSDP1
from memtui.estimator.stacks.fsdp2 import FSDP2
from memtui.estimator.stacks.generic import GENERIC
from memtui.estimator.stacks.litgpt import LITGPT
from memtui.estimator.stacks.torchtune import TORCHTUNE
from memtui.estimator.stacks.trainer import TRAINER

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan

__all__ = ["STACKS", "BookStack", "Breakdown", "stack_for"]

STACKS: dict[StackName, BookStack] = {
    stack.name: stack for stack in (GENERIC, TRAINER, DEEPSPEED, FSDP2, FSDP1, TORCHTUNE, LITGPT)
}
"""Every stack by its name."""


def stack_for(plan: Plan) -> BookStack:
    """The stack that runs `plan`."""
    return STACKS[plan.stack]
