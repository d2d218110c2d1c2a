"""The amdgpu backend: AMD GPUs from sysfs and hwmon, their processes from DRM fdinfo and KFD.

Reads ``Roots.sysfs`` (``GPUSIGHT_SYSFS_ROOT``, default ``/sys``) and ``Roots.fdinfo`` (``GPUSIGHT_FDINFO_ROOT``,
default ``/proc``); needs no ROCm library. The driver's version (``/sys/module/amdgpu/version``, published by AMD's DKMS
driver, not the in-kernel one) rides on each device; the reading's ``driver`` stays NVIDIA's alone. GPUs are the DRM cards whose driver is amdgpu, numbered in PCI order,
found at the first poll that finds any. A card whose sysfs entry goes away is reported lost, as NVML reports a GPU
that fell off the bus, and comes back when its entry does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gpusight.backends.amdgpu.device import CardReader
from gpusight.backends.amdgpu.entry import DRIVERS, KERNEL_DRIVER, NAME
from gpusight.backends.amdgpu.kfd import gpu_slots
from gpusight.backends.amdgpu.processes import amdgpu_processes
from gpusight.backends.drm.clients import DrmClientScanner
from gpusight.backends.drm.sysfs import DrmCard, find_cards, read_text, read_uevent
from gpusight.backends.interface import BackendOptions, Roots
from gpusight.snapshot.model import DeviceSample, ErrorNote, GpuReading, ScopeKind, Vendor

LOST_MESSAGE = "GPU is lost (its sysfs entry went away: it fell off the bus or the driver let it go)"
"""Shown for a card that was found and is gone."""
UNREADABLE_HINT = "run gpusight as root to see their use of the AMD GPUs"
"""Ends the note about processes whose descriptors could not be read."""


class AmdgpuBackend:
    """Polls every amdgpu card and its DRM clients; ``poll`` never raises."""

    def __init__(self, roots: Roots, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.roots = roots
        """Where it reads."""
        self._cards: list[DrmCard] = []
        self._readers: dict[int, CardReader] = {}
        self._version: str | None = None
        self._clock = clock
        self._names: dict[int, str | None] = {}
        self._kfd_slots: dict[int, str] = {}
        self._scanner = DrmClientScanner(roots.fdinfo, DRIVERS, clock=clock)
        self._closed = False

    @classmethod
    def from_options(cls, options: BackendOptions) -> AmdgpuBackend:
        """The backend on the command line's roots (the registry opens it so)."""
        return cls(options.roots)

    @property
    def name(self) -> str:
        """``"amdgpu"``."""
        return NAME

    @property
    def vendor(self) -> Vendor:
        """AMD."""
        return Vendor.AMD

    def poll(self) -> GpuReading:
        """Every card's figures and the processes using them, indexed from 0."""
        if self._closed:
            return GpuReading(errors=(ErrorNote(NAME, "amdgpu backend is closed"),))
        if not self._cards:
            self._cards = find_cards(self.roots.sysfs, DRIVERS)
            self._kfd_slots = gpu_slots(self.roots.sysfs)
            self._version = read_text(self.roots.sysfs / "module" / KERNEL_DRIVER / "version") or None
            if not self._cards:
                return GpuReading(errors=(ErrorNote(NAME, f"no amdgpu GPU under {self.roots.sysfs}/class/drm"),))
        errors: list[ErrorNote] = []
        version = self._version
        devices = [self._device(index, card, version, errors) for index, card in enumerate(self._cards)]
        indexes = {card.pci_slot: d.index for card, d in zip(self._cards, devices, strict=True) if card.pci_slot and not d.lost}
        scan = self._scanner.scan()
        if scan.unreadable:
            errors.append(ErrorNote(NAME, f"the file descriptors of {scan.unreadable} processes could not be "
                                                  f"read; {UNREADABLE_HINT}"))
        return GpuReading(
            devices=tuple(devices),
            processes=amdgpu_processes(scan, indexes, self._kfd_slots, self.roots.sysfs),
            errors=tuple(errors),
        )

    def _device(self, index: int, card: DrmCard, version: str | None, errors: list[ErrorNote]) -> DeviceSample:
        if read_uevent(card.device / "uevent").get("DRIVER") != card.driver:
            errors.append(ErrorNote(ScopeKind.GPU.of(index), LOST_MESSAGE))
            self._readers.pop(index, None)  # a card that comes back is read afresh
            return DeviceSample(index=index, name=self._names.get(index), pci_bus_id=card.pci_slot, lost=True,
                                error=LOST_MESSAGE, vendor=Vendor.AMD, kernel_driver=KERNEL_DRIVER,
                                kernel_driver_version=version)
        reader = self._readers.get(index)
        if reader is None or reader.card is not card:
            reader = self._readers[index] = CardReader(card, self._clock)
        sample = reader.read(index, version)
        self._names[index] = sample.name
        return sample

    def close(self) -> None:
        """Stop answering; safe to call twice (it holds no handle or thread)."""
        self._closed = True
