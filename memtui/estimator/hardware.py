"""GPU and interconnect presets.

GPU memory is the total NVML reports (`nvidia-smi --query-gpu=memory.total`), not the
marketing figure: an "80 GB" H100 reports 81559 MiB, an A100 80GB 81920 MiB. Bandwidths are
per GPU per direction, the figure a ring collective can approach.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memtui.estimator.units import MiB


@dataclass(frozen=True)
class GpuPreset:
    key: str
    name: str
    memory: int
    """Bytes, as NVML reports the card's total."""
    intra_node: str
    """Default interconnect preset inside a node."""
    compute_capability: float
    """CUDA compute capability (sm): PyTorch sizes its cuBLAS workspace by it."""


GPUS: dict[str, GpuPreset] = {
    p.key: p
    for p in (
        GpuPreset("a100-40gb", "A100 40GB", 40960 * MiB, "nvlink3", 8.0),
        GpuPreset("a100-80gb", "A100 80GB", 81920 * MiB, "nvlink3", 8.0),
        GpuPreset("h100-sxm", "H100 80GB SXM", 81559 * MiB, "nvlink4", 9.0),
        GpuPreset("h100-pcie", "H100 80GB PCIe", 81559 * MiB, "pcie5", 9.0),
        GpuPreset("h200", "H200 141GB", 143771 * MiB, "nvlink4", 9.0),
        GpuPreset("b200", "B200 180GB", 183359 * MiB, "nvlink5", 10.0),
        GpuPreset("l40s", "L40S 48GB", 46068 * MiB, "pcie4", 8.9),
        GpuPreset("l4", "L4 24GB", 23034 * MiB, "pcie4", 8.9),
        GpuPreset("a10g", "A10G 24GB", 23028 * MiB, "pcie4", 8.6),
        GpuPreset("rtx3090", "RTX 3090 24GB", 24576 * MiB, "pcie4", 8.6),
        GpuPreset("rtx4090", "RTX 4090 24GB", 24564 * MiB, "pcie4", 8.9),
        GpuPreset("v100-16gb", "V100 16GB", 16384 * MiB, "nvlink2", 7.0),
        GpuPreset("v100-32gb", "V100 32GB", 32768 * MiB, "nvlink2", 7.0),
        GpuPreset("t4", "T4 16GB", 15360 * MiB, "pcie3", 7.5),
    )
}
GPU_ALIASES = {
    "a100": "a100-80gb",
    "h100": "h100-sxm",
    "v100": "v100-32gb",
    "4090": "rtx4090",
    "3090": "rtx3090",
}

# Bytes/s per GPU per direction. NVLink: NVIDIA's per-GPU totals halved (both directions);
# PCIe x16: 4.0 16 GB/s, 5.0 32 GB/s... as usable unidirectional figures.
INTRA_NODE: dict[str, float] = {
    "nvlink5": 900e9,  # B200: 1.8 TB/s total
    "nvlink4": 450e9,  # H100/H200 SXM: 900 GB/s total
    "nvlink3": 300e9,  # A100 SXM: 600 GB/s total
    "nvlink2": 150e9,  # V100 SXM2: 300 GB/s total
    "pcie5": 64e9,  # PCIe 5.0 x16
    "pcie4": 32e9,  # PCIe 4.0 x16
    "pcie3": 16e9,  # PCIe 3.0 x16
}
# Per GPU: one NIC per GPU as in DGX/HGX designs.
INTER_NODE: dict[str, float] = {
    "ib-xdr": 100e9,  # 800 Gb/s
    "ib-ndr": 50e9,  # 400 Gb/s
    "ib-hdr": 25e9,  # 200 Gb/s
    "eth-100g": 12.5e9,
    "eth-25g": 3.125e9,
}


def gpu_preset(text: str) -> GpuPreset | None:
    """The preset named `text` (case and punctuation tolerant), or None."""
    key = _key(text)
    return _BY_KEY.get(_ALIAS_KEYS.get(key, key))


def _key(text: str) -> str:
    """A card's name without case, spaces or punctuation: "RTX 4090", "rtx-4090", "rtx4090"."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


_BY_KEY = {_key(key): preset for key, preset in GPUS.items()}
_ALIAS_KEYS = {_key(alias): _key(key) for alias, key in GPU_ALIASES.items()}
