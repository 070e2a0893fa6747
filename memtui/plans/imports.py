"""A plan from a job's own config files: `--from FILE...` for estimate, the dashboard, snapshot
and measure, and the plan a running job is attached with.

The files make one layer of the plan (`Imported.layer`), between memtui's defaults (or a
`--plan` file) and the flags given on the command line (`memtui.estimator.precedence.merge`).
The model comes from the files'
`base_model` / `model_name_or_path` / torchtune builder unless --model or --params is given,
through the one model resolver (catalog, config.json, folder, offline Hugging Face cache).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from memtui.errors import one_line
from memtui.estimator.precedence import PlanLayer

if TYPE_CHECKING:
    from memtui.estimator.plan import ModelSpec, Plan
    from memtui.estimator.report import Provenance
    from memtui.plans.derive import Derived
    from memtui.plans.facts import Facts

# derive and facts load with the first --from: `memtui estimate` without it stays as fast


@dataclass
class Imported:
    """What the files decided: the plan fields, their origins, the assumptions."""

    label: str
    """The files, as the user named them."""
    derived: Derived
    model: ModelSpec | None = None
    """The files' model (None: none named, or --model / --params given)."""
    notes: list[str] = field(default_factory=list)
    """What the chosen stack changed in fields the files set."""
    gpu_assumption: str | None = None
    """The GPU count assumed because neither the files nor this node gave one (the verdict
    line says it)."""

    @property
    def provenance(self) -> tuple[Provenance, ...]:
        return tuple(self.derived.provenance)

    @property
    def assumptions(self) -> tuple[str, ...]:
        return (*self.derived.assumptions, *self.notes)

    @property
    def ignored(self) -> tuple[str, ...]:
        """The files' memory settings memtui does not size, each with what it did instead."""
        return tuple(self.derived.ignored)

    @property
    def layer(self) -> PlanLayer:
        """The fields the files decide, their model too, as the layer between the plan below
        and the flags; a stack may adapt them (the notes say so)."""
        fields = dict(self.derived.changes)
        if self.model is not None:
            fields["model"] = self.model
        return PlanLayer(self.label, fields, pinned=False)

    def sets(self, name: str) -> bool:
        """Whether the files decided plan field `name` (dotted for nested ones)."""
        return any(p.field == name for p in self.derived.provenance)


def model_of(facts: Facts, cwd: Path) -> ModelSpec | None:
    """The model the files name, resolved (a relative path against the launch's folder)."""
    fact = facts.values.get("model")
    if fact is None:
        return None
    from memtui.estimator.configs import ModelConfigError
    from memtui.estimator.model_source import load_model
    from memtui.plans.facts import ConfigError
    from memtui.plans.hub import fetch_config

    ref = str(fact.value)
    local = cwd / ref
    try:
        if not Path(ref).is_absolute() and local.exists():
            ref = str(local)
        model = load_model(ref, fetch_config)
    except (ModelConfigError, OSError, ValueError) as err:
        raise ConfigError(f"{fact.origin}: {one_line(err)}") from None
    if facts.get("unfused"):  # the same weights as separate linears: LoRA names them apart
        # validated anew, not model_copy: the cached linear_layers must be rebuilt
        arch = model.architecture
        unfused = arch.model_validate({**arch.model_dump(), "fused_qkv": False,
                                       "fused_gate_up": False})  # fmt: skip
        return model.from_architecture(model.name, unfused)
    return model


def import_facts(
    facts: Facts, below: Plan, given: set[str], cwd: Path, model_given: bool
) -> Imported:
    """The fields `facts` decide over the plan `below` them (and their model unless one was
    given); `given`: the fields the flags set, dotted."""
    from memtui.plans.derive import derive

    model = None if model_given else model_of(facts, cwd)
    imported = Imported(facts.source, derive(facts, below, given), model)
    if model is not None:
        imported.derived.record("model", model.name, facts.values["model"].origin)
    return imported


def import_files(
    paths: Iterable[str], below: Plan, given: set[str], model_given: bool, cwd: Path | None = None
) -> Imported:
    """`--from FILE...`: read, merge and derive (ConfigError: one line, exit 2)."""
    from memtui.plans.registry import read_files

    cwd = cwd or Path.cwd()
    return import_facts(read_files(paths, cwd), below, given, cwd, model_given)
