"""How a plan field is set by hand: its `memtui estimate` flag and its settings row.

A `Knob` sits in the field's own declaration (`Annotated[int, Knob(...)]` in
`memtui/estimator/plan.py`), so the field, its flag and its row are described in one place:
`memtui.commands.plan_flags.add_plan_arguments` derives the flags and `memtui.ui.plan_edits`
the rows of the fields whose flag or row maps one to one onto them. A leaf module: the plan
imports it, it imports nothing of memtui.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from pydantic import BaseModel

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo


class FlagGroup(Enum):
    """The groups of the plan flags in `--help`, in their order (the value is the title)."""

    stack = "stack"
    model = "model"
    hardware = "hardware"
    method = "method"
    optimizer = "precision and optimizer"
    sharding = "sharding"
    activations = "activations"
    deepspeed = "DeepSpeed ZeRO (--stack deepspeed; default: Trainer's auto)"
    overhead = "runtime overhead"
    versions = "framework versions (default: the releases the stacks were read from)"
    objective = "objective (preference and RL fine-tuning)"


class Entry(Enum):
    """How a value is typed after its flag where the field's type does not say it (an enum:
    one of its values; a bool: --flag / --no-flag; an int: a whole number of at least 1)."""

    count = "count"
    """A count with a suffix: 13B, 5e8."""
    size = "size"
    """Bytes with a unit: 512MiB, 1GiB (GB is 10^9, GiB 2^30)."""
    fraction = "fraction"
    """Above 0 and at most 1, or a percentage: 0.025, 2.5%."""
    probability = "probability"
    """At least 0 and below 1."""
    names = "names"
    """Comma-separated names: lm_head,embed_tokens."""
    version = "version"
    """A release: 4.48.1 (a local suffix such as +cu121 is kept)."""


POWERS_OF_TWO = tuple(2**k for k in range(21))
"""Rungs of a row that steps by doubling (ranks, sequence lengths, parallel degrees)."""


@dataclass(frozen=True)
class Knob:
    """The flag and the settings row of one plan field."""

    group: FlagGroup
    """Where its flag is listed in `--help` (also for a flag written out by hand)."""
    flag: str | None = None
    """The flag (`--lora-rank`), derived from the field; None: no flag, or one written out
    in `memtui/commands/plan_flags.py` because its value needs more than parsing."""
    help: str | None = None
    entry: Entry | None = None
    """How its value is typed, where the field's type does not say it."""
    metavar: str | None = None
    """The value's name in `--help` (default: the flag's name in capitals)."""
    label: str | None = None
    """Its settings row's label; None: no row of its own (it is part of a combined row)."""
    steps: tuple[int, ...] = ()
    """An integer row's rungs, smallest first (empty: one up or down)."""


def knob_of(field: FieldInfo) -> Knob | None:
    """The Knob a field is declared with, if any."""
    return next((m for m in field.metadata if isinstance(m, Knob)), None)


def sections(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The fields of `model` that are nested settings (a model with a default of its own: the
    plan's hardware, overhead and deepspeed), set field by field; a required model (the
    plan's model) is replaced whole."""
    return {
        name: type(field.default)
        for name, field in model.model_fields.items()
        if isinstance(field.default, BaseModel)
    }


def knobs(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo, Knob]]:
    """(dotted field name, field, its Knob) for every field of `model` declared with one, in
    declaration order, a section's fields at the section's place."""
    nested = sections(model)
    for name, field in model.model_fields.items():
        if name in nested:
            yield from knobs(nested[name], f"{prefix}{name}.")
        elif (knob := knob_of(field)) is not None:
            yield f"{prefix}{name}", field, knob
