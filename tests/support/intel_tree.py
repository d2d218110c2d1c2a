"""Intel machines under a tmp dir, as the xe and i915 drivers lay out sysfs and DRM fdinfo, with moving counters.

:func:`xe_max1550_machine` is four Data Center GPU Max 1550 cards under xe; :func:`i915_a770_machine` one Arc A770
under i915. Each :class:`IntelMachine` gives real processes DRM clients (:meth:`IntelMachine.add_client`) and moves
every counter (energy, engine nanoseconds or cycles) as a function of the time since it started, in a
:class:`~support.drm_fixture.Ticker` thread (:meth:`IntelMachine.running`). Formats and their sources:
tests/data/intel/README.md. Nothing here was checked against real hardware.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from support.drm_fixture import FdinfoTree, SysfsTree, Ticker

GIB = 1024**3
XE_TIMESTAMP_HZ = 100_000_000
"""Rate at which the fixture's xe ``drm-total-cycles-*`` advance (the GPU timestamp clock)."""
XE_CAPACITY = {"rcs": 1, "bcs": 1, "vcs": 2, "vecs": 2, "ccs": 4}
"""Engines per class on the fixture's xe cards (capacity 1 is not written, as the driver omits it)."""
I915_CAPACITY = {"render": 1, "copy": 1, "video": 2, "video-enhance": 1, "compute": 1}
"""Engines per class on the fixture's i915 card."""


@dataclass(frozen=True)
class CardSpec:
    """One fixture card."""

    slot: str
    """PCI slot, e.g. ``0000:29:00.0``."""
    pci_id: str
    """``8086:XXXX``."""
    watts: float
    """Power the energy counter moves at."""
    limit_uw: int
    """``power1_max``."""
    rated_uw: int
    """``power1_rated_max``."""
    clock_mhz: int
    """Actual GT frequency."""
    pkg_celsius: float | None = None
    """xe ``pkg`` temperature."""
    vram_celsius: float | None = None
    """xe ``vram`` temperature."""
    tile_vram_bytes: tuple[int, ...] = ()
    """xe ``tileN/physical_vram_size_bytes``."""


@dataclass
class ClientSpec:
    """One DRM client of a real process."""

    pid: int
    fd: int
    slot: str
    client_id: int
    vram_bytes: int
    compute_busy: float
    """Fraction of the compute class busy (xe ``ccs``, i915 ``render``)."""
    video_busy: float = 0.0
    """Fraction of the video class busy."""
    holders: tuple[int, ...] = ()
    """Other processes holding the same descriptor (forked children)."""


@dataclass
class IntelMachine:
    """A fixture machine: its sysfs and fd roots, its cards and its clients."""

    root: Path
    driver: str
    cards: list[CardSpec]
    clients: list[ClientSpec] = field(default_factory=list)

    @property
    def sysfs(self) -> Path:
        """``GPUSIGHT_SYSFS_ROOT``."""
        return self.root / "sys"

    @property
    def fdinfo(self) -> Path:
        """``GPUSIGHT_FDINFO_ROOT``."""
        return self.root / "proc"

    def env(self) -> dict[str, str]:
        """The environment variables pointing gpusight at this machine."""
        return {"GPUSIGHT_SYSFS_ROOT": str(self.sysfs), "GPUSIGHT_FDINFO_ROOT": str(self.fdinfo)}

    def card_dir(self, index: int) -> str:
        """``class/drm/cardN`` of card ``index`` (relative to the sysfs root)."""
        return f"class/drm/card{index}"

    def write_static(self) -> None:
        """Every file that does not move."""
        tree = SysfsTree(self.sysfs)
        for i, card in enumerate(self.cards):
            device = f"{self.card_dir(i)}/device"
            tree.write(f"{device}/uevent", f"DRIVER={self.driver}\nPCI_CLASS=38000\nPCI_ID={card.pci_id}\n"
                                           f"PCI_SUBSYS_ID=8086:0000\nPCI_SLOT_NAME={card.slot}\nMODALIAS=pci:v00008086")
            hwmon = f"{device}/hwmon/hwmon{i + 3}"
            tree.write_many(hwmon, {"name": self.driver, "power1_max": card.limit_uw, "power1_rated_max": card.rated_uw})
            for n, (label, value) in enumerate((("pkg", card.pkg_celsius), ("vram", card.vram_celsius)), start=2):
                if value is not None:
                    tree.write_many(hwmon, {f"temp{n}_input": int(value * 1000), f"temp{n}_label": label})
            if self.driver == "xe":
                tree.write(f"{device}/tile0/gt0/freq0/act_freq", card.clock_mhz)
                tree.write(f"{device}/tile0/gt0/freq0/max_freq", 1600)
                for t, size in enumerate(card.tile_vram_bytes):
                    tree.write(f"{device}/tile{t}/physical_vram_size_bytes", size)
            else:
                tree.write(f"{self.card_dir(i)}/gt_act_freq_mhz", card.clock_mhz)
                tree.write(f"{self.card_dir(i)}/gt_max_freq_mhz", 2400)
            tree.write(f"class/drm/card{i}-DP-{i + 1}/status", "disconnected")

    def add_client(self, client: ClientSpec) -> None:
        """Give ``client.pid`` (and its holders) the descriptor, counters at zero time."""
        self.clients.append(client)
        for pid in (client.pid, *client.holders):
            FdinfoTree(self.fdinfo).open(pid, client.fd, self.fdinfo_fields(client, 0.0),
                                         target=f"/dev/dri/renderD{128 + self._card_of(client)}")

    def tick(self, elapsed: float) -> None:
        """Move every counter to ``elapsed`` seconds after the start."""
        tree = SysfsTree(self.sysfs)
        for i, card in enumerate(self.cards):
            energy_uj = int((5_000_000.0 + card.watts * elapsed) * 1e6)
            tree.write(f"{self.card_dir(i)}/device/hwmon/hwmon{i + 3}/energy1_input", energy_uj)
        fds = FdinfoTree(self.fdinfo)
        for client in self.clients:
            for pid in (client.pid, *client.holders):
                fds.update(pid, client.fd, self.fdinfo_fields(client, elapsed))

    def running(self, period: float = 0.1) -> Ticker:
        """A context in which the counters move every ``period`` seconds."""
        return Ticker(self.tick, period)

    def fdinfo_fields(self, client: ClientSpec, elapsed: float) -> dict[str, object]:
        """The DRM keys of ``client`` at ``elapsed`` seconds, in the driver's documented format."""
        head: dict[str, object] = {"drm-driver": self.driver, "drm-client-id": client.client_id,
                                   "drm-pdev": client.slot}
        kib = client.vram_bytes // 1024
        if self.driver == "xe":
            total = int(elapsed * XE_TIMESTAMP_HZ) + 1_000_000
            busy = {"rcs": 0.0, "bcs": 0.01, "vcs": client.video_busy, "vecs": 0.0, "ccs": client.compute_busy}
            fields = {**head, "drm-total-system": 0, "drm-total-gtt": "192 KiB", "drm-resident-gtt": "192 KiB",
                      "drm-total-vram0": f"{kib} KiB", "drm-shared-vram0": 0, "drm-resident-vram0": f"{kib} KiB"}
            for engine, fraction in busy.items():
                capacity = XE_CAPACITY[engine]
                fields[f"drm-cycles-{engine}"] = int(fraction * capacity * (total - 1_000_000))
                fields[f"drm-total-cycles-{engine}"] = total
                if capacity > 1:
                    fields[f"drm-engine-capacity-{engine}"] = capacity
            return fields
        busy = {"render": client.compute_busy, "copy": 0.01, "video": client.video_busy, "video-enhance": 0.0,
                "compute": 0.0}
        fields = {**head, "drm-total-system0": "4096 KiB", "drm-resident-system0": "4096 KiB",
                  "drm-total-local0": f"{kib} KiB", "drm-resident-local0": f"{kib} KiB"}
        for engine, fraction in busy.items():
            fields[f"drm-engine-{engine}"] = f"{int(fraction * I915_CAPACITY[engine] * elapsed * 1e9)} ns"
            if I915_CAPACITY[engine] > 1:
                fields[f"drm-engine-capacity-{engine}"] = I915_CAPACITY[engine]
        return fields

    def _card_of(self, client: ClientSpec) -> int:
        return next((i for i, card in enumerate(self.cards) if card.slot == client.slot), 0)


MAX1550_SLOTS = ("0000:29:00.0", "0000:3a:00.0", "0000:9a:00.0", "0000:ca:00.0")
"""PCI slots of the xe machine's four cards."""
A770_SLOT = "0000:03:00.0"
"""PCI slot of the i915 machine's card."""


def xe_max1550_machine(root: Path) -> IntelMachine:
    """Four Data Center GPU Max 1550 (two 64 GiB tiles each, 600 W) under xe, written under ``root``."""
    cards = [CardSpec(slot, "8086:0BD5", watts=300.0 + 50 * i, limit_uw=600_000_000, rated_uw=600_000_000,
                      clock_mhz=1550 - 100 * i, pkg_celsius=55.0 + i, vram_celsius=61.0 + i,
                      tile_vram_bytes=(64 * GIB, 64 * GIB)) for i, slot in enumerate(MAX1550_SLOTS)]
    machine = IntelMachine(root, "xe", cards)
    machine.write_static()
    machine.tick(0.0)
    return machine


def i915_a770_machine(root: Path) -> IntelMachine:
    """One Arc A770 (16 GiB, 225 W rated, limited to 190 W) under i915, written under ``root``."""
    card = CardSpec(A770_SLOT, "8086:56A0", watts=150.0, limit_uw=190_000_000, rated_uw=225_000_000, clock_mhz=2100)
    machine = IntelMachine(root, "i915", [card])
    machine.write_static()
    machine.tick(0.0)
    return machine
