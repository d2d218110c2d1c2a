"""Peak dense FLOP/s of NVIDIA, AMD and Intel GPUs per math mode, from the vendors' datasheets: the denominator of MFU
and HFU.

Each entry matches device names (NVML's ``nvmlDeviceGetName``, which is also what ``torch.cuda.get_device_name``
returns; on ROCm ``torch.cuda.get_device_name``'s ``"AMD Instinct MI300X"``, on XPU ``torch.xpu.get_device_name``'s
``"Intel(R) Data Center GPU Max 1550"``; the amdgpu and xe backends' names) by a pattern, and gives the dense peaks
(without 2:4 structured sparsity, which datasheets often quote with an asterisk at twice the figure) for FP32 on the CUDA cores, TF32 on the tensor cores, and BF16/FP16 on the
tensor cores with FP32 accumulation. Where a GPU has no tensor cores for a mode (V100 and T4: no TF32 and no BF16),
TF32 matmuls run in FP32, so the FP32 peak applies; BF16 has no peak and the utilization is N/A with that reason.

Datasheet figures for boards (HGX B200) are divided by the board's GPUs. A GPU not in the table gets N/A with the
reason; ``peak_tflops=`` in ``gpusight.torch`` overrides the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpusight.snapshot.model import MathMode


@dataclass(frozen=True, slots=True)
class PeakSpec:
    """Dense peak TFLOP/s of one GPU model per math mode, and the datasheet they come from."""

    model: str
    """The model's name as the datasheet gives it, e.g. ``"H100 SXM"``."""
    fp32: float
    """FP32 on the CUDA cores (AMD Instinct: on the matrix cores, where its FP32 GEMMs run; Intel: vector engines)."""
    tf32: float | None
    """TF32 on the tensor cores, dense; None where the GPU has none (TF32 math then runs as FP32)."""
    bf16: float | None
    """BF16 on the tensor cores, dense; None where the GPU has no BF16 tensor cores."""
    fp16: float
    """FP16 on the tensor cores (FP32 accumulate), dense."""
    source: str
    """The datasheet the figures come from."""


@dataclass(frozen=True, slots=True)
class Peak:
    """The peak that applies to a GPU and math mode, or why none does."""

    tflops: float | None
    """Dense peak TFLOP/s; None when unknown."""
    source: str
    """Where the figure comes from, or why there is none (one line)."""


_V100_SXM = PeakSpec("V100 SXM2", 15.7, None, None, 125.0, "NVIDIA Tesla V100 datasheet (SXM2)")
_V100_PCIE = PeakSpec("V100 PCIe", 14.0, None, None, 112.0, "NVIDIA Tesla V100 datasheet (PCIe)")
_V100S = PeakSpec("V100S PCIe", 16.4, None, None, 130.0, "NVIDIA Tesla V100S datasheet")
_T4 = PeakSpec("T4", 8.1, None, None, 65.0, "NVIDIA T4 datasheet")
_A10 = PeakSpec("A10", 31.2, 62.5, 125.0, 125.0, "NVIDIA A10 datasheet")
_A30 = PeakSpec("A30", 10.3, 82.0, 165.0, 165.0, "NVIDIA A30 datasheet")
_A40 = PeakSpec("A40", 37.4, 74.8, 149.7, 149.7, "NVIDIA A40 datasheet")
_A100 = PeakSpec("A100", 19.5, 156.0, 312.0, 312.0, "NVIDIA A100 datasheet (40 GB and 80 GB, SXM and PCIe)")
_L4 = PeakSpec("L4", 30.3, 60.0, 121.0, 121.0, "NVIDIA L4 datasheet")
_L40 = PeakSpec("L40", 90.5, 90.5, 181.0, 181.0, "NVIDIA L40 datasheet")
_L40S = PeakSpec("L40S", 91.6, 183.0, 362.05, 362.05, "NVIDIA L40S datasheet")
_H100_SXM = PeakSpec("H100 SXM", 67.0, 494.5, 989.5, 989.5, "NVIDIA H100 datasheet (SXM)")
_H100_PCIE = PeakSpec("H100 PCIe", 51.0, 378.0, 756.0, 756.0, "NVIDIA H100 datasheet (PCIe)")
_H100_NVL = PeakSpec("H100 NVL", 60.0, 417.5, 835.5, 835.5, "NVIDIA H100 datasheet (NVL)")
_H200_SXM = PeakSpec("H200 SXM", 67.0, 494.5, 989.5, 989.5, "NVIDIA H200 datasheet (SXM)")
_H200_NVL = PeakSpec("H200 NVL", 60.0, 417.5, 835.5, 835.5, "NVIDIA H200 datasheet (NVL)")
_B200 = PeakSpec("B200", 75.0, 1125.0, 2250.0, 2250.0, "NVIDIA HGX B200 datasheet (per GPU: the 8-GPU board's figures / 8)")

# AMD Instinct: FP32 is the matrix-core peak ("FP32 Matrix"), on which FP32 GEMMs run (MFMA); CDNA 2 has no TF32, so
# TF32 math runs as FP32 there. An MI250X or MI250 is two dies (GCDs) that ROCm shows as two GPUs, each with half the
# board's figures.
_MI210 = PeakSpec("MI210", 45.3, None, 181.0, 181.0, "AMD Instinct MI210 datasheet (FP32 matrix)")
_MI250X = PeakSpec("MI250X GCD", 47.85, None, 191.5, 191.5,
                   "AMD Instinct MI250X datasheet (FP32 matrix; per GCD: the module's figures / 2)")
_MI250 = PeakSpec("MI250 GCD", 45.25, None, 181.05, 181.05,
                  "AMD Instinct MI250 datasheet (FP32 matrix; per GCD: the module's figures / 2)")
_MI300X = PeakSpec("MI300X", 163.4, 653.7, 1307.4, 1307.4, "AMD Instinct MI300X datasheet (FP32 matrix, dense)")

# Intel: FP32 on the vector engines, TF32 (Intel's XF32 math mode) and BF16/FP16 on the XMX matrix engines. Arc's
# Xe-HPG XMX has no TF32. A Max 1550 is two stacks; where Level Zero shows each stack as a device (FLAT hierarchy) the
# name is the same, and the card's figures apply to half a card: MFU is then understated, never overstated.
_MAX_1550 = PeakSpec("Data Center GPU Max 1550", 52.4, 419.4, 838.9, 838.9,
                     "Intel Data Center GPU Max 1550 product brief (128 Xe-cores at 1.6 GHz)")
_MAX_1100 = PeakSpec("Data Center GPU Max 1100", 22.2, 177.8, 355.5, 355.5,
                     "Intel Data Center GPU Max 1100 product brief (56 Xe-cores at 1.55 GHz)")
_ARC_A770 = PeakSpec("Arc A770", 17.2, None, 137.6, 137.6,
                     "Intel Arc A770 specifications (32 Xe-cores at the 2.1 GHz graphics clock: 256 FP32 and 2048 "
                     "FP16/BF16 XMX FLOP per Xe-core per clock; 275 INT8 TOPS)")

PEAK_TABLE: tuple[tuple[re.Pattern[str], PeakSpec], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), spec)
    for pattern, spec in (
        (r"\bV100S\b", _V100S),
        (r"\bV100\b.*\bSXM", _V100_SXM),
        (r"\bV100\b.*\bPCIE", _V100_PCIE),
        (r"\bT4\b", _T4),
        (r"\bA10\b", _A10),
        (r"\bA30\b", _A30),
        (r"\bA40\b", _A40),
        (r"\bA100\b", _A100),
        (r"\bL4\b", _L4),
        (r"\bL40S\b", _L40S),
        (r"\bL40\b", _L40),
        (r"\bH100\b.*\bNVL\b", _H100_NVL),
        (r"\bH100\b.*\bPCIE\b", _H100_PCIE),
        (r"\bH100\b", _H100_SXM),
        (r"\bH200\b.*\bNVL\b", _H200_NVL),
        (r"\bH200\b", _H200_SXM),
        (r"\bB200\b", _B200),
        (r"\bMI210\b", _MI210),
        (r"\bMI250X\b", _MI250X),
        (r"\bMI250\b", _MI250),
        (r"\bMI300X\b", _MI300X),
        (r"\bMax 1550\b", _MAX_1550),
        (r"\bMax 1100\b", _MAX_1100),
        (r"\bArc\b.*\bA770\b", _ARC_A770),
    )
)
"""(name pattern, peaks) in match order: the first pattern found in the NVML name wins, so the more specific come
first (``H100 NVL`` and ``H100 PCIe`` before a plain ``H100``, which NVML names ``NVIDIA H100 80GB HBM3`` on SXM).
ROCm may name either MI250 die ``AMD Instinct MI250X/MI250``: it matches the MI250X, the higher peak, so that MFU is
never overstated."""


def peak_spec(device_name: str | None) -> PeakSpec | None:
    """The table's entry for an NVML device name; None for a GPU it does not know."""
    if not device_name:
        return None
    for pattern, spec in PEAK_TABLE:
        if pattern.search(device_name):
            return spec
    return None


def peak_for(device_name: str | None, mode: MathMode | None) -> Peak:
    """The dense peak of ``device_name`` for math ``mode``, with its datasheet; or None with the reason."""
    if mode is None:
        return Peak(None, "math mode unknown")
    spec = peak_spec(device_name)
    if spec is None:
        shown = repr(device_name) if device_name else "no GPU name"
        return Peak(None, f"GPU {shown} not in the peak table: give peak_tflops=")
    if mode is MathMode.FP32:
        return Peak(spec.fp32, f"{spec.source}, FP32")
    if mode is MathMode.TF32:
        if spec.tf32 is None:
            return Peak(spec.fp32, f"{spec.source}, FP32 ({spec.model} has no TF32 tensor cores)")
        return Peak(spec.tf32, f"{spec.source}, TF32 dense")
    if mode is MathMode.FP16:
        return Peak(spec.fp16, f"{spec.source}, FP16 dense")
    if spec.bf16 is None:
        return Peak(None, f"{spec.model} has no BF16 tensor cores (bf16 math is emulated)")
    return Peak(spec.bf16, f"{spec.source}, BF16 dense")
