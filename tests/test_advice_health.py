"""The health rule turns collect.health's judgement into advice: drain findings are critical at once, lesser ones
warn or inform, and the advice stays while the finding stands (table-driven, through a real History and engine)."""

from __future__ import annotations

import pytest

from gpusight.facts.xid_catalog import xid_info
from gpusight.snapshot.model import DeviceHealth, DeviceSample, XidEvent
from support.advice_frames import T0, Case, check, gpu, run, snapshot, steady, trainer


def sick(index: int = 0, util: float = 95.0, **health) -> DeviceSample:
    """A busy GPU with the given health counters."""
    return gpu(index, util=util, health=DeviceHealth(**health))


def xid(*codes: int, at: float = T0) -> tuple[XidEvent, ...]:
    """Xid events with ``codes``, all at ``at``."""
    return tuple(XidEvent(code, at) for code in codes)


GEN5_X16 = {"pcie_link_gen_max": 5, "pcie_link_width_max": 16}

CASES = [
    Case("pending row remap drains at once", steady([sick(remap_pending=True, remapped_rows_uncorrectable=1)], [trainer()]),
         "health:gpu0", True, "critical", ("drain gpu0 / reset needed", "waits for a GPU reset", "1 rows remapped"),
         seconds=0.0, action=("nvidia-smi -r",), absent=("healthy:gpu0",)),
    Case("row remap failure", steady([sick(remap_failed=True)], [trainer()]), "health:gpu0", True, "critical",
         ("row remapping failed", "no spare rows"), seconds=1.0, action=("replaced",)),
    Case("Xid 79 on the GPU", steady([sick(xid_total=1, xid_recent=xid(79))]), "health:gpu0", True, "critical",
         ("Xid 79: GPU has fallen off the bus", "once"), seconds=1.0, action=("reboot",)),
    Case("Xid 48 twice", steady([sick(xid_total=2, xid_recent=xid(48, 48))]), "health:gpu0", True, "critical",
         ("Xid 48: double-bit ECC error", "2 times"), seconds=1.0),
    Case("Xid 94 and 95: both named", steady([sick(xid_total=2, xid_recent=xid(94, 95))]), "health:gpu0", True, "critical",
         ("(and 1 more)", "Xid 94", "Xid 95"), seconds=1.0, action=(xid_info(94).advice, xid_info(95).advice)),
    Case("Xid 13 (an application fault) is only information", steady([sick(xid_total=1, xid_recent=xid(13))], [trainer()]),
         "health:gpu0", True, "info", ("GPU 0 health: Xid 13",), seconds=1.0),
    Case("an Xid from yesterday no longer counts", steady([sick(xid_total=1, xid_recent=xid(79, at=T0 - 2 * 86400))]),
         "health:gpu0", False, seconds=1.0),
    Case("PCIe link at x8 of x16", steady([sick(pcie_link_gen=5, pcie_link_width=8, **GEN5_X16)]), "health:gpu0", True,
         "critical", ("degraded to x8", "Gen5 x8 (can run Gen5 x16)"), seconds=1.0, action=("reseat",)),
    Case("PCIe link at Gen3 x8 on a Gen5 x16 card, busy", steady([sick(pcie_link_gen=3, pcie_link_width=8, **GEN5_X16)]),
         "health:gpu0", True, "critical", ("(and 1 more)", "Gen3 x8 (can run Gen5 x16)", "while 95% busy"), seconds=1.0),
    Case("PCIe Gen1 at idle is power saving, not a fault", steady([sick(util=0.0, pcie_link_gen=1, pcie_link_width=16, **GEN5_X16)]),
         "health:gpu0", False, seconds=1.0),
    Case("uncorrected ECC errors warn", steady([gpu(util=95.0, ecc_errors_uncorrected=3, health=DeviceHealth())], [trainer()]),
         "health:gpu0", True, "warn", ("3 uncorrected ECC errors",), seconds=1.0, absent=("healthy:gpu0",)),
    Case("PCIe replays are information, and the GPU may still be called healthy",
         steady([sick(pcie_replay_count=12)], [trainer()]), "health:gpu0", True, "info", ("12 PCIe replays",), seconds=20.0),
    Case("all counters clean", steady([sick(xid_total=0, remap_pending=False, remap_failed=False, pcie_link_gen=5,
                                            pcie_link_width=16, pcie_replay_count=0, **GEN5_X16)], [trainer()]),
         "health:gpu0", False, seconds=20.0),
    Case("health not read", steady([gpu(util=95.0)], [trainer()]), "health:gpu0", False, seconds=1.0),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_health_rule(case: Case) -> None:
    check(case)


def test_replays_do_not_keep_the_gpu_from_being_called_healthy() -> None:
    ids = {a.id for a in run(steady([sick(pcie_replay_count=12)], [trainer()]), 20.0)}
    assert {"health:gpu0", "healthy:gpu0"} <= ids


def test_a_lost_gpu_reports_the_xid_that_lost_it() -> None:
    lost = DeviceSample(index=1, lost=True, error="GPU is lost", health=DeviceHealth(xid_total=1, xid_recent=xid(79)))
    advice = {a.id: a for a in run(steady([gpu(0), lost], [trainer()]), 1.0)}
    assert advice["health:gpu1"].severity == "critical"
    assert "Xid 79" in advice["health:gpu1"].title


def test_a_fault_shows_on_the_first_poll_and_stays_while_it_stands() -> None:
    """No hold: the first snapshot with a pending remap has the advice; it stays through a minute of polls."""
    remap = sick(remap_pending=True)
    for seconds in (0.0, 60.0):
        assert "health:gpu0" in {a.id for a in run(steady([remap]), seconds)}


def test_the_advice_clears_once_the_gpu_was_reset() -> None:
    def frame(t: float):
        return snapshot(t, [sick(remap_pending=t < 10.0)])

    assert "health:gpu0" not in {a.id for a in run(frame, 10.0 + 11.0)}
    assert "health:gpu0" in {a.id for a in run(frame, 9.0)}


def test_health_scopes_name_each_gpu() -> None:
    advice = {a.id for a in run(steady([sick(0), sick(1, remap_pending=True), sick(2, xid_recent=xid(48))]), 1.0)}
    assert {"health:gpu1", "health:gpu2"} <= advice and "health:gpu0" not in advice
