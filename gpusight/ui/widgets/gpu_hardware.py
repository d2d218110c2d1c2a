"""Text of a GPU's hardware beyond its load, shared by the GPU panel and the detail screen: the health badge, the
video engine figures and the MIG devices' lines.

Health is judged once, by :func:`gpusight.facts.health.assess`; this module only words it. Every string from
NVML (a MIG profile or uuid, a note) is escaped here.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpusight.facts.health import HealthAssessment, HealthLevel, assess
from gpusight.snapshot.model import DeviceSample, MigDeviceSample, ProcessSample
from gpusight.textsafe import safe_text
from gpusight.ui.widgets.chart_choice import ChartedMetric
from gpusight.ui.widgets.format import bar_text, memory_pair, percent_of
from gpusight.units import NA, fmt_percent

ENGINE_BUSY_PERCENT = 20.0
"""Video decoder or encoder utilization at or above which the GPU panel charts the engine."""

DECODER = ChartedMetric("decoder_percent", "DEC", "dec")
"""The video decoder's chart, shown in the GPU panel in place of the last history while an engine is busy."""

MIG_NA_REASON = "NVML gives no utilization on a MIG-enabled GPU"
"""Why a MIG-enabled GPU's own utilization reads N/A."""

_BADGE_WORDS = {
    "remap_failed": "REMAP FAIL",
    "remap_pending": "REMAP",
    "retired_pending": "RETIRE",
    "ecc_uncorrected": "ECC",
    "pcie_replay": "REPLAY",
    "nvlink_errors": "NVLINK",
}
"""Badge word of each finding whose badge is fixed (Xid and PCIe link badges carry their numbers)."""


@dataclass(frozen=True, slots=True)
class HealthBadge:
    """The GPU line's health badge: the worst finding in a long and a short form, and its level."""

    text: str
    """E.g. ``"DRAIN Xid 48 +2"``: the worst finding, ``DRAIN`` when the GPU must be drained, how many more."""
    short: str
    """The worst finding alone, e.g. ``"Xid 48"``, for the narrow strip layout (its colour tells the level)."""
    level: HealthLevel
    """The worst finding's level."""


def health_badge(device: DeviceSample, now: float) -> HealthBadge | None:
    """The health badge of ``device`` judged at ``now``; None when health was not read or nothing is wrong."""
    judged = assess(device, now)
    if not judged.findings:
        return None
    word = _badge_word(judged.findings[0].key, device)
    text = f"DRAIN {word}" if judged.needs_drain else word
    if len(judged.findings) > 1:
        text += f" +{len(judged.findings) - 1}"
    return HealthBadge(text, word, judged.level)


def _badge_word(key: str, device: DeviceSample) -> str:
    health = device.health
    if key.startswith("xid"):
        return f"Xid {key[3:]}"
    if key == "pcie_width" and health is not None:
        return f"PCIe x{health.pcie_link_width}"
    if key == "pcie_gen" and health is not None:
        return f"PCIe Gen{health.pcie_link_gen}"
    return _BADGE_WORDS.get(key, key.upper())


def health_summary(judged: HealthAssessment) -> str:
    """``score 30/100``, or ``N/A`` when nothing of the GPU's health was read."""
    return NA if judged.score is None else f"score {judged.score}/100"


def engine_items(device: DeviceSample) -> list[tuple[str, str]]:
    """(label, value) of the video engines the GPU reports: ``ENC``, ``DEC``, and ``JPG``/``OFA`` where known."""
    items = []
    for label, value in (("ENC ", device.encoder_percent), ("DEC ", device.decoder_percent),
                         ("JPG ", device.jpeg_percent), ("OFA ", device.ofa_percent)):
        if value is not None:
            items.append((label, fmt_percent(value)))
    return items


def engine_busy(device: DeviceSample) -> bool:
    """True when the video decoder or encoder works hard enough to be charted."""
    return any(v is not None and v >= ENGINE_BUSY_PERCENT for v in (device.decoder_percent, device.encoder_percent))


def migs_of(migs: tuple[MigDeviceSample, ...], device_index: int) -> tuple[MigDeviceSample, ...]:
    """The MIG devices of GPU ``device_index``."""
    return tuple(m for m in migs if m.device_index == device_index)


def mig_name(mig: MigDeviceSample) -> str:
    """``g2.c0 3g.40gb``: its GPU and compute instance ids and its profile, escaped."""
    gi = "?" if mig.gpu_instance_id is None else str(mig.gpu_instance_id)
    ci = "?" if mig.compute_instance_id is None else str(mig.compute_instance_id)
    return f"g{gi}.c{ci} {safe_text(mig.profile, 16) or NA}"


def mig_activity(mig: MigDeviceSample) -> str:
    """``SM 86% tensor 55%`` from GPM, or ``SM N/A (reason)`` with NVML's reason."""
    if mig.error:
        return f"error: {safe_text(mig.error, 60)}"
    if mig.sm_active_percent is None:
        reason = safe_text(mig.utilization_note, 60) or "not measured"
        return f"SM N/A ({reason})"
    text = f"SM {fmt_percent(mig.sm_active_percent)}"
    if mig.tensor_active_percent is not None:
        text += f" tensor {fmt_percent(mig.tensor_active_percent)}"
    return text


def mig_line(mig: MigDeviceSample, bar_width: int, ascii_mode: bool) -> list[tuple[str, str]]:
    """One MIG device as (text, part) pieces: name, memory bar, memory pair and activity."""
    used = percent_of(mig.memory_used_bytes, mig.memory_total_bytes)
    pieces = [(f"{mig_name(mig):<15} ", "label")]
    if bar_width > 0:
        pieces.append((bar_text(None if used is None else used / 100.0, bar_width, ascii_mode), "mem"))
        pieces.append((" ", "dim"))
    pieces.append((f"{memory_pair(mig.memory_used_bytes, mig.memory_total_bytes):>12}  ", "value"))
    pieces.append((mig_activity(mig), "value"))
    return pieces


def mig_short(mig: MigDeviceSample) -> str:
    """``g2 3g.40gb 31.6/39.4GiB SM 86%``: one MIG device in short form, escaped."""
    gi = "?" if mig.gpu_instance_id is None else str(mig.gpu_instance_id)
    activity = NA if mig.sm_active_percent is None else fmt_percent(mig.sm_active_percent)
    memory = memory_pair(mig.memory_used_bytes, mig.memory_total_bytes)
    return f"g{gi} {safe_text(mig.profile, 16) or NA} {memory} SM {activity}"


def mig_summary(migs: tuple[MigDeviceSample, ...]) -> str:
    """``MIG 4: 3g.40gb SM 86% · 2g.20gb SM 0% · ...``: every instance in one line."""
    parts = []
    for mig in migs:
        activity = NA if mig.sm_active_percent is None else fmt_percent(mig.sm_active_percent)
        parts.append(f"{safe_text(mig.profile, 16) or NA} {activity}")
    return f"MIG {len(migs)}: " + " · ".join(parts)


def process_instance(process: ProcessSample) -> str | None:
    """``g2`` for a process on MIG GPU instance 2 (``g2.c0`` with its compute instance); None off MIG."""
    if process.gpu_instance_id is None:
        return None
    ci = "" if process.compute_instance_id is None else f".c{process.compute_instance_id}"
    return f"g{process.gpu_instance_id}{ci}"
