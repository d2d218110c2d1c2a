"""NVIDIA's line in the backend registry: its name, vendor and summary, and how to open it.

Like every vendor's ``entry`` module, it names its backend class without importing it: pynvml and
:mod:`~gpusight.backends.nvml.backend` load only when the backend is opened.
"""

from __future__ import annotations

from gpusight.backends.interface import BackendEntry, Roots
from gpusight.snapshot.model import Vendor

NAME = "nvml"
"""As ``--backend`` spells it, and the scope of its notes."""


def present(_roots: Roots) -> bool:
    """Always True: NVML itself says, on its first poll, when no NVIDIA driver answers."""
    return True


ENTRY = BackendEntry(NAME, Vendor.NVIDIA, "NVIDIA GPUs through NVML (libnvidia-ml.so.1)", present,
                     "gpusight.backends.nvml.backend:NvmlBackend")
"""NVIDIA GPUs through NVML (``libnvidia-ml.so.1``)."""
