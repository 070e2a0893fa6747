"""Training stacks: the software that runs a plan, each keeping its own books.

A stack turns a plan and a strategy into a `Breakdown`: every term of the per-GPU budget
(`TermKind`) in bytes, and where each number comes from. `estimate` sums what the plan's stack
contributes and never looks inside it, so a new stack (its buffers, where its master weights
live, its gradient dtype) is one module here plus its entry in `STACKS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memtui.estimator.stacks.base import Breakdown, Stack
from memtui.estimator.stacks.generic import GENERIC

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan

__all__ = ["STACKS", "Breakdown", "Stack", "stack_for"]

STACKS: dict[str, Stack] = {stack.name: stack for stack in (GENERIC,)}
"""Every stack by its key."""


def stack_for(plan: Plan) -> Stack:
    """The stack that runs `plan`."""
    return GENERIC
