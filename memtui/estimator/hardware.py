"""GPU and interconnect presets.

GPU memory is the total NVML reports (`nvidia-smi --query-gpu=memory.total`), not the
marketing figure: an "80 GB" H100 reports 81559 MiB, an A100 80GB 81920 MiB. Bandwidths are
per GPU per direction, the figure a ring collective can approach.

Compute figures (the step-time model, `memtui.estimator.step_time`) are the vendor's
datasheet peaks without sparsity (NVIDIA prints the sparse figure, twice the dense one, first
for Ampere and later parts: the dense one is used here), in FLOP/s; 0 where the card has no
tensor cores for the type. Memory bandwidth is the datasheet's, bytes/s; the host link is the
card's PCIe generation at x16, per direction (the datasheets print both directions summed).
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
    bf16_flops: float
    """Dense bf16 tensor-core peak, FLOP/s (0: no bf16 tensor cores)."""
    fp16_flops: float
    """Dense fp16 tensor-core peak with fp32 accumulation, FLOP/s."""
    fp8_flops: float
    """Dense fp8 tensor-core peak, FLOP/s (0: no fp8 tensor cores)."""
    tf32_flops: float
    """Dense tf32 tensor-core peak, FLOP/s (0: no tf32)."""
    fp32_flops: float
    """fp32 peak on the CUDA cores (no tensor cores), FLOP/s."""
    memory_bandwidth: float
    """Device memory bandwidth, bytes/s."""
    host_link: float
    """Bytes/s per direction between the card and the host (PCIe x16)."""
    sms: int
    """Streaming multiprocessors: the architecture whitepaper's count for the card (CUDA
    cores over the cores per SM: 64 on Volta and Turing, 128 on GA102 and Ada; A100 108,
    H100 SXM 132 and PCIe 114, B200 148), what a kernel's blocks are spread over."""
    matmul_ceiling: float = 0.803
    """The share of the dense peak the best-shaped bf16 matmul reaches (Maximum Achievable
    Matmul FLOPS over the datasheet peak): stas00/ml-engineering compute/accelerator/README.md,
    "Maximum Achievable Matmul FLOPS comparison table" (v2, torch 2.6-2.7, commit b9e29720):
    A100 SXM 86.9%, H100 SXM 80.3%. Cards without a published figure take H100 SXM's, the
    lowest NVIDIA figure of that table."""


# Per-direction PCIe x16 rates (PCI-SIG: 4.0 16 GT/s, 5.0 32 GT/s per lane), as the
# datasheets' summed figures halved: "PCIe Gen4 64 GB/s", "PCIe Gen5 128 GB/s".
_PCIE3, _PCIE4, _PCIE5 = 16e9, 32e9, 64e9
T = 1e12

# one card per row, its figures in the fields' order
# fmt: off
GPUS: dict[str, GpuPreset] = {
    p.key: p
    for p in (
        # NVIDIA A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf): BF16 and
        # FP16 312 TFLOPS, TF32 156, FP32 19.5; HBM2 1,555 GB/s (40GB SXM), HBM2e 2,039 GB/s
        # (80GB SXM); PCIe Gen4 64 GB/s
        GpuPreset(
            "a100-40gb", "A100 40GB", 40960 * MiB, "nvlink3", 8.0,
            312 * T, 312 * T, 0, 156 * T, 19.5 * T, 1555e9, _PCIE4, 108, 0.869,
        ),
        GpuPreset(
            "a100-80gb", "A100 80GB", 81920 * MiB, "nvlink3", 8.0,
            312 * T, 312 * T, 0, 156 * T, 19.5 * T, 2039e9, _PCIE4, 108, 0.869,
        ),
        # NVIDIA H100 datasheet (H100 Tensor Core GPU, SXM and PCIe columns; its tensor
        # figures are with sparsity, halved here): SXM BF16/FP16 989.5, FP8 1,979, TF32 494.5,
        # FP32 67 TFLOPS, HBM3 3.35 TB/s; PCIe BF16/FP16 756, FP8 1,513, TF32 378, FP32 51,
        # HBM2e 2 TB/s; both PCIe Gen5 128 GB/s
        GpuPreset(
            "h100-sxm", "H100 80GB SXM", 81559 * MiB, "nvlink4", 9.0,
            989.5 * T, 989.5 * T, 1979 * T, 494.5 * T, 67 * T, 3.35e12, _PCIE5, 132,
        ),
        GpuPreset(
            "h100-pcie", "H100 80GB PCIe", 81559 * MiB, "pcie5", 9.0,
            756 * T, 756 * T, 1513 * T, 378 * T, 51 * T, 2.0e12, _PCIE5, 114,
        ),
        # NVIDIA H200 datasheet (H200 SXM): the H100 SXM's compute, HBM3e 4.8 TB/s, PCIe Gen5
        GpuPreset(
            "h200", "H200 141GB", 143771 * MiB, "nvlink4", 9.0,
            989.5 * T, 989.5 * T, 1979 * T, 494.5 * T, 67 * T, 4.8e12, _PCIE5, 132,
        ),
        # NVIDIA HGX B200 datasheet, per GPU (sparse figures halved): FP8 4.5 PFLOPS, BF16 and
        # FP16 2.25, TF32 1.125, FP32 80 TFLOPS; HBM3e 8 TB/s; PCIe Gen5 to the host
        GpuPreset(
            "b200", "B200 180GB", 183359 * MiB, "nvlink5", 10.0,
            2250 * T, 2250 * T, 4500 * T, 1125 * T, 80 * T, 8e12, _PCIE5, 148,
        ),
        # NVIDIA L40S datasheet: BF16/FP16 362.05, FP8 733, TF32 183, FP32 91.6 TFLOPS;
        # GDDR6 864 GB/s; PCIe Gen4 x16 64 GB/s
        GpuPreset(
            "l40s", "L40S 48GB", 46068 * MiB, "pcie4", 8.9,
            362.05 * T, 362.05 * T, 733 * T, 183 * T, 91.6 * T, 864e9, _PCIE4, 142,
        ),
        # NVIDIA L4 datasheet: BF16/FP16 121, FP8 242.5, TF32 60, FP32 30.3 TFLOPS; 300 GB/s;
        # PCIe Gen4 x16 64 GB/s
        GpuPreset(
            "l4", "L4 24GB", 23034 * MiB, "pcie4", 8.9,
            121 * T, 121 * T, 242.5 * T, 60 * T, 30.3 * T, 300e9, _PCIE4, 58,
        ),
        # NVIDIA A10 datasheet (the A10G is AWS's variant of GA102 with no datasheet of its
        # own): BF16/FP16 125, TF32 62.5, FP32 31.2 TFLOPS; GDDR6 600 GB/s; PCIe Gen4
        GpuPreset(
            "a10g", "A10G 24GB", 23028 * MiB, "pcie4", 8.6,
            125 * T, 125 * T, 0, 62.5 * T, 31.2 * T, 600e9, _PCIE4, 72,
        ),
        # NVIDIA Ampere GA102 whitepaper, Table (RTX 3090): FP16 and BF16 tensor with FP32
        # accumulate 71 TFLOPS, TF32 35.6, FP32 35.6; GDDR6X 936 GB/s; PCIe Gen4
        GpuPreset(
            "rtx3090", "RTX 3090 24GB", 24576 * MiB, "pcie4", 8.6,
            71 * T, 71 * T, 0, 35.6 * T, 35.6 * T, 936e9, _PCIE4, 82,
        ),
        # NVIDIA Ada Lovelace architecture whitepaper, Appendix A (RTX 4090): FP16 and BF16
        # tensor with FP32 accumulate 165.2 TFLOPS, FP8 330.3, TF32 82.6, FP32 82.6; GDDR6X
        # 1,008 GB/s; PCIe Gen4. Best matmul: torch.mm bf16 (square, 1024 to 10240) on six
        # RTX 4090 24GB, torch 2.4-2.8: 162.4, 163.1, 164.8, 165.7, 170.1, 173.3 TFLOPS,
        # median 165.3 (zzc0721/torch-performance-test-data database.md @9d828276, each the
        # best of test.py benchmark_precision's sizes; its A100 SXM4 80GB 264.5 and H100
        # HBM3 797.5 and 783.7 agree with the MAMF table's): the datasheet peak, at its
        # 2,520 MHz boost clock, is reached
        GpuPreset(
            "rtx4090", "RTX 4090 24GB", 24564 * MiB, "pcie4", 8.9,
            165.2 * T, 165.2 * T, 330.3 * T, 82.6 * T, 82.6 * T, 1008e9, _PCIE4, 128, 1.0,
        ),
        # NVIDIA V100 datasheet (SXM2): tensor (FP16) 125 TFLOPS, FP32 15.7; HBM2 900 GB/s;
        # PCIe Gen3 32 GB/s; no bf16 or tf32 tensor cores
        GpuPreset(
            "v100-16gb", "V100 16GB", 16384 * MiB, "nvlink2", 7.0,
            0, 125 * T, 0, 0, 15.7 * T, 900e9, _PCIE3, 80,
        ),
        GpuPreset(
            "v100-32gb", "V100 32GB", 32768 * MiB, "nvlink2", 7.0,
            0, 125 * T, 0, 0, 15.7 * T, 900e9, _PCIE3, 80,
        ),
        # NVIDIA T4 datasheet: mixed-precision (FP16/FP32) 65 TFLOPS, FP32 8.1; GDDR6 320 GB/s;
        # PCIe Gen3 x16 32 GB/s
        GpuPreset(
            "t4", "T4 16GB", 15360 * MiB, "pcie3", 7.5,
            0, 65 * T, 0, 0, 8.1 * T, 320e9, _PCIE3, 40,
        ),
    )
}
# fmt: on
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


def card_of(name: str, compute_capability: float, memory: int) -> tuple[GpuPreset, bool]:
    """The preset whose compute figures stand for a plan's card, and whether it was assumed:
    the preset named `name` (its key, alias or display name, or an NVML name that contains a
    preset's key: "NVIDIA H100 80GB HBM3"), else the preset of the same compute capability
    whose memory is nearest, else the slowest preset of the nearest capability below."""
    named = gpu_preset(name) or _BY_NAME.get(_key(name))
    if named is not None:
        return named, False
    key = _key(name)
    scores = {p.key: _matched(p, key) for p in GPUS.values()}
    best = max(scores.values())
    if best:
        within = [p for p in GPUS.values() if scores[p.key] == best]
        return min(within, key=lambda p: abs(p.memory - memory)), False
    same = [p for p in GPUS.values() if p.compute_capability == compute_capability]
    if same:
        return min(same, key=lambda p: abs(p.memory - memory)), True
    below = [p for p in GPUS.values() if p.compute_capability <= compute_capability]
    pool = below or list(GPUS.values())
    top = max(p.compute_capability for p in pool)
    return min((p for p in pool if p.compute_capability == top), key=lambda p: p.bf16_flops), True


def _matched(preset: GpuPreset, key: str) -> int:
    """How much of a preset's key a card's name holds: none unless its family ("h100" of
    "h100-sxm") is there, else the characters of the key's parts it contains (so "NVIDIA H100
    PCIe" is h100-pcie, "NVIDIA L40S" is l40s, not l4)."""
    family, *rest = preset.key.split("-")
    if family not in key:
        return 0
    return len(family) + sum(len(part) for part in rest if part in key)


_BY_NAME = {_key(p.name): p for p in GPUS.values()}
