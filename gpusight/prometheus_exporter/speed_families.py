"""gpusight_job_* speed families: each job's throughput, achieved and peak FLOP/s, MFU (or HFU) and step-time parts.

The values are :func:`gpusight.facts.speed.job_speed`'s, over the job's ranks on this node. Only jobs with a rank
that reports its steps per second get series, and only jobs with a rank among the served process rows (the cap of
``MAX_PROCESS_SERIES``), so their number never exceeds the processes served; each such job has at most one series
per family, and five ``part`` series of step time. FLOP/s are served in base units (FLOP/s, not TFLOP/s).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily

from gpusight import metric_names as names
from gpusight.facts.speed import job_speed
from gpusight.prometheus_exporter.process_families import ProcessRow
from gpusight.snapshot.model import Snapshot
from gpusight.trainer_record import BREAKDOWN_PARTS

TERA = 1e12
"""FLOP/s in a TFLOP/s."""


def _family(metric: names.MetricName) -> GaugeMetricFamily:
    return GaugeMetricFamily(metric.name, metric.help, labels=names.HOST_LABELS + metric.labels)


def speed_families(snapshot: Snapshot, rows: list[ProcessRow], host: list[str]) -> Iterator[GaugeMetricFamily]:
    """The job speed families of the jobs that have a served row and a rank reporting its speed."""
    steps, samples, tokens, flops, peak, utilization, step_time = families = [_family(metric) for metric in (
        names.JOB_STEPS, names.JOB_SAMPLES, names.JOB_TOKENS, names.JOB_FLOPS, names.JOB_PEAK_FLOPS,
        names.JOB_FLOPS_UTILIZATION, names.JOB_STEP_TIME)]
    served = {row.process.job for row in rows}
    for job in snapshot.jobs:
        if job.id not in served:
            continue
        speed = job_speed(job, snapshot.processes)
        if not speed.reporting:
            continue
        labels = host + [str(job.id)]
        for family, value in ((steps, speed.steps_per_second), (samples, speed.samples_per_second),
                              (tokens, speed.tokens_per_second)):
            if value is not None:
                family.add_metric(labels, value)
        named = labels + [speed.utilization_name]
        if speed.achieved_tflops is not None and speed.peak_tflops is not None:
            flops.add_metric(named, speed.achieved_tflops * TERA)
            peak.add_metric(named, speed.peak_tflops * TERA)
        if speed.flops_utilization_percent is not None:
            utilization.add_metric(named, speed.flops_utilization_percent)
        if speed.breakdown is not None:
            for part, (_label, percent) in zip(BREAKDOWN_PARTS, speed.breakdown, strict=True):
                step_time.add_metric(labels + [part], percent)
    yield from families
