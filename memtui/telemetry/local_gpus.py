"""How many GPUs a training launch started on this machine would use: NVML's count of the
node's GPUs, narrowed by CUDA_VISIBLE_DEVICES as CUDA narrows it.

`accelerate launch` without a config, `deepspeed` without --num_gpus, torchrun's
`--nproc_per_node gpu` and LLaMA-Factory without NPROC_PER_NODE start one process per
visible GPU (torch.cuda.device_count()); `memtui estimate --from` asks here when the files
give no count. No GPU, no driver or no pynvml: None (the caller then says what it assumed).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping


def local_gpu_count(env: Mapping[str, str] | None = None) -> int | None:
    """The GPUs CUDA would show a process started here with `env` (default: this process's
    environment), or None when NVML cannot count them."""
    env = os.environ if env is None else env
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError):
        return None
    try:
        count = int(pynvml.nvmlDeviceGetCount())
    except pynvml.NVMLError:
        return None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        # CUDA stops at the first entry it cannot use; "" or "-1" hides every GPU
        shown = 0
        for entry in visible.split(","):
            entry = entry.strip()
            if not entry or entry.startswith("-"):
                break
            shown += 1
        count = min(count, shown)
    return count or None
