"""DRM cards in sysfs and the small files they expose, read defensively: any file may be missing or hold anything.

A card is ``<sysfs>/class/drm/cardN`` whose ``device/uevent`` names the driver (``DRIVER=amdgpu``) and the PCI slot
(``PCI_SLOT_NAME=0000:c1:00.0``). Connector entries such as ``card0-DP-1`` are skipped. Cards are listed in PCI
order, the order amd-smi and nvidia-smi number GPUs in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 16 * 1024
"""Most bytes read from one sysfs file (real ones are a line or a short table)."""


@dataclass(frozen=True, slots=True)
class DrmCard:
    """One GPU's DRM card: where its sysfs files are, and who drives it."""

    name: str
    """``cardN``."""
    device: Path
    """``<sysfs>/class/drm/cardN/device``: the PCI device's directory."""
    driver: str
    """The kernel driver, from ``uevent``: ``amdgpu``, ``xe``, ``i915``."""
    pci_slot: str | None
    """``PCI_SLOT_NAME``, e.g. ``0000:c1:00.0``."""
    pci_id: str | None
    """``PCI_ID`` as ``VENDOR:DEVICE`` in hex, e.g. ``1002:74A1``."""


def read_text(path: Path) -> str | None:
    """A sysfs file's text, stripped; None when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_FILE_BYTES).decode("utf-8", errors="replace").strip()
    except OSError:
        return None


def read_int(path: Path) -> int | None:
    """A sysfs file holding one integer; None when missing, unreadable or not a plain integer."""
    text = read_text(path)
    if text is None:
        return None
    text = text.split()[0] if text.split() else ""
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 20:
        return None
    return -int(digits) if negative else int(digits)


def read_uevent(path: Path) -> dict[str, str]:
    """``KEY=value`` lines of a uevent file."""
    text = read_text(path) or ""
    return {k: v for k, _, v in (line.partition("=") for line in text.splitlines()) if k}


def find_cards(sysfs: Path, drivers: frozenset[str]) -> list[DrmCard]:
    """The DRM cards driven by one of ``drivers``, in PCI order."""
    try:
        names = [e.name for e in os.scandir(sysfs / "class" / "drm")]
    except OSError:
        return []
    cards = []
    for name in names:
        if not name.startswith("card") or not name[4:].isdigit():
            continue
        device = sysfs / "class" / "drm" / name / "device"
        uevent = read_uevent(device / "uevent")
        driver = uevent.get("DRIVER")
        if driver in drivers:
            cards.append(DrmCard(name, device, driver, uevent.get("PCI_SLOT_NAME"), uevent.get("PCI_ID")))
    return sorted(cards, key=lambda c: (c.pci_slot or "~", int(c.name[4:])))


def hwmon_dir(device: Path) -> Path | None:
    """The first ``device/hwmon/hwmonN`` directory; None when the driver exposes none."""
    try:
        names = sorted(e.name for e in os.scandir(device / "hwmon") if e.name.startswith("hwmon"))
    except OSError:
        return None
    return device / "hwmon" / names[0] if names else None


def hwmon_sensors(hwmon: Path) -> tuple[tuple[str, Path], ...]:
    """(label, ``tempN_input``) of each temperature sensor in file order: its ``tempN_label`` (``edge``, ``junction``,
    ``mem``) in lower case, or ``tempN`` where it has none."""
    try:
        names = sorted(e.name for e in os.scandir(hwmon) if e.name.startswith("temp") and e.name.endswith("_input"))
    except OSError:
        return ()
    sensors = []
    for name in names:
        sensor = name.removesuffix("_input")
        sensors.append(((read_text(hwmon / f"{sensor}_label") or sensor).strip().lower(), hwmon / name))
    return tuple(sensors)


def hwmon_temperatures(hwmon: Path) -> dict[str, float]:
    """Each ``tempN_input`` in degrees Celsius by its label (see :func:`hwmon_sensors`)."""
    return sensor_temperatures(hwmon_sensors(hwmon))


def sensor_temperatures(sensors: tuple[tuple[str, Path], ...]) -> dict[str, float]:
    """The readable ones of ``sensors`` (from :func:`hwmon_sensors`) in degrees Celsius by label."""
    temperatures: dict[str, float] = {}
    for label, path in sensors:
        value = read_int(path)
        if value is not None:
            temperatures[label] = value / 1000.0
    return temperatures
