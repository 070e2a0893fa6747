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
from dataclasses import dataclass
from enum import Enum
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
from memtui.estimator.units import format_count
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
    """The next value (wrapping) that makes a valid plan."""
    start = values.index(current) if current in values else -1
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


def _enum_setting(key: str, label: str, enum: type[Enum]) -> Setting:
    values = list(enum)
    return Setting(
        key,
        label,
        lambda p: str(getattr(p, key).value),
        lambda p, d: _cycle(values, getattr(p, key), d, lambda v: _validated(p, {key: v})),
    )


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

    return Setting(key, label, lambda p: f"{getattr(p, key):,}", step)


def _toggle(key: str, label: str) -> Setting:
    def step(p: Plan, d: int) -> Plan:
        try:
            return _validated(p, {key: not getattr(p, key)})
        except (ValidationError, ValueError) as err:
            raise PlanEditError(one_line(err)) from None

    return Setting(key, label, lambda p: "on" if getattr(p, key) else "off", step)


def _gpu_step(p: Plan, d: int) -> Plan:
    cards = list(GPUS.values())
    names = [c.name for c in cards]
    current = p.hardware.gpu_name if p.hardware.gpu_name in names else None

    def build(name: str) -> Plan:
        card = cards[names.index(name)]
        return _with_hardware(
            p,
            gpu_name=card.name,
            gpu_memory=card.memory,
            intra_node_bandwidth=INTRA_NODE[card.intra_node],
            compute_capability=card.compute_capability,
        )

    return _cycle(names, current, d, build)


def _link_setting(key: str, presets: dict[str, float]) -> Setting:
    names = list(presets)

    def show(p: Plan) -> str:
        value = getattr(p.hardware, key)
        name = next((n for n, v in presets.items() if v == value), None)
        return name or f"{value / 1e9:g} GB/s"

    def step(p: Plan, d: int) -> Plan:
        name = next((n for n, v in presets.items() if v == getattr(p.hardware, key)), None)
        return _cycle(names, name, d, lambda n: _with_hardware(p, **{key: presets[n]}))

    return Setting(key, _label(f"hardware.{key}"), show, step, (f"hardware.{key}",))


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

    return Setting(key, label, lambda p: str(getattr(p.hardware, key)), step, (f"hardware.{key}",))


def _targets_step(p: Plan, d: int) -> Plan:
    """PEFT's shorthands, then all-linear with adapters on lm_head, and on the embedding too
    (by this model's module names: LoRA on the vocabulary modules)."""
    embed, head = (lin.name for lin in p.model.architecture.vocabulary_modules)
    options = [("all-linear",), ("attention",), ("all-linear", head), ("all-linear", embed, head)]
    return _cycle(options, p.lora_targets, d, lambda v: _validated(p, {"lora_targets": v}))


def _overhead_step(p: Plan, d: int) -> Plan:
    return p.evolve(overhead={"enabled": not p.overhead.enabled})


def _ladder_setting(
    key: str,
    values: Sequence[Any],
    show: Callable[[Any], str],
    overhead: bool = False,
) -> Setting:
    """A setting stepped along a fixed list of values (no wrap); `overhead`: a field of
    `plan.overhead` rather than of the plan."""

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

    return Setting(key, label, lambda p: show(get(p)), step, fields)


def _offload_step(p: Plan, d: int) -> Plan:
    """Activation offloading on or off; on with full checkpointing, which it needs."""
    if p.activation_offload:
        return _validated(p, {"activation_offload": False})
    try:
        return _validated(p, {"activation_offload": True, "checkpointing": Checkpointing.full})
    except (ValidationError, ValueError) as err:
        raise PlanEditError(one_line(err)) from None


def _stack_step(p: Plan, d: int) -> Plan:
    """The next stack, with the strategy, precision and loss it runs where the plan's are
    not among them (a plan on bf16-mixed still reaches the Trainer stack)."""

    def build(name: StackName) -> Plan:
        return merge(p, [PlanLayer("the stack row", {"stack": name})]).plan

    return _cycle(list(StackName), p.stack, d, build)


def _saved_modules_step(p: Plan, d: int) -> Plan:
    """None, lm_head, or the embedding and lm_head, by this model's module names."""
    embed, head = (lin.name for lin in p.model.architecture.vocabulary_modules)
    options: list[tuple[str, ...]] = [(), (head,), (embed, head)]
    return _cycle(options, p.modules_to_save, d, lambda v: _validated(p, {"modules_to_save": v}))


def _deepspeed_step(p: Plan, d: int) -> Plan:
    """Transformers' "auto" bucket sizes, or DeepSpeed's own defaults (zero/config.py)."""
    own = DeepSpeedSettings(
        reduce_bucket_size=500_000_000,
        prefetch_bucket_size=50_000_000,
        persistence_threshold=100_000,
    )
    options = [DeepSpeedSettings(), own]
    return _cycle(options, p.deepspeed, d, lambda v: _validated(p, {"deepspeed": v}))


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


def _transformers_step(p: Plan, d: int) -> Plan:
    have = p.versions.transformers
    current = None if have is None else have.version

    def build(version: str | None) -> Plan:
        given = None if version is None else {"version": version, "source": "the dashboard"}
        versions = Versions.model_validate({**p.versions.model_dump(), "transformers": given})
        return _validated(p, {"versions": versions})

    return _cycle(_TRANSFORMERS, current, d, build)


def _transformers_text(p: Plan) -> str:
    have = p.versions.transformers
    return "current" if have is None else have.version


def _model_text(p: Plan) -> str:
    return f"{p.model.name} ({format_count(p.model.parameters)})"


_LAID_OUT: tuple[Setting, ...] = (
    # rows written out: a combined row, or one whose steps depend on the model, a preset
    # list or a ladder of its own, or that changes another field with it; `_row` the others
    Setting("model", _label("model"), _model_text, None, ("model",)),
    Setting("stack", _label("stack"), lambda p: p.stack.value, _stack_step),
    _hardware_int("gpus_per_node"),
    _hardware_int("nodes"),
    Setting(
        "gpu",
        "GPU",
        lambda p: p.hardware.gpu_name,
        _gpu_step,
        ("hardware.gpu_name", "hardware.gpu_memory", "hardware.compute_capability"),
    ),
    _link_setting("intra_node_bandwidth", INTRA_NODE),
    _link_setting("inter_node_bandwidth", INTER_NODE),
    _row("method"),
    _row("lora_rank"),
    Setting(
        "lora_targets", _label("lora_targets"), lambda p: ",".join(p.lora_targets), _targets_step
    ),
    _ladder_setting(
        "lora_fraction",
        (None, 0.005, 0.01, 0.025, 0.05, 0.1),
        lambda v: "from rank" if v is None else f"{v:.1%}",
    ),
    _ladder_setting("lora_dropout", (0.0, 0.05, 0.1), lambda v: f"{v:g}"),
    Setting(
        "modules_to_save",
        _label("modules_to_save"),
        lambda p: ",".join(p.modules_to_save) or "none",
        _saved_modules_step,
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
    _row("micro_batch"),
    _row("seq_len"),
    _row("grad_accum"),
    _row("attention"),
    _row("checkpointing"),
    Setting(
        "activation_offload",
        _label("activation_offload"),
        lambda p: "on" if p.activation_offload else "off",
        _offload_step,
    ),
    _row("loss"),
    _row("optimizer_in_backward"),
    _row("tp"),
    _row("objective"),
    _row("ref_model"),
    _row("precompute_ref_log_probs"),
    _ladder_setting(
        "beta",
        (None, 0.0, 0.001, 0.01, 0.04, 0.1, 0.5),
        lambda v: "TRL's" if v is None else f"{v:g}",
    ),
    _row("num_generations"),
    _row("max_prompt_length"),
    _row("max_completion_length"),
    _row("vllm_mode"),
    _ladder_setting(
        "vllm_gpu_memory_utilization", tuple(k / 10 for k in range(1, 10)), lambda v: f"{v:.0%}"
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
        overhead=True,
    ),
    _ladder_setting(
        "nccl",
        tuple(m * _MiB for m in (0, 256, 512, 1024, 2048, 4096)),
        _bytes_text,
        overhead=True,
    ),
    _ladder_setting(
        "fragmentation",
        (0.0, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2),
        lambda v: f"{v:.0%}",
        overhead=True,
    ),
    _row("expandable_segments"),
    _ladder_setting(
        "expandable_fragmentation",
        (0.0, 0.01, 0.02, 0.05),
        lambda v: f"{v:.0%}",
        overhead=True,
    ),
    Setting("deepspeed", "ZeRO buckets", _deepspeed_text, _deepspeed_step),
    Setting("versions", "Transformers", _transformers_text, _transformers_step),
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
