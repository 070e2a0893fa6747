"""Build a randomly initialised Hugging Face model for a plan: never downloads weights.

The config dict comes from the same inputs as `memtui estimate` (a catalog entry's config.json
subset, a config.json path, a model folder, a repo id in the local cache); transformers builds
the module tree from it (`AutoModelForCausalLM.from_config`), PEFT adds LoRA adapters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from memtui.estimator.plan import Attention, Checkpointing, Method, Plan, Precision
from memtui.estimator.stacks.hf_model import reentrant
from memtui.estimator.versions import release

SELECTIVE = "memtui_selective"
ATTENTION_DROPOUT_KEYS = ("attn_pdrop", "attention_dropout", "attention_probs_dropout_prob")


def installed_release(package: str) -> tuple[int, ...]:
    """The release of `package` that runs the step: its distribution's metadata, found as
    imports find it (importlib.metadata searches sys.path in order, so a PYTHONPATH folder of
    older releases shadows the environment's for both)."""
    from importlib import metadata

    return release(metadata.version(package))


def dtype_of(precision: Precision) -> torch.dtype:
    """Parameter and activation dtype: bf16 for both bf16 modes (fp32 master kept apart)."""
    return torch.float32 if precision is Precision.fp32 else torch.bfloat16


def _register_selective(base: str) -> str:
    """An attention function that recomputes the attention core in backward (Korthikanti et
    al. 2022 sec. 5, selective recomputation), registered with transformers' AttentionInterface."""
    from torch.utils.checkpoint import checkpoint
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    inner = ALL_ATTENTION_FUNCTIONS[base] if base != "eager" else None
    name = f"{SELECTIVE}_{base}"

    def attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kw: Any):
        fn = inner
        if fn is None:  # the model family's own eager function
            import sys

            fn = sys.modules[type(module).__module__].eager_attention_forward
        return checkpoint(fn, module, query, key, value, attention_mask, use_reentrant=False, **kw)

    AttentionInterface.register(name, attention)
    return name


def hf_model(
    config: dict[str, Any],
    plan: Plan,
    dtype: torch.dtype,
    attn: str | None = None,
    score_labels: int = 0,
) -> torch.nn.Module:
    """The transformers model of `config`, random init, in `dtype`, in training mode, with
    SDPA for `--attention flash` and the eager attention otherwise (or `attn`); with
    `score_labels`, the sequence-classification model of that many labels (its pad token 0,
    which it needs to find each sequence's last token)."""
    from transformers import (
        AutoConfig,
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
    )
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # config notices about random-init toy vocabularies

    cfg = dict(config)
    model_type = cfg.pop("model_type")
    cfg.pop("architectures", None)
    cfg.pop("torch_dtype", None)
    cfg.pop("dtype", None)
    if plan.attention is Attention.flash:
        # CUDA's flash kernel applies attention dropout with an RNG state and keeps nothing
        # more; CPU's SDPA would fall back to the math kernel (s x s tensors). Same bytes as
        # CUDA without it.
        cfg.update(dict.fromkeys(ATTENTION_DROPOUT_KEYS, 0.0))
    if score_labels:
        cfg.update(num_labels=score_labels, pad_token_id=0)
    hf_config = AutoConfig.for_model(model_type, **cfg)
    hf_config.use_cache = False
    if attn is None:
        attn = "sdpa" if plan.attention is Attention.flash else "eager"
    auto = AutoModelForSequenceClassification if score_labels else AutoModelForCausalLM
    # the dtype's keyword: `torch_dtype` up to 4.55, `dtype` from 4.56.0 (modeling_utils.py
    # PreTrainedModel._from_config)
    dtype_key = "dtype" if installed_release("transformers") >= (4, 56) else "torch_dtype"
    model = auto.from_config(hf_config, attn_implementation=attn, **{dtype_key: dtype})
    model.train()
    return model  # type: ignore[no-any-return]


def build_model(config: dict[str, Any], plan: Plan, *, fake: bool = False) -> torch.nn.Module:
    """The model for `plan`, random init, in the plan's dtype, in training mode."""
    attn = "sdpa" if plan.attention is Attention.flash else "eager"
    if plan.checkpointing is Checkpointing.selective:
        attn = _register_selective(attn)
    model: Any = hf_model(config, plan, dtype_of(plan.precision), attn)
    if plan.checkpointing is Checkpointing.full:
        # the variant the plan's loop and versions run (reentrant: torch's CheckpointFunction)
        kwargs = {"use_reentrant": reentrant(plan)}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if plan.method is Method.lora:
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=plan.lora_rank,
            lora_alpha=2 * plan.lora_rank,
            lora_dropout=0.0,
            target_modules=lora_targets(plan),
        )
        with _adapters_in(dtype_of(plan.precision), fake):
            # Adapters in the model dtype: the fp32 master copy is kept by memtui's step, as
            # the estimator counts it (PEFT's default would make the adapters fp32 instead).
            # (PEFT before 0.12 has no autocast_adapter_dtype: it keeps the base's dtype)
            keep: dict[str, Any] = {}
            if installed_release("peft") >= (0, 12):
                keep["autocast_adapter_dtype"] = False
            model = get_peft_model(model, lora, **keep)
        if plan.checkpointing is Checkpointing.full:
            model.enable_input_require_grads()
        model.train()
    return model


@contextlib.contextmanager
def _adapters_in(dtype: torch.dtype, fake: bool) -> Iterator[None]:
    """Create PEFT's adapters directly in `dtype`. Under FakeTensorMode also skip PEFT's
    `.to(device, dtype)` calls that change nothing: nn.Module._apply must swap fake
    parameters and cannot (`_apply(): Couldn't swap Linear.weight`)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    original = torch.nn.Module.to

    def to(self: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.nn.Module:
        device, want, _, _ = torch._C._nn._parse_to(*args, **kwargs)
        tensors = [*self.parameters(), *self.buffers()]
        if all(
            (device is None or t.device == torch.device(device))
            and (want is None or not t.is_floating_point() or t.dtype == want)
            for t in tensors
        ):
            return self
        return original(self, *args, **kwargs)

    if fake:
        torch.nn.Module.to = to  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        torch.set_default_dtype(previous)
        torch.nn.Module.to = original  # type: ignore[method-assign]


def lora_targets(plan: Plan) -> list[str]:
    """The module names PEFT adapts for the plan's `--lora-targets`."""
    layers = plan.model.architecture.lora_layers(plan.lora_targets, plan.expert_adapters)
    return sorted({lin.name for lin in layers})
