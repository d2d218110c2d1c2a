"""Every metric family of one scrape, built from the newest snapshot, and the collector that serves them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gpusight import __version__
from gpusight import metric_names as names
from gpusight.advice.rules import SUMMARIES
from gpusight.prometheus_exporter.device_families import device_families
from gpusight.prometheus_exporter.health_families import XidTally
from gpusight.prometheus_exporter.labels import label_value
from gpusight.prometheus_exporter.process_families import (
    MAX_PROCESS_SERIES,
    job_families,
    mig_profiles,
    process_families,
    process_rows,
)
from gpusight.prometheus_exporter.speed_families import speed_families
from gpusight.prometheus_exporter.vendor_families import vendor_families
from gpusight.snapshot.model import Snapshot


@dataclass(frozen=True, slots=True)
class ExportOptions:
    """What the exporter adds to or keeps out of its series."""

    hostname: str
    """The ``Hostname``/``hostname`` label value of every series."""
    cmdline: bool = False
    """Give ``gpusight_process_info`` a ``command`` label (``--serve-cmdline``); off by default: secrets."""
    max_process_series: int = MAX_PROCESS_SERIES
    """Most GPU processes served per scrape."""


def _gauge(metric: names.MetricName, host: list[str], value: float | None = None) -> GaugeMetricFamily:
    family = GaugeMetricFamily(metric.name, metric.help, labels=names.HOST_LABELS + metric.labels)
    if value is not None:
        family.add_metric(host, value)
    return family


def host_families(snapshot: Snapshot, host: list[str]) -> Iterator[GaugeMetricFamily]:
    """Host CPU (average and per core), iowait and memory, where known."""
    cores = snapshot.host.cpu_percent_per_core
    yield _gauge(names.HOST_CPU, host, sum(cores) / len(cores) if cores else None)
    per_core = _gauge(names.HOST_CORE_CPU, host)
    for number, percent in enumerate(cores):
        per_core.add_metric(host + [str(number)], percent)
    yield per_core
    yield _gauge(names.HOST_IOWAIT, host, snapshot.host.iowait_percent)
    memory = snapshot.host.memory_used_bytes, snapshot.host.memory_total_bytes
    yield _gauge(names.HOST_MEMORY_USED, host, None if memory[0] is None else float(memory[0]))
    yield _gauge(names.HOST_MEMORY_TOTAL, host, None if memory[1] is None else float(memory[1]))


def advice_families(snapshot: Snapshot, host: list[str], uuids: Mapping[int, str]) -> Iterator[GaugeMetricFamily]:
    """gpusight_advice: 1 per piece of advice standing; gpusight_gpu_lost: 0 or 1 per GPU.

    A lost GPU reports no UUID; ``uuids`` (index -> UUID seen before) keeps its series the one that read 0.
    """
    advice = _gauge(names.ADVICE, host)
    for item in snapshot.advice:
        rule = item.id.split(":", 1)[0]
        advice.add_metric(host + [label_value(item.id), label_value(rule), str(item.severity), label_value(item.scope),
                                  SUMMARIES.get(rule, "")], 1.0)
    yield advice
    lost = _gauge(names.GPU_LOST, host)
    for device in snapshot.devices:
        uuid = device.uuid if device.uuid is not None else uuids.get(device.index)
        lost.add_metric(host + [str(device.index), label_value(uuid)], 1.0 if device.lost else 0.0)
    yield lost


def scrape_families(snapshot: Snapshot | None, now: float, options: ExportOptions,
                    uuids: Mapping[int, str] | None = None, tally: XidTally | None = None,
                    known: dict[int, list[str]] | None = None) -> Iterable[Metric]:
    """The families of a scrape at wall time ``now`` serving ``snapshot`` (None before the first poll); ``uuids``
    names GPUs by index as earlier snapshots did; ``tally`` counts Xid events from scrape to scrape; ``known``
    remembers each GPU's labels for its health series once it is lost."""
    host = [options.hostname, options.hostname]
    source = "" if snapshot is None else str(snapshot.source)
    yield _gauge(names.BUILD_INFO, host + [__version__, source], 1.0)
    if snapshot is None:
        return
    yield _gauge(names.SNAPSHOT_TIME, host, snapshot.timestamp)
    yield _gauge(names.SNAPSHOT_AGE, host, max(0.0, now - snapshot.timestamp))
    yield from device_families(snapshot, options.hostname, tally, known)
    yield from vendor_families(snapshot, options.hostname)
    yield from advice_families(snapshot, host, uuids or {})
    yield from job_families(snapshot, host)
    rows, dropped = process_rows(snapshot, options.max_process_series)
    yield from speed_families(snapshot, rows, host)
    yield from process_families(rows, host, options.cmdline, mig_profiles(snapshot))
    yield _gauge(names.SERIES_DROPPED, host, float(dropped))
    yield from host_families(snapshot, host)


class SnapshotCollector(Collector):
    """A ``prometheus_client`` collector that builds every family at scrape time from ``latest()``.

    ``latest`` must return at once (the sampler's newest snapshot): nothing here touches NVML.
    """

    def __init__(self, latest: Callable[[], Snapshot | None], options: ExportOptions,
                 clock: Callable[[], float] = time.time) -> None:
        self._latest = latest
        self._options = options
        self._clock = clock
        self._uuids: dict[int, str] = {}
        self._tally = XidTally()
        self._known: dict[int, list[str]] = {}

    def collect(self) -> Iterable[Metric]:
        """The families of one scrape that have a series (an unknown value is absent, never 0)."""
        snapshot = self._latest()
        if snapshot is not None:
            self._uuids.update((d.index, d.uuid) for d in snapshot.devices if d.uuid is not None)
        families = scrape_families(snapshot, self._clock(), self._options, self._uuids, self._tally, self._known)
        return [f for f in families if f.samples]
