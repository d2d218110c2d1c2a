"""The GPU detail screen's sections beyond the device's own fields: Health, Video engines and MIG.

Each section is a title and (label, text) rows, every value escaped and every unknown one ``N/A``. Health is
judged by :func:`gpusight.facts.health.assess`, so the score and findings here are those of the badge,
the advice and ``--check``.
"""

from __future__ import annotations

import time

from gpusight.facts.health import assess
from gpusight.facts.xid_catalog import xid_info
from gpusight.snapshot.model import DeviceHealth, DeviceSample, MigDeviceSample, ProcessSample, XidEvent
from gpusight.textsafe import safe_text
from gpusight.ui.widgets.format import memory_pair
from gpusight.ui.widgets.gpu_hardware import MIG_NA_REASON, health_summary, mig_activity, mig_name
from gpusight.units import NA, fmt_bytes, fmt_percent

Section = tuple[str, list[tuple[str, str]]]
"""A section's title and its (label, text) rows."""

XIDS_SHOWN = 5
"""The latest Xid events the Health section lists."""


def detail_sections(
    device: DeviceSample, migs: tuple[MigDeviceSample, ...], processes: tuple[ProcessSample, ...], now: float
) -> list[Section]:
    """The sections shown for ``device`` at ``now``: Health, Video engines, and MIG on a MIG-enabled GPU."""
    sections = [("Health", health_rows(device, now)), ("Video engines", engine_rows(device))]
    if migs or device.mig_mode:
        sections.append(("MIG", mig_rows(device, migs, processes)))
    return sections


def health_rows(device: DeviceSample, now: float) -> list[tuple[str, str]]:
    """The health score, each finding with its points, evidence and action, then every counter read."""
    health = device.health
    if health is None:
        return [("health", "N/A: not read for this GPU")]
    judged = assess(device, now)
    rows = [("health", health_summary(judged))]
    for finding in judged.findings:
        rows.append((f"-{finding.points} {finding.level.name}", safe_text(finding.title, 120)))
        rows.append(("  evidence", safe_text(finding.evidence, 200)))
        rows.append(("  action", safe_text(finding.action, 200)))
    if not judged.findings:
        rows.append(("findings", "none"))
    rows += _counter_rows(device, health)
    rows += [(f"Xid {event.code}", _xid_text(event)) for event in reversed(health.xid_recent[-XIDS_SHOWN:])]
    return rows


def _count(value: int | None) -> str:
    return NA if value is None else str(value)


def _flag(value: bool | None) -> str:
    return NA if value is None else ("yes" if value else "no")


def _counter_rows(device: DeviceSample, health: DeviceHealth) -> list[tuple[str, str]]:
    nvlink = (health.nvlink_crc_flit_errors, health.nvlink_crc_data_errors, health.nvlink_replay_errors,
              health.nvlink_recovery_errors)
    return [
        ("ECC volatile", f"corrected {_count(health.ecc_volatile_corrected)}, "
                         f"uncorrected {_count(device.ecc_errors_uncorrected)}"),
        ("ECC aggregate", f"corrected {_count(health.ecc_aggregate_corrected)}, "
                          f"uncorrected {_count(health.ecc_aggregate_uncorrected)}"),
        ("remapped rows", f"correctable {_count(health.remapped_rows_correctable)}, uncorrectable "
                          f"{_count(health.remapped_rows_uncorrectable)}, pending {_flag(health.remap_pending)}, "
                          f"failed {_flag(health.remap_failed)}"),
        ("retired pages", f"single-bit {_count(health.retired_pages_single_bit)}, double-bit "
                          f"{_count(health.retired_pages_double_bit)}, pending {_flag(health.retired_pages_pending)}"),
        ("PCIe link", f"Gen{_count(health.pcie_link_gen)} x{_count(health.pcie_link_width)} now, "
                      f"Gen{_count(health.pcie_link_gen_max)} x{_count(health.pcie_link_width_max)} max"),
        ("PCIe replays", _count(health.pcie_replay_count)),
        ("NVLink errors", NA if all(v is None for v in nvlink) else
         f"CRC flit {_count(nvlink[0])}, CRC data {_count(nvlink[1])}, replay {_count(nvlink[2])}, "
         f"recovery {_count(nvlink[3])}"),
        ("Xid events", f"{_count(health.xid_total)} since gpusight started listening"),
    ]


def _xid_text(event: XidEvent) -> str:
    """``12:03:41 on g2: double-bit ECC error``: when the Xid came, where it hit, and its meaning."""
    when = time.strftime("%m-%d %H:%M:%S", time.localtime(event.timestamp))
    where = "" if event.gpu_instance_id is None else f" on MIG g{event.gpu_instance_id}"
    return f"{when}{where}: {safe_text(xid_info(event.code).meaning, 100)}"


def engine_rows(device: DeviceSample) -> list[tuple[str, str]]:
    """Encoder, decoder, JPEG and OFA utilization (``N/A`` where the GPU or NVML cannot say)."""
    note = " (N/A on a MIG-enabled GPU)" if device.mig_mode and device.decoder_percent is None else ""
    return [
        ("encoder (NVENC)", fmt_percent(device.encoder_percent) + note),
        ("decoder (NVDEC)", fmt_percent(device.decoder_percent) + note),
        ("JPEG (NVJPG)", fmt_percent(device.jpeg_percent)),
        ("optical flow (OFA)", fmt_percent(device.ofa_percent)),
    ]


def mig_rows(
    device: DeviceSample, migs: tuple[MigDeviceSample, ...], processes: tuple[ProcessSample, ...]
) -> list[tuple[str, str]]:
    """Each MIG device: memory, SMs, activity (or why it is N/A), uuid and the processes running in it."""
    rows = [("GPU utilization", f"{NA}: {MIG_NA_REASON}" if device.utilization_gpu_percent is None
             else fmt_percent(device.utilization_gpu_percent))]
    if not migs:
        rows.append(("instances", "none read"))
    for mig in migs:
        sms = "" if mig.sm_count is None else f", {mig.sm_count} SMs"
        rows.append((mig_name(mig), f"{memory_pair(mig.memory_used_bytes, mig.memory_total_bytes)}{sms}, "
                                    f"{mig_activity(mig)}"))
        rows.append(("  uuid", safe_text(mig.uuid, 64) or NA))
        inside = [p for p in processes if p.device_index == mig.device_index
                  and p.gpu_instance_id is not None and p.gpu_instance_id == mig.gpu_instance_id]
        for process in inside:
            rows.append((f"  PID {process.pid}", f"{safe_text(process.name, 30) or NA} "
                                                 f"(user {safe_text(process.user, 20) or NA}), "
                                                 f"{fmt_bytes(process.gpu_memory_bytes)}"))
        if not inside:
            rows.append(("  processes", "none"))
    return rows
