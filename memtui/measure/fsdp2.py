"""A real FSDP2 step over two CPU processes (`memtui measure --stack fsdp2`).

Each rank runs `transformers.Trainer` with `fsdp="full_shard"` (or "shard_grad_op") and
`fsdp_config={"fsdp_version": 2}`, everything else at its default, over gloo: accelerate
shards the model with its own `fsdp2_prepare_model` (trainable parameters upcast to fp32,
MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16) from
FullyShardedDataParallelPlugin.set_mixed_precision, decoder layers wrapped by
`_no_split_modules`, the embeddings and the [final norm, lm_head] tail carved into units of
their own), Trainer's default fused AdamW steps the fp32 shards. The plan maps to the same
arguments as the Trainer step (memtui/measure/trainer.py) except precision: bf16-mixed is
`bf16=True` on a model loaded in bf16 (accelerate's FSDP2 mixed precision), bf16 and fp32
are `bf16=False` on a model loaded in that dtype (no policy).

One line is memtui's: accelerate turns FSDP on only when its distributed type is a
multi-accelerator one (accelerate/state.py AcceleratorState.__init__ checks MULTI_GPU,
MULTI_XPU, ...; MULTI_CPU is not in the list), so on CPU it silently runs DDP. The Trainer
subclass here sets the distributed type to FSDP and hands the plugin to the state as that
branch does on a GPU (`fsdp_plugin.set_mixed_precision`); everything after it is
accelerate's and torch's own code. FSDP2 itself runs on CPU with gloo in torch 2.13.

Measured per rank (the ranks are symmetric; rank 0 is reported, a note says if rank 1
differs): the local shards (weights, optimizer state; the sharded gradients once the
measured backward has made them), and through the tracker the activations, the logits, and
FSDP's buffers: storages allocated inside its all-gather, copy-out and reduce-scatter
(`_fsdp_param_group.foreach_all_gather`, `foreach_all_gather_copy_out`, `foreach_reduce`),
the unsharded parameters it regrows in place (`alloc_storage`), and the unsharded gradients
autograd makes for them.

What CPU cannot show (benchmarks/cuda_check.py must): FSDP2 on CUDA runs its all-gathers and
reduce-scatters on separate streams, so the next unit's all-gather buffer exists while the
current unit computes (implicit prefetch) and the caching allocator keeps a freed buffer
reserved until the stream that used it is done; gloo on CPU runs them synchronously on one
stream, so fewer units are gathered at once than on a GPU.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from memtui.bounded import MEASUREMENT, read_text
from memtui.estimator.choices import Method, Precision, Strategy
from memtui.estimator.plan import Plan
from memtui.measure.measurement import Measurement, Unsupported

WORLD_SIZE = 2
#: seconds both ranks may take (a tiny model's step takes a few)
TIMEOUT = 600

_COMPARED = ("weights", "gradients", "optimizer_states", "forward_backward_peak")
"""What must agree between ranks (their step temporaries differ by a few scalars)."""
_SHARDING = {Strategy.fsdp: "full_shard", Strategy.fsdp_shard_grad_op: "shard_grad_op"}


def check_fsdp2_plan(plan: Plan) -> None:
    """Raise Unsupported (one line) for what this FSDP2 step cannot run on CPU."""
    from memtui.measure.trainer import check_trainer_plan

    if plan.strategy not in _SHARDING:
        raise Unsupported(
            f"--strategy {plan.strategy.value} is not measured: fsdp or fsdp-shard-grad-op "
            "(HSDP needs a second mesh dimension, more than two processes)"
        )
    if plan.offload is not plan.offload.none:
        raise Unsupported("CPUOffloadPolicy moves the shards to CPU RAM: nothing to see on CPU")
    check_trainer_plan(plan.evolve(precision=Precision.bf16))  # the rest as Trainer's


def gloo_missing() -> str | None:
    """Why two CPU processes cannot run FSDP2 here, or None (torch built without
    torch.distributed or without gloo)."""
    import torch.distributed as dist

    if not dist.is_available():
        return "this torch has no torch.distributed"
    if not dist.is_gloo_available():
        return "this torch has no gloo backend"
    return None


def measure_fsdp2(config: dict[str, Any], plan: Plan) -> Measurement:
    """Run the step on WORLD_SIZE CPU processes and return rank 0's measurement."""
    check_fsdp2_plan(plan)
    from accelerate.utils import FullyShardedDataParallelPlugin

    if "fsdp_version" not in FullyShardedDataParallelPlugin.__dataclass_fields__:
        from importlib import metadata

        raise Unsupported(
            f"accelerate {metadata.version('accelerate')} has no FSDP2 "
            "(FullyShardedDataParallelPlugin.fsdp_version): measure it with a newer accelerate"
        )
    why = gloo_missing()
    if why:
        raise Unsupported(f"FSDP2 over CPU processes needs gloo: {why}")
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"config": config, "plan": plan.model_dump(mode="json")}))
        env = {
            **os.environ,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(_free_port()),
            "WORLD_SIZE": str(WORLD_SIZE),
            "OMP_NUM_THREADS": "1",  # as torchrun sets it: the ranks share the cores
        }
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "memtui.measure.fsdp2", str(job), tmp],
                env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for r in range(WORLD_SIZE)
        ]
        errors = []
        for r, proc in enumerate(procs):
            try:
                _, err = proc.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                for other in procs:
                    other.kill()
                raise RuntimeError(f"FSDP2 rank {r} did not finish in {TIMEOUT} s") from None
            if proc.returncode:
                errors.append(f"rank {r}: {_last_error(err)}")
        if errors:
            raise RuntimeError("FSDP2 step failed: " + "; ".join(errors))
        ranks = [_load(Path(tmp) / f"rank{r}.json") for r in range(WORLD_SIZE)]
    first = ranks[0]
    for r, rank in enumerate(ranks[1:], 1):
        differs = [k for k in _COMPARED if getattr(rank, k) != getattr(first, k)]
        if differs:
            first.notes.append(f"rank {r} differs from rank 0 in {', '.join(differs)}")
    return first


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _last_error(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _load(path: Path) -> Measurement:
    return Measurement(**json.loads(read_text(path, MEASUREMENT)))


@contextlib.contextmanager
def _buffers_classed(probe: Any) -> Iterator[None]:
    """While FSDP2's all-gather, copy-out and reduce-scatter run, storages they allocate are
    its buffers; the sharded gradients foreach_reduce leaves behind are static state."""
    from torch.distributed.fsdp._fully_shard import _fsdp_param_group as group

    from memtui.measure.probe import GATHERED, local

    names = ("foreach_all_gather", "foreach_all_gather_copy_out", "foreach_reduce")
    originals = {n: getattr(group, n) for n in names}

    def wrap(name: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            tracker = probe.tracker if not probe.done else None
            if tracker is None:
                return fn(*args, **kwargs)
            before, tracker.inside = tracker.inside, GATHERED
            try:
                out = fn(*args, **kwargs)
            finally:
                tracker.inside = before
            if name == "foreach_reduce":
                for fsdp_param in args[0]:
                    grad = fsdp_param.sharded_param.grad
                    if grad is not None:
                        tracker.drop(local(grad))
            return out

        return inner

    for name, fn in originals.items():
        setattr(group, name, wrap(name, fn))
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(group, name, fn)


def _unsharded_grads(model: Any) -> list[Any]:
    """The unsharded gradients FSDP2 holds between micro-batches without gradient sync
    (FSDPParamGroup.post_backward leaves them on the unsharded parameters, or in
    `unsharded_accumulated_grad` when the reduce dtype differs)."""
    from torch.distributed.fsdp import FSDPModule

    out = []
    for module in model.modules():
        if not isinstance(module, FSDPModule):
            continue
        group = module._get_fsdp_state()._fsdp_param_group
        for fsdp_param in group.fsdp_params if group else ():
            grad = fsdp_param.unsharded_accumulated_grad
            if grad is None and hasattr(fsdp_param, "_unsharded_param"):
                grad = fsdp_param._unsharded_param.grad
            if grad is not None:
                out.append(grad)
    return out


def _rank_main(job: Path, out: Path) -> None:
    """One rank: build the model, train it through Trainer + accelerate's FSDP2, write the
    measurement."""
    import torch
    import torch.distributed as dist
    from accelerate import PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin
    from transformers import Trainer

    from memtui.measure.build import hf_model
    from memtui.measure.probe import StepProbe
    from memtui.measure.step import native_dropout
    from memtui.measure.trainer import _quiet, lora_model, run_trainer

    data = json.loads(read_text(job, MEASUREMENT))
    config, plan = data["config"], Plan.model_validate(data["plan"])
    mixed = plan.precision is Precision.bf16_mixed

    class Fsdp2Trainer(Trainer):  # type: ignore[misc]
        def create_accelerator_and_postprocess(self) -> None:
            super().create_accelerator_and_postprocess()
            state = self.accelerator.state
            if state.distributed_type is DistributedType.MULTI_CPU:
                # accelerate/state.py AcceleratorState.__init__, the branch it takes on GPUs
                plugin = FullyShardedDataParallelPlugin(**self.args.fsdp_plugin_args)
                state.distributed_type = DistributedType.FSDP
                if state.mixed_precision != "no":
                    plugin.set_mixed_precision(state.mixed_precision)
                state.fsdp_plugin = plugin
                # ... and, as that __init__ ends, the process state learns it too
                PartialState._shared_state["distributed_type"] = state.distributed_type
                self.is_fsdp_enabled = True

    torch.manual_seed(0)
    dtype = torch.float32 if plan.precision is Precision.fp32 else torch.bfloat16
    with _quiet():
        model: Any = hf_model(config, plan, dtype)
        if plan.method is Method.lora:
            model = lora_model(model, plan, config["model_type"])
    vocab = int(model.get_output_embeddings().weight.shape[0])
    param_dtype = torch.bfloat16 if mixed else dtype
    unsharded = frozenset(
        (tuple(p.shape), param_dtype) for p in model.parameters() if p.requires_grad
    )
    probe = StepProbe(
        vocab,
        plan.micro_batch,
        plan.seq_len,
        grads_after_backward=True,
        unsharded=unsharded,
        held=_unsharded_grads,
    )
    with native_dropout(), _buffers_classed(probe), _quiet():
        run_trainer(
            model,
            plan,
            vocab,
            probe,
            base=Fsdp2Trainer,
            bf16=mixed,
            accumulation=plan.grad_accum,
            fsdp=_SHARDING[plan.strategy],
            fsdp_config={"fsdp_version": 2},
            ddp_backend="gloo",
        )
    m = probe.measurement()
    m.world_size = dist.get_world_size()
    rank = dist.get_rank()
    (out / f"rank{rank}.json").write_text(json.dumps(asdict(m)))
    dist.destroy_process_group()


if __name__ == "__main__":
    _rank_main(Path(sys.argv[1]), Path(sys.argv[2]))
