"""A real step through Transformers' Trainer on CPU (`memtui measure --stack trainer`).

The estimator is held to code nobody here wrote: `transformers.Trainer.train()` runs with real
`TrainingArguments` and, for LoRA, `peft.get_peft_model` with a `LoraConfig` left at PEFT's
defaults, both told only what the plan says. What the plan maps to (nothing else is set):
- precision bf16: the model loaded in bf16, `bf16=True`; bf16-autocast: loaded in fp32 (no
  dtype), `bf16=True`; fp32: loaded in fp32, `bf16=False`. On CPU accelerate runs the same
  `torch.autocast` it runs on CUDA (accelerator.py Accelerator.prepare_model,
  utils/modeling.py get_mixed_precision_context_manager with the CPU device type).
- `activation_checkpointing` for `--checkpointing full` (Trainer has no selective mode),
  `per_device_train_batch_size` = micro-batch, `optim` left at its default
  (adamw_torch_fused) for adamw, "sgd" (momentum=0.9 through optim_args) or "adafactor".
- LoRA: `LoraConfig(r, lora_dropout, target_modules)`, target_modules None (PEFT's own
  per-architecture default) when the plan's targets are that default, lora_alpha and every
  other field at PEFT's default, `autocast_adapter_dtype` at its default True.
Not chosen by the plan and not to memtui's liking either: report_to none, no saving, no
logging, no evaluation, `use_cpu`. Trainer runs two optimizer steps of two accumulated
micro-batches each; the last micro-batch (gradients already allocated, as in every
accumulation micro-batch but the first) and the optimizer step after it are measured through
a subclass that only tells the probe where Trainer's own phases meet.

CPU is not CUDA in a few places a check on a GPU must confirm (benchmarks/cuda_check.py):
- Dropout: CPU's composite `dropout` keeps a mask in the activation dtype, CUDA's fused kernel
  a 1-byte bool mask (aten/src/ATen/native/Dropout.cpp `dropout` takes `native_dropout` only on
  CUDA-like devices); the step routes F.dropout to `native_dropout`, CUDA's kernel, whose CPU
  implementation keeps the same bool mask.
- SDPA with attention dropout falls back to the math kernel on CPU; the flash rows run without
  attention dropout (CUDA's flash kernel keeps only its RNG state for it).
- Autocast's CPU op lists differ from CUDA's in a few ops (torch/amp autocast lists); matmuls,
  which decide the copies and the saved widths, are bf16 on both.
- LayerNorm keeps its statistics in the activation dtype on CPU, fp32 on CUDA.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import tempfile
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from memtui.estimator.choices import (
    Checkpointing,
    CheckpointVariant,
    LossKind,
    Method,
    Optimizer,
    Precision,
)
from memtui.estimator.plan import Plan
from memtui.estimator.stacks.hf_model import reentrant
from memtui.measure.build import hf_model, lora_targets
from memtui.measure.measurement import Measurement, Unsupported
from memtui.measure.probe import StepProbe

ON_CPU = True
"""TrainingArguments.use_cpu of every measured step (benchmarks/cuda_check.py turns it off
to run the same TRL steps on a GPU)."""
#: gradient accumulation steps and optimizer steps Trainer runs; the last micro-batch of the
#: last step is measured (the first step creates the optimizer state)
ACCUMULATION, STEPS = 2, 2

_OPTIM = {
    Optimizer.sgd: ("sgd", None),
    Optimizer.sgd_momentum: ("sgd", "momentum=0.9"),
    Optimizer.adafactor: ("adafactor", None),
}


def check_trainer_plan(plan: Plan) -> None:
    """Raise Unsupported (one line) for what this Trainer step cannot run on CPU."""
    if plan.method is Method.qlora:
        raise Unsupported("QLoRA needs bitsandbytes on CUDA; measure --method lora instead")
    if plan.checkpointing is Checkpointing.selective:
        raise Unsupported("Trainer has no selective recomputation: --checkpointing none or full")
    if plan.precision is Precision.bf16_mixed:
        raise Unsupported(
            "Trainer keeps no fp32 master copy: --precision bf16, bf16-autocast or fp32"
        )
    if plan.loss is not LossKind.full:
        raise Unsupported("the fused loss needs Liger's Triton kernels (CUDA): --loss full")
    if plan.activation_offload:
        raise Unsupported("activation offloading moves tensors to CPU RAM: nothing to see on CPU")
    if plan.optimizer is not Optimizer.adamw and plan.optimizer not in _OPTIM:
        raise Unsupported(
            f"--optimizer {plan.optimizer.value} needs bitsandbytes or a Lion package on CUDA; "
            "measure adamw, sgd, sgd-momentum or adafactor"
        )
    if plan.tp > 1:
        raise Unsupported("tensor parallelism is not measured (one process, --tp 1)")


def model_dtype(plan: Plan) -> torch.dtype:
    """The dtype the model is loaded in: bf16 for `bf16`, fp32 (no dtype) otherwise."""
    return torch.bfloat16 if plan.precision is Precision.bf16 else torch.float32


def peft_targets(plan: Plan, model_type: str) -> list[str] | str | None:
    """LoraConfig.target_modules for the plan: "all-linear" as PEFT spells it, None when the
    plan names PEFT's own default for this architecture (utils/constants.py
    TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING), else the module names."""
    if plan.lora_targets == ("all-linear",):
        return "all-linear"
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING

    names = lora_targets(plan)
    default = TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING.get(model_type)
    if default is not None and sorted(default) == sorted(names):
        return None
    return names


def lora_config(plan: Plan, model_type: str) -> Any:
    """A LoraConfig with PEFT's defaults but for what the plan sets."""
    from peft import LoraConfig

    return LoraConfig(
        r=plan.lora_rank,
        lora_dropout=plan.lora_dropout,
        target_modules=peft_targets(plan, model_type),
        modules_to_save=list(plan.modules_to_save) or None,
    )


def lora_model(model: torch.nn.Module, plan: Plan, model_type: str) -> torch.nn.Module:
    """`get_peft_model` with PEFT's defaults but for what the plan sets."""
    from peft import get_peft_model

    return get_peft_model(model, lora_config(plan, model_type))  # type: ignore[no-any-return]


def training_arguments(
    plan: Plan,
    output_dir: str,
    bf16: bool,
    accumulation: int,
    config_class: type | None = None,
    **extra: Any,
) -> Any:
    """Real TrainingArguments (or `config_class`, a TRL config deriving from them) for the
    plan, every other field at its default."""
    from transformers import TrainingArguments

    cls = config_class or TrainingArguments
    kwargs: dict[str, Any] = {}
    if plan.optimizer in _OPTIM:
        kwargs["optim"], args = _OPTIM[plan.optimizer]
        if args:
            kwargs["optim_args"] = args
    # the names the installed release has (training_args.py TrainingArguments):
    # `gradient_checkpointing` in 4.x (a deprecated alias of `activation_checkpointing` in
    # 5.24), `evaluation_strategy` in 4.39 (`eval_strategy` in 4.48 and 5.24)
    names = {f.name for f in dataclasses.fields(cls)}
    checkpointing = (
        "activation_checkpointing"
        if "activation_checkpointing" in names
        else "gradient_checkpointing"
    )
    evaluation = "eval_strategy" if "eval_strategy" in names else "evaluation_strategy"
    kwargs[checkpointing] = plan.checkpointing is Checkpointing.full
    if kwargs[checkpointing] and plan.checkpoint_variant is not CheckpointVariant.auto:
        # `gradient_checkpointing_kwargs` from 4.35 (`activation_checkpointing_kwargs` in
        # 5.24); auto leaves the release's own default, which the estimate follows
        kwargs[f"{checkpointing}_kwargs"] = {"use_reentrant": reentrant(plan)}
    kwargs[evaluation] = "no"
    return cls(
        output_dir=output_dir,
        bf16=bf16,
        per_device_train_batch_size=plan.micro_batch,
        gradient_accumulation_steps=accumulation,
        max_steps=STEPS,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        use_cpu=ON_CPU,
        dataloader_num_workers=0,
        **kwargs,
        **extra,
    )


def dataset(plan: Plan, vocab: int, samples: int) -> list[dict[str, torch.Tensor]]:
    """Random token sequences of the plan's length, labelled as a causal-LM collator does
    (labels = a copy of input_ids: DataCollatorForLanguageModeling(mlm=False))."""
    out = []
    for _ in range(samples):
        ids = torch.randint(0, vocab, (plan.seq_len,))
        out.append({"input_ids": ids, "labels": ids.clone()})
    return out


def measured_trainer(base: type, probe: StepProbe, measured_call: int) -> type:
    """A subclass of `base` (Trainer) that tells `probe` where Trainer's phases meet on its
    `measured_call`-th micro-batch; what Trainer does is unchanged."""

    def after_step(*_: Any) -> None:
        if not probe.done:
            probe.after_step()

    class Measured(base):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._calls = 0
            self._measuring = False

        def training_step(self, model: Any, inputs: Any, *rest: Any) -> Any:
            # *rest: num_items_in_batch from 4.46 (trainer.py Trainer.training_step)
            self._calls += 1
            self._measuring = self._calls == measured_call
            self._model = model
            loss = super().training_step(model, inputs, *rest)
            if self._measuring:
                probe.after_backward()
            return loss

        def _prepare_inputs(self, inputs: Any) -> Any:
            # Trainer.training_step's first call: the batch as the model reads it (GRPOTrainer
            # generates or takes its buffered completions here, before the measured forward)
            prepared = super()._prepare_inputs(inputs)
            if self._measuring and probe.tracker is None:
                probe.start(self._model, self.optimizer, prepared, self._known())
                probe.adopt_buffered(self)
                # the measured step ends when the optimizer's step returns: torch's own hook
                # (optim/optimizer.py register_step_post_hook), as every release of Trainer
                # steps it (4.39 has no on_optimizer_step callback)
                inner: Any = getattr(self.optimizer, "optimizer", self.optimizer)
                inner.register_step_post_hook(after_step)
            return prepared

        def compute_loss(self, *args: Any, **kwargs: Any) -> Any:
            out = super().compute_loss(*args, **kwargs)
            if self._measuring:
                probe.after_forward()
            return out

        def _known(self) -> list[torch.Tensor]:
            """Trainer's own running tensors (the loss it accumulates for logging) and the
            weights of the other models a TRL trainer keeps (DPOTrainer.ref_model): their
            slices and transposes in the forward are views of weights loaded before the
            step, not allocations of it."""
            tr_loss = getattr(self, "_tr_loss", None)
            known = [tr_loss] if isinstance(tr_loss, torch.Tensor) else []
            other = getattr(self, "ref_model", None)
            if isinstance(other, torch.nn.Module):
                known += [*other.parameters(), *other.buffers()]
            return known

    return Measured


def run_trainer(
    model: torch.nn.Module,
    plan: Plan,
    vocab: int,
    probe: StepProbe,
    *,
    base: type | None = None,
    bf16: bool,
    accumulation: int = ACCUMULATION,
    config_class: type | None = None,
    data: Any = None,
    trainer_kwargs: dict[str, Any] | None = None,
    **extra_args: Any,
) -> Any:
    """Train `model` with a real Trainer (or `base`, a subclass, configured by
    `config_class` on `data` with `trainer_kwargs`: a TRL trainer) for STEPS optimizer steps
    of `accumulation` micro-batches, measuring the last micro-batch and step; returns it."""
    from transformers import Trainer

    samples = plan.micro_batch * accumulation * STEPS
    with _environment_restored(), tempfile.TemporaryDirectory() as out:
        args = training_arguments(plan, out, bf16, accumulation, config_class, **extra_args)
        cls = measured_trainer(base or Trainer, probe, measured_call=accumulation * STEPS)
        trainer = cls(
            model=model,
            args=args,
            train_dataset=dataset(plan, vocab, samples) if data is None else data,
            **(trainer_kwargs or {}),
        )
        trainer.train()
    return trainer


def measure_trainer(config: dict[str, Any], plan: Plan) -> Measurement:
    """One real Trainer step of the model of `config` for `plan`, measured on CPU."""
    from memtui.measure.step import native_dropout

    check_trainer_plan(plan)
    with native_dropout(), torch.random.fork_rng(), _quiet():
        torch.manual_seed(0)
        model: Any = hf_model(config, plan, model_dtype(plan))
        if plan.method is Method.lora:
            model = lora_model(model, plan, config["model_type"])
            if plan.checkpointing is Checkpointing.full and reentrant(plan):
                # the reentrant rebuild needs an input that requires grad, or the frozen
                # base's loss has no grad_fn (4.39-4.57 Trainer: the step fails): what PEFT's
                # PeftModel._prepare_model_for_gradient_checkpointing and
                # prepare_model_for_kbit_training call (peft utils/other.py)
                model.enable_input_require_grads()
        vocab = int(model.get_output_embeddings().weight.shape[0])
        autocast = plan.precision is not Precision.fp32
        probe = StepProbe(vocab, plan.micro_batch, plan.seq_len, autocast_copies=autocast)
        run_trainer(model, plan, vocab, probe, bf16=autocast)
    return probe.measurement()


@contextlib.contextmanager
def _environment_restored() -> Iterator[None]:
    """os.environ as it was before the block, whatever the block wrote: TrainingArguments
    and accelerate write process-wide variables that later rows would inherit. transformers
    4.48 training_args.py TrainingArguments.__post_init__ sets
    `os.environ["ACCELERATE_MIXED_PRECISION"]` from bf16/fp16 (so an fp32 row run after a
    bf16 one got accelerate's autocast), and ACCELERATE_USE_FSDP / ACCELERATE_USE_DEEPSPEED /
    ACCELERATE_DYNAMO_* with FSDP, DeepSpeed or torch_compile; accelerate state.py
    PartialState writes RANK, WORLD_SIZE, LOCAL_RANK, MASTER_PORT and the like. The whole
    mapping is restored, so a variable a release adds is covered too."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        for key in set(os.environ) - set(saved):
            del os.environ[key]
        for key, value in saved.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Trainer's notices, deprecation warnings and closing metrics line off (the command's
    output is the comparison)."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        warnings.simplefilter("ignore", FutureWarning)
        yield
