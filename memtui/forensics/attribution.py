"""Which plan term an allocation belongs to, judged from the stack frames it was made under.

This is a heuristic and says so wherever its numbers are shown. Every rule is in `RULES`, one
place, each with the source that makes the frame appear. A stack is read from the innermost
frame outwards (PyTorch records frames innermost first: torch/cuda/_memory_viz.py
`_frames_fmt(..., reverse=True)` turns them root-first for flame graphs); the first frame
that matches a rule decides. Specific frames (the optimizer's state initialisation, the
loss) sit inside generic ones (a module's forward), so they win. Nothing matched: the bytes
are `unattributed`, and the innermost frame is kept so the user sees where they came from.

Frames come in three spellings, all handled by `_where`:
- Python frames of a CUDA snapshot: filename = the full path, name = the function;
- C++ frames (`stacks="all"`, the default of `_record_memory_history`): name = the qualified
  C++ function, e.g. `torch::autograd::AccumulateGrad::apply(...)`;
- frames of a snapshot converted from a torch.profiler trace
  (torch/cuda/_memory_viz.py `_profile_to_snapshot`): filename "none", name
  "torch/nn/modules/linear.py(130): forward".

What frames cannot tell: on CUDA the autograd engine runs the backward pass in its own
thread, which has no Python frames, so with Python-only stacks a backward allocation has no
frame at all; with C++ frames its kind shows (AccumulateGrad: a gradient; a *Backward0 node:
the backward working set). A snapshot with Python-only frames of a backward run on the
calling thread (the CPU profiler's) cannot tell gradients from activation gradients: those
bytes stay unattributed, with that reason.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memtui.estimator.terms import TermKind
from memtui.forensics.model import BUCKETS, UNATTRIBUTED, Attribution, Bucket


@dataclass(frozen=True)
class Rule:
    """Frames matching `path` (a substring of the '/'-separated path), `names` (the function,
    exactly; empty: any) and `contains` (a substring of the function name: C++ frames) belong
    to `term`."""

    term: Bucket
    label: str
    """Short name shown beside the bytes it attributed."""
    source: str
    """Where this frame comes from."""
    path: str = ""
    names: tuple[str, ...] = ()
    contains: tuple[str, ...] = ()

    def matches(self, path: str, name: str) -> bool:
        if self.path and self.path not in path:
            return False
        if self.names and name not in self.names:
            return False
        return not self.contains or any(c in name for c in self.contains)


_OPT = "torch/optim"

RULES: tuple[Rule, ...] = (
    # --- C++ frames (recorded with stacks="all", the default) -------------------------
    Rule(
        TermKind.gradients,
        "AccumulateGrad (a parameter's .grad)",
        "torch/csrc/autograd/functions/accumulate_grad.h: the grad_fn of every leaf "
        "parameter; it allocates .grad on the first backward",
        contains=("torch::autograd::AccumulateGrad",),
    ),
    Rule(
        TermKind.logits,
        "loss backward (log_softmax / nll_loss)",
        "cross_entropy's autograd nodes are LogSoftmaxBackward0 and NllLossBackward0 "
        "(tools/autograd/derivatives.yaml): the logits-sized gradient of the loss",
        contains=("LogSoftmaxBackward", "NllLossBackward", "log_softmax_backward"),
    ),
    Rule(
        TermKind.weights,
        "autocast's cached low-precision weights",
        "aten/src/ATen/autocast_mode.cpp cached_cast: the bf16/fp16 copy of an fp32 "
        "parameter, kept for the forward and backward (mixed precision's working weights)",
        contains=("autocast::cached_cast",),
    ),
    Rule(
        TermKind.transient,
        "DDP reducer buckets",
        "torch/csrc/distributed/c10d/reducer.cpp: DistributedDataParallel's gradient buckets",
        contains=("c10d::Reducer",),
    ),
    Rule(
        TermKind.activations,
        "backward pass (autograd engine)",
        "torch/csrc/autograd/engine.cpp Engine::evaluate_function and the generated "
        "*Backward0 nodes: the backward working set, which memtui's activations term holds "
        "(memtui/measure/step.py Measurement.activations)",
        contains=("torch::autograd::Engine::", "torch::autograd::generated::"),
    ),
    # --- optimizers -----------------------------------------------------------------
    Rule(
        TermKind.optimizer_states,
        "optimizer state init (_init_group)",
        "torch/optim/adam.py Adam._init_group: state['exp_avg'] = torch.zeros_like(p) (every "
        "torch.optim optimizer creates its state in _init_group)",
        path=f"/{_OPT}/",
        names=("_init_group",),
    ),
    Rule(
        TermKind.optimizer_states,
        "bitsandbytes state init",
        "bitsandbytes/optim/optimizer.py Optimizer2State.init_state: the 8-bit moments and "
        "their absmax",
        path="/bitsandbytes/optim/",
        names=("init_state",),
    ),
    Rule(
        TermKind.master_weights,
        "DeepSpeed ZeRO-3 fp32 partitions",
        "deepspeed/runtime/zero/stage3.py DeepSpeedZeroOptimizer_Stage3._create_fp32_partitions",
        path="/deepspeed/runtime/zero/",
        names=("_create_fp32_partitions",),
    ),
    Rule(
        TermKind.transient,
        "optimizer step temporaries",
        "torch/optim/adam.py _multi_tensor_adam / _single_tensor_adam: the foreach "
        "intermediates of the step (SGD also makes its momentum buffer here on the first step)",
        path=f"/{_OPT}/",
    ),
    # --- loss and logits ------------------------------------------------------------
    Rule(
        TermKind.logits,
        "cross_entropy / log_softmax",
        "torch/nn/functional.py cross_entropy, nll_loss, log_softmax: the loss over the vocabulary",
        path="/torch/nn/functional.py",
        names=("cross_entropy", "nll_loss", "log_softmax"),
    ),
    Rule(
        TermKind.logits,
        "Transformers causal-LM loss",
        "transformers/loss/loss_utils.py ForCausalLMLoss (logits.float()) and fixed_cross_entropy",
        path="/transformers/loss/",
    ),
    # --- sharding and communication buffers -------------------------------------------
    Rule(
        TermKind.transient,
        "FSDP2 all-gather / reduce-scatter buffers",
        "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py foreach_all_gather, "
        "foreach_reduce",
        path="/torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py",
    ),
    Rule(
        TermKind.transient,
        "FSDP2 unsharded parameters",
        "torch/distributed/fsdp/_fully_shard/_fsdp_param.py FSDPParam.init_unsharded_param, "
        "alloc_all_gather_outputs",
        path="/torch/distributed/fsdp/_fully_shard/_fsdp_param.py",
        names=("init_unsharded_param", "alloc_all_gather_outputs"),
    ),
    Rule(
        TermKind.weights,
        "FSDP2 sharded parameters",
        "torch/distributed/fsdp/_fully_shard/_fsdp_param.py FSDPParam._init_sharded_param",
        path="/torch/distributed/fsdp/_fully_shard/_fsdp_param.py",
        names=("_init_sharded_param",),
    ),
    Rule(
        TermKind.transient,
        "FSDP unsharded flat parameter",
        "torch/distributed/fsdp/_flat_param.py FlatParamHandle._alloc_padded_unsharded_flat_param",
        path="/torch/distributed/fsdp/_flat_param.py",
        names=("_alloc_padded_unsharded_flat_param",),
    ),
    Rule(
        TermKind.weights,
        "FSDP flat parameter",
        "torch/distributed/fsdp/_flat_param.py FlatParamHandle._init_flat_param_and_metadata, "
        "flatten_tensors",
        path="/torch/distributed/fsdp/_flat_param.py",
        names=(
            "_init_flat_param_and_metadata",
            "flatten_tensors",
            "flatten_tensors_into_flat_param",
        ),
    ),
    Rule(
        TermKind.transient,
        "DDP bucket rebuild",
        "torch/nn/parallel/distributed.py DistributedDataParallel._pre_forward -> "
        "reducer._rebuild_buckets, _ddp_init_helper",
        path="/torch/nn/parallel/distributed.py",
        names=("_pre_forward", "_ddp_init_helper"),
    ),
    # --- model weights ----------------------------------------------------------------
    Rule(
        TermKind.weights,
        "module construction",
        "torch/nn/modules/linear.py Linear.__init__ / reset_parameters, torch/nn/init.py",
        path="/torch/nn/modules/",
        names=("__init__", "reset_parameters", "_reset_parameters"),
    ),
    Rule(TermKind.weights, "parameter init", "torch/nn/init.py", path="/torch/nn/init.py"),
    Rule(
        TermKind.weights,
        "Module.to / load_state_dict",
        "torch/nn/modules/module.py Module.to -> _apply -> convert; load_state_dict",
        path="/torch/nn/modules/module.py",
        names=("_apply", "convert", "to", "cuda", "load_state_dict", "_load_from_state_dict"),
    ),
    Rule(
        TermKind.weights,
        "Transformers model loading",
        "transformers/modeling_utils.py PreTrainedModel.from_pretrained, "
        "_load_pretrained_model, _init_weights, post_init",
        path="/transformers/modeling_utils.py",
        names=(
            "from_pretrained",
            "_load_pretrained_model",
            "_init_weights",
            "initialize_weights",
            "post_init",
            "_initialize_missing_keys",
        ),
    ),
    Rule(
        TermKind.weights,
        "Transformers checkpoint conversion",
        "transformers/core_model_loading.py: weights converted and placed while loading",
        path="/transformers/core_model_loading.py",
    ),
    Rule(
        TermKind.weights,
        "accelerate set_module_tensor_to_device",
        "accelerate/utils/modeling.py set_module_tensor_to_device (device_map loading)",
        path="/accelerate/utils/modeling.py",
        names=("set_module_tensor_to_device",),
    ),
    Rule(
        TermKind.weights, "safetensors load", "safetensors/torch.py load_file", path="/safetensors/"
    ),
    Rule(
        TermKind.weights,
        "PEFT adapter creation",
        "peft/tuners/lora/layer.py LoraLayer.update_layer: the adapter's A and B",
        path="/peft/tuners/",
        names=("update_layer",),
    ),
    # --- forward activations ------------------------------------------------------------
    Rule(
        TermKind.activations,
        "nn.Linear forward",
        "torch/nn/modules/linear.py Linear.forward (its output; see LM_HEAD for the one that "
        "makes the logits)",
        path="/torch/nn/modules/linear.py",
        names=("forward",),
    ),
    Rule(
        TermKind.activations,
        "torch.nn module forward",
        "torch/nn/modules/*.py forward",
        path="/torch/nn/modules/",
        names=("forward",),
    ),
    Rule(
        TermKind.activations,
        "torch.nn.functional",
        "torch/nn/functional.py",
        path="/torch/nn/functional.py",
    ),
    Rule(
        TermKind.activations,
        "activation checkpointing recompute",
        "torch/utils/checkpoint.py: the forward run again inside backward",
        path="/torch/utils/checkpoint.py",
    ),
    Rule(
        TermKind.weights,
        "Transformers model construction",
        "transformers/models/llama/modeling_llama.py LlamaRMSNorm.__init__: "
        "nn.Parameter(torch.ones(hidden_size)) (found by tests/test_snapshot_real.py)",
        path="/transformers/models/",
        names=("__init__", "_init_weights"),
    ),
    Rule(
        TermKind.activations,
        "Transformers model code",
        "transformers/models/*/modeling_*.py: a model's forward",
        path="/transformers/models/",
    ),
    # --- what frames cannot decide ---------------------------------------------------------
    Rule(
        UNATTRIBUTED,
        "backward pass, Python frames only",
        "torch/autograd/graph.py _engine_run_backward: without C++ frames a gradient and an "
        "activation gradient look the same (record with stacks='all')",
        path="/torch/autograd/",
        names=("_engine_run_backward", "backward", "grad"),
    ),
    Rule(
        TermKind.activations,
        "a module's forward",
        "any frame named `forward` (a model's own code)",
        names=("forward",),
    ),
)

#: The Linear that the outermost Transformers model forward calls directly is its lm_head:
#: in transformers/models/llama/modeling_llama.py LlamaForCausalLM.forward,
#: `logits = self.lm_head(hidden_states[:, slice_indices, :])` is the only Linear called with
#: no other model forward between (every layer's Linear sits under LlamaModel.forward too).
LM_HEAD = Rule(
    TermKind.logits,
    "lm_head (Linear called by the outermost model forward)",
    "transformers/models/*/modeling_*.py *ForCausalLM.forward: self.lm_head(hidden_states)",
)
_LINEAR_FORWARD = RULES[next(i for i, r in enumerate(RULES) if r.label == "nn.Linear forward")]
_NO_STACK = Rule(UNATTRIBUTED, "no stack recorded", "the block was allocated before "
                 "_record_memory_history, or by a thread without Python frames")  # fmt: skip
_NO_RULE = Rule(UNATTRIBUTED, "no rule matched", "see the innermost frame")

_PROFILER_NAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.+)$")


def _where(frame: Any) -> tuple[str, str, str]:
    """(path with '/' separators and a leading '/', function, short text) of one frame."""
    if not isinstance(frame, dict):
        return "", "", "?"
    filename = str(frame.get("filename", "") or "")
    name = str(frame.get("name", "") or "")
    line = frame.get("line", 0)
    if filename in ("", "none", "??"):
        m = _PROFILER_NAME.match(name)
        if m:
            filename, name, line = m["file"], m["func"], m["line"]
    path = "/" + filename.replace("\\", "/").lstrip("/") if filename not in ("", "??") else ""
    short = f"{path.rsplit('/', 1)[-1] or '??'}:{line}:{name[:80]}"
    return path, name, short


@dataclass(frozen=True)
class Verdict:
    term: Bucket
    rule: Rule
    site: str
    """The frame that decided, or the innermost Python frame when none did."""


class Attributor:
    """Classifies stacks; remembers each frame list (PyTorch shares one list among the
    allocations of one traceback) and each frame it has judged."""

    def __init__(self) -> None:
        self._stacks: dict[int, Verdict] = {}
        self._frames: dict[int, tuple[Rule | None, str, str, str]] = {}

    def _frame(self, frame: Any) -> tuple[Rule | None, str, str, str]:
        key = id(frame)
        got = self._frames.get(key)
        if got is None:
            path, name, short = _where(frame)
            rule = next((r for r in RULES if r.matches(path, name)), None)
            got = (rule, path, name, short)
            self._frames[key] = got
        return got

    def classify(self, frames: Any) -> Verdict:
        """The verdict for one allocation's frame list."""
        if not isinstance(frames, list) or not frames:
            return Verdict(UNATTRIBUTED, _NO_STACK, "<no stack recorded>")
        key = id(frames)
        got = self._stacks.get(key)
        if got is None:
            got = self._decide(frames)
            self._stacks[key] = got
        return got

    def _decide(self, frames: Sequence[Any]) -> Verdict:
        first_python = ""
        for frame in frames:
            rule, path, _name, short = self._frame(frame)
            if not first_python and path.endswith(".py"):
                first_python = short
            if rule is None:
                continue
            if rule is _LINEAR_FORWARD and self._model_forwards(frames) == 1:
                return Verdict(LM_HEAD.term, LM_HEAD, short)
            return Verdict(rule.term, rule, short)
        site = first_python or self._frame(frames[0])[3]
        return Verdict(UNATTRIBUTED, _NO_RULE, site)

    def _model_forwards(self, frames: Sequence[Any]) -> int:
        return sum(
            1
            for f in frames
            if (w := self._frame(f)) and "/transformers/models/" in w[1] and w[2] == "forward"
        )

    def tally(self, items: Iterable[tuple[int, Any]], measure: str = "size") -> Attribution:
        """Bytes per term of (bytes, frames) pairs, with the rules and sites behind them."""
        by_term = dict.fromkeys(BUCKETS, 0)
        by_rule: Counter[tuple[Bucket, str]] = Counter()
        sites: Counter[str] = Counter()
        count = 0
        for size, frames in items:
            v = self.classify(frames)
            by_term[v.term] += size
            by_rule[(v.term, v.rule.label)] += size
            if v.term is UNATTRIBUTED:
                sites[f"{v.site} ({v.rule.label})"] += size
            count += 1
        return Attribution(
            by_term=by_term,
            by_rule=tuple((t, r, b) for (t, r), b in by_rule.most_common(12) if b),
            unattributed_sites=tuple((s, b) for s, b in sites.most_common(5) if b),
            count=count,
            measure=measure,
        )
