"""``gpusight --cluster URL --once``: a :class:`ClusterFrame` as a compact plain-text table grouped by host.

Every string that came from an exporter (host names, process names, users, advice) goes through ``safe_text``.
"""

from __future__ import annotations

import time
from collections import defaultdict

from gpusight.cluster.counts import FleetCounts, counted, node_gpus
from gpusight.cluster.frame import ClusterFrame, ClusterGpu, ClusterJob, ClusterMig, ClusterNode, ClusterProcess
from gpusight.cluster.job_speed_text import cluster_speed_line
from gpusight.snapshot.model import Advice
from gpusight.textsafe import safe_text
from gpusight.units import NA, fmt_bytes, fmt_celsius, fmt_percent, fmt_watts

PROCESS_COLUMN = 60
"""Longest text in a GPU row's processes column."""


def render_cluster(frame: ClusterFrame, requests: int | None = None, fetched: int | None = None) -> str:
    """The whole report: title, one block per node, job speed across nodes, fleet advice, node advice, problems,
    missing panels."""
    lines = [_title(frame, requests, fetched)]
    jobs = {(job.host, job.job): job for job in frame.jobs}
    by_gpu: dict[tuple[str, int | None], list[ClusterProcess]] = defaultdict(list)
    for process in frame.processes:
        by_gpu[(process.host, process.gpu)].append(process)
    for node in frame.nodes:
        lines.append("")
        lines.extend(_node_lines(node, by_gpu, jobs))
    if frame.job_speeds:
        lines += ["", "Job speed across nodes (gpusight.torch)"] + [f"  {cluster_speed_line(s)}" for s in frame.job_speeds]
    if frame.fleet_advice:
        lines += ["", "Fleet advice"]
        for advice in frame.fleet_advice:
            lines.extend(_advice_lines(advice))
    if frame.node_advice:
        lines += ["", "Advice raised on the nodes (gpusight --serve)"]
        for host, advice in frame.node_advice:
            where = f"{host} {advice.scope}" if advice.scope else host
            lines.append(f"  {advice.severity.value.upper():<8} {safe_text(where)}: {safe_text(advice.title)}")
    if frame.problems:
        lines += ["", "Problems"] + [f"  {safe_text(problem)}" for problem in frame.problems]
    if frame.missing_panels:
        lines += ["", "Not available"] + [f"  {safe_text(line)}" for line in frame.missing_panels]
    return "\n".join(lines) + "\n"


def _title(frame: ClusterFrame, requests: int | None, fetched: int | None) -> str:
    nodes, down, gpus, free = FleetCounts.of(frame).parts()
    cost = []
    if requests is not None:
        cost.append(f"{requests} queries")
    if fetched is not None:
        cost.append(fmt_bytes(fetched))
    if frame.query_seconds is not None:
        cost.append(f"{frame.query_seconds:.2f} s")
    jobs = counted(len({j.cluster_job or (j.host, j.job) for j in frame.jobs}), "job")
    return (f"gpusight --cluster {safe_text(frame.url)} at {time.strftime('%H:%M:%S', time.localtime(frame.timestamp))}: "
            f"{nodes}{down}, {gpus} ({free}), {jobs}" + (f" · {', '.join(cost)}" if cost else ""))


def _node_lines(node: ClusterNode, by_gpu: dict[tuple[str, int | None], list[ClusterProcess]],
                jobs: dict[tuple[str, int], ClusterJob]) -> list[str]:
    state = "up" if node.up else "DOWN"
    exporter = "gpusight --serve" if node.exporter == "gpusight" else "dcgm-exporter"
    head = f"{safe_text(node.host)}  {state}  {exporter}  {node_gpus(node)}"
    if node.cpu_percent is not None:
        head += f"  CPU {fmt_percent(node.cpu_percent)} iowait {fmt_percent(node.iowait_percent)}"
    if node.note:
        head += f"  ({safe_text(node.note)}{'; last values' if not node.up and node.gpus else ''})"
    if node.drain_gpus:
        head += f"  {counted(node.drain_gpus, 'GPU')} to drain"
    lines = [head, f"  {'GPU':>3}  {'UTIL':>5}  {'MEMORY':<17} {'POWER':>6} {'TEMP':>5} {'HEALTH':>6}  PROCESSES"]
    for gpu in node.gpus:
        here = by_gpu.get((node.host, gpu.index), [])
        instances = {mig.gpu_instance_id for mig in gpu.mig}
        lines.append(_gpu_line(gpu, [p for p in here if p.gpu_instance_id not in instances], jobs))
        lines.extend(_mig_line(mig, [p for p in here if p.gpu_instance_id == mig.gpu_instance_id], jobs)
                     for mig in gpu.mig)
    return lines


def _memory(used: int | None, total: int | None) -> str:
    if used is None:
        return NA
    return fmt_bytes(used) if total is None else f"{fmt_bytes(used)}/{fmt_bytes(total)}"


def health_badge(gpu: ClusterGpu) -> str:
    """``DRAIN``, the health score when below 100, ``OK``, or N/A when the GPU serves no health series."""
    if gpu.health is None or gpu.health.score is None:
        return NA
    if gpu.health.needs_drain:
        return "DRAIN"
    return "OK" if gpu.health.score == 100 else str(gpu.health.score)


def _who(processes: list[ClusterProcess], jobs: dict[tuple[str, int], ClusterJob]) -> str:
    who = []
    for process in processes:
        job = jobs.get((process.host, process.job))
        where = job.cluster_job if job is not None and job.cluster_job else f"job {process.job}"
        sm = f" SM {fmt_percent(process.sm_percent)}" if process.sm_percent is not None else ""
        who.append(f"{safe_text(process.name) or '?'} r{safe_text(process.rank)} {safe_text(where)}{sm}")
    return safe_text("; ".join(who), PROCESS_COLUMN)


def _gpu_line(gpu: ClusterGpu, processes: list[ClusterProcess], jobs: dict[tuple[str, int], ClusterJob]) -> str:
    util = "LOST" if gpu.lost else fmt_percent(gpu.utilization_percent)
    engines = "".join(f"{name} {fmt_percent(value)}  " for name, value in (("ENC", gpu.encoder_percent),
                                                                             ("DEC", gpu.decoder_percent)) if value)
    return (f"  {gpu.index:>3}  {util:>5}  {_memory(gpu.memory_used_bytes, gpu.memory_total_bytes):<17} "
            f"{fmt_watts(gpu.power_watts):>6} {fmt_celsius(gpu.temperature_celsius):>5} {health_badge(gpu):>6}  "
            f"{engines}{_who(processes, jobs)}").rstrip()


def _mig_line(mig: ClusterMig, processes: list[ClusterProcess], jobs: dict[tuple[str, int], ClusterJob]) -> str:
    """A MIG instance under its GPU: id and profile, memory, SM activity where served, and its processes."""
    name = f"MIG {mig.gpu_instance_id} {safe_text(mig.profile, 12) if mig.profile else ''}".rstrip()
    activity = f"SM {fmt_percent(mig.sm_active_percent)}  " if mig.sm_active_percent is not None else ""
    return (f"     {name:<20} {_memory(mig.memory_used_bytes, mig.memory_total_bytes):<17} "
            f"{activity}{_who(processes, jobs)}").rstrip()


def _advice_lines(advice: Advice) -> list[str]:
    return [f"  {advice.severity.value.upper():<8} {safe_text(advice.title)}",
            f"  {'':<8} {safe_text(advice.evidence)}",
            f"  {'':<8} -> {safe_text(advice.action)}"]
