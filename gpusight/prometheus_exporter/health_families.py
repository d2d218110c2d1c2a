"""Hardware health and video engine series of each GPU: dcgm-exporter's names, plus gpusight's Xid counter,
last-Xid gauges, health score and drain flag (judged by :func:`gpusight.facts.health.assess`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from gpusight import metric_names as names
from gpusight.facts.health import assess
from gpusight.snapshot.model import DeviceHealth, DeviceSample

UNKNOWN_XID = "unknown"
"""The ``xid`` label of events counted in ``xid_total`` that came and went between two scrapes unseen."""


def _flag(value: bool | None) -> float | None:
    return None if value is None else float(value)


def _count(value: int | None) -> float | None:
    return None if value is None else float(value)


def last_xid(health: DeviceHealth) -> float | None:
    """dcgm-exporter's ``DCGM_FI_DEV_XID_ERRORS``: the last Xid's number, 0 when none came; None where unread."""
    if health.xid_total is None:
        return None
    return float(health.xid_recent[-1].code) if health.xid_recent else 0.0


_HEALTH: tuple[tuple[names.MetricName, Callable[[DeviceHealth], float | None]], ...] = (
    (names.XID_ERRORS, last_xid),
    (names.ECC_SBE_VOL, lambda h: _count(h.ecc_volatile_corrected)),
    (names.ECC_SBE_AGG, lambda h: _count(h.ecc_aggregate_corrected)),
    (names.ECC_DBE_AGG, lambda h: _count(h.ecc_aggregate_uncorrected)),
    (names.RETIRED_SBE, lambda h: _count(h.retired_pages_single_bit)),
    (names.RETIRED_DBE, lambda h: _count(h.retired_pages_double_bit)),
    (names.RETIRED_PENDING, lambda h: _flag(h.retired_pages_pending)),
    (names.ROW_REMAP_FAILURE, lambda h: _flag(h.remap_failed)),
    (names.ROW_REMAP_PENDING, lambda h: _flag(h.remap_pending)),
    (names.CORRECTABLE_REMAPPED_ROWS, lambda h: _count(h.remapped_rows_correctable)),
    (names.UNCORRECTABLE_REMAPPED_ROWS, lambda h: _count(h.remapped_rows_uncorrectable)),
    (names.PCIE_REPLAY, lambda h: _count(h.pcie_replay_count)),
    (names.PCIE_LINK_GEN, lambda h: _count(h.pcie_link_gen)),
    (names.PCIE_LINK_WIDTH, lambda h: _count(h.pcie_link_width)),
    (names.PCIE_MAX_LINK_GEN, lambda h: _count(h.pcie_link_gen_max)),
    (names.PCIE_MAX_LINK_WIDTH, lambda h: _count(h.pcie_link_width_max)),
    (names.NVLINK_CRC_FLIT, lambda h: _count(h.nvlink_crc_flit_errors)),
    (names.NVLINK_CRC_DATA, lambda h: _count(h.nvlink_crc_data_errors)),
    (names.NVLINK_REPLAY, lambda h: _count(h.nvlink_replay_errors)),
    (names.NVLINK_RECOVERY, lambda h: _count(h.nvlink_recovery_errors)),
)
"""Each health metric and how it is read from a GPU's :class:`DeviceHealth` (None: not served)."""

_DEVICE: tuple[tuple[names.MetricName, Callable[[DeviceSample], float | None]], ...] = (
    (names.ENC_UTIL, lambda d: d.encoder_percent),
    (names.DEC_UTIL, lambda d: d.decoder_percent),
    (names.ECC_DBE_VOL, lambda d: None if d.health is None else _count(d.ecc_errors_uncorrected)),
)
"""dcgm-exporter's video engines, and the volatile uncorrected ECC count, which the model keeps on the device."""

_OWN: tuple[tuple[names.MetricName, Callable[[DeviceSample], float | None]], ...] = (
    (names.JPEG_UTIL, lambda d: d.jpeg_percent),
    (names.OFA_UTIL, lambda d: d.ofa_percent),
    (names.XID_LAST, lambda d: float(d.health.xid_recent[-1].code) if d.health and d.health.xid_recent else None),
    (names.XID_LAST_TIME, lambda d: d.health.xid_recent[-1].timestamp if d.health and d.health.xid_recent else None),
)
"""gpusight's own per-GPU gauges read straight from the device."""


@dataclass
class XidTally:
    """Xid events by number for each GPU, grown scrape by scrape from the snapshots' ``xid_total`` and
    ``xid_recent``: the counts never fall while gpusight runs (a smaller ``xid_total``, a replay starting over,
    starts the GPU's counts again, which Prometheus reads as a counter reset)."""

    totals: dict[int, int] = field(default_factory=dict)
    """The ``xid_total`` last seen per GPU index (a lost GPU keeps its index, not its UUID)."""
    counts: dict[int, dict[str, int]] = field(default_factory=dict)
    """Events counted per GPU index and ``xid`` label."""

    def update(self, device: DeviceSample) -> dict[str, int]:
        """Count the events ``device`` received since its previous snapshot; returns its counts by Xid label."""
        key = device.index
        health = device.health
        if health is None or health.xid_total is None:
            return self.counts.get(key, {})
        before = self.totals.get(key, 0)
        if health.xid_total < before:
            before = 0
            self.counts.pop(key, None)
        counts = self.counts.setdefault(key, {})
        new = health.xid_total - before
        seen = health.xid_recent[len(health.xid_recent) - min(new, len(health.xid_recent)):] if new else ()
        for event in seen:
            counts[str(event.code)] = counts.get(str(event.code), 0) + 1
        if new > len(seen):
            counts[UNKNOWN_XID] = counts.get(UNKNOWN_XID, 0) + new - len(seen)
        self.totals[key] = health.xid_total
        return counts


def health_families(present: list[tuple[DeviceSample, list[str]]], hostname: str, now: float,
                    tally: XidTally) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """The health and video families of the GPUs in ``present`` (each with its ``DEVICE_LABELS`` values, a lost
    GPU's as remembered), judged at epoch seconds ``now``; families no GPU has a value for are left out."""
    for metric, read_device in _DEVICE:
        yield _family(metric, names.DEVICE_LABELS, ((labels, read_device(d)) for d, labels in present))
    with_health = [(d, d.health, labels) for d, labels in present if d.health is not None]
    for metric, read in _HEALTH:
        yield _family(metric, names.DEVICE_LABELS, ((labels, read(h)) for _, h, labels in with_health))
    gpu, uuid = names.DEVICE_LABELS.index(names.LABEL_GPU), names.DEVICE_LABELS.index(names.LABEL_UUID)
    own = [(d, [hostname, hostname, labels[gpu], labels[uuid]]) for d, labels in present]
    own_labels = names.HOST_LABELS + names.GPU_LABELS
    for metric, read_device in _OWN:
        yield _family(metric, own_labels, ((labels, read_device(d)) for d, labels in own))
    judged = [(labels, assess(d, now)) for d, labels in own if d.health is not None]
    yield _family(names.HEALTH_SCORE, own_labels,
                  ((labels, None if a.score is None else float(a.score)) for labels, a in judged))
    yield _family(names.DRAIN, own_labels,
                  ((labels, None if a.score is None else float(a.needs_drain)) for labels, a in judged))
    counter = CounterMetricFamily(names.XID_COUNT.name, names.XID_COUNT.help, labels=own_labels + names.XID_COUNT.labels)
    for device, labels in own:
        for xid, count in sorted(tally.update(device).items()):
            counter.add_metric(labels + [xid], float(count))
    yield counter


def _family(metric: names.MetricName, label_names: tuple[str, ...],
            values: Iterator[tuple[list[str], float | None]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(metric.name, metric.help, labels=label_names + metric.labels)
    for labels, value in values:
        if value is not None:
            family.add_metric(labels, value)
    return family
