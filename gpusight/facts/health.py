"""Judging a GPU's hardware health: findings with their evidence and action, and a 0-100 score.

Pure functions of one :class:`~gpusight.snapshot.model.DeviceSample`. The badge, the GPU detail
screen, the health advice, ``--check`` and the cluster view all judge health here, so they agree.
Every point the score loses is one finding's ``points``: the score explains itself.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import IntEnum

from gpusight.facts.xid_catalog import XidAction, xid_info
from gpusight.snapshot.model import DeviceHealth, DeviceSample, XidEvent

XID_WINDOW_S = 24 * 3600.0
"""How long after it arrived an Xid still counts against the GPU."""

BUSY_PERCENT = 10.0
"""GPU utilization at or above which a PCIe generation below the maximum is a fault, not power saving.

GPUs drop their PCIe link to a low generation when idle and raise it under load; the width does not change."""


SLOW_LINK_POINTS = 40
"""Points a PCIe generation below the maximum under load costs: less than a narrow link, which is never power saving
and is named first when both stand."""

REBOOT_POINTS = 70
"""Points an Xid that needs the node rebooted costs (more than a reset's): listed first among drain findings."""


class HealthLevel(IntEnum):
    """How bad a finding is, in increasing order."""

    OK = 0
    """Nothing wrong."""
    NOTICE = 1
    """Worth watching; no action yet."""
    WARN = 2
    """Something failed or degrades; act when convenient."""
    DRAIN = 3
    """Drain the GPU: it needs a reset, its node a reboot, or it needs replacing, before the next job."""


@dataclass(frozen=True, slots=True)
class HealthFinding:
    """One thing wrong with a GPU's health."""

    key: str
    """Stable name of the finding, e.g. ``"xid79"``, ``"remap_pending"``, ``"pcie_width"``."""
    level: HealthLevel
    """How bad it is."""
    title: str
    """A short line, e.g. ``"Xid 79: GPU has fallen off the bus"``."""
    evidence: str
    """The numbers behind it."""
    action: str
    """What to do."""
    points: int
    """Points the health score loses for it."""


@dataclass(frozen=True, slots=True)
class HealthAssessment:
    """A GPU's health judged: its findings, worst first, and the score they leave."""

    findings: tuple[HealthFinding, ...]
    """What is wrong, worst first."""
    score: int | None
    """100 minus the findings' points, at least 0; None when nothing of the GPU's health was read."""

    @property
    def level(self) -> HealthLevel:
        """The worst finding's level (``OK`` with none)."""
        return max((f.level for f in self.findings), default=HealthLevel.OK)

    @property
    def needs_drain(self) -> bool:
        """True when a finding says the GPU must be drained."""
        return self.level is HealthLevel.DRAIN


_POINTS = {HealthLevel.DRAIN: 50, HealthLevel.WARN: 20, HealthLevel.NOTICE: 5}
"""Points a finding of each level costs (a remap failure costs more: the GPU must be replaced)."""


def assess(device: DeviceSample, now: float) -> HealthAssessment:
    """Judge ``device``'s health at epoch seconds ``now`` (Xid events older than ``XID_WINDOW_S`` no longer count)."""
    health = device.health
    if health is None:
        return HealthAssessment((), None)
    findings = [*_xid_findings(health.xid_recent, now), *_memory_findings(device, health),
                *_link_findings(device, health)]
    findings.sort(key=lambda f: (-f.level, -f.points, f.key))
    if not findings and not _anything_read(device, health):
        return HealthAssessment((), None)
    return HealthAssessment(tuple(findings), max(0, 100 - sum(f.points for f in findings)))


def _anything_read(device: DeviceSample, health: DeviceHealth) -> bool:
    """True when some health counter was read: a GPU whose counters all failed to read scores None, not 100."""
    return device.ecc_errors_uncorrected is not None or any(
        getattr(health, f.name) not in (None, ()) for f in fields(health))


def _finding(key: str, level: HealthLevel, title: str, evidence: str, action: str,
             points: int | None = None) -> HealthFinding:
    return HealthFinding(key, level, title, evidence, action, _POINTS[level] if points is None else points)


def _xid_findings(events: tuple[XidEvent, ...], now: float) -> list[HealthFinding]:
    """One finding per Xid number seen within the window, naming the latest event and how many there were."""
    latest: dict[int, XidEvent] = {}
    counts: dict[int, int] = {}
    for event in events:
        if now - event.timestamp <= XID_WINDOW_S:
            latest[event.code] = event
            counts[event.code] = counts.get(event.code, 0) + 1
    findings = []
    for code, event in latest.items():
        info = xid_info(code)
        level = HealthLevel.DRAIN if info.drains else HealthLevel.NOTICE
        where = "" if event.gpu_instance_id is None else f" on MIG instance {event.gpu_instance_id}"
        times = "once" if counts[code] == 1 else f"{counts[code]} times"
        ago = _ago(now - event.timestamp)
        points = REBOOT_POINTS if info.action is XidAction.REBOOT_NODE else None
        findings.append(_finding(f"xid{code}", level, f"Xid {code}: {info.meaning}",
                                 f"Xid {code}{where} {times}, last {ago}", info.advice, points))
    return findings


def _memory_findings(device: DeviceSample, health: DeviceHealth) -> list[HealthFinding]:
    findings = []
    if health.remap_failed:
        findings.append(_finding("remap_failed", HealthLevel.DRAIN, "row remapping failed",
                                 "a memory row could not be remapped: the GPU has no spare rows left",
                                 "drain the GPU and have it replaced", points=80))
    if health.remap_pending:
        rows = _remapped(health)
        findings.append(_finding("remap_pending", HealthLevel.DRAIN, "row remap pending: reset needed",
                                 f"a remapped memory row waits for a GPU reset{rows}",
                                 "drain the GPU and reset it (nvidia-smi -r) before its next job"))
    if health.retired_pages_pending:
        findings.append(_finding("retired_pending", HealthLevel.DRAIN, "page retirement pending: reset needed",
                                 "a retired memory page waits for a GPU reset or driver reload",
                                 "drain the GPU and reset it before its next job"))
    if device.ecc_errors_uncorrected:
        findings.append(_finding("ecc_uncorrected", HealthLevel.WARN, "uncorrected ECC errors",
                                 f"{device.ecc_errors_uncorrected} uncorrected ECC errors since the driver loaded",
                                 "restart the jobs that ran on it; watch for a pending remap"))
    return findings


def _remapped(health: DeviceHealth) -> str:
    parts = []
    if health.remapped_rows_uncorrectable:
        parts.append(f"{health.remapped_rows_uncorrectable} rows remapped after uncorrectable errors")
    if health.remapped_rows_correctable:
        parts.append(f"{health.remapped_rows_correctable} after correctable ones")
    return f" ({', '.join(parts)})" if parts else ""


def _link_findings(device: DeviceSample, health: DeviceHealth) -> list[HealthFinding]:
    findings = []
    width, width_max = health.pcie_link_width, health.pcie_link_width_max
    gen, gen_max = health.pcie_link_gen, health.pcie_link_gen_max
    link = _link_text(gen, gen_max, width, width_max)
    if width is not None and width_max is not None and 0 < width < width_max:
        findings.append(_finding("pcie_width", HealthLevel.DRAIN, f"PCIe link degraded to x{width}",
                                 link, "drain the GPU; reseat it or check its slot and riser"))
    busy = device.utilization_gpu_percent is not None and device.utilization_gpu_percent >= BUSY_PERCENT
    if gen is not None and gen_max is not None and 0 < gen < gen_max and busy:
        findings.append(_finding("pcie_gen", HealthLevel.DRAIN, f"PCIe link degraded to Gen{gen} under load",
                                 f"{link}, while {device.utilization_gpu_percent:.0f}% busy",
                                 "drain the GPU; reseat it or check its slot, riser and BIOS PCIe settings",
                                 points=SLOW_LINK_POINTS))
    if health.pcie_replay_count:
        findings.append(_finding("pcie_replay", HealthLevel.NOTICE, "PCIe replays",
                                 f"{health.pcie_replay_count} PCIe replays since the driver loaded",
                                 "watch the count: a growing one means a marginal link"))
    nvlink = sum(v for v in (health.nvlink_crc_flit_errors, health.nvlink_crc_data_errors,
                             health.nvlink_replay_errors, health.nvlink_recovery_errors) if v)
    if nvlink:
        findings.append(_finding("nvlink_errors", HealthLevel.NOTICE, "NVLink errors",
                                 f"{nvlink} NVLink CRC, replay or recovery errors since the driver loaded",
                                 "watch the count; check the NVLink if it keeps rising"))
    return findings


def _link_text(gen: int | None, gen_max: int | None, width: int | None, width_max: int | None) -> str:
    """``"Gen3 x8 (can run Gen5 x16)"`` with what is known."""
    now = " ".join(p for p in (None if gen is None else f"Gen{gen}", None if width is None else f"x{width}") if p)
    most = " ".join(p for p in (None if gen_max is None else f"Gen{gen_max}",
                                None if width_max is None else f"x{width_max}") if p)
    return f"link at {now or 'N/A'} (can run {most or 'N/A'})"


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"
