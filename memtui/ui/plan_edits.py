"""One keyboard step on one plan setting: the settings panel's rows and the screen's keys.

Each `Setting` names a plan input, how it reads on screen, and how a step up or down changes it. A
step returns a new frozen Plan (`Plan.evolve`, every validator run: docs/architecture.md, "Immutable
plans, changed through evolve"); a value the Plan rejects (e.g. parameter offload with DDP) is
skipped, so cycling never gets stuck. No memory arithmetic lives here: the estimator computes every
byte. A field's row follows from its type and its `Knob` (`memtui/estimator/knobs.py`: label,
rungs); rows that need more are written out in `_LAID_OUT`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from typing import Any

from pydantic import ValidationError

from memtui.errors import MemtuiError, one_line
from memtui.estimator import (
    Checkpointing,
    ModelSpec,
    Plan,
    StackName,
)
from memtui.estimator.hardware import GPUS, INTER_NODE, INTRA_NODE
from memtui.estimator.knobs import knob_of, knobs
from memtui.estimator.plan import DeepSpeedSettings
from memtui.estimator.precedence import PlanLayer, merge
from memtui.estimator.units import format_count, parse_size
from memtui.estimator.versions import Versions


class PlanEditError(MemtuiError):
    """No value in that direction is valid for this plan; the message says why (one line)."""


def _validated(plan: Plan, update: dict[str, Any]) -> Plan:
    return plan.evolve(**update)  # every validator runs (LoRA targets the model lacks too)


def _with_hardware(plan: Plan, **fields: Any) -> Plan:
    return plan.evolve(hardware=fields)


def _cycle(
    values: Sequence[Any], current: Any, direction: int, build: Callable[[Any], Plan]
) -> Plan:
    """The next value (wrapping) that makes a valid plan; from a value not in the list
    (a flag's, NVML's card name) forward starts at the first, backward at the last."""
    start = values.index(current) if current in values else (-1 if direction > 0 else len(values))
    first_error = ""
    for k in range(1, len(values) + 1):
        candidate = values[(start + direction * k) % len(values)]
        if candidate == current:
            continue
        try:
            return build(candidate)
        except (ValidationError, ValueError) as err:
            first_error = first_error or one_line(err)
    raise PlanEditError(first_error or "no other value is valid here")


def _ladder(values: Sequence[int], current: int, direction: int) -> int:
    """The next rung of a sorted ladder (no wrap); the current value if at the end."""
    if direction > 0:
        return next((v for v in values if v > current), current)
    return next((v for v in reversed(values) if v < current), current)


@dataclass(frozen=True)
class Setting:
    """One row of the settings panel."""

    key: str
    """Stable id (also the Plan field it edits, where there is one)."""
    label: str
    show: Callable[[Plan], str]
    step: Callable[[Plan, int], Plan] | None
    """None for settings edited elsewhere (the model picker)."""
    fields: tuple[str, ...] = ()
    """The Plan fields it edits, dotted for nested ones ("hardware.nodes"); default (key,)."""
    listed: Callable[[Plan], tuple[Sequence[Any], Any]] | None = None
    """A row that cycles through a list (wrapping at its ends): the list and the plan's value,
    so the panel can say where the value is in it and the screen when a step wrapped."""
    typed: Callable[[Plan, str], Plan] | None = None
    """A number row: the plan with the value typed (Enter opens an input instead of a step)."""

    @property
    def edits(self) -> tuple[str, ...]:
        """`fields`, or the key itself when it is a top-level Plan field."""
        return self.fields or (self.key,)


def _label(name: str) -> str:
    """The row label a (dotted) Plan field's Knob names."""
    model: Any = Plan
    *sections, leaf = name.split(".")
    for section in sections:
        model = model.model_fields[section].annotation
    knob = knob_of(model.model_fields[leaf])
    if knob is None or knob.label is None:
        raise TypeError(f"{name}: its Knob names no row label")
    return knob.label


def _row(key: str) -> Setting:
    """The row of a top-level Plan field from its type and Knob: an enum cycles through its
    values, a bool toggles, an int steps along the Knob's rungs or by one."""
    if key not in Plan.model_fields:
        raise TypeError(f"{key}: a section's row is written out in SETTINGS")
    field = Plan.model_fields[key]
    label, kind = _label(key), field.annotation
    if isinstance(kind, type) and issubclass(kind, Enum):
        return _enum_setting(key, label, kind)
    if kind is bool:
        return _toggle(key, label)
    if kind is int:
        knob = knob_of(field)
        return _int_setting(key, label, knob.steps if knob else ())
    raise TypeError(f"{key}: no row follows from its type {kind}: write it out in SETTINGS")


def _listed(
    key: str,
    label: str,
    show: Callable[[Plan], str],
    options: Callable[[Plan], Sequence[Any]],
    current: Callable[[Plan], Any],
    build: Callable[[Plan, Any], Plan],
    fields: tuple[str, ...] = (),
) -> Setting:
    """A row that cycles through `options(plan)` (wrapping), each value made by `build`."""
    return Setting(
        key,
        label,
        show,
        lambda p, d: _cycle(options(p), current(p), d, lambda v: build(p, v)),
        fields,
        listed=lambda p: (options(p), current(p)),
    )


def _enum_setting(key: str, label: str, enum: type[Enum]) -> Setting:
    values = list(enum)
    return _listed(
        key,
        label,
        lambda p: str(getattr(p, key).value),
        lambda p: values,
        lambda p: getattr(p, key),
        lambda p, v: _validated(p, {key: v}),
    )


def _whole_number(label: str, text: str) -> int:
    """A typed whole number: digits with optional thousands separators ("4,096", "4_096")."""
    cleaned = text.strip().replace(",", "").replace("_", "")
    if not cleaned.isdigit():
        raise PlanEditError(f"{label}: {text.strip()!r} is not a whole number (e.g. 4096)")
    return int(cleaned)


def _typed(label: str, parse: Callable[[str], Any], build: Callable[[Plan, Any], Plan]) -> Any:
    """The `typed` hook of a number row: parse, then validate through the Plan."""

    def typed(p: Plan, text: str) -> Plan:
        value = parse(text)
        try:
            return build(p, value)
        except (ValidationError, ValueError) as err:
            raise PlanEditError(f"{label} {text.strip()}: {one_line(err)}") from None

    return typed


def _int_setting(key: str, label: str, steps: Sequence[int] = ()) -> Setting:
    def step(p: Plan, d: int) -> Plan:
        current = getattr(p, key)
        new = _ladder(steps, current, d) if steps else current + d
        if new == current or new < 1:
            raise PlanEditError(f"{label} is already at its {'largest' if d > 0 else 'smallest'}")
        try:
            return _validated(p, {key: new})
        except (ValidationError, ValueError) as err:
            raise PlanEditError(one_line(err)) from None

    return Setting(
        key,
        label,
        lambda p: f"{getattr(p, key):,}",
        step,
        typed=_typed(label, partial(_whole_number, label), lambda p, v: _validated(p, {key: v})),
    )


def _toggle(key: str, label: str) -> Setting:
    def step(p: Plan, d: int) -> Plan:
        try:
            return _validated(p, {key: not getattr(p, key)})
        except (ValidationError, ValueError) as err:
            raise PlanEditError(one_line(err)) from None

    return Setting(key, label, lambda p: "on" if getattr(p, key) else "off", step)


_CARDS = {card.name: card for card in GPUS.values()}


def _with_card(p: Plan, name: str) -> Plan:
    card = _CARDS[name]
    return _with_hardware(
        p,
        gpu_name=card.name,
        gpu_memory=card.memory,
        intra_node_bandwidth=INTRA_NODE[card.intra_node],
        compute_capability=card.compute_capability,
    )


def _link_setting(key: str, presets: dict[str, float]) -> Setting:
    names = list(presets)

    def current(p: Plan) -> str | None:
        return next((n for n, v in presets.items() if v == getattr(p.hardware, key)), None)

    def show(p: Plan) -> str:
        return current(p) or f"{getattr(p.hardware, key) / 1e9:g} GB/s"

    return _listed(
        key,
        _label(f"hardware.{key}"),
        show,
        lambda p: names,
        current,
        lambda p, n: _with_hardware(p, **{key: presets[n]}),
        (f"hardware.{key}",),
    )


def _hardware_int(key: str) -> Setting:
    """A GPU count, stepped by one and shown without a thousands separator."""
    label = _label(f"hardware.{key}")

    def step(p: Plan, d: int) -> Plan:
        current = getattr(p.hardware, key)
        new = current + d
        if new < 1:
            raise PlanEditError(f"{label} is already at its smallest")
        try:
            return _with_hardware(p, **{key: new})
        except (ValidationError, ValueError) as err:
            raise PlanEditError(one_line(err)) from None

    return Setting(
        key,
        label,
        lambda p: str(getattr(p.hardware, key)),
        step,
        (f"hardware.{key}",),
        typed=_typed(
            label, partial(_whole_number, label), lambda p, v: _with_hardware(p, **{key: v})
        ),
    )


def _target_options(p: Plan) -> list[tuple[str, ...]]:
    """PEFT's shorthands, then all-linear with adapters on lm_head, and on the embedding too
    (by this model's module names: LoRA on the vocabulary modules)."""
    embed, head = (lin.name for lin in p.model.architecture.vocabulary_modules)
    return [("all-linear",), ("attention",), ("all-linear", head), ("all-linear", embed, head)]


def _overhead_step(p: Plan, d: int) -> Plan:
    return p.evolve(overhead={"enabled": not p.overhead.enabled})


def _ladder_setting(
    key: str,
    values: Sequence[Any],
    show: Callable[[Any], str],
    parse: Callable[[str], Any],
    overhead: bool = False,
) -> Setting:
    """A setting stepped along a fixed list of values (no wrap), or typed (`parse`: the text
    to a value, which the Plan then validates); `overhead`: a field of `plan.overhead` rather
    than of the plan."""

    fields = (f"overhead.{key}",) if overhead else (key,)
    label = _label(fields[0])

    def get(p: Plan) -> Any:
        return getattr(p.overhead if overhead else p, key)

    def build(p: Plan, value: Any) -> Plan:
        return p.evolve(overhead={key: value}) if overhead else p.evolve(**{key: value})

    def step(p: Plan, d: int) -> Plan:
        current = get(p)
        end = PlanEditError(f"{label} is already at its {'largest' if d > 0 else 'smallest'}")
        if current in values:
            index = values.index(current) + d
            if not 0 <= index < len(values):
                raise end
            new = values[index]
        else:  # a value from a flag or a file: the nearest rung in that direction
            ahead = [v for v in values if v is not None and (v > current if d > 0 else v < current)]
            if not ahead:
                raise end
            new = ahead[0] if d > 0 else ahead[-1]
        try:
            return build(p, new)
        except (ValidationError, ValueError) as err:
            raise PlanEditError(one_line(err)) from None

    typed = _typed(label, parse, build)
    return Setting(key, label, lambda p: show(get(p)), step, fields, typed=typed)


def _number(text: str) -> float:
    """A typed decimal number ("0.05"); a percentage ("5%") is its fraction."""
    clean = text.strip()
    percent = clean.endswith("%")
    try:
        value = float(clean.removesuffix("%").strip())
    except ValueError:
        raise PlanEditError(f"{clean!r} is not a number (e.g. 0.05 or 5%)") from None
    return value / 100 if percent else value


def _size(text: str) -> int:
    """A typed size with its unit ("512MiB", "1GiB"), read as every size flag reads it."""
    try:
        return parse_size(text)
    except ValueError as err:
        raise PlanEditError(one_line(err)) from None


def _offload_step(p: Plan, d: int) -> Plan:
    """Activation offloading on or off; on with full checkpointing, which it needs."""
    if p.activation_offload:
        return _validated(p, {"activation_offload": False})
    try:
        return _validated(p, {"activation_offload": True, "checkpointing": Checkpointing.full})
    except (ValidationError, ValueError) as err:
        raise PlanEditError(one_line(err)) from None


def _with_stack(p: Plan, name: StackName) -> Plan:
    """The stack, with the strategy, precision and loss it runs where the plan's are not
    among them (a plan on bf16-mixed still reaches the Trainer stack)."""
    return merge(p, [PlanLayer("the stack row", {"stack": name})]).plan


def _saved_module_options(p: Plan) -> list[tuple[str, ...]]:
    """None, lm_head, or the embedding and lm_head, by this model's module names."""
    embed, head = (lin.name for lin in p.model.architecture.vocabulary_modules)
    return [(), (head,), (embed, head)]


#: Transformers' "auto" bucket sizes, or DeepSpeed's own defaults (zero/config.py).
_DEEPSPEED_OPTIONS = (
    DeepSpeedSettings(),
    DeepSpeedSettings(
        reduce_bucket_size=500_000_000,
        prefetch_bucket_size=50_000_000,
        persistence_threshold=100_000,
    ),
)


def _deepspeed_text(p: Plan) -> str:
    if p.deepspeed == DeepSpeedSettings():
        return "auto (Trainer)"
    size = p.deepspeed.reduce_bucket_size
    return f"bucket {format_count(size)}" if size else "custom"


def _bytes_text(value: int) -> str:
    return f"{value / 2**30:g} GiB" if value >= 2**30 else f"{value / 2**20:g} MiB"


_MiB = 2**20


# a release on each side of every change the books follow (FP32_OUTPUT_BEFORE,
# SHIFTED_COPY_BEFORE in memtui/estimator/stacks/hf_model.py); None: the release read
_TRANSFORMERS = (None, "4.45.2", "4.48.3", "4.49.0")


def _transformers_version(p: Plan) -> str | None:
    have = p.versions.transformers
    return None if have is None else have.version


def _with_transformers(p: Plan, version: str | None) -> Plan:
    given = None if version is None else {"version": version, "source": "the dashboard"}
    versions = Versions.model_validate({**p.versions.model_dump(), "transformers": given})
    return _validated(p, {"versions": versions})


def _transformers_text(p: Plan) -> str:
    have = p.versions.transformers
    return "current" if have is None else have.version


def _model_text(p: Plan) -> str:
    return f"{p.model.name} ({format_count(p.model.parameters)})"


_LAID_OUT: tuple[Setting, ...] = (
    # rows written out: a combined row, or one whose steps depend on the model, a preset
    # list or a ladder of its own, or that changes another field with it; `_row` the others
    Setting("model", _label("model"), _model_text, None, ("model",)),
    _listed(
        "stack",
        _label("stack"),
        lambda p: p.stack.value,
        lambda p: list(StackName),
        lambda p: p.stack,
        _with_stack,
    ),
    _hardware_int("gpus_per_node"),
    _hardware_int("nodes"),
    _listed(
        "gpu",
        "GPU",
        lambda p: p.hardware.gpu_name,
        lambda p: list(_CARDS),
        lambda p: p.hardware.gpu_name if p.hardware.gpu_name in _CARDS else None,
        _with_card,
        ("hardware.gpu_name", "hardware.gpu_memory", "hardware.compute_capability"),
    ),
    _link_setting("intra_node_bandwidth", INTRA_NODE),
    _link_setting("inter_node_bandwidth", INTER_NODE),
    _row("method"),
    _row("lora_rank"),
    _listed(
        "lora_targets",
        _label("lora_targets"),
        lambda p: ",".join(p.lora_targets),
        _target_options,
        lambda p: p.lora_targets,
        lambda p, v: _validated(p, {"lora_targets": v}),
    ),
    _ladder_setting(
        "lora_fraction",
        (None, 0.005, 0.01, 0.025, 0.05, 0.1),
        lambda v: "from rank" if v is None else f"{v:.1%}",
        _number,
    ),
    _ladder_setting("lora_dropout", (0.0, 0.05, 0.1), lambda v: f"{v:g}", _number),
    _listed(
        "modules_to_save",
        _label("modules_to_save"),
        lambda p: ",".join(p.modules_to_save) or "none",
        _saved_module_options,
        lambda p: p.modules_to_save,
        lambda p, v: _validated(p, {"modules_to_save": v}),
    ),
    _row("qlora_double_quant"),
    _row("qlora_upcast"),
    _row("qlora_keeps_inputs"),
    _row("precision"),
    _row("fp32_grad_buffer"),
    _row("optimizer"),
    _row("optimizer_state_dtype"),
    _row("optimizer_kernel"),
    _row("optimizer_block_size"),
    _row("strategy"),
    _row("offload"),
    _row("reduce_dtype"),
    _row("micro_batch"),
    _row("seq_len"),
    _row("grad_accum"),
    _row("attention"),
    _row("checkpointing"),
    _row("checkpoint_variant"),
    Setting(
        "activation_offload",
        _label("activation_offload"),
        lambda p: "on" if p.activation_offload else "off",
        _offload_step,
    ),
    _row("loss"),
    _row("optimizer_in_backward"),
    _row("tp"),
    _row("tp_style"),
    _row("objective"),
    _row("ref_model"),
    _row("precompute_ref_log_probs"),
    _ladder_setting(
        "beta",
        (None, 0.0, 0.001, 0.01, 0.04, 0.1, 0.5),
        lambda v: "TRL's" if v is None else f"{v:g}",
        _number,
    ),
    _row("num_generations"),
    _row("max_prompt_length"),
    _row("max_completion_length"),
    _row("vllm_mode"),
    _ladder_setting(
        "vllm_gpu_memory_utilization",
        tuple(k / 10 for k in range(1, 10)),
        lambda v: f"{v:.0%}",
        _number,
    ),
    _row("vllm_sleep_mode"),
    Setting(
        "overhead",
        _label("overhead.enabled"),
        lambda p: "CUDA+NCCL+frag" if p.overhead.enabled else "none",
        _overhead_step,
        ("overhead.enabled",),
    ),
    _ladder_setting(
        "cuda_context",
        tuple(m * _MiB for m in (0, 256, 384, 512, 768, 1024, 1536, 2048)),
        _bytes_text,
        _size,
        overhead=True,
    ),
    _ladder_setting(
        "nccl",
        tuple(m * _MiB for m in (0, 256, 512, 1024, 2048, 4096)),
        _bytes_text,
        _size,
        overhead=True,
    ),
    _ladder_setting(
        "fragmentation",
        (0.0, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2),
        lambda v: f"{v:.0%}",
        _number,
        overhead=True,
    ),
    _row("expandable_segments"),
    _ladder_setting(
        "expandable_fragmentation",
        (0.0, 0.01, 0.02, 0.05),
        lambda v: f"{v:.0%}",
        _number,
        overhead=True,
    ),
    _listed(
        "deepspeed",
        "ZeRO buckets",
        _deepspeed_text,
        lambda p: _DEEPSPEED_OPTIONS,
        lambda p: p.deepspeed,
        lambda p, v: _validated(p, {"deepspeed": v}),
    ),
    _listed(
        "versions",
        "Transformers",
        _transformers_text,
        lambda p: _TRANSFORMERS,
        _transformers_version,
        _with_transformers,
    ),
)
_PLACED = {name for setting in _LAID_OUT for name in setting.edits}
SETTINGS: tuple[Setting, ...] = (
    *_LAID_OUT,
    *(_row(name) for name, _, knob in knobs(Plan) if knob.label and name not in _PLACED),
)
"""The panel's rows in order: those laid out above, then one for each other field whose
Knob names a row label (a new plan setting's row comes last until it is placed)."""
BY_KEY = {s.key: s for s in SETTINGS}


def with_model(plan: Plan, model: ModelSpec) -> Plan:
    """The plan with another model, validated as `plan_from_args` does (e.g. LoRA targets that
    name no module of the new model); raises PlanEditError with one line."""
    try:
        return plan.evolve(model=model)
    except (ValidationError, ValueError) as err:
        raise PlanEditError(one_line(err)) from None


def step(plan: Plan, key: str, direction: int = 1) -> Plan:
    """The plan with setting `key` moved one step (+1 or -1); raises PlanEditError."""
    setting = BY_KEY[key]
    if setting.step is None:
        raise PlanEditError(f"{setting.label} is chosen with the model picker")
    return setting.step(plan, direction)


def set_typed(plan: Plan, key: str, text: str) -> Plan:
    """The plan with number row `key` set to the value typed; raises PlanEditError (one line:
    not a number, or what the Plan says about the value)."""
    setting = BY_KEY[key]
    if setting.typed is None:
        raise PlanEditError(f"{setting.label} is not a number row: step it with ←/→")
    return setting.typed(plan, text)


def position(setting: Setting, plan: Plan) -> tuple[int, int] | None:
    """Where the plan's value is in a listed row (1-based, and the list's length); None for a
    row that is not a list, or a value that is not in it (a flag's, NVML's card name)."""
    if setting.listed is None:
        return None
    options, current = setting.listed(plan)
    if current not in options:
        return None
    return list(options).index(current) + 1, len(options)


def wrap_note(key: str, before: Plan, after: Plan, direction: int) -> str | None:
    """What to say when a step went round the end of its list: past the last value back to the
    first (forward), or before the first round to the last (backward); None otherwise."""
    setting = BY_KEY[key]
    old, new = position(setting, before), position(setting, after)
    if old is None or new is None:
        return None
    value = setting.show(after)
    if direction > 0 and new[0] < old[0]:
        return f"{setting.label}: past the last of {new[1]}, back to the first ({value})"
    if direction < 0 and new[0] > old[0]:
        return f"{setting.label}: before the first, round to the last of {new[1]} ({value})"
    return None


@dataclass
class PlanHistory:
    """The what-if plan's edits, for undo, redo and reset, and whether it changed since it was
    loaded or last saved (the quit key asks to save then). Pure: the screen adopts the plans it
    returns."""

    start: Plan
    """The plan reset goes back to: the one the dashboard started with."""
    saved: Plan
    """The plan as last written (or as started): a plan equal to it has nothing to save."""
    limit: int = 200
    """Edits kept for undo (the oldest are dropped)."""
    _undo: list[Plan] = field(default_factory=list)
    _redo: list[Plan] = field(default_factory=list)

    @classmethod
    def starting(cls, plan: Plan) -> PlanHistory:
        """A history with `plan` as the start and the saved state, and no edits."""
        return cls(start=plan, saved=plan)

    def record(self, before: Plan) -> None:
        """An edit replaced `before`: undo can bring it back; what was undone is gone."""
        self._undo.append(before)
        del self._undo[: -self.limit]
        self._redo.clear()

    def undo(self, current: Plan) -> Plan | None:
        """The plan before the last edit (None: nothing to undo)."""
        if not self._undo:
            return None
        self._redo.append(current)
        return self._undo.pop()

    def redo(self, current: Plan) -> Plan | None:
        """The plan the last undo took back (None: nothing to redo)."""
        if not self._redo:
            return None
        self._undo.append(current)
        return self._redo.pop()

    def follow(self, before: Plan, after: Plan) -> None:
        """A change nobody typed (the plan sized to the GPUs found): the start and the saved
        state follow it when they were `before`, so it is neither undone nor asked about."""
        if self.start == before:
            self.start = after
        if self.saved == before:
            self.saved = after

    def changed(self, current: Plan) -> bool:
        """True when `current` differs from the plan loaded or last saved."""
        return current != self.saved
