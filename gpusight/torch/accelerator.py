"""The GPU this program computes on, whichever way torch drives it: ``torch.cuda`` on NVIDIA's CUDA builds and on
AMD's ROCm builds (which answer to ``torch.cuda`` too; ``torch.version.hip`` tells them apart), ``torch.xpu`` on
Intel GPUs.

Nothing here initialises a device or imports a vendor's library: an accelerator is in use only once the program
itself has initialised it. ``torch.cuda`` and ``torch.xpu`` are attributes of every torch build (answering "not
available" where the build lacks them); they are looked up when asked, never at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

CUDA = "cuda"
"""NVIDIA through CUDA."""
ROCM = "rocm"
"""AMD through ROCm (HIP), under ``torch.cuda``."""
XPU = "xpu"
"""Intel through ``torch.xpu``."""


@dataclass(frozen=True, slots=True)
class Accelerator:
    """The device module in use (``torch.cuda`` or ``torch.xpu``) and what it is."""

    backend: str
    """``CUDA``, ``ROCM`` or ``XPU``."""
    module: Any
    """``torch.cuda`` or ``torch.xpu``: both offer ``current_device``, ``get_device_name``, ``synchronize`` and the
    memory statistics ``memory_allocated``, ``memory_reserved`` and ``max_memory_allocated``."""
    device_type: str
    """torch's device type for autocast and the profiler: ``"cuda"`` (also on ROCm) or ``"xpu"``."""

    def device_name(self) -> str:
        """The current device's name, e.g. ``"NVIDIA H100 80GB HBM3"``, ``"AMD Instinct MI300X"``,
        ``"Intel(R) Data Center GPU Max 1550"``."""
        return str(self.module.get_device_name(self.module.current_device()))

    def memory(self) -> dict[str, int] | None:
        """Allocated, reserved and peak bytes on the calling thread's device; None where torch cannot say."""
        try:
            device = self.module.current_device()
            return {
                "device": device,
                "allocated_bytes": self.module.memory_allocated(device),
                "reserved_bytes": self.module.memory_reserved(device),
                "peak_bytes": self.module.max_memory_allocated(device),
            }
        except RuntimeError:
            return None


def _in_use(module: Any) -> bool:
    """Whether ``module`` (``torch.cuda`` or ``torch.xpu``) has a device this program initialised."""
    if module is None or not module.is_available():
        return False
    return bool(module.is_initialized())


def accelerator_in_use(torch_module: Any = torch) -> Accelerator | None:
    """The accelerator this program has initialised, or None (CPU only, or not yet initialised); never initialises one.

    ``torch_module`` is torch itself; tests stand an object with torch's ``cuda``, ``xpu`` and ``version`` attributes
    in for it where the real device cannot exist.
    """
    if _in_use(torch_module.cuda):
        backend = ROCM if getattr(torch_module.version, "hip", None) else CUDA
        return Accelerator(backend, torch_module.cuda, "cuda")
    xpu = getattr(torch_module, "xpu", None)
    if _in_use(xpu):
        return Accelerator(XPU, xpu, "xpu")
    return None


AUTOCAST_DEVICES = ("cuda", "xpu", "cpu")
"""The device types whose autocast state matters to the math mode, GPUs first."""
