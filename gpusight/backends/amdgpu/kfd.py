"""ROCm's KFD in sysfs: which PCI slot each KFD ``gpu_id`` is, and each ROCm process's VRAM per GPU.

``<sysfs>/class/kfd/kfd/topology/nodes/N/gpu_id`` (0 on CPU nodes) and ``.../properties`` (``name value`` lines,
among them ``domain`` and ``location_id``: the PCI bus, device and function as ``bus << 8 | device << 3 |
function``) map a gpu_id to a slot; ``<sysfs>/class/kfd/kfd/proc/<pid>/vram_<gpu_id>`` is that process's VRAM on
that GPU in bytes (kernel ``drivers/gpu/drm/amd/amdkfd/kfd_process.c`` and ``kfd_topology.c``).
"""

from __future__ import annotations

import os
from pathlib import Path

from gpusight.backends.drm.sysfs import read_int, read_text

KFD_DIR = Path("class/kfd/kfd")
"""KFD's directory under the sysfs root."""


def _properties(text: str | None) -> dict[str, int]:
    values: dict[str, int] = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1].isascii() and fields[1].isdigit():
            values[fields[0]] = int(fields[1])
    return values


def _subdirectories(path: Path) -> list[str]:
    try:
        return [e.name for e in os.scandir(path)]
    except OSError:
        return []


def gpu_slots(sysfs: Path) -> dict[int, str]:
    """KFD gpu_id -> PCI slot (``0000:c1:00.0``) for every GPU node of the topology."""
    nodes = sysfs / KFD_DIR / "topology" / "nodes"
    slots: dict[int, str] = {}
    for node in _subdirectories(nodes):
        gpu_id = read_int(nodes / node / "gpu_id")
        properties = _properties(read_text(nodes / node / "properties"))
        location = properties.get("location_id")
        if gpu_id and location is not None:
            domain = properties.get("domain", 0)
            slots[gpu_id] = f"{domain:04x}:{location >> 8 & 0xFF:02x}:{location >> 3 & 0x1F:02x}.{location & 0x7}"
    return slots


def rocm_pids(sysfs: Path) -> set[int]:
    """The processes KFD lists under ``proc/`` (every process using ROCm, readable without root)."""
    return {int(name) for name in _subdirectories(sysfs / KFD_DIR / "proc") if name.isascii() and name.isdigit()}


def process_vram(sysfs: Path, pid: int) -> dict[int, int]:
    """gpu_id -> bytes of VRAM ``pid`` holds through KFD; empty when KFD does not list it."""
    directory = sysfs / KFD_DIR / "proc" / str(pid)
    vram: dict[int, int] = {}
    for name in _subdirectories(directory):
        suffix = name.removeprefix("vram_")
        if suffix != name and suffix.isascii() and suffix.isdigit():
            size = read_int(directory / name)
            if size is not None and size >= 0:
                vram[int(suffix)] = size
    return vram
