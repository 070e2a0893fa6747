"""A synthetic node for `memtui --demo` and `memtui watch --demo`: no GPU needed.

N GPUs of one card run a data-parallel job: each rank's memory ramps from a CUDA context to
just under a per-GPU budget, jitters with noise, and once crosses the budget (an excursion,
the moment a real job would be near OOM). A second, small process sits on GPU 0.

Every value is a pure function of (seed, elapsed seconds, GPU), so a given seed and clock
always give the same snapshot, whatever was polled before: tests and UI snapshots freeze it
by passing a fake `clock`.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Sequence

from memtui.errors import SourceError
from memtui.telemetry.models import DeviceSnapshot, NodeSnapshot, ProcessSnapshot
from memtui.telemetry.source import SourceInfo, SourceKind, select_devices

MiB = 1024**2
#: Total memory NVML reports for an NVIDIA H100 80GB HBM3 (81559 MiB), the default card.
H100_80GB_TOTAL_BYTES = 81559 * MiB
_CONTEXT_BYTES = 600 * MiB  # a CUDA context plus cuBLAS workspace, before any tensor
_RESERVED_BYTES = 512 * MiB  # what the driver reserves (memory.reserved)
_FIRST_PID = 41000
# An H100 SXM's board figures, for the demo's sensors (NVIDIA H100 Tensor Core GPU datasheet:
# 700 W maximum TDP; `nvidia-smi -q -d CLOCK` max clocks SM 1980 MHz, memory 2619 MHz)
_POWER_LIMIT_MW = 700_000
_IDLE_POWER_MW = 70_000
_SM_CLOCK_MHZ = (345, 1980)  # idle, busy
_MEMORY_CLOCK_MHZ = 2619
#: GPUs a synthetic node may have: more than any real node (100,000 never finished a poll).
MAX_GPUS = 64

#: What the demo source is: never silent (no I/O), so `silent` is never said.
DEMO_INFO = SourceInfo(
    SourceKind.SYNTHETIC,
    "demo",
    "demo (synthetic node)",
    "the demo node is not answering",
    "please report this",
)


class SyntheticSource:
    """A believable node, deterministic given `seed` and `clock`.

    Sizes are bytes: `total_bytes` per GPU (the card's NVML total) and `budget_bytes`, the
    per-GPU memory the job was planned for (default 85 percent of the card). The job ramps
    over `ramp_s` seconds; the excursion past the budget starts at `excursion_at_s` and
    lasts `excursion_s` seconds, on one GPU chosen by the seed.
    """

    def __init__(
        self,
        gpus: int = 8,
        *,
        card: str = "NVIDIA H100 80GB HBM3",
        total_bytes: int = H100_80GB_TOTAL_BYTES,
        budget_bytes: int | None = None,
        seed: int = 0,
        clock: Callable[[], float] = time.time,
        start: float | None = None,
        ramp_s: float = 60.0,
        excursion_at_s: float | None = None,
        excursion_s: float = 8.0,
        only: Sequence[str] = (),
    ) -> None:
        if not 1 <= gpus <= MAX_GPUS:
            raise SourceError(f"a synthetic node has 1 to {MAX_GPUS} GPUs, not {gpus}")
        if total_bytes <= _CONTEXT_BYTES + _RESERVED_BYTES:
            raise SourceError(f"total_bytes={total_bytes} is too small for a GPU")
        self.gpus = gpus
        self.card = card
        self.total_bytes = total_bytes
        self.budget_bytes = budget_bytes if budget_bytes is not None else int(total_bytes * 0.85)
        if not _CONTEXT_BYTES < self.budget_bytes <= total_bytes - _RESERVED_BYTES:
            raise SourceError(
                f"budget_bytes={self.budget_bytes} must lie between a CUDA context "
                f"({_CONTEXT_BYTES}) and the card's usable memory"
            )
        self.seed = seed
        self.ramp_s = ramp_s
        self.excursion_at_s = excursion_at_s if excursion_at_s is not None else ramp_s + 30.0
        self.excursion_s = excursion_s
        self.excursion_gpu = seed % gpus
        self.only = tuple(only)
        self.name = DEMO_INFO.label
        self.info = DEMO_INFO
        self._clock = clock
        self._start = clock() if start is None else start

    def poll(self) -> NodeSnapshot:
        """The node as it is `clock() - start` seconds into the job."""
        now = self._clock()
        elapsed = max(0.0, now - self._start)
        devices = tuple(self._device(i, elapsed) for i in range(self.gpus))
        snapshot = NodeSnapshot(
            time=now,
            hostname="demo-node",
            source=self.name,
            driver_version="550.54.15",
            cuda_version="12.4",
            devices=devices,
        )
        return select_devices(snapshot, self.only)

    def _device(self, i: int, elapsed: float) -> DeviceSnapshot:
        tick = int(elapsed)  # noise changes once a second, like a 1 Hz poll would see
        rng = random.Random(f"{self.seed}:{i}:{tick}")  # str seeds are stable across runs
        budget = self.budget_bytes
        # the second process (someone's eval loop) starts a third of the way into the ramp
        second = int(budget * 0.02) if i == 0 and elapsed >= self.ramp_s / 3 else 0
        x = min(1.0, elapsed / self.ramp_s) if self.ramp_s > 0 else 1.0
        ramp = 1.0 - (1.0 - x) ** 2  # fast at first (weights, optimizer state), then slower
        # settle at 93-97 percent of the budget (minus the second process on GPU 0)
        steady = budget * (0.95 + rng.uniform(-0.02, 0.02)) - second
        main = int(_CONTEXT_BYTES + (steady - _CONTEXT_BYTES) * ramp)
        excursion_end = self.excursion_at_s + self.excursion_s
        if i == self.excursion_gpu and self.excursion_at_s <= elapsed < excursion_end:
            main = int(budget * 1.03) - second  # a long batch: 3 percent past the budget
        main = min(main, self.total_bytes - _RESERVED_BYTES - second)
        processes = [
            ProcessSnapshot(
                pid=_FIRST_PID + i,
                used_bytes=main,
                name="python",
                user="demo",
                command=f"python train.py --local_rank={i}",
            )
        ]
        if second:
            processes.append(
                ProcessSnapshot(
                    pid=_FIRST_PID + 900,
                    used_bytes=second,
                    name="python",
                    user="demo",
                    command="python eval_watch.py --every 500",
                )
            )
        used = main + second
        util = 0 if elapsed < 1 else int(min(100, 88 + rng.uniform(-8, 11) * ramp))
        busy = util / 100
        # draw follows the load between idle and the limit; the core warms with it
        power = int(_IDLE_POWER_MW + (_POWER_LIMIT_MW - _IDLE_POWER_MW) * busy * 0.82)
        idle_clock, boost = _SM_CLOCK_MHZ
        return DeviceSnapshot(
            index=i,
            uuid=_uuid(self.seed, i),
            name=self.card,
            memory_total=self.total_bytes,
            memory_used=used,
            memory_free=self.total_bytes - used - _RESERVED_BYTES,
            memory_reserved=_RESERVED_BYTES,
            utilization_gpu=util,
            utilization_memory=int(util * 0.45),
            temperature_c=int(34 + 36 * busy + rng.uniform(-1, 1)),
            power_mw=power + int(rng.uniform(-5_000, 5_000)),
            power_limit_mw=_POWER_LIMIT_MW,
            clock_sm_mhz=boost if util else idle_clock,
            clock_memory_mhz=_MEMORY_CLOCK_MHZ,
            processes=tuple(processes),
        )

    def close(self) -> None:
        """Nothing to release."""


def _uuid(seed: int, index: int) -> str:
    """A UUID shaped like NVML's ("GPU-8-4-4-4-12" hex), stable for a seed and GPU."""
    h = hashlib.sha256(f"memtui-demo:{seed}:{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
