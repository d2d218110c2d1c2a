"""The peak FLOP/s table: NVML names as real drivers report them map to the right datasheet row and math mode."""

from __future__ import annotations

import pytest

from gpusight.facts.peak_flops import PEAK_TABLE, peak_for, peak_spec
from gpusight.snapshot.model import MathMode

# NVML names as drivers report them (nvidia-smi -L / nvmlDeviceGetName), with the datasheet model they must match.
NAMES = [
    ("Tesla V100-SXM2-16GB", "V100 SXM2"),
    ("Tesla V100-SXM2-32GB", "V100 SXM2"),
    ("Tesla V100-PCIE-32GB", "V100 PCIe"),
    ("Tesla V100S-PCIE-32GB", "V100S PCIe"),
    ("Tesla T4", "T4"),
    ("NVIDIA A10", "A10"),
    ("NVIDIA A100-SXM4-40GB", "A100"),
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA A100-PCIE-40GB", "A100"),
    ("NVIDIA A100 80GB PCIe", "A100"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA L40", "L40"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200 SXM"),
    ("NVIDIA H200 NVL", "H200 NVL"),
    ("NVIDIA B200", "B200"),
]


@pytest.mark.parametrize(("name", "model"), NAMES)
def test_nvml_names_find_their_datasheet_row(name, model):
    spec = peak_spec(name)
    assert spec is not None and spec.model == model


@pytest.mark.parametrize("name", ["NVIDIA A10G", "NVIDIA GeForce RTX 4090", "NVIDIA GH200 480GB", "", None])
def test_gpus_not_in_the_table_have_no_peak_and_say_why(name):
    peak = peak_for(name, MathMode.BF16)
    assert peak.tflops is None and "peak_tflops=" in peak.source


def test_every_row_is_dense_and_ordered_by_math_mode():
    for _, spec in PEAK_TABLE:
        assert spec.fp32 > 0 and spec.fp16 > spec.fp32 and spec.source.startswith(("NVIDIA", "AMD", "Intel"))
        if spec.tf32 is not None:
            assert spec.fp32 <= spec.tf32 < spec.fp16
        if spec.bf16 is not None:
            assert spec.bf16 == spec.fp16


def test_the_math_mode_picks_the_column():
    name = "NVIDIA H100 80GB HBM3"
    figures = {mode: peak_for(name, mode).tflops for mode in MathMode}
    assert figures[MathMode.BF16] == figures[MathMode.FP16] == pytest.approx(2 * figures[MathMode.TF32], rel=1e-3)
    assert figures[MathMode.FP32] < figures[MathMode.TF32]
    assert "BF16 dense" in peak_for(name, MathMode.BF16).source


def test_gpus_without_tf32_or_bf16_tensor_cores():
    tf32 = peak_for("Tesla V100-SXM2-16GB", MathMode.TF32)
    assert tf32.tflops == peak_for("Tesla V100-SXM2-16GB", MathMode.FP32).tflops and "no TF32" in tf32.source
    bf16 = peak_for("Tesla T4", MathMode.BF16)
    assert bf16.tflops is None and "no BF16" in bf16.source
    assert peak_for("NVIDIA A100-SXM4-80GB", None).tflops is None


# Names as ROCm's torch.cuda.get_device_name and torch.xpu.get_device_name give them, and the amdgpu/xe backends, with
# the datasheet figures (dense TFLOP/s) each math mode must give: (name, FP32, TF32, BF16, FP16).
OTHER_VENDORS = [
    ("AMD Instinct MI210", 45.3, 45.3, 181.0, 181.0),
    ("AMD Instinct MI250X", 47.85, 47.85, 191.5, 191.5),
    ("AMD Instinct MI250X/MI250", 47.85, 47.85, 191.5, 191.5),
    ("AMD Instinct MI250", 45.25, 45.25, 181.05, 181.05),
    ("AMD Instinct MI300X", 163.4, 653.7, 1307.4, 1307.4),
    ("Intel(R) Data Center GPU Max 1550", 52.4, 419.4, 838.9, 838.9),
    ("Intel(R) Data Center GPU Max 1100", 22.2, 177.8, 355.5, 355.5),
    ("Intel(R) Arc(TM) A770 Graphics", 17.2, 17.2, 137.6, 137.6),
    ("Intel Data Center GPU Max 1550", 52.4, 419.4, 838.9, 838.9),  # the xe/i915 backend's names (by PCI id)
    ("Intel Arc A770", 17.2, 17.2, 137.6, 137.6),
]


@pytest.mark.parametrize(("name", "fp32", "tf32", "bf16", "fp16"), OTHER_VENDORS)
def test_amd_and_intel_names_give_their_datasheet_peaks(name, fp32, tf32, bf16, fp16):
    figures = {mode: peak_for(name, mode) for mode in MathMode}
    assert {mode: peak.tflops for mode, peak in figures.items()} == {
        MathMode.FP32: fp32, MathMode.TF32: tf32, MathMode.BF16: bf16, MathMode.FP16: fp16}
    assert all(peak.source.startswith(("AMD Instinct", "Intel")) for peak in figures.values())


@pytest.mark.parametrize("name", ["AMD Instinct MI300A", "AMD Instinct MI100", "AMD Radeon RX 7900 XTX",
                                  "Intel(R) Arc(TM) A770M Graphics", "Intel(R) Data Center GPU Flex 170"])
def test_other_amd_and_intel_gpus_are_not_guessed(name):
    assert peak_for(name, MathMode.BF16).tflops is None


def test_gpus_without_tf32_say_so_and_fall_back_to_fp32():
    for name in ("AMD Instinct MI210", "Intel(R) Arc(TM) A770 Graphics"):
        assert "no TF32" in peak_for(name, MathMode.TF32).source
