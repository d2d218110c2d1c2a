"""The one-shot text report printed by ``gpusight --once``: devices, processes with their workers, containers and jobs,
the speed of the trainers that report it, advice.

Jobs and containers are written as the process table writes them (:mod:`gpusight.job_text`, which loads no UI library).
"""

from __future__ import annotations

import time

from gpusight import __version__
from gpusight.facts.gpu_selection import gpu_number
from gpusight.facts.health import HealthLevel, assess
from gpusight.facts.speed import job_speed
from gpusight.job_text import container_labels, job_facts, job_label, jobs_by_id, scope_label
from gpusight.snapshot.model import DeviceSample, JobSample, MigDeviceSample, ProcessRole, ProcessSample, Snapshot
from gpusight.speed_text import job_speed_line, process_speed_line, reports_speed
from gpusight.textsafe import safe_text
from gpusight.units import (
    NA,
    fmt_bytes,
    fmt_celsius,
    fmt_duration,
    fmt_percent,
    fmt_rate,
    fmt_watts,
)
from gpusight.vendor_text import GPM_NVIDIA_ONLY, driver_parts, extra_temperatures, gpu_usage_reason, is_other_vendor

MIN_WIDTH = 60
"""Narrowest layout; command lines are cut to fit the width given."""
_CONTAINER_WIDTH = 24
"""Longest container label (a pod's name can be long); longer ones are cut."""


def render_once(snapshot: Snapshot, width: int | None = 120, filters: str | None = None,
                judged: str | None = None) -> str:
    """Return the one-shot report for ``snapshot`` as plain text.

    Command lines are cut to fit ``width`` columns; with ``width=None`` (output to a pipe or a
    file) they are printed whole. ``filters`` describes the filters in force (shown under the title);
    ``judged``, how the advice judged the window sampled (``--duration``), heads the ADVICE section.
    """
    width = None if width is None else max(MIN_WIDTH, width)
    lines = [_title(snapshot)]
    if filters:
        lines.append(f"filters: {safe_text(filters)}")
    lines.append("")
    lines += _device_lines(snapshot)
    lines += ["", _host_line(snapshot)]
    jobs = jobs_by_id(snapshot)
    lines += ["", *_process_lines(snapshot.processes, jobs, width)]
    lines += _speed_lines(snapshot, width)
    if snapshot.jobs:
        lines += ["", "JOBS"]
        for job in snapshot.jobs:
            lines.append(f"  job {job.id}: {job_facts(job)}")
            if job.cluster_key:
                lines.append(f"      across nodes: {safe_text(job.cluster_key)}")
            lines.append(f"      evidence: {safe_text(job.evidence, None if width is None else max(10, width - 16))}")
    if snapshot.advice or judged:
        lines += ["", "ADVICE"]
        if judged:
            lines.append(f"  {safe_text(judged)}")
        if not snapshot.advice:
            lines.append("  no advice stands")
        for item in snapshot.advice:
            scope = scope_label(item.scope, jobs)
            lines.append(f"  [{safe_text(item.severity)}] {safe_text(scope)}: {safe_text(item.title)}")
            lines.append(f"      evidence: {safe_text(item.evidence)}")
            lines.append(f"      action:   {safe_text(item.action)}")
    if snapshot.errors:
        lines += ["", "ERRORS"]
        lines += [f"  {safe_text(e.scope)}: {safe_text(e.message)}" for e in snapshot.errors]
    return "\n".join(lines) + "\n"


def _speed_lines(snapshot: Snapshot, width: int | None) -> list[str]:
    """The SPEED section: each job whose trainers report their speed (``gpusight.torch``), then its ranks, then
    trainers in no job: steps/s, tokens or samples per second, MFU or HFU, and the step-time breakdown. Nothing
    when no process reports speed."""
    trainers = [p for p in snapshot.processes if p.role == ProcessRole.GPU and reports_speed(p)]
    if not trainers:
        return []
    room = None if width is None else max(20, width - 4)
    lines = ["", "SPEED"]
    shown: set[int] = set()
    for job in snapshot.jobs:
        ranks = [p for p in trainers if p.pid in job.pids]
        if not ranks:
            continue
        shown.update(p.pid for p in ranks)
        speed = job_speed(job, snapshot.processes)
        if speed.ranks == 1:
            lines.append(safe_text(f"  job {job.id}, {_trainer_name(ranks[0])}: {process_speed_line(ranks[0])}", room))
            continue
        reporting = "" if speed.reporting == speed.ranks else f", {speed.reporting} of {speed.ranks} ranks reporting"
        lines.append(safe_text(f"  job {job.id} ({speed.ranks} ranks{reporting}): {job_speed_line(speed)}", room))
        lines += [safe_text(f"    {_trainer_name(p)}: {process_speed_line(p)}", room) for p in ranks]
    lines += [safe_text(f"  {_trainer_name(p)}: {process_speed_line(p)}", room) for p in trainers if p.pid not in shown]
    return lines


def _trainer_name(process: ProcessSample) -> str:
    """``rank 2 (PID 4242) on GPU 2``, or ``PID 4242 on GPU 2`` when its rank is unknown."""
    rank = "" if process.rank is None else f"rank {process.rank} "
    gpu = "" if process.device_index is None else f" on GPU {process.device_index}"
    return f"{rank}{'(' if rank else ''}PID {process.pid}{')' if rank else ''}{gpu}"


def _title(snapshot: Snapshot) -> str:
    parts = [f"gpusight {__version__}"]
    if snapshot.host.hostname:
        parts.append(f"host {safe_text(snapshot.host.hostname)}")
    parts += driver_parts(snapshot)
    parts.append(safe_text(snapshot.label or snapshot.source))
    parts.append(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snapshot.timestamp)))
    return " | ".join(parts)


def _device_lines(snapshot: Snapshot) -> list[str]:
    """The GPU table; under each GPU its health, its video engines and its MIG instances, where known."""
    devices = snapshot.devices
    if not devices:
        return ["No GPUs."]
    numbers = {d.index: gpu_number(d) for d in devices}
    gpu_width = max(4, *(len(n) + 1 for n in numbers.values()))
    header = f"{'GPU':<{gpu_width}}{'NAME':<24}{'UTIL':>5}{'MEM':>6} {'USED/TOTAL':<17}{'POWER/LIMIT':<12}{'TEMP':>5}{'FAN':>5}  {'PCIe RX':>9}{'PCIe TX':>9} {'SM':>5}{'TC':>5}  THROTTLE"
    lines = [header]
    for d in devices:
        name = safe_text(d.name, 23) or NA
        if d.lost:
            lines.append(f"{numbers[d.index]:<{gpu_width}}{name:<24}LOST: {safe_text(d.error) or 'GPU is lost'}")
            lines += _details(snapshot, d, gpu_width)
            continue
        mem_pct = None
        if d.memory_used_bytes is not None and d.memory_total_bytes:
            mem_pct = 100.0 * d.memory_used_bytes / d.memory_total_bytes
        used_total = f"{fmt_bytes(d.memory_used_bytes)}/{fmt_bytes(d.memory_total_bytes)}"
        power = f"{fmt_watts(d.power_watts)}/{fmt_watts(d.power_limit_watts)}"
        throttle = safe_text(",".join(r for r in d.throttle_reasons if r != "gpu_idle")) or "-"
        lines.append(
            f"{numbers[d.index]:<{gpu_width}}{name:<24}{fmt_percent(d.utilization_gpu_percent):>5}{fmt_percent(mem_pct):>6} "
            f"{used_total:<17}{power:<12}{fmt_celsius(d.temperature_celsius):>5}{fmt_percent(d.fan_percent):>5}  "
            f"{fmt_rate(d.pcie_rx_bytes_per_s):>9}{fmt_rate(d.pcie_tx_bytes_per_s):>9} {fmt_percent(d.sm_active_percent):>5}{fmt_percent(d.tensor_active_percent):>5}  {throttle}"
        )
        lines += _details(snapshot, d, gpu_width)
    return lines


def _details(snapshot: Snapshot, device: DeviceSample, indent: int) -> list[str]:
    """Lines under a GPU's row: its health, its video engines where known, its MIG instances."""
    pad = " " * indent
    lines = []
    health = _health_line(device, snapshot.timestamp)
    if health:
        lines.append(f"{pad}health {health}")
    engines = _engines(device)
    if engines:
        lines.append(f"{pad}video {engines}")
    vendor = _vendor_line(device)
    if vendor:
        lines.append(f"{pad}{vendor}")
    processes = [p for p in snapshot.processes if p.role == ProcessRole.GPU and p.device_index == device.index]
    for mig in snapshot.mig_devices:
        if mig.device_index == device.index:
            lines.append(f"{pad}{_mig_line(mig, processes)}")
    return lines


def _gpu_column(process: ProcessSample) -> str:
    """A GPU process's GPU: ``"0"``, ``"0.3"`` on MIG GPU instance 3 of GPU 0, ``"-"`` when unknown."""
    if process.device_index is None:
        return "-"
    instance = "" if process.gpu_instance_id is None else f".{process.gpu_instance_id}"
    return f"{process.device_index}{instance}"


def _health_line(device: DeviceSample, now: float) -> str:
    """``"50/100 DRAIN: row remap pending: reset needed"``: the score and level, with the findings that drain it (or
    the worst ones); empty when the GPU's health was not read."""
    if device.health is None:
        return ""
    judged = assess(device, now)
    score = NA if judged.score is None else f"{judged.score}/100"
    if not judged.findings:
        return f"{score} ok"
    worst = [f.title for f in judged.findings if f.level is judged.level]
    rest = len(judged.findings) - len(worst)
    more = f" (and {rest} lesser finding{'s' if rest != 1 else ''})" if rest else ""
    level = judged.level.name if judged.level is HealthLevel.DRAIN else judged.level.name.lower()
    return f"{score} {level}: {'; '.join(worst)}{more}"


def _vendor_line(device: DeviceSample) -> str:
    """``"amd (amdgpu): temperature junction 84C, memory 71C; SM, TC (GPM) NVIDIA-only"`` for another vendor's GPU;
    the junction and memory temperatures of any GPU that reports them; empty otherwise."""
    parts = []
    temperatures = extra_temperatures(device)
    if temperatures:
        parts.append("temperature " + ", ".join(f"{label} {text}" for label, text in temperatures))
    if not is_other_vendor(device):
        return "; ".join(parts)
    parts.append(f"SM, TC (GPM) {GPM_NVIDIA_ONLY}")
    return f"{safe_text(device.vendor)} ({safe_text(device.kernel_driver, 16) or NA}): {'; '.join(parts)}"


def _engines(device: DeviceSample) -> str:
    """``"ENC 12% DEC 97% JPG 4%"`` with the video engines whose utilization is known; empty when none is."""
    engines = (("ENC", device.encoder_percent), ("DEC", device.decoder_percent), ("JPG", device.jpeg_percent),
               ("OFA", device.ofa_percent))
    return " ".join(f"{label} {fmt_percent(value)}" for label, value in engines if value is not None)


def _mig_line(mig: MigDeviceSample, processes: list[ProcessSample]) -> str:
    """``"MIG 0.1 3g.40gb GI 1 CI 0 mem 30GiB/40GiB SM 85% TC 10% DRAM 40% pids 100"``; activity N/A with its reason."""
    gi = NA if mig.gpu_instance_id is None else str(mig.gpu_instance_id)
    ci = NA if mig.compute_instance_id is None else str(mig.compute_instance_id)
    parts = [f"MIG {mig.device_index}.{gi}", safe_text(mig.profile, 24) or NA, f"GI {gi} CI {ci}",
             f"mem {fmt_bytes(mig.memory_used_bytes)}/{fmt_bytes(mig.memory_total_bytes)}"]
    if mig.error:
        parts.append(f"error: {safe_text(mig.error, 80)}")
    activity = (("SM", mig.sm_active_percent), ("TC", mig.tensor_active_percent), ("DRAM", mig.dram_active_percent))
    if all(value is None for _, value in activity):
        parts.append(f"activity N/A ({safe_text(mig.utilization_note, 80) or 'not reported'})")
    else:
        parts += [f"{label} {fmt_percent(value)}" for label, value in activity]
    pids = [str(p.pid) for p in processes if p.gpu_instance_id is not None and p.gpu_instance_id == mig.gpu_instance_id]
    parts.append(f"pids {', '.join(pids)}" if pids else "no processes")
    return " ".join(parts)


def _host_line(snapshot: Snapshot) -> str:
    host = snapshot.host
    cores = host.cpu_percent_per_core
    cpu = NA
    if cores:
        cpu = f"{sum(cores) / len(cores):.0f}% avg, {sum(1 for c in cores if c >= 90)} of {len(cores)} cores busy"
    load = " ".join(f"{v:.2f}" for v in host.load_average) if host.load_average else NA
    return (
        f"HOST  CPU {cpu} | iowait {fmt_percent(host.iowait_percent)} | "
        f"mem {fmt_bytes(host.memory_used_bytes)}/{fmt_bytes(host.memory_total_bytes)} | "
        f"swap {fmt_bytes(host.swap_used_bytes)}/{fmt_bytes(host.swap_total_bytes)} | load {load}"
    )


def _process_lines(processes: tuple[ProcessSample, ...], jobs: dict[int, JobSample], width: int | None) -> list[str]:
    """The process table; its JOB column is there when the snapshot has jobs, its CONTAINER column when some GPU
    process runs in a container, pod, Slurm job or PID namespace; each as wide as its longest entry."""
    if not processes:
        return ["No GPU processes."]
    labels = {p.pid: job_label(p, jobs) for p in processes if p.role == ProcessRole.GPU}
    job_width = max([3, *map(len, labels.values())]) + 1 if jobs else 0
    job_header = f"{'JOB':<{job_width}}" if job_width else ""
    places = {p.pid: safe_text(container_labels(p.container)[0], _CONTAINER_WIDTH)
              for p in processes if p.role == ProcessRole.GPU and p.container is not None}
    place_width = max([9, *map(len, places.values())]) + 1 if places else 0
    place_header = f"{'CONTAINER':<{place_width}}" if place_width else ""
    fixed = (f"{'GPU':<4}{'PID':>8} {'USER':<10}{place_header}{job_header}{'GPU MEM':>9}{'SM':>5}{'CPU':>6}{'RSS':>9}"
             f"{'ELAPSED':>11}  ")
    room = None if width is None else max(10, width - len(fixed))
    lines = [fixed + "COMMAND"]
    for p in processes:
        worker = p.role == ProcessRole.DATALOADER_WORKER
        gpu = "" if worker else _gpu_column(p)
        pid = f"└{p.pid}" if worker else str(p.pid)
        user = safe_text(p.user, 9) or NA
        if worker:
            command = f"{safe_text(p.name) or 'worker'} ({safe_text(p.status) or NA})"
        else:
            command = safe_text(p.cmdline) or safe_text(p.name) or NA
            if p.num_workers:
                command = f"[{p.num_workers} workers] {command}"
            codecs = " ".join(f"{label} {fmt_percent(value)}" for label, value in
                              (("enc", p.encoder_percent), ("dec", p.decoder_percent)) if value is not None)
            if codecs:
                command = f"[{codecs}] {command}"
            if p.input_wait_percent is not None:
                rate = "" if p.steps_per_second is None else f", {p.steps_per_second:.1f} steps/s"
                command = f"[waits {p.input_wait_percent:.0f}% for data{rate}] {command}"
            usage = gpu_usage_reason(p)
            if usage:
                command = f"[{usage}] {command}"
        if p.note:
            command = f"({safe_text(p.note)}) {command}"
        gpu_mem = "" if worker else fmt_bytes(p.gpu_memory_bytes)
        sm = "" if worker else fmt_percent(p.sm_percent)
        job = f"{'' if worker else labels.get(p.pid, ''):<{job_width}}" if job_width else ""
        place = f"{'' if worker else places.get(p.pid, ''):<{place_width}}" if place_width else ""
        lines.append(
            f"{gpu:<4}{pid:>8} {user:<10}{place}{job}{gpu_mem:>9}{sm:>5}{fmt_percent(p.cpu_percent):>6}"
            f"{fmt_bytes(p.rss_bytes):>9}{fmt_duration(p.elapsed_seconds):>11}  {safe_text(command, room)}"
        )
    return lines
