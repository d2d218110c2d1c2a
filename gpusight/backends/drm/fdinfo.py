"""One DRM client's ``fdinfo``, parsed as the kernel documents it (``Documentation/gpu/drm-usage-stats.rst``).

Keys used: ``drm-driver``, ``drm-client-id``, ``drm-pdev``; ``drm-engine-<class>: <ns> ns`` (amdgpu, i915) and
``drm-engine-capacity-<class>``; ``drm-cycles-<class>`` with ``drm-total-cycles-<class>`` (xe); memory as
``drm-total-<region>``, ``drm-resident-<region>`` (kernel 6.8+ on every driver) and amdgpu's older
``drm-memory-<region>``, each a number of bytes with an optional ``KiB`` or ``MiB`` unit. Unknown keys are ignored;
a malformed line is skipped, never fatal: the file comes from another process's driver and may be anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_FDINFO_BYTES = 64 * 1024
"""Most bytes read from one fdinfo file (real ones are under 2 KiB)."""

_UNITS = {"": 1, "B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "kB": 1024}


@dataclass(frozen=True, slots=True)
class ClientStats:
    """The usage keys of one DRM file descriptor."""

    driver: str | None = None
    """``drm-driver``: ``"amdgpu"``, ``"i915"``, ``"xe"``."""
    client_id: int | None = None
    """``drm-client-id``: unique per open of the device; shared by every process that inherited the descriptor."""
    pdev: str | None = None
    """``drm-pdev``: the PCI slot, e.g. ``"0000:c1:00.0"``."""
    engine_ns: dict[str, int] = field(default_factory=dict)
    """Busy nanoseconds per engine class (``drm-engine-<class>``), a counter."""
    engine_capacity: dict[str, int] = field(default_factory=dict)
    """Engines per class where more than one (``drm-engine-capacity-<class>``)."""
    cycles: dict[str, int] = field(default_factory=dict)
    """Busy GPU cycles per engine class (``drm-cycles-<class>``, xe), a counter."""
    total_cycles: dict[str, int] = field(default_factory=dict)
    """Elapsed GPU cycles per engine class (``drm-total-cycles-<class>``, xe), a counter."""
    memory_total: dict[str, int] = field(default_factory=dict)
    """Bytes per memory region allocated by the client (``drm-total-<region>``, or amdgpu's ``drm-memory-<region>``)."""
    memory_resident: dict[str, int] = field(default_factory=dict)
    """Bytes per region resident in that region (``drm-resident-<region>``)."""


def parse_fdinfo(text: str) -> ClientStats | None:
    """The DRM keys of one fdinfo file; None when it is not a DRM client (no ``drm-driver`` key)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon and key.startswith("drm-"):
            values[key.strip()] = value.strip()
    driver = values.get("drm-driver")
    if not driver:
        return None
    stats = ClientStats(driver=driver, client_id=_integer(values.get("drm-client-id")), pdev=values.get("drm-pdev"))
    legacy: dict[str, int] = {}
    for key, value in values.items():
        for prefix, into, read in (("drm-engine-capacity-", stats.engine_capacity, _counter),
                                   ("drm-total-cycles-", stats.total_cycles, _counter), ("drm-cycles-", stats.cycles, _counter),
                                   ("drm-engine-", stats.engine_ns, _counter), ("drm-total-", stats.memory_total, _memory),
                                   ("drm-resident-", stats.memory_resident, _memory), ("drm-memory-", legacy, _memory)):
            if key.startswith(prefix) and len(key) > len(prefix):
                number = read(value)
                if number is not None:
                    into[key[len(prefix):]] = number
                break
    for region, size in legacy.items():
        stats.memory_total.setdefault(region, size)
        stats.memory_resident.setdefault(region, size)
    return stats


def _integer(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 20 else None


def _counter(text: str) -> int | None:
    """``"12345 ns"`` or ``"12345"`` as 12345."""
    number, _, unit = text.partition(" ")
    return _integer(number) if unit.strip() in ("", "ns") else None


def _memory(text: str) -> int | None:
    """``"1024 KiB"`` as 1048576 bytes; None for an unknown unit."""
    number, _, unit = text.partition(" ")
    scale = _UNITS.get(unit.strip())
    value = _integer(number)
    return None if value is None or scale is None else value * scale
