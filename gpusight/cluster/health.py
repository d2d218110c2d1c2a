"""GPU health in the cluster view: a :class:`DeviceHealth` rebuilt from the health series a node serves (under
dcgm-exporter's names, from dcgm-exporter and ``gpusight --serve`` alike), judged by the one judgement every
surface shares (:func:`gpusight.facts.health.assess`), and the fleet advice that names the node and the GPU.

The last Xid's time comes from ``gpusight_xid_last_timestamp_seconds`` where ``gpusight --serve`` reports;
dcgm-exporter gives only the last Xid's number (``DCGM_FI_DEV_XID_ERRORS``, which never returns to 0 while
its DCGM runs: its issues #190/#500/#502), so a non-zero value there counts as an Xid seen now.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpusight import metric_names as m
from gpusight.facts.health import HealthAssessment, HealthLevel, assess
from gpusight.snapshot.model import Advice, DeviceHealth, DeviceSample, Severity, XidEvent

LINK = (m.PCIE_LINK_GEN, m.PCIE_LINK_WIDTH, m.PCIE_MAX_LINK_GEN, m.PCIE_MAX_LINK_WIDTH)
"""The PCIe link series: the device query asks for them only where the link runs below its maximum."""
NONZERO = (*(metric for metric in m.HEALTH_METRICS if metric not in LINK and metric is not m.XID_ERRORS),
           *m.VIDEO_METRICS, m.XID_LAST_TIME)
"""Error counts, flags and video engines: the device query asks only for the non-zero ones (nearly all are 0 on a
healthy fleet, so its answer stays small); an absent one reads as 0 or idle."""


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)


def _flag(value: float | None) -> bool | None:
    return None if value is None else value != 0


def health_from_values(value: Callable[[m.MetricName], float | None], now: float) -> DeviceHealth | None:
    """The health of one GPU from its series' values (``value(metric)``, None when absent); None when it serves
    none (``DCGM_FI_DEV_XID_ERRORS``, always asked for, is how a GPU says it serves health)."""
    if all(value(metric) is None for metric in m.HEALTH_METRICS):
        return None
    code = _whole(value(m.XID_ERRORS))
    seen = value(m.XID_LAST_TIME)
    recent = (XidEvent(code, now if seen is None else seen),) if code else ()
    return DeviceHealth(
        xid_total=None if code is None else len(recent), xid_recent=recent,
        ecc_volatile_corrected=_whole(value(m.ECC_SBE_VOL)), ecc_aggregate_corrected=_whole(value(m.ECC_SBE_AGG)),
        ecc_aggregate_uncorrected=_whole(value(m.ECC_DBE_AGG)),
        remapped_rows_correctable=_whole(value(m.CORRECTABLE_REMAPPED_ROWS)),
        remapped_rows_uncorrectable=_whole(value(m.UNCORRECTABLE_REMAPPED_ROWS)),
        remap_pending=_flag(value(m.ROW_REMAP_PENDING)), remap_failed=_flag(value(m.ROW_REMAP_FAILURE)),
        retired_pages_single_bit=_whole(value(m.RETIRED_SBE)), retired_pages_double_bit=_whole(value(m.RETIRED_DBE)),
        retired_pages_pending=_flag(value(m.RETIRED_PENDING)),
        pcie_link_gen=_whole(value(m.PCIE_LINK_GEN)), pcie_link_gen_max=_whole(value(m.PCIE_MAX_LINK_GEN)),
        pcie_link_width=_whole(value(m.PCIE_LINK_WIDTH)), pcie_link_width_max=_whole(value(m.PCIE_MAX_LINK_WIDTH)),
        pcie_replay_count=_whole(value(m.PCIE_REPLAY)),
        nvlink_crc_flit_errors=_whole(value(m.NVLINK_CRC_FLIT)), nvlink_crc_data_errors=_whole(value(m.NVLINK_CRC_DATA)),
        nvlink_replay_errors=_whole(value(m.NVLINK_REPLAY)), nvlink_recovery_errors=_whole(value(m.NVLINK_RECOVERY)),
    )


def judge(index: int, utilization: float | None, value: Callable[[m.MetricName], float | None],
          now: float) -> HealthAssessment:
    """GPU ``index``'s health judged at ``now`` from its series, as the local monitor judges it."""
    device = DeviceSample(index, utilization_gpu_percent=utilization, ecc_errors_uncorrected=_whole(value(m.ECC_DBE_VOL)),
                          health=health_from_values(value, now))
    return assess(device, now)


def drain_gpus(gpus: Sequence[tuple[str, int, HealthAssessment | None]]) -> list[Advice]:
    """``fleet_drain:HOST/gpuN`` (critical) for each (node, GPU index, health) whose health says drain, naming the
    node, the GPU and the worst finding: "drain gpu3 on node-07: Xid 79: GPU has fallen off the bus"."""
    advice = []
    for host, index, health in gpus:
        if health is None or not health.needs_drain:
            continue
        drains = [f for f in health.findings if f.level is HealthLevel.DRAIN]
        worst = drains[0]
        more = f" (and {len(drains) - 1} more)" if len(drains) > 1 else ""
        advice.append(Advice(
            id=f"fleet_drain:{host}/gpu{index}", severity=Severity.CRITICAL, scope=f"{host}/gpu{index}",
            title=f"drain gpu{index} on {host}: {worst.title}{more}",
            evidence="; ".join(f"{f.title}: {f.evidence}" for f in drains) + f" (health {health.score}/100)",
            action=worst.action,
        ))
    return advice
