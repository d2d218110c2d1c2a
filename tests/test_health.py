"""collect.health.assess, table-driven: each counter's finding, its level and points, and the score they leave."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gpusight.facts.health import XID_WINDOW_S, HealthLevel, assess
from gpusight.snapshot.model import DeviceHealth, DeviceSample, XidEvent

NOW = 1_700_000_000.0


@dataclass
class Row:
    """A device's health and what assess must make of it."""

    name: str
    health: DeviceHealth | None
    keys: tuple[str, ...]
    """Finding keys, worst first."""
    level: HealthLevel
    score: int | None
    device: dict[str, object] = field(default_factory=dict)
    """Other DeviceSample fields."""
    text: tuple[str, ...] = ()
    """Text that must appear in some finding's title, evidence or action."""


ROWS = [
    Row("health not read", None, (), HealthLevel.OK, None),
    Row("nothing of the health read", DeviceHealth(), (), HealthLevel.OK, None),
    Row("clean", DeviceHealth(xid_total=0, remap_pending=False, remap_failed=False, pcie_replay_count=0),
        (), HealthLevel.OK, 100),
    Row("Xid 79 a minute ago", DeviceHealth(xid_total=1, xid_recent=(XidEvent(79, NOW - 60),)), ("xid79",),
        HealthLevel.DRAIN, 30, text=("fallen off the bus", "60 s ago", "reboot")),
    Row("a reboot comes before a reset", DeviceHealth(xid_recent=(XidEvent(79, NOW - 9), XidEvent(48, NOW - 10))),
        ("xid79", "xid48"), HealthLevel.DRAIN, 0),
    Row("Xid 48 on MIG instance 3", DeviceHealth(xid_recent=(XidEvent(48, NOW - 5, gpu_instance_id=3),)), ("xid48",),
        HealthLevel.DRAIN, 50, text=("on MIG instance 3",)),
    Row("Xid 48 three times counts once", DeviceHealth(xid_recent=tuple(XidEvent(48, NOW - s) for s in (30, 20, 10))),
        ("xid48",), HealthLevel.DRAIN, 50, text=("3 times, last 10 s ago",)),
    Row("Xid older than the window", DeviceHealth(xid_recent=(XidEvent(79, NOW - XID_WINDOW_S - 1),)), (),
        HealthLevel.OK, 100),
    Row("unknown Xid is a notice", DeviceHealth(xid_recent=(XidEvent(999, NOW - 1),)), ("xid999",), HealthLevel.NOTICE,
        95, text=("Xid catalog",)),
    Row("Xid 13 is the application's", DeviceHealth(xid_recent=(XidEvent(13, NOW - 1),)), ("xid13",), HealthLevel.NOTICE,
        95),
    Row("pending remap", DeviceHealth(remap_pending=True, remapped_rows_uncorrectable=2, remapped_rows_correctable=1),
        ("remap_pending",), HealthLevel.DRAIN, 50, text=("2 rows remapped after uncorrectable errors, 1 after",)),
    Row("remap failed and pending", DeviceHealth(remap_pending=True, remap_failed=True),
        ("remap_failed", "remap_pending"), HealthLevel.DRAIN, 0),
    Row("retired page pending (pre-Ampere)", DeviceHealth(retired_pages_pending=True, retired_pages_double_bit=1),
        ("retired_pending",), HealthLevel.DRAIN, 50),
    Row("uncorrected ECC", DeviceHealth(), ("ecc_uncorrected",), HealthLevel.WARN, 80,
        device={"ecc_errors_uncorrected": 4}),
    Row("width x8 of x16", DeviceHealth(pcie_link_gen=5, pcie_link_gen_max=5, pcie_link_width=8, pcie_link_width_max=16),
        ("pcie_width",), HealthLevel.DRAIN, 50, text=("Gen5 x8 (can run Gen5 x16)",)),
    Row("Gen3 x8 on Gen5 x16 under load", DeviceHealth(pcie_link_gen=3, pcie_link_gen_max=5, pcie_link_width=8,
        pcie_link_width_max=16), ("pcie_width", "pcie_gen"), HealthLevel.DRAIN, 10, device={"utilization_gpu_percent": 80.0}),
    Row("Gen3 x16 on Gen5 under load", DeviceHealth(pcie_link_gen=3, pcie_link_gen_max=5, pcie_link_width=16,
        pcie_link_width_max=16), ("pcie_gen",), HealthLevel.DRAIN, 60, device={"utilization_gpu_percent": 80.0}),
    Row("Gen1 at idle saves power", DeviceHealth(pcie_link_gen=1, pcie_link_gen_max=5, pcie_link_width=16,
        pcie_link_width_max=16), (), HealthLevel.OK, 100, device={"utilization_gpu_percent": 0.0}),
    Row("Gen unknown utilization is not judged", DeviceHealth(pcie_link_gen=1, pcie_link_gen_max=5), (), HealthLevel.OK, 100),
    Row("replays and NVLink errors", DeviceHealth(pcie_replay_count=7, nvlink_crc_flit_errors=2, nvlink_replay_errors=1),
        ("nvlink_errors", "pcie_replay"), HealthLevel.NOTICE, 90, text=("3 NVLink", "7 PCIe replays")),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_assess(row: Row) -> None:
    device = DeviceSample(index=0, health=row.health, **row.device)  # type: ignore[arg-type]
    judged = assess(device, NOW)
    assert tuple(f.key for f in judged.findings) == row.keys
    assert judged.level is row.level
    assert judged.needs_drain == (row.level is HealthLevel.DRAIN)
    assert judged.score == row.score
    if judged.score is not None:
        assert judged.score == max(0, 100 - sum(f.points for f in judged.findings))
    words = " ".join(f"{f.title} {f.evidence} {f.action}" for f in judged.findings)
    for text in row.text:
        assert text in words, (text, words)
