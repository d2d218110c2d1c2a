"""Marketing names of Intel data-center and Arc GPUs by PCI device id.

Neither xe nor i915 exposes a product name in sysfs; the device id (``PCI_ID`` in the card's ``uevent``) is all
there is. The names are those of the PCI ID Repository (https://pci-ids.ucw.cz, ``pci.ids`` version 2023.04.10,
vendor 8086); the ids are also listed in the kernel's ``include/drm/intel/pciids.h`` (``INTEL_DG2_IDS``,
``INTEL_ATS_M_IDS``, ``INTEL_PVC_IDS``).
"""

from __future__ import annotations

INTEL_VENDOR_ID = "8086"
"""Intel's PCI vendor id."""

DEVICE_NAMES: dict[str, str] = {
    "56A0": "Intel Arc A770",
    "56A1": "Intel Arc A750",
    "56A5": "Intel Arc A380",
    "56C0": "Intel Data Center GPU Flex 170",
    "0BD5": "Intel Data Center GPU Max 1550",
    "0BDA": "Intel Data Center GPU Max 1100",
}
"""Upper-case PCI device id -> marketing name."""


def device_name(pci_id: str | None) -> str | None:
    """The GPU's name from its ``PCI_ID`` (``8086:56A0``); ``"Intel GPU 8086:XXXX"`` for an id not in the table,
    None without a well-formed Intel id."""
    if pci_id is None:
        return None
    vendor, colon, device = pci_id.strip().upper().partition(":")
    if not colon or vendor != INTEL_VENDOR_ID or len(device) != 4 or not all(c in "0123456789ABCDEF" for c in device):
        return None
    return DEVICE_NAMES.get(device, f"Intel GPU {vendor}:{device}")
