"""Product names of AMD Instinct GPUs by PCI device id, for cards whose sysfs has no ``product_name``.

Source: the PCI ID Repository (https://pci-ids.ucw.cz/read/PC/1002, vendor 1002): ``7408`` Instinct MI250X,
``740c`` Instinct MI250X/MI250, ``740f`` Instinct MI210 (checked in pci.ids 2023.04.10), ``74a0`` Instinct MI300A,
``74a1`` Instinct MI300X, ``74a5`` Instinct MI325X ("Aqua Vanjaram", as ``lspci -nn`` prints them).
"""

from __future__ import annotations

AMD_PCI_VENDOR = "1002"
"""AMD's PCI vendor id."""

INSTINCT_NAMES: dict[str, str] = {
    "7408": "AMD Instinct MI250X",
    "740c": "AMD Instinct MI250X/MI250",
    "740f": "AMD Instinct MI210",
    "74a0": "AMD Instinct MI300A",
    "74a1": "AMD Instinct MI300X",
    "74a5": "AMD Instinct MI325X",
}
"""Lower-case PCI device id -> product name."""


def name_from_pci_id(pci_id: str | None) -> str | None:
    """The product name for a uevent ``PCI_ID`` such as ``1002:74A1``; None when unknown."""
    if pci_id is None:
        return None
    vendor, _, device = pci_id.strip().lower().partition(":")
    return INSTINCT_NAMES.get(device) if vendor == AMD_PCI_VENDOR else None
