"""Measure a real PyTorch training step and hold the estimator to it (`memtui measure`).

Measuring needs torch, transformers and peft (the `memtui[measure]` extra); they load when
`measure()` runs, never on import, so the comparison and its output stay torch-free (the
`measure` command imports this package lazily all the same). `measure(ref, plan)` builds the
model from the same inputs as `memtui estimate` with random initialisation (never downloads
weights), runs one training step with the plan's settings, really on CPU for small models or
under FakeTensorMode (no allocation) for full-size ones, and returns predicted beside measured
bytes for every term of the estimator.

With `--stack trainer` or `--stack fsdp2` the step is not memtui's: it runs through the stack
itself (a real `transformers.Trainer`, PEFT's default LoRA, FSDP2 through accelerate over CPU
processes; memtui/measure/trainer.py, fsdp2.py), always for real on CPU, and is compared with
the estimate of the same stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memtui.estimator.choices import Objective, Optimizer, Precision, StackName, StateDtype
from memtui.estimator.plan import Plan
from memtui.measure.compare import Row, compare, single_gpu
from memtui.measure.measurement import Measurement, Unsupported

# Below this many parameters a real CPU step is quick (seconds); above it, FakeTensorMode.
REAL_STEP_MAX_PARAMETERS = 300_000_000

NOT_MEASURED = {
    StackName.deepspeed: "DeepSpeed's ZeRO optimizers build CUDA extensions (FusedAdam) and "
    "DeepSpeed is not in the measure extra",
    StackName.fsdp1: "FSDP1 through accelerate is not run here (accelerate enables FSDP only on "
    "accelerator devices; memtui promotes FSDP2 alone)",
    StackName.torchtune: "torchtune is not installed (its recipes need a CUDA device)",
    StackName.litgpt: "LitGPT is not installed",
}
"""Stacks `memtui measure` cannot run through on CPU, and why; benchmarks/cuda_check.py
measures them on a GPU instead."""
MEASURED_STACKS = (StackName.trainer, StackName.fsdp2)
"""Stacks with a CPU runner (memtui/measure/trainer.py, memtui/measure/fsdp2.py); any other
stack but generic is refused, with its NOT_MEASURED reason when it has one."""


@dataclass
class Result:
    """A measured step beside the estimate of the same plan."""

    plan: Plan
    measurement: Measurement
    rows: list[Row]
    notes: list[str] = field(default_factory=list)


def as_torch_runs(plan: Plan) -> tuple[Plan, list[str]]:
    """The plan as PyTorch runs it, with a note for each setting that had to change."""
    notes = []
    keeps_param_dtype = plan.optimizer in (Optimizer.adamw, Optimizer.sgd_momentum)
    if (
        plan.precision is Precision.bf16
        and keeps_param_dtype
        and plan.optimizer_state_dtype is StateDtype.fp32
    ):
        plan = plan.evolve(optimizer_state_dtype=StateDtype.bf16)
        notes.append(
            "pure bf16: torch.optim keeps optimizer state in the parameter dtype, so the "
            "estimate uses --optimizer-state-dtype bf16"
        )
    return plan, notes


def measure(
    ref: str, plan: Plan, *, fake: bool | None = None, config: dict[str, Any] | None = None
) -> Result:
    """Measure one training step of `plan` on the model `ref` (catalog id, config.json,
    folder, cached repo id), or of `config` (a config.json object) when given.

    `fake` None picks a real CPU step below REAL_STEP_MAX_PARAMETERS, FakeTensorMode above.
    """
    if plan.stack is not StackName.generic:
        return _measure_stack(ref, plan, fake, config)
    plan, notes = as_torch_runs(plan)
    if plan.hardware.gpus > 1 or plan.tp > 1:
        notes.append(
            f"the plan's {plan.strategy.value} over {plan.hardware.gpus} GPUs is measured and "
            "estimated as one process (one GPU, unsharded); sharding divides the static terms "
            "as `memtui estimate` shows"
        )
    if fake is None:
        fake = plan.model.parameters > REAL_STEP_MAX_PARAMETERS
    from memtui.measure.step import measure_step  # torch loads here

    if config is None:
        config = _config_of(ref)
    m = measure_step(config, plan, fake=fake)
    return Result(plan, m, compare(plan, m), notes + m.notes)


def _measure_stack(
    ref: str, plan: Plan, fake: bool | None, config: dict[str, Any] | None
) -> Result:
    """A real step through the plan's stack (trainer on one process, fsdp2 on two)."""
    if plan.stack not in MEASURED_STACKS:
        why = NOT_MEASURED.get(plan.stack, "memtui has no CPU runner for it")
        raise Unsupported(f"--stack {plan.stack.value} is not measured on CPU: {why}")
    if fake or plan.model.parameters > REAL_STEP_MAX_PARAMETERS:
        raise Unsupported(
            f"--stack {plan.stack.value} runs a real step through the stack on CPU: a model "
            f"under {REAL_STEP_MAX_PARAMETERS / 1e6:.0f}M parameters (--fake measures the "
            "generic step)"
        )
    if config is None:
        config = _config_of(ref)
    notes = []
    if plan.stack is StackName.trainer and plan.objective is not Objective.sft:
        from memtui.measure.trl_step import measure_trl

        plan, m = measure_trl(config, plan)
        notes.append(
            "a TRL 1.16 trainer step"
            + (
                "; estimated with its fused LM head (--loss fused)"
                if plan.loss.value == "fused"
                else ""
            )
        )
    elif plan.stack is StackName.trainer:
        from memtui.measure.trainer import measure_trainer  # torch loads here

        if plan.hardware.gpus > 1:
            notes.append(
                f"DDP over {plan.hardware.gpus} GPUs is measured and estimated as one process"
            )
        m = measure_trainer(config, plan)
    else:
        from memtui.measure.fsdp2 import WORLD_SIZE, measure_fsdp2

        if plan.hardware.gpus != WORLD_SIZE:
            notes.append(
                f"FSDP2 is measured over {WORLD_SIZE} CPU processes and estimated for "
                f"{WORLD_SIZE} GPUs, not {plan.hardware.gpus}"
            )
        m = measure_fsdp2(config, plan)
    return Result(plan, m, compare(plan, m), notes + m.notes)


def _config_of(ref: str) -> dict[str, Any]:
    """The config.json object behind a `--model` reference: what the real model is built from."""
    from memtui.estimator.configs import ModelConfigError
    from memtui.estimator.model_source import resolve_model

    config = resolve_model(ref).config
    if config is None:
        raise ModelConfigError(f"{ref!r} is a bare parameter count: there is no model to build")
    return dict(config)


__all__ = [
    "REAL_STEP_MAX_PARAMETERS",
    "Measurement",
    "Result",
    "Row",
    "Unsupported",
    "as_torch_runs",
    "compare",
    "measure",
    "single_gpu",
]
