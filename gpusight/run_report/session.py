"""The run summary of a live session, from the sampler's :class:`~gpusight.sampling.history.History`.

The history keeps every device and host metric over its window and a log of advice changes; they are turned back
into snapshots and fed through the same :class:`~gpusight.run_report.summary.RunAccumulator` as a recording, so the
Markdown report of ``s`` and ``gpusight --report`` compute their numbers with one piece of code. The history keeps no
process list, so a session's summary has no processes or jobs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpusight.run_report.summary import RunSummary, summarize
from gpusight.sampling.history import DEVICE_METRICS, History
from gpusight.snapshot.model import Advice, DeviceSample, HostSample, Snapshot, SourceKind

_INTEGER_METRICS = ("memory_used_bytes", "clock_sm_mhz")
"""Kept metrics that are integers in a DeviceSample (the history stores floats)."""


def history_snapshots(history: History) -> Iterator[Snapshot]:
    """The history's samples as snapshots (devices with every kept metric unknown are left out); hold
    ``history.reading()`` while iterating so appends wait."""
    stamps = history.timestamps()
    latest = history.latest
    names = {d.index: d for d in latest.devices} if latest is not None else {}
    devices = {i: {m: history.device(i, m) for m in DEVICE_METRICS} for i in history.device_indexes()}
    cpu, iowait, memory = history.host("cpu_percent"), history.host("iowait_percent"), history.host("memory_used_bytes")
    log = history.advice_log()
    host_name = latest.host.hostname if latest is not None else None
    memory_total = latest.host.memory_total_bytes if latest is not None else None
    label = latest.label if latest is not None else None
    source = latest.source if latest is not None else SourceKind.NVML
    entry = -1
    for i, t in enumerate(stamps):
        while entry + 1 < len(log) and log[entry + 1][0] <= t:
            entry += 1
        advice: tuple[Advice, ...] = log[entry][1] if entry >= 0 else ()
        samples = []
        for index, series in devices.items():
            values: dict[str, Any] = {m: series[m][i] for m in DEVICE_METRICS}
            if all(v is None for v in values.values()):
                continue
            for m in _INTEGER_METRICS:
                values[m] = None if values[m] is None else int(values[m])
            known = names.get(index)
            samples.append(DeviceSample(index=index, name=known.name if known else None,
                                        memory_total_bytes=known.memory_total_bytes if known else None, **values))
        mean_cpu, used = cpu[i], memory[i]
        host = HostSample(
            hostname=host_name, cpu_percent_per_core=() if mean_cpu is None else (mean_cpu,),
            iowait_percent=iowait[i], memory_used_bytes=None if used is None else int(used),
            memory_total_bytes=memory_total,
        )
        yield Snapshot(timestamp=t, source=source, host=host, devices=tuple(samples), advice=advice, label=label)


def summarize_history(history: History) -> RunSummary:
    """The run summary of everything the history holds."""
    with history.reading():
        return summarize(history_snapshots(history))
