"""A plan from a job's own config files: `--from FILE...` for estimate, the dashboard, snapshot
and measure, and the plan a running job is attached with.

Precedence, lowest first: memtui's defaults (or a `--plan` file), then what the job's files
say, then the flags given on the command line. The model comes from the files'
`base_model` / `model_name_or_path` / torchtune builder unless --model or --params is given,
through the one model resolver (catalog, config.json, folder, offline Hugging Face cache).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtui.errors import one_line

if TYPE_CHECKING:
    from memtui.estimator.plan import ModelSpec, Plan
    from memtui.estimator.report import Provenance
    from memtui.plans.derive import Derived
    from memtui.plans.facts import Facts

# derive and facts load with the first --from: `memtui estimate` without it stays as fast

_NESTED = ("hardware", "deepspeed", "overhead")


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

    @property
    def provenance(self) -> tuple[Provenance, ...]:
        return tuple(self.derived.provenance)

    @property
    def assumptions(self) -> tuple[str, ...]:
        return (*self.derived.assumptions, *self.notes)

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

    ref = str(fact.value)
    local = cwd / ref
    try:
        if not Path(ref).is_absolute() and local.exists():
            ref = str(local)
        return load_model(ref)
    except (ModelConfigError, OSError, ValueError) as err:
        raise ConfigError(f"{fact.origin}: {one_line(err)}") from None


def import_facts(
    facts: Facts, start: Plan, given: set[str], cwd: Path, model_given: bool
) -> tuple[Imported, Plan]:
    """The files' fields over `start` (with their model unless one was given); returns
    the import and the plan to apply the flags over."""
    from memtui.plans.derive import derive

    model = None if model_given else model_of(facts, cwd)
    if model is not None:
        start = start.model_copy(update={"model": model})
    imported = Imported(facts.source, derive(facts, start, given), model)
    if model is not None:
        imported.derived.record("model", model.name, facts.values["model"].origin)
    return imported, start


def import_files(
    paths: Iterable[str], start: Plan, given: set[str], model_given: bool, cwd: Path | None = None
) -> tuple[Imported, Plan]:
    """`--from FILE...`: read, merge and derive (ConfigError: one line, exit 2)."""
    from memtui.plans.registry import read_files

    cwd = cwd or Path.cwd()
    return import_facts(read_files(paths, cwd), start, given, cwd, model_given)


def combine(
    start: Plan, imported: Imported | None, flags: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """`Plan.evolve` arguments: the files' fields, the flags' over them. When a stack is
    chosen, fields neither gives that it cannot run are adapted to it (`suited`), and so are
    fields the files set that it cannot run (said in the returned notes); a flag is never
    changed (evolve reports it if the stack cannot run it)."""
    from memtui.estimator.stacks import STACKS

    files = imported.derived.changes if imported is not None else {}
    merged: dict[str, Any] = {}
    for source in (files, flags):
        for key, value in source.items():
            if key in _NESTED and isinstance(value, dict):
                merged[key] = {**merged.get(key, {}), **value}
            else:
                merged[key] = value
    notes: list[str] = []
    if "stack" not in merged:
        return merged, notes
    update = {k: v for k, v in merged.items() if k not in _NESTED and k != "model"}
    for key in _NESTED:  # the GPU count decides, e.g. torchtune's DDP on one GPU only
        if merged.get(key):
            update[key] = getattr(start, key).model_copy(update=merged[key])
    as_given = start.model_copy(update=update)  # validated once, by evolve, afterwards
    stack = STACKS[as_given.stack]
    for key, value in stack.suited(as_given).items():
        if key in flags:
            continue
        if key in files:
            shown = getattr(files[key], "value", files[key])
            notes.append(
                f"the {stack.name.value} stack cannot run {key} {shown}: "
                f"{getattr(value, 'value', value)} instead"
            )
        merged[key] = value
    return merged, notes
