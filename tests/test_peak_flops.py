"""The peak FLOP/s table: NVML names as real drivers report them map to the right datasheet row and math mode."""

from __future__ import annotations

import pytest

from gpusight.collect.model import MathMode
from gpusight.collect.peak_flops import PEAK_TABLE, peak_for, peak_spec

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
        assert spec.fp32 > 0 and spec.fp16 > spec.fp32 and spec.source.startswith("NVIDIA")
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
