"""The plan flags shared by `memtui estimate` and the dashboard (one parser, one meaning).

Flag names follow what DeepSpeed and FSDP users already say (zero3, fsdp, micro-batch,
grad-accum). Values are checked here and by the Plan's pydantic validators; every problem
becomes one line: what is wrong and what is allowed.
"""

from __future__ import annotations

import argparse
import re
from argparse import _ArgumentGroup
from collections.abc import Callable
from enum import Enum
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args, get_origin

from memtui.errors import UsageError, one_line

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

    from memtui.estimator.knobs import Knob
    from memtui.estimator.plan import Plan
    from memtui.estimator.precedence import PlanLayer
    from memtui.plans.imports import Imported

DEFAULT_MODEL = "meta-llama/Llama-2-7b-hf"


def _gpu_memory(text: str) -> tuple[int, str, str | None, float | None]:
    """(bytes, card name, its default interconnect, its compute capability) for a size or a
    card preset."""
    from memtui.estimator.hardware import GPU_ALIASES, GPUS, gpu_preset
    from memtui.estimator.suggest import did_you_mean
    from memtui.estimator.units import parse_size

    preset = gpu_preset(text)
    if preset:
        return preset.memory, preset.name, preset.intra_node, preset.compute_capability
    try:
        # a bare number is refused, asking for the unit: "24" must not become 24 bytes
        return parse_size(text), f"{text} GPU", None, None
    except ValueError as err:
        listed = ", ".join(GPUS)
        if re.fullmatch(r"[\d.]+\s*[kmgt]?i?b?", text.strip().lower()):  # a size, not a name
            raise argparse.ArgumentTypeError(f"{err}, or a card: {listed}") from None
        cards = {**{key: key for key in GPUS}, **{p.name: p.key for p in GPUS.values()}}
        close = did_you_mean(text, {**cards, **GPU_ALIASES})
        said = f"; {close} (cards: {listed})" if close else f", or a card: {listed}"
        raise argparse.ArgumentTypeError(f"{err}{said}") from None


def _size(text: str) -> int:
    from memtui.estimator.units import parse_size

    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def count_argument(text: str) -> int:
    """A count flag's value: 13B, 13e9, 2,000 (argparse's type)."""
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


def _version(flag: str) -> Callable[[str], Any]:
    """A framework's version given by `flag`, with that flag as where it came from."""

    def parse(text: str) -> Any:
        from memtui.estimator.versions import PackageVersion, release

        try:
            release(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return PackageVersion(version=text, source=f"flag {flag}")

    return parse


def installed_versions() -> dict[str, Any]:
    """The frameworks installed in this Python environment (where the job runs, when memtui
    runs there), as dotted plan fields: read from their distributions' metadata
    (importlib.metadata), nothing imported."""
    from importlib import metadata

    from memtui.estimator.versions import Package, PackageVersion

    found: dict[str, Any] = {}
    for package in Package:
        try:
            version = metadata.version(package.value)
        except metadata.PackageNotFoundError:
            continue
        source = "installed here (importlib.metadata)"
        found[f"versions.{package.value}"] = PackageVersion(version=version, source=source)
    return found


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


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every plan flag to `parser`: one for each field whose `Knob` names a flag, in its
    group and in the fields' order, and those of `_WRITTEN_OUT` at their field's place."""
    from memtui.estimator.knobs import FlagGroup, knobs
    from memtui.estimator.plan import Plan
    from memtui.plans.formats import FORMATS, spoken

    parser.add_argument(
        "--plan",
        metavar="FILE",
        help="start from a saved plan (TOML, as the dashboard's save key w writes it); the "
        "--from files and the flags go on top; relative config.json refs in it are read from "
        "its folder",
    )
    parser.add_argument(
        "--from",
        dest="from_files",
        nargs="+",
        metavar="FILE",
        help="read the plan from the job's own files: "
        f"{spoken([*(f.title for f in FORMATS), 'a launch script'])}; "
        "flags given as well win over them",
    )
    groups = {group: parser.add_argument_group(group.value) for group in FlagGroup}
    # not a field: it sets every version field the flags leave, from this environment
    groups[FlagGroup.versions].add_argument(
        "--installed-versions",
        action="store_true",
        help="the versions of torch, transformers, peft, trl, accelerate, bitsandbytes, "
        "deepspeed and torchtune installed here (run memtui where the job runs)",
    )
    for name, field, knob in knobs(Plan):
        group = groups[knob.group]
        if name in _WRITTEN_OUT:
            _WRITTEN_OUT[name](group)
        elif knob.flag is not None:
            group.add_argument(knob.flag, **_flag_options(name, field, knob))


def _flag_options(name: str, field: FieldInfo, knob: Knob) -> dict[str, Any]:
    """`add_argument`'s options for a field's flag: its Knob's entry, else the field's type
    (an enum: its values; a bool: --flag / --no-flag, None when neither is given)."""
    from memtui.estimator.knobs import Entry

    options: dict[str, Any] = {
        "help": knob.help and knob.help.replace("%", "%%"),  # argparse formats the help
        "metavar": knob.metavar,
    }
    parsers: dict[Entry, Callable[[str], Any]] = {
        Entry.count: count_argument,
        Entry.size: _size,
        Entry.fraction: _fraction,
        Entry.probability: _probability,
        Entry.names: _names,
    }
    if knob.entry is Entry.version and knob.flag is not None:
        return {**options, "type": _version(knob.flag)}
    if knob.entry is not None:
        return {**options, "type": parsers[knob.entry]}
    kind = _value_type(field.annotation)
    if isinstance(kind, type) and issubclass(kind, Enum):
        options["choices"] = [member.value for member in kind]
    elif kind is bool:
        options.update(action=argparse.BooleanOptionalAction, default=None)
    elif kind is int:
        options["type"] = _positive
    else:
        raise TypeError(f"{name}: its flag needs a Knob.entry saying how {kind} is typed")
    return options


def _value_type(annotation: Any) -> Any:
    """The type a field holds, without None and pydantic's constraints (`Elements | None`:
    int)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _value_type(get_args(annotation)[0])
    if origin in (Union, UnionType):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        return _value_type(rest[0]) if len(rest) == 1 else annotation
    return annotation


def _add_model(group: _ArgumentGroup) -> None:
    # resolved by memtui.estimator.model_source, or a bare count: two flags, one field
    group.add_argument(
        "--model",
        help="config.json, model folder, cached repo id, catalog id, or a Hub repo id whose "
        f"config.json is fetched (default {DEFAULT_MODEL})",
    )
    group.add_argument(
        "--params", type=count_argument, help="a bare parameter count instead: 13B, 13e9"
    )


def _add_gpu_memory(group: _ArgumentGroup) -> None:
    # a size or a card preset, which also sets the card's name, link and compute capability
    group.add_argument(
        "--gpu-memory",
        "--gpu",
        type=_gpu_memory,
        metavar="SIZE|CARD",
        help="memory per GPU: 80GB, 80GiB, 81559MiB (a bare number asks for its unit) or a "
        "card (h100-sxm, a100-80gb, 4090...)",
    )


def _add_link(flag: str, inside: bool) -> Callable[[_ArgumentGroup], None]:
    # GB/s or a named interconnect (memtui.estimator.hardware's presets)
    def add(group: _ArgumentGroup) -> None:
        from memtui.estimator.hardware import INTER_NODE, INTRA_NODE

        links = INTRA_NODE if inside else INTER_NODE
        group.add_argument(
            flag,
            type=_bandwidth(links),
            metavar="LINK",
            help=f"link {'inside a node' if inside else 'across nodes'}: GB/s or "
            f"{', '.join(links)}",
        )

    return add


def _add_lora_targets(group: _ArgumentGroup) -> None:
    # kept as the text given: an empty one leaves the targets below it
    group.add_argument(
        "--lora-targets", help="attention, all-linear, or module names: q_proj,v_proj"
    )


def _add_fp32_grad_buffer(group: _ArgumentGroup) -> None:
    # a plain switch that turns it on (no --no- form)
    group.add_argument(
        "--fp32-grad-buffer",
        action="store_true",
        default=None,
        help="keep an fp32 gradient accumulation buffer (+4 B/param)",
    )


def _add_overhead(group: _ArgumentGroup) -> None:
    # auto or none, for OverheadSettings.enabled
    group.add_argument(
        "--overhead",
        choices=["auto", "none"],
        help="auto: CUDA context, NCCL, fragmentation; none: the model's memory only",
    )


_WRITTEN_OUT: dict[str, Callable[[_ArgumentGroup], None]] = {
    "model": _add_model,
    "hardware.gpu_memory": _add_gpu_memory,
    "hardware.intra_node_bandwidth": _add_link("--intra-node", inside=True),
    "hardware.inter_node_bandwidth": _add_link("--inter-node", inside=False),
    "lora_targets": _add_lora_targets,
    "fp32_grad_buffer": _add_fp32_grad_buffer,
    "overhead.enabled": _add_overhead,
}
"""The flags of fields whose value needs more than parsing, by the (dotted) field they set;
`_flag_layer` reads them back."""


def _dest(flag: str) -> str:
    """The attribute argparse stores a flag's value in."""
    return flag.removeprefix("--").replace("-", "_")


def _flag_layer(args: argparse.Namespace) -> PlanLayer:
    """The plan fields the flags set (a flag not given is None and sets nothing)."""
    from memtui.estimator.hardware import INTRA_NODE
    from memtui.estimator.knobs import knobs
    from memtui.estimator.model_source import load_model
    from memtui.estimator.plan import ModelSpec, Plan
    from memtui.estimator.precedence import PlanLayer
    from memtui.plans.hub import fetch_config

    values: dict[str, Any] = installed_versions() if args.installed_versions else {}
    for name, _, knob in knobs(Plan):
        value = getattr(args, _dest(knob.flag), None) if knob.flag else None
        if value is not None:
            values[name] = value
    if args.params is not None:
        values["model"] = ModelSpec.from_parameters(args.params)
    elif args.model is not None:
        values["model"] = load_model(args.model, fetch_config)
    if args.gpu_memory is not None:
        memory, name, link, capability = args.gpu_memory
        values.update({"hardware.gpu_memory": memory, "hardware.gpu_name": name})
        if link and args.intra_node is None:
            values["hardware.intra_node_bandwidth"] = INTRA_NODE[link]
        if capability is not None:
            values["hardware.compute_capability"] = capability
    if args.intra_node is not None:
        values["hardware.intra_node_bandwidth"] = args.intra_node
    if args.inter_node is not None:
        values["hardware.inter_node_bandwidth"] = args.inter_node
    if args.lora_targets:
        values["lora_targets"] = _names(args.lora_targets)
    if args.fp32_grad_buffer is not None:
        values["fp32_grad_buffer"] = args.fp32_grad_buffer
    if args.overhead:
        values["overhead.enabled"] = args.overhead != "none"
    return PlanLayer.dotted("flags", values)


def _count_gpus(imported: Imported, default: int) -> None:
    """GPUs per node where the files give none: this node's (NVML), else memtui's default,
    said as the import's GPU-count assumption (the verdict line repeats it)."""
    reason = imported.derived.gpus_unknown
    if reason is None:
        return
    from memtui.telemetry.nvml import local_gpu_count

    shown = imported.derived.visible_devices  # the launch line's CUDA_VISIBLE_DEVICES wins
    count = local_gpu_count(None if shown is None else {"CUDA_VISIBLE_DEVICES": shown})
    if count is not None:
        imported.derived.set("hardware.gpus_per_node", count, f"{reason}: NVML, this node")
        return
    imported.gpu_assumption = (
        f"GPU count: {reason}; sized for {default} GPUs per node, memtui's default "
        "(no GPU counted here; --gpus sets it)"
    )
    imported.notes.append(imported.gpu_assumption)


def plan_from_args(args: argparse.Namespace, base: Plan | None = None) -> Plan:
    """Build a Plan from parsed flags over `base` (a Plan) or the built-in defaults."""
    return plan_and_import(args, base)[0]


def plan_and_import(
    args: argparse.Namespace, base: Plan | None = None
) -> tuple[Plan, Imported | None]:
    """The plan of the layers, lowest first: `base`, else the `--plan` file (its plan laid
    over memtui's defaults by `load_plan`), else memtui's defaults; the files of `--from` (if
    any); the flags (`memtui.estimator.precedence.merge`); and what the files decided (their
    fields' origins and assumptions)."""
    from pydantic import ValidationError

    from memtui.estimator.configs import ModelConfigError
    from memtui.estimator.model_source import load_model
    from memtui.estimator.plan import Method, Plan
    from memtui.estimator.precedence import merge

    if args.model is not None and args.params is not None:
        raise UsageError("give --model or --params, not both")
    if base is None and args.plan:
        from memtui.plans.memtui_toml import load_plan

        base = load_plan(args.plan)
    try:
        flags = _flag_layer(args)
        model_given = "model" in flags.fields
        if base is not None:
            start = base
        else:  # memtui's defaults, on the flags' model or the default one
            model = flags.fields["model"] if model_given else load_model(DEFAULT_MODEL)
            start = Plan(model=model, method=model.default_method)
        layers = [flags]
        imported = None
        files = getattr(args, "from_files", None)
        if files:
            from memtui.plans.imports import import_files

            # the files decide over the plan below them, checked first on the flags' model
            below = start.evolve(model=flags.fields.get("model", start.model))
            imported = import_files(files, below, flags.names(), model_given)
            if imported.model is None and not model_given and base is None:
                imported.notes.append(f"the files name no model: {DEFAULT_MODEL} (--model)")
            if base is None and "hardware.gpus_per_node" not in flags.names():
                _count_gpus(imported, below.hardware.gpus_per_node)
            layers.insert(0, imported.layer)
        try:
            merged = merge(start, layers)
        except (ValidationError, ValueError) as err:
            if imported is None:
                raise
            raise UsageError(f"{imported.label}: {one_line(err)}") from None
        if imported is not None:
            imported.notes += merged.notes
        if args.lora_fraction is not None and merged.plan.method is Method.full:
            # it would size only the LoRA levers' figures, never the estimate asked for
            raise UsageError(
                "--lora-fraction sizes LoRA adapters, but the method is full: add --method "
                "lora or qlora"
            )
        return merged.plan, imported
    except (ValidationError, ModelConfigError, ValueError) as err:
        raise UsageError(one_line(err)) from None


def given_fields(args: argparse.Namespace) -> frozenset[str]:
    """The plan fields whose own flag the user gave (dotted for a section's): what a search
    over plans keeps (`memtui plan --fastest`). A flag not given is None; values from --from
    files and a --plan file are not given choices."""
    from memtui.estimator.knobs import knobs
    from memtui.estimator.plan import Plan

    return frozenset(
        name
        for name, _, knob in knobs(Plan)
        if knob.flag is not None and getattr(args, _dest(knob.flag), None) is not None
    )
