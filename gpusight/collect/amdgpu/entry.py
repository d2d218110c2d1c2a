"""The amdgpu backend's line in the registry (:data:`gpusight.collect.backends.BACKENDS`)."""

from __future__ import annotations

from gpusight.collect.backend import BackendEntry, BackendOptions, GpuBackend, Roots
from gpusight.collect.drm.sysfs import find_cards
from gpusight.collect.model import Vendor


def amdgpu_present(roots: Roots) -> bool:
    """True when the sysfs tree has a DRM card driven by amdgpu."""
    return bool(find_cards(roots.sysfs, frozenset({"amdgpu"})))


def open_amdgpu(options: BackendOptions) -> GpuBackend:
    """The amdgpu backend on the command line's roots."""
    from gpusight.collect.amdgpu.source import AmdgpuBackend

    return AmdgpuBackend(options.roots)


AMDGPU_ENTRY = BackendEntry("amdgpu", Vendor.AMD, "AMD GPUs through the amdgpu driver's sysfs, hwmon, DRM fdinfo and KFD",
                            amdgpu_present, open_amdgpu)
"""AMD GPUs, read without ROCm."""
