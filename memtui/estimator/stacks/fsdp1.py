"""PyTorch FSDP1 (FullyShardedDataParallel) as accelerate applies it.

Read from torch 2.13 (distributed/fsdp/) and accelerate 1.15: accelerate upcasts trainable
parameters to fp32 before wrapping (accelerator.py prepare_model) and sets
MixedPrecision(param_dtype=bf16, reduce_dtype=bf16); each FlatParamHandle keeps the fp32
shard, gathers into a bf16 unsharded flat parameter (_flat_param.py _full_param_padded) and
keeps the sharded gradient in fp32 (_saved_grad_shard). accelerate passes
limit_all_gathers=True, so at most two all-gathers are in flight (_limiter_utils.py
_FreeEventQueue: _max_num_inflight_all_gathers = 2): the running unit and one more. The
state layout is FSDP2's.
"""

from __future__ import annotations

from memtui.estimator.choices import StackName
from memtui.estimator.stacks.fsdp2 import Fsdp2Stack


class Fsdp1Stack(Fsdp2Stack):
    """FullyShardedDataParallel through accelerate (fsdp_version: 1)."""

    name = StackName.fsdp1
    label = "FSDP1 (FullyShardedDataParallel)"
    units_in_flight = 2  # limit_all_gathers


FSDP1 = Fsdp1Stack()
