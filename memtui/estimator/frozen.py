"""The base of every estimator input and output: a frozen pydantic model that is replaced,
never mutated, and changed only through `evolve`, which validates the new value."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict
from typing_extensions import Self

from memtui.errors import PlanError


class Frozen(BaseModel):
    """Immutable, and strict about unknown fields (a misspelt key is an error, not a no-op)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def evolve(self, **changes: Any) -> Self:
        """A copy with `changes` applied and every validator run (`model_copy(update=...)`
        skips validation). A nested model may be changed by a mapping of its own fields:
        `plan.evolve(hardware={"gpus_per_node": 4})`. Unchanged nested models are kept as
        they are (not copied), so caches keyed on them keep hitting."""
        data = {name: getattr(self, name) for name in type(self).model_fields}
        for name, value in changes.items():
            if name not in data:
                raise PlanError(f"{type(self).__name__} has no field {name!r}")
            current = data[name]
            if isinstance(value, Mapping) and isinstance(current, Frozen):
                value = current.evolve(**value)
            data[name] = value
        return type(self).model_validate(data)
