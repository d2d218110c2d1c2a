"""The Intel backend: every xe and i915 card in PCI order, with its clients' usage from DRM fdinfo.

Device figures come from sysfs (:mod:`~gpusight.backends.intel.card`); the rest is derived from the DRM clients,
because neither driver publishes it in sysfs (intel_gpu_top reads device busy from the i915/xe PMU, and qmassa reads
VRAM use through the xe query ioctl; gpusight uses neither):

- utilization: per engine class, the clients' busy percents summed (capped at 100), and the busiest class taken;
- memory used: the clients' device-memory regions summed; the kernel's own allocations are not in it.

Both need every process's descriptors: when some processes could not be read (another user's, without root) they
are None, with a note, rather than a figure that leaves work out. Power is the energy counter's change over time,
None on the first poll. A card whose sysfs directory goes away is shown lost.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from gpusight.backends.drm.clients import ClientScan, DrmClient, DrmClientScanner
from gpusight.backends.drm.sysfs import DrmCard, find_cards, read_text
from gpusight.backends.intel.card import read_card
from gpusight.backends.intel.engines import busiest, class_sums, device_memory_bytes, process_samples
from gpusight.backends.intel.entry import DRIVERS, NAME
from gpusight.backends.intel.names import device_name
from gpusight.backends.interface import BackendOptions, Roots
from gpusight.snapshot.model import DeviceSample, ErrorNote, GpuReading, Vendor

LOST_MESSAGE = "card gone from sysfs (driver unbound or the GPU fell off the bus)"
"""Why a card that was seen is now lost."""


class IntelBackend:
    """Reads Intel GPUs under xe and i915 from a sysfs root and a tree of processes' descriptors."""

    def __init__(self, roots: Roots, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._roots = roots
        self._clock = clock
        self._scanner = DrmClientScanner(roots.fdinfo, DRIVERS, clock=clock)
        self._cards: list[DrmCard] | None = None
        self._energy: dict[str, tuple[float, float]] = {}

    @classmethod
    def from_options(cls, options: BackendOptions) -> IntelBackend:
        """The backend on the command line's roots (the registry opens it so)."""
        return cls(options.roots)

    @property
    def name(self) -> str:
        """``"intel"``."""
        return NAME

    @property
    def vendor(self) -> Vendor:
        """Intel."""
        return Vendor.INTEL

    def poll(self) -> GpuReading:
        """Every card once, indexed from 0 in PCI order; never raises."""
        try:
            return self._poll()
        except Exception as exc:  # noqa: BLE001 - a backend must never take the sampler down
            return GpuReading(errors=(ErrorNote(NAME, f"Intel backend failed: {type(exc).__name__}: {exc}"),))

    def close(self) -> None:
        """Nothing is held open between polls."""

    def _poll(self) -> GpuReading:
        if self._cards is None:
            self._cards = find_cards(self._roots.sysfs, DRIVERS)
        cards = self._cards
        if not cards:
            where = self._roots.sysfs / "class" / "drm"
            return GpuReading(errors=(ErrorNote(NAME, f"no Intel GPU (xe or i915 driver) found under {where}"),))
        scan = self._scanner.scan()
        index_of = {card.pci_slot: i for i, card in enumerate(cards) if card.pci_slot}
        per_device: dict[int, list[DrmClient]] = {i: [] for i in range(len(cards))}
        per_owner: dict[tuple[int, int], list[DrmClient]] = {}
        for client in scan.clients:
            pdev = client.stats.pdev
            index = index_of.get(pdev) if pdev else (0 if len(cards) == 1 else None)
            if index is not None:
                per_device[index].append(client)
                per_owner.setdefault((client.pid, index), []).append(client)
        devices = tuple(self._device(i, card, per_device[i], scan) for i, card in enumerate(cards))
        errors: tuple[ErrorNote, ...] = ()
        if scan.unreadable:
            errors = (ErrorNote(NAME, f"{scan.unreadable} processes' descriptors unreadable (run as root): Intel "
                                       "GPU utilization and memory used are N/A"),)
        return GpuReading(devices=devices, processes=process_samples(per_owner), errors=errors)

    def _device(self, index: int, card: DrmCard, clients: list[DrmClient], scan: ClientScan) -> DeviceSample:
        base = DeviceSample(index=index, name=device_name(card.pci_id), pci_bus_id=card.pci_slot,
                            vendor=Vendor.INTEL, kernel_driver=card.driver,
                            kernel_driver_version=self._driver_version(card.driver))
        if read_text(card.device / "uevent") is None:
            self._energy.pop(card.name, None)
            return dataclasses.replace(base, lost=True, error=LOST_MESSAGE)
        figures = read_card(card)
        complete = scan.unreadable == 0
        return dataclasses.replace(
            base,
            utilization_gpu_percent=_utilization(clients) if complete else None,
            memory_used_bytes=sum(device_memory_bytes(c) for c in clients) if complete else None,
            memory_total_bytes=figures.memory_total_bytes,
            power_watts=self._power(card.name, figures.energy_joules),
            power_limit_watts=figures.power_limit_watts,
            temperature_celsius=figures.temperature_celsius,
            temperature_memory_celsius=figures.temperature_memory_celsius,
            clock_sm_mhz=figures.clock_mhz,
            energy_joules=figures.energy_joules,
        )

    def _power(self, card: str, energy: float | None) -> float | None:
        """Watts from the energy counter's change since the last poll; None first, or when it went backwards."""
        now = self._clock()
        previous = self._energy.pop(card, None)
        if energy is None:
            return None
        self._energy[card] = (now, energy)
        if previous is None or now <= previous[0] or energy < previous[1]:
            return None
        return (energy - previous[1]) / (now - previous[0])

    def _driver_version(self, driver: str) -> str | None:
        """The driver module's version where it publishes one (an out-of-tree build); None for the in-kernel driver."""
        version = read_text(self._roots.sysfs / "module" / driver / "version")
        return version if version and version.isprintable() and len(version) < 40 else None


def _utilization(clients: list[DrmClient]) -> float | None:
    """The busiest engine class over the clients; 0 with no client; None before a client's second reading."""
    if any(not c.engine_percent and (c.stats.engine_ns or c.stats.cycles) for c in clients):
        return None
    return busiest(class_sums(clients)) or 0.0
