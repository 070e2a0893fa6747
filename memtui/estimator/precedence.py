"""Where a plan's values come from: partial layers over a whole plan, merged by one function.

The order, lowest first: memtui's defaults (or a `--plan` file, itself laid over them when it
was read), the job's files (`--from`, an attached job), the flags (or one settings row).
A layer names the fields it sets; a nested section (hardware, overhead, deepspeed) is set
field by field, so a layer that sets hardware.nodes keeps the GPU count below it. When a layer
chooses the stack, the stack then adapts what it cannot run (`BookStack.suited`), which the
layer that set the field decides: a value from the plan below is changed silently, one from
the files with a note, one from the flags never (validation says why the stack refuses it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memtui.estimator.knobs import sections
from memtui.estimator.plan import Plan

SECTIONS = frozenset(sections(Plan))
"""The plan's nested sections, set field by field."""


@dataclass(frozen=True)
class PlanLayer:
    """The plan fields one source sets: each top-level field's value, a section's as a
    mapping of the section fields it sets."""

    source: str
    """Who set them, as the user named it (the files, the flags, a settings row)."""
    fields: Mapping[str, Any]
    pinned: bool = True
    """True: the stack never adapts these values (a flag, a key); False: it may, and the
    notes say so (a job's files)."""

    @classmethod
    def dotted(cls, source: str, values: Mapping[str, Any], pinned: bool = True) -> PlanLayer:
        """A layer from dotted names ("hardware.nodes" for a section's field)."""
        fields: dict[str, Any] = {}
        for name, value in values.items():
            head, _, leaf = name.partition(".")
            if leaf:
                fields.setdefault(head, {})[leaf] = value
            else:
                fields[name] = value
        return cls(source, fields, pinned)

    def names(self) -> set[str]:
        """The fields it sets, dotted for a section's."""
        names: set[str] = set()
        for key, value in self.fields.items():
            names |= {f"{key}.{leaf}" for leaf in value} if key in SECTIONS else {key}
        return names


@dataclass(frozen=True)
class Merged:
    """The plan of the layers, and what the stack changed in values the files set."""

    plan: Plan
    notes: list[str] = field(default_factory=list)


def merge(base: Plan, layers: Sequence[PlanLayer]) -> Merged:
    """`layers` (lowest first) over `base`, the stack's adaptation, then one validation
    (`Plan.evolve`: ValidationError or ValueError, one line with `one_line`)."""
    merged: dict[str, Any] = {}
    setter: dict[str, PlanLayer] = {}  # each top-level field: the highest layer setting it
    for layer in layers:
        for key, value in layer.fields.items():
            merged[key] = {**merged.get(key, {}), **value} if key in SECTIONS else value
            setter[key] = layer
    notes: list[str] = []
    if "stack" in setter:  # a stack chosen above the base brings what it runs
        # the stacks' books load here, when a stack is chosen: a plan built without one
        # (the dashboard's, before its first frame) does not wait for them
        from memtui.estimator.stacks import STACKS

        stack = STACKS[merged["stack"]]
        for key, value in stack.suited(_unchecked(base, merged)).items():
            by = setter.get(key)
            if by is not None and by.pinned:
                continue
            if by is not None:
                shown = getattr(merged[key], "value", merged[key])
                notes.append(
                    f"the {stack.name.value} stack cannot run {key} {shown}: "
                    f"{getattr(value, 'value', value)} instead"
                )
            merged[key] = value
    return Merged(base.evolve(**merged), notes)


def _unchecked(base: Plan, merged: Mapping[str, Any]) -> Plan:
    """`merged` over `base` without validation: what the stack is asked to run, before it
    adapts what validation would refuse (its GPU count decides, e.g. torchtune's DDP on one
    GPU only)."""
    update = {
        key: getattr(base, key).model_copy(update=value) if key in SECTIONS else value
        for key, value in merged.items()
    }
    return base.model_copy(update=update)
