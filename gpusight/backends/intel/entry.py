"""Intel's line in the backend registry: its name, vendor and summary, how to find its GPUs and how to open it.

Like every vendor's ``entry`` module, it names its backend class without importing it:
:mod:`~gpusight.backends.intel.backend` loads only when the backend is opened.
"""

from __future__ import annotations

from gpusight.backends.drm.sysfs import find_cards
from gpusight.backends.interface import BackendEntry, Roots
from gpusight.snapshot.model import Vendor

NAME = "intel"
"""As ``--backend`` spells it, and the scope of its notes."""
DRIVERS = frozenset({"xe", "i915"})
"""The kernel drivers this backend reads: the ``DRIVER=`` of the cards and the ``drm-driver`` of the clients."""


def present(roots: Roots) -> bool:
    """True when the sysfs tree has a DRM card driven by xe or i915."""
    return bool(find_cards(roots.sysfs, DRIVERS))


ENTRY = BackendEntry(NAME, Vendor.INTEL, "Intel GPUs under xe or i915, from sysfs, hwmon and DRM fdinfo", present,
                     "gpusight.backends.intel.backend:IntelBackend")
"""Intel GPUs, read from sysfs, hwmon and DRM fdinfo."""
