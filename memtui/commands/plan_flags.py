"""The plan flags shared by `memtui estimate` and the dashboard (one parser, one meaning).

Flag names follow what DeepSpeed and FSDP users already say (zero3, fsdp, micro-batch,
grad-accum). Values are checked here and by the Plan's pydantic validators; every problem
becomes one line: what is wrong and what is allowed.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memtui.errors import UsageError, one_line

if TYPE_CHECKING:
    from memtui.estimator.plan import Plan
    from memtui.plans.imports import Imported

DEFAULT_MODEL = "meta-llama/Llama-2-7b-hf"


def _gpu_memory(text: str) -> tuple[int, str, str | None, float | None]:
    """(bytes, card name, its default interconnect, its compute capability) for a size or a
    card preset."""
    from memtui.estimator.hardware import GPUS, gpu_preset
    from memtui.estimator.units import parse_size

    preset = gpu_preset(text)
    if preset:
        return preset.memory, preset.name, preset.intra_node, preset.compute_capability
    try:
        return parse_size(text), f"{text} GPU", None, None
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{err}, or a card: {', '.join(GPUS)}") from None


def _size(text: str) -> int:
    from memtui.estimator.units import parse_size

    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _count(text: str) -> int:
    from memtui.estimator.units import parse_count

    try:
        return parse_count(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _fraction(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction; use 0.025 or 2.5%") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be between 0 and 1 (or 0% and 100%)")
    return value


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; use e.g. 0.05") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 0 and below 1")
    return value


def _names(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _bandwidth(presets: dict[str, float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        key = text.strip().lower()
        if key in presets:
            return presets[key]
        try:
            return float(key.removesuffix("gb/s")) * 1e9
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a link; use GB/s per GPU (e.g. 450) or one of: "
                f"{', '.join(presets)}"
            ) from None

    return parse


def _choices(enum: type[Any]) -> list[str]:
    return [e.value for e in enum]


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every plan flag to `parser`."""
    from memtui.estimator import hardware as hw
    from memtui.estimator.plan import (
        Attention,
        Checkpointing,
        LossKind,
        Method,
        Offload,
        Optimizer,
        OptimizerKernel,
        Precision,
        StackName,
        StateDtype,
        Strategy,
    )
    from memtui.plans.formats import FORMATS, spoken

    parser.add_argument(
        "--from",
        dest="from_files",
        nargs="+",
        metavar="FILE",
        help="read the plan from the job's own files: "
        f"{spoken([*(f.title for f in FORMATS), 'a launch script'])}; "
        "flags given as well win over them",
    )
    g = parser.add_argument_group("stack")
    g.add_argument(
        "--stack",
        choices=_choices(StackName),
        help="the software that runs the job; its own bookkeeping sizes every term "
        "(generic: memtui's model of a step). Switching stack adapts strategy, precision "
        "and loss flags not given to ones it runs",
    )
    g = parser.add_argument_group("model")
    g.add_argument(
        "--model",
        help=f"catalog id, config.json, model folder or cached repo id (default {DEFAULT_MODEL})",
    )
    g.add_argument("--params", type=_count, help="a bare parameter count instead: 13B, 13e9")
    g = parser.add_argument_group("hardware")
    g.add_argument("--gpus", type=_positive, help="GPUs per node (default 8)")
    g.add_argument("--nodes", type=_positive, help="nodes (default 1)")
    g.add_argument(
        "--gpu-memory",
        type=_gpu_memory,
        metavar="SIZE|CARD",
        help="memory per GPU: 80GB, 80GiB, 81559MiB or a card (h100-sxm, a100-80gb...)",
    )
    g.add_argument(
        "--intra-node",
        type=_bandwidth(hw.INTRA_NODE),
        metavar="LINK",
        help=f"link inside a node: GB/s or {', '.join(hw.INTRA_NODE)}",
    )
    g.add_argument(
        "--inter-node",
        type=_bandwidth(hw.INTER_NODE),
        metavar="LINK",
        help=f"link across nodes: GB/s or {', '.join(hw.INTER_NODE)}",
    )
    g = parser.add_argument_group("method")
    g.add_argument("--method", choices=_choices(Method))
    g.add_argument("--lora-rank", type=_positive)
    g.add_argument("--lora-targets", help="attention, all-linear, or module names: q_proj,v_proj")
    g.add_argument(
        "--lora-fraction",
        type=_fraction,
        help="adapter size as a share of the model: 0.025 or 2.5%% (bare counts)",
    )
    g.add_argument(
        "--qlora-keeps-inputs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="QLoRA's 4-bit linears keep their inputs (bitsandbytes before 0.43.2)",
    )
    g.add_argument(
        "--lora-dropout",
        type=_probability,
        help="LoRA dropout (PEFT default 0; above 0 each adapter keeps a mask and a copy)",
    )
    g.add_argument(
        "--modules-to-save",
        type=_names,
        metavar="NAMES",
        help="modules trained in full beside the adapters: lm_head,embed_tokens",
    )
    g.add_argument(
        "--double-quant",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="QLoRA double quantization (default on)",
    )
    g.add_argument(
        "--kbit-upcast",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="QLoRA: PEFT's fp32 upcast of non-quantized parameters (default on)",
    )
    g = parser.add_argument_group("precision and optimizer")
    g.add_argument("--precision", choices=_choices(Precision))
    g.add_argument(
        "--fp32-grad-buffer",
        action="store_true",
        default=None,
        help="keep an fp32 gradient accumulation buffer (+4 B/param)",
    )
    g.add_argument("--optimizer", choices=_choices(Optimizer))
    g.add_argument("--optimizer-state-dtype", choices=_choices(StateDtype))
    g.add_argument(
        "--optimizer-kernel",
        choices=_choices(OptimizerKernel),
        help="AdamW/Lion step: fused (no temporaries), foreach (torch's default without "
        "fused=True: one moment-sized temporary), auto: the stack's default",
    )
    g.add_argument(
        "--optimizer-block-size",
        type=_positive,
        help="8-bit optimizers' absmax block (256 current bitsandbytes, 2048 paper)",
    )
    g = parser.add_argument_group("sharding")
    g.add_argument("--strategy", choices=_choices(Strategy))
    g.add_argument("--offload", choices=_choices(Offload))
    g = parser.add_argument_group("activations")
    g.add_argument("--micro-batch", type=_positive)
    g.add_argument("--seq-len", type=_positive)
    g.add_argument("--grad-accum", type=_positive)
    g.add_argument("--attention", choices=_choices(Attention))
    g.add_argument("--checkpointing", choices=_choices(Checkpointing))
    g.add_argument("--tp", type=_positive, help="tensor-parallel degree (sequence parallel on)")
    g.add_argument(
        "--loss",
        choices=_choices(LossKind),
        help="full: logits whole (transformers); chunked (torchtune, LitGPT); fused: "
        "linear cross-entropy (Liger, CCE)",
    )
    g.add_argument(
        "--activation-offload",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="checkpointed layer inputs to pinned CPU RAM (needs --checkpointing full)",
    )
    g.add_argument(
        "--optimizer-in-backward",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="step and free each gradient in its hook (torchtune; no grad accumulation)",
    )
    g = parser.add_argument_group("DeepSpeed ZeRO (--stack deepspeed; default: Trainer's auto)")
    g.add_argument("--ds-reduce-bucket", type=_count, metavar="ELEMENTS")
    g.add_argument("--ds-prefetch-bucket", type=_count, metavar="ELEMENTS")
    g.add_argument("--ds-max-live-parameters", type=_count, metavar="ELEMENTS")
    g.add_argument("--ds-persistence-threshold", type=_count, metavar="ELEMENTS")
    g.add_argument("--ds-overlap-comm", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument(
        "--ds-grad-accum-fp32",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="data_types.grad_accum_dtype fp32 (ZeRO-1: BF16_Optimizer)",
    )
    g = parser.add_argument_group("runtime overhead")
    g.add_argument(
        "--overhead",
        choices=["auto", "none"],
        help="auto: CUDA context, NCCL, fragmentation; none: the model's memory only",
    )
    g.add_argument("--cuda-context", type=_size, metavar="SIZE")
    g.add_argument("--nccl-buffers", type=_size, metavar="SIZE")
    g.add_argument(
        "--fragmentation",
        type=_fraction,
        metavar="FRACTION",
        help="allocator reserve beyond the allocated peak (0.10)",
    )
    g.add_argument(
        "--expandable-segments",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    )


_PLAN_FIELDS = {
    "method": "method",
    "lora_rank": "lora_rank",
    "lora_fraction": "lora_fraction",
    "double_quant": "qlora_double_quant",
    "kbit_upcast": "qlora_upcast",
    "precision": "precision",
    "fp32_grad_buffer": "fp32_grad_buffer",
    "optimizer": "optimizer",
    "optimizer_state_dtype": "optimizer_state_dtype",
    "optimizer_kernel": "optimizer_kernel",
    "optimizer_block_size": "optimizer_block_size",
    "strategy": "strategy",
    "offload": "offload",
    "micro_batch": "micro_batch",
    "seq_len": "seq_len",
    "grad_accum": "grad_accum",
    "attention": "attention",
    "checkpointing": "checkpointing",
    "tp": "tp",
    "stack": "stack",
    "loss": "loss",
    "lora_dropout": "lora_dropout",
    "qlora_keeps_inputs": "qlora_keeps_inputs",
    "modules_to_save": "modules_to_save",
    "activation_offload": "activation_offload",
    "optimizer_in_backward": "optimizer_in_backward",
    "expandable_segments": "expandable_segments",
}
_DEEPSPEED_FIELDS = {
    "ds_reduce_bucket": "reduce_bucket_size",
    "ds_prefetch_bucket": "prefetch_bucket_size",
    "ds_max_live_parameters": "max_live_parameters",
    "ds_persistence_threshold": "persistence_threshold",
    "ds_overlap_comm": "overlap_comm",
    "ds_grad_accum_fp32": "grad_accum_fp32",
}
_HARDWARE_FIELDS = {
    "gpus": "gpus_per_node",
    "nodes": "nodes",
    "intra_node": "intra_node_bandwidth",
    "inter_node": "inter_node_bandwidth",
}
_OVERHEAD_FIELDS = {
    "cuda_context": "cuda_context",
    "nccl_buffers": "nccl",
    "fragmentation": "fragmentation",
}


def _given(args: argparse.Namespace, fields: dict[str, str]) -> dict[str, Any]:
    return {
        field: getattr(args, flag)
        for flag, field in fields.items()
        if getattr(args, flag, None) is not None
    }


def plan_from_args(args: argparse.Namespace, base: Plan | None = None) -> Plan:
    """Build a Plan from parsed flags over `base` (a Plan) or the built-in defaults."""
    return plan_and_import(args, base)[0]


def plan_and_import(
    args: argparse.Namespace, base: Plan | None = None
) -> tuple[Plan, Imported | None]:
    """The plan of the flags over the files of `--from` (if any) over `base`, and what the
    files decided (their fields' origins and assumptions)."""
    from pydantic import ValidationError

    from memtui.estimator.configs import ModelConfigError
    from memtui.estimator.hardware import INTRA_NODE
    from memtui.estimator.model_source import load_model
    from memtui.estimator.plan import Method, ModelSpec, Plan

    if args.model is not None and args.params is not None:
        raise UsageError("give --model or --params, not both")
    try:
        files = getattr(args, "from_files", None)
        if args.params is not None:
            model = ModelSpec.from_parameters(args.params)
        elif args.model is not None or base is None:
            model = load_model(DEFAULT_MODEL if args.model is None else args.model)
        else:
            model = base.model
        hw = _given(args, _HARDWARE_FIELDS)
        if args.gpu_memory is not None:
            memory, name, link, capability = args.gpu_memory
            hw.update(gpu_memory=memory, gpu_name=name)
            if link and args.intra_node is None:
                hw["intra_node_bandwidth"] = INTRA_NODE[link]
            if capability is not None:
                hw["compute_capability"] = capability
        overhead = _given(args, _OVERHEAD_FIELDS)
        if args.overhead:
            overhead["enabled"] = args.overhead != "none"
        fields = _given(args, _PLAN_FIELDS)
        if args.lora_targets:
            fields["lora_targets"] = tuple(
                t.strip() for t in args.lora_targets.split(",") if t.strip()
            )
        start = base if base is not None else Plan(model=model)
        deepspeed = _given(args, _DEEPSPEED_FIELDS)
        flags = {**fields, "hardware": hw, "overhead": overhead, "deepspeed": deepspeed}
        imported = None
        if files:
            from memtui.plans.imports import import_files

            given = {
                *fields,
                *(f"hardware.{k}" for k in hw),
                *(f"deepspeed.{k}" for k in deepspeed),
            }
            model_given = args.model is not None or args.params is not None
            imported, start = import_files(files, start.evolve(model=model), given, model_given)
            if imported.model is None and not model_given and base is None:
                imported.notes.append(f"the files name no model: {DEFAULT_MODEL} (--model)")
            model = start.model
        from memtui.plans.imports import combine

        changes, notes = combine(start, imported, flags)
        if imported is not None:
            imported.notes += notes
        try:
            plan = start.evolve(model=model, **changes)
        except (ValidationError, ValueError) as err:
            if imported is None:
                raise
            raise UsageError(f"{imported.label}: {one_line(err)}") from None
        if args.lora_fraction is not None and plan.method is Method.full:
            # it would size only the LoRA levers' figures, never the estimate asked for
            raise UsageError(
                "--lora-fraction sizes LoRA adapters, but the method is full: add --method "
                "lora or qlora"
            )
        return plan, imported
    except (ValidationError, ModelConfigError, ValueError) as err:
        raise UsageError(one_line(err)) from None
