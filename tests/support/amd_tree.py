"""An AMD machine under a tmp dir, as the amdgpu driver lays out sysfs, hwmon, KFD and DRM fdinfo (no hardware).

:func:`mi300x_machine` builds eight MI300X (the shape of an 8-GPU Instinct node); :func:`mi210_machine` a smaller
card with the files an MI300X lacks (edge temperature, hwmon clocks, a fan, ``power1_input`` only). Processes get
DRM clients whose counters move: :meth:`AmdMachine.tick` sets every counter to what ``elapsed`` seconds of the
client's busy fractions would have added, and every card's busy, power, temperatures and clocks to a wave, so that a
:class:`~support.drm_fixture.Ticker` makes them move while gpusight reads. The formats and their sources are in
tests/data/amdgpu/README.md; nothing here was checked against a real card.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from support.drm_fixture import FdinfoTree, SysfsTree, Ticker

GIB = 1024**3
MI300X_SLOTS = ("0000:05:00.0", "0000:26:00.0", "0000:46:00.0", "0000:65:00.0",
                "0000:85:00.0", "0000:a6:00.0", "0000:c6:00.0", "0000:e5:00.0")
"""PCI slots of the eight MI300X of a published ``lspci | grep MI300X`` (ROCm docs)."""
SCLK_LEVELS = (500, 1300, 2100)
"""pp_dpm_sclk levels in MHz."""
MCLK_LEVELS = (900, 1300)
"""pp_dpm_mclk levels in MHz."""


@dataclass(frozen=True)
class AmdCard:
    """One card's static shape."""

    slot: str
    gpu_id: int
    """KFD's gpu_id for it."""
    pci_id: str = "1002:74A1"
    product_name: str | None = "AMD Instinct MI300X"
    vram_total: int = 192 * GIB
    power_cap_w: int = 750
    edge_sensor: bool = False
    """MI300X reports junction and memory temperatures only."""
    hwmon_clocks: bool = False
    """``freq1_input``/``freq2_input`` beside pp_dpm (older cards)."""
    fan: bool = False
    power_input_only: bool = False
    """``power1_input`` without ``power1_average`` (newer SMU firmware)."""


@dataclass
class AmdClient:
    """One DRM client: where it is and how busy it keeps each engine class (0-1 of the wall time)."""

    pids: list[int]
    fd: int
    card: int
    client_id: int
    vram: int
    busy: dict[str, float] = field(default_factory=dict)
    new_keys: bool = True
    """``drm-total-``/``drm-resident-`` (kernel 6.8+), else the older ``drm-memory-``."""


def wave(elapsed: float, phase: float, low: float, high: float, period: float = 4.0) -> float:
    """A value going from ``low`` to ``high`` and back every ``period`` seconds."""
    return low + (high - low) * (0.5 + 0.5 * math.sin(2 * math.pi * elapsed / period + phase))


class AmdMachine:
    """Cards and processes of an AMD machine under ``root``: ``root/sys`` and ``root/proc``."""

    def __init__(self, root: Path, cards: list[AmdCard]) -> None:
        self.sysfs_root = root / "sys"
        self.fdinfo_root = root / "proc"
        self.sysfs = SysfsTree(self.sysfs_root)
        self.fds = FdinfoTree(self.fdinfo_root)
        self.cards = cards
        self.clients: list[AmdClient] = []
        self.frozen: set[int] = set()
        """Cards whose figures :meth:`tick` leaves alone."""
        self.sysfs.write("module/amdgpu/version", "6.10.5")
        self.sysfs.write("class/drm/card0/device/uevent", "DRIVER=ast\nPCI_SLOT_NAME=0000:02:00.0")  # the BMC's VGA
        for index, card in enumerate(cards):
            self._write_static(index, card)
            self.set_figures(index, busy=0, mem_busy=0, vram_used=0, power_w=140, junction=40, memory=38, level=0)
        self.sysfs.write("class/kfd/kfd/topology/nodes/0/gpu_id", 0)  # a CPU node
        self.sysfs.write("class/kfd/kfd/topology/nodes/0/properties", "cpu_cores_count 96\nsimd_count 0\n")

    def device(self, index: int) -> str:
        """``class/drm/cardN/device`` of card ``index`` (card0 is the BMC's VGA)."""
        return f"class/drm/card{index + 1}/device"

    def hwmon(self, index: int) -> str:
        """The card's hwmon directory."""
        return f"{self.device(index)}/hwmon/hwmon{index + 3}"

    def env(self) -> dict[str, str]:
        """``GPUSIGHT_SYSFS_ROOT`` and ``GPUSIGHT_FDINFO_ROOT`` naming this machine."""
        return {"GPUSIGHT_SYSFS_ROOT": str(self.sysfs_root), "GPUSIGHT_FDINFO_ROOT": str(self.fdinfo_root)}

    def _write_static(self, index: int, card: AmdCard) -> None:
        device, hwmon = self.device(index), self.hwmon(index)
        self.sysfs.write(f"{device}/uevent", f"DRIVER=amdgpu\nPCI_CLASS=120000\nPCI_ID={card.pci_id}\n"
                                             f"PCI_SUBSYS_ID=1002:74A1\nPCI_SLOT_NAME={card.slot}\nMODALIAS=pci:v00001002")
        if card.product_name is not None:
            self.sysfs.write(f"{device}/product_name", card.product_name)
        self.sysfs.write(f"{device}/unique_id", f"{0x5E1A7E2F00000000 + index:016x}")
        self.sysfs.write(f"{device}/mem_info_vram_total", card.vram_total)
        for kind in ("current", "max"):
            self.sysfs.write(f"{device}/{kind}_link_speed", "32.0 GT/s PCIe")
            self.sysfs.write(f"{device}/{kind}_link_width", 16)
        for block in ("umc", "gfx", "sdma"):
            self.sysfs.write(f"{device}/ras/{block}_err_count", "ue: 0\nce: 0")
        self.sysfs.write(f"{hwmon}/name", "amdgpu")
        self.sysfs.write(f"{hwmon}/power1_cap", card.power_cap_w * 1_000_000)
        self.sysfs.write(f"{hwmon}/temp2_label", "junction")
        self.sysfs.write(f"{hwmon}/temp3_label", "mem")
        if card.edge_sensor:
            self.sysfs.write(f"{hwmon}/temp1_label", "edge")
        if card.hwmon_clocks:
            self.sysfs.write(f"{hwmon}/freq1_label", "sclk")
            self.sysfs.write(f"{hwmon}/freq2_label", "mclk")
        if card.fan:
            self.sysfs.write(f"{hwmon}/pwm1_max", 255)
        location = int(card.slot[5:7], 16) << 8 | int(card.slot[8:10], 16) << 3 | int(card.slot[11:])
        node = f"class/kfd/kfd/topology/nodes/{index + 1}"
        self.sysfs.write(f"{node}/gpu_id", card.gpu_id)
        self.sysfs.write(f"{node}/properties", f"cpu_cores_count 0\nsimd_count 1216\ndomain {int(card.slot[:4], 16)}\n"
                                               f"location_id {location}\ndrm_render_minor {128 + index + 1}\n")

    def set_figures(self, index: int, *, busy: int, mem_busy: int, vram_used: int, power_w: float, junction: float,
                    memory: float, level: int) -> None:
        """Write card ``index``'s moving figures (power in W, temperatures in degrees, the starred sclk level)."""
        card, device, hwmon = self.cards[index], self.device(index), self.hwmon(index)
        self.sysfs.write(f"{device}/gpu_busy_percent", busy)
        self.sysfs.write(f"{device}/mem_busy_percent", mem_busy)
        self.sysfs.write(f"{device}/mem_info_vram_used", vram_used)
        power = f"{hwmon}/power1_input" if card.power_input_only else f"{hwmon}/power1_average"
        self.sysfs.write(power, int(power_w * 1_000_000))
        self.sysfs.write(f"{hwmon}/temp2_input", int(junction * 1000))
        self.sysfs.write(f"{hwmon}/temp3_input", int(memory * 1000))
        if card.edge_sensor:
            self.sysfs.write(f"{hwmon}/temp1_input", int((junction - 8) * 1000))
        sclk, mclk = SCLK_LEVELS[level], MCLK_LEVELS[min(level, len(MCLK_LEVELS) - 1)]
        self.sysfs.write(f"{device}/pp_dpm_sclk", "\n".join(f"{n}: {mhz}Mhz{' *' if mhz == sclk else ''}"
                                                            for n, mhz in enumerate(SCLK_LEVELS)))
        self.sysfs.write(f"{device}/pp_dpm_mclk", "\n".join(f"{n}: {mhz}Mhz{' *' if mhz == mclk else ''}"
                                                            for n, mhz in enumerate(MCLK_LEVELS)))
        if card.hwmon_clocks:
            self.sysfs.write(f"{hwmon}/freq1_input", sclk * 1_000_000)
            self.sysfs.write(f"{hwmon}/freq2_input", mclk * 1_000_000)
        if card.fan:
            self.sysfs.write(f"{hwmon}/pwm1", 128)

    def open_client(self, pids: list[int], fd: int, card: int, client_id: int, vram: int,
                    busy: dict[str, float] | None = None, *, new_keys: bool = True) -> AmdClient:
        """A DRM client on card ``card`` held by ``pids`` (the opener first, then forked children that inherited it)."""
        client = AmdClient(pids, fd, card, client_id, vram, dict(busy or {}), new_keys)
        self.clients.append(client)
        for pid in pids:
            self.fds.open(pid, fd, self._fields(client, 0.0))
        return client

    def _fields(self, client: AmdClient, elapsed: float) -> dict[str, object]:
        fields: dict[str, object] = {"drm-driver": "amdgpu", "drm-pdev": self.cards[client.card].slot,
                                     "drm-client-id": client.client_id, "pasid": 32768 + client.client_id}
        if client.new_keys:
            fields.update({"drm-total-vram": f"{client.vram // 1024} KiB", "drm-resident-vram": f"{client.vram // 1024} KiB",
                           "drm-total-gtt": "8192 KiB", "drm-resident-gtt": "8192 KiB"})
        else:
            fields.update({"drm-memory-vram": f"{client.vram // 1024} KiB", "drm-memory-gtt": "8192 KiB",
                           "drm-memory-cpu": "0 KiB"})
        for engine in ("gfx", "compute", "dma", "dec", "enc"):
            fields[f"drm-engine-{engine}"] = f"{int(client.busy.get(engine, 0.0) * elapsed * 1e9)} ns"
        return fields

    def open_kfd(self, pid: int, fd: int, vram: dict[int, int]) -> None:
        """Give ``pid`` ``/dev/kfd`` and KFD's ``vram_<gpu_id>`` files (card index -> bytes)."""
        self.fds.open_kfd(pid, fd)
        for card, size in vram.items():
            self.sysfs.write(f"class/kfd/kfd/proc/{pid}/vram_{self.cards[card].gpu_id}", size)
        self.sysfs.write(f"class/kfd/kfd/proc/{pid}/pasid", 32800)

    def remove_card(self, index: int) -> None:
        """The card falls off the bus: its sysfs entry goes."""
        shutil.rmtree(self.sysfs_root / f"class/drm/card{index + 1}")

    def tick(self, elapsed: float) -> None:
        """Counters as ``elapsed`` seconds of work left them; card figures on their waves."""
        for client in self.clients:
            for pid in client.pids:
                self.fds.update(pid, client.fd, self._fields(client, elapsed))
        for index in range(len(self.cards)):
            if index in self.frozen or not (self.sysfs_root / self.device(index)).exists():
                continue
            vram = sum(c.vram for c in self.clients if c.card == index) + 512 * 1024**2
            self.set_figures(index, busy=round(wave(elapsed, index, 55, 95)), mem_busy=round(wave(elapsed, index, 20, 40)),
                             vram_used=vram, power_w=wave(elapsed, index, 450, 700), junction=wave(elapsed, index, 60, 80),
                             memory=wave(elapsed, index, 55, 70), level=2)

    def moving(self, period: float = 0.1) -> Ticker:
        """A ticker calling :meth:`tick` every ``period`` seconds."""
        return Ticker(self.tick, period)


def mi300x_machine(root: Path, count: int = 8) -> AmdMachine:
    """``count`` (at most 8) MI300X as an Instinct node lays them out."""
    return AmdMachine(root, [AmdCard(slot, 50000 + 1111 * n) for n, slot in enumerate(MI300X_SLOTS[:count])])


def mi210_machine(root: Path) -> AmdMachine:
    """One MI210 without a ``product_name`` (named from its PCI id), with edge sensor, hwmon clocks, a fan, and
    ``power1_input`` only."""
    card = AmdCard("0000:c1:00.0", 61234, pci_id="1002:740F", product_name=None, vram_total=64 * GIB, power_cap_w=300,
                   edge_sensor=True, hwmon_clocks=True, fan=True, power_input_only=True)
    return AmdMachine(root, [card])
