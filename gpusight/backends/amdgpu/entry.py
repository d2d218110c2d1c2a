"""AMD's line in the backend registry: its name, vendor and summary, how to find its GPUs and how to open it.

Like every vendor's ``entry`` module, it names its backend class without importing it:
:mod:`~gpusight.backends.amdgpu.backend` loads only when the backend is opened.
"""

from __future__ import annotations

from gpusight.backends.drm.sysfs import find_cards
from gpusight.backends.interface import BackendEntry, Roots
from gpusight.snapshot.model import Vendor

NAME = "amdgpu"
"""As ``--backend`` spells it, and the scope of its notes."""
KERNEL_DRIVER = "amdgpu"
"""The kernel driver this backend reads."""
DRIVERS = frozenset({KERNEL_DRIVER})
"""The ``DRIVER=`` of the cards, and the ``drm-driver`` of the clients, this backend reads."""


def present(roots: Roots) -> bool:
    """True when the sysfs tree has a DRM card driven by amdgpu."""
    return bool(find_cards(roots.sysfs, DRIVERS))


ENTRY = BackendEntry(NAME, Vendor.AMD, "AMD GPUs through the amdgpu driver's sysfs, hwmon, DRM fdinfo and KFD",
                     present, "gpusight.backends.amdgpu.backend:AmdgpuBackend")
"""AMD GPUs, read without ROCm."""
