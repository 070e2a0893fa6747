"""Training stacks: the software that runs a plan, each keeping its own books.

A stack turns a plan and a strategy into a `Breakdown`: every term of the per-GPU budget
(`TermKind`) in bytes, and where each number comes from. `estimate` sums what the plan's stack
contributes and never looks inside it. Each `StackName` keeps its books in the module of this
package named by its value (`StackName.fsdp2`: `stacks/fsdp2.py`), whose `BookStack` instance
of that name `STACKS` finds; what it can run is its record in
`memtui.estimator.capabilities.CAPABILITIES`. So a new stack is its name, its record and its
module, and nothing here changes.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from memtui.estimator.choices import StackName
from memtui.estimator.stacks.base import BookStack, Breakdown

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan

__all__ = ["STACKS", "BookStack", "Breakdown", "stack_for"]


def _books_of(name: StackName) -> BookStack:
    """The stack instance in `stacks/<name>.py` (one module per stack, by the enum's value)."""
    module = import_module(f"{__name__}.{name.value}")
    found = [v for v in vars(module).values() if isinstance(v, BookStack) and v.name is name]
    if len(found) != 1:  # a module imports other stacks' instances too: only its own counts
        raise ImportError(f"{module.__name__} must define one {name.value} BookStack instance")
    return found[0]


STACKS: dict[StackName, BookStack] = {name: _books_of(name) for name in StackName}
"""Every stack by its name, in the enum's order."""


def stack_for(plan: Plan) -> BookStack:
    """The stack that runs `plan`."""
    return STACKS[plan.stack]
