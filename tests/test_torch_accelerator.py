"""The torch hook finds the GPU in use through ``torch.cuda`` (CUDA and ROCm builds) or ``torch.xpu`` (Intel).

Only CPU torch is installed here and no GPU exists: the CPU-only cases run on the real torch. ROCm and XPU cannot
exist on this machine, so those cases stand a small device module (``DeviceModule``, with the functions of
``torch.cuda``/``torch.xpu`` the hook calls) in for ``torch.cuda`` or ``torch.xpu``; nothing here ran on ROCm or
XPU. The device names are the ones ROCm's and Intel's torch builds report.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from gpusight.snapshot.model import MathMode
from gpusight.torch.accelerator import CUDA, ROCM, XPU, accelerator_in_use
from gpusight.torch.flops import FlopsMeter
from gpusight.torch.probes import cuda_memory
from gpusight.torch.window import WindowStats

GIB = 1 << 30


class DeviceModule:
    """Stands in for ``torch.cuda`` or ``torch.xpu`` of a build whose device this machine lacks: one GPU, ``name``,
    its memory statistics, and whether the program initialised it."""

    def __init__(self, name: str, initialized: bool = True) -> None:
        self.name = name
        self.initialized = initialized
        self.synchronized = 0

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self.initialized

    def current_device(self) -> int:
        assert self.initialized, "the hook must never initialise a device"
        return 0

    def get_device_name(self, device: int) -> str:
        return self.name

    def memory_allocated(self, device: int) -> int:
        return 3 * GIB

    def memory_reserved(self, device: int) -> int:
        return 4 * GIB

    def max_memory_allocated(self, device: int) -> int:
        return 5 * GIB

    def synchronize(self) -> None:
        self.synchronized += 1


def _torch(cuda: object = None, xpu: object = None, hip: str | None = None) -> SimpleNamespace:
    """torch's namespace with ``cuda``/``xpu`` replaced where given (the real ones otherwise)."""
    return SimpleNamespace(cuda=cuda or torch.cuda, xpu=xpu or torch.xpu,
                           version=SimpleNamespace(hip=hip, cuda=None if hip else torch.version.cuda))


def _stats() -> WindowStats:
    return WindowStats(window_seconds=10.0, steps=20, total_steps=20, input_wait_fraction=0.0, steps_per_second=2.0,
                       step_seconds=0.5, wait_seconds=0.0)


def test_on_this_cpu_build_no_gpu_is_in_use_and_the_peak_says_so() -> None:
    assert accelerator_in_use() is None and cuda_memory() is None
    figures = FlopsMeter(torch.nn.Linear(4, 4), flops_per_step=1e12, flops=None, peak_tflops=None).figures(_stats())
    assert figures["peak_tflops"] is None and "no GPU in use" in figures["flops_utilization_note"]


@pytest.mark.parametrize(("fake", "backend", "device_type"), [
    (_torch(cuda=DeviceModule("NVIDIA H100 80GB HBM3")), CUDA, "cuda"),
    (_torch(cuda=DeviceModule("AMD Instinct MI300X"), hip="6.2.41133-dd7f95766"), ROCM, "cuda"),
    (_torch(xpu=DeviceModule("Intel(R) Data Center GPU Max 1550")), XPU, "xpu"),
])
def test_the_gpu_in_use_is_found_through_torch_cuda_or_torch_xpu(fake, backend: str, device_type: str) -> None:
    accelerator = accelerator_in_use(fake)
    assert accelerator is not None
    assert (accelerator.backend, accelerator.device_type) == (backend, device_type)
    assert accelerator.memory() == {"device": 0, "allocated_bytes": 3 * GIB, "reserved_bytes": 4 * GIB,
                                    "peak_bytes": 5 * GIB}


def test_a_gpu_the_program_has_not_initialised_is_left_alone() -> None:
    for fake in (_torch(cuda=DeviceModule("AMD Instinct MI300X", initialized=False), hip="6.2"),
                 _torch(xpu=DeviceModule("Intel(R) Arc(TM) A770 Graphics", initialized=False))):
        assert accelerator_in_use(fake) is None


@pytest.mark.parametrize(("attribute", "name", "hip", "peak"), [
    ("cuda", "AMD Instinct MI300X", "6.2.41133", 1307.4),
    ("cuda", "AMD Instinct MI250X/MI250", "6.0.32830", 191.5),
    ("xpu", "Intel(R) Data Center GPU Max 1550", None, 838.9),
    ("xpu", "Intel(R) Arc(TM) A770 Graphics", None, 137.6),
])
def test_the_peak_and_memory_come_from_the_rocm_or_xpu_device(monkeypatch: pytest.MonkeyPatch, attribute: str,
                                                              name: str, hip: str | None, peak: float) -> None:
    device = DeviceModule(name)
    monkeypatch.setattr(torch, attribute, device)
    monkeypatch.setattr(torch.version, "hip", hip)
    model = torch.nn.Linear(4, 4).to(torch.bfloat16)
    figures = FlopsMeter(model, flops_per_step=1e12, flops=None, peak_tflops=None).figures(_stats())
    assert figures["math_mode"] is MathMode.BF16
    assert figures["peak_tflops"] == peak
    assert figures["flops_utilization_fraction"] == pytest.approx(2.0 / peak)
    assert cuda_memory() == {"device": 0, "allocated_bytes": 3 * GIB, "reserved_bytes": 4 * GIB, "peak_bytes": 5 * GIB}
