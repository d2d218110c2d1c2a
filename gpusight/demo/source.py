"""The demo source: simulated GPU servers (H100s, MI300Xs or both) that tell a story (``gpusight --demo [SCENARIO]``).

Every value is a smooth, seeded function of the clock (see :mod:`gpusight.demo.noise`), so a
demo moves like real data yet gives the same snapshot for the same seed and time. Every snapshot is
labelled ``demo: <scenario> (simulated)`` so it can never pass for live data.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from gpusight.demo.catalog import SCENARIOS
from gpusight.demo.gpu_models import H100, JUNCTION_OVER_CORE, KFD_USAGE_NOTE, MEMORY_UNDER_CORE, GpuModel
from gpusight.demo.hardware import demo_health, mig_device
from gpusight.demo.noise import SmoothNoise
from gpusight.demo.scenarios import FREE, MIG_PARENT, SCENARIO_SPECS, Faults, Job, Model, Scenario, Workload
from gpusight.demo.speed import step_breakdown, step_rate, with_speed
from gpusight.facts.jobs import Grouping, JobTracker, ProcessHints, group_jobs
from gpusight.facts.peak_flops import peak_for
from gpusight.facts.workload import find_sign, parse_command
from gpusight.snapshot.model import (
    DeviceHealth,
    DeviceSample,
    DriverInfo,
    GpuProcessType,
    HostSample,
    MigDeviceSample,
    ProcessRole,
    ProcessSample,
    Snapshot,
    SourceKind,
    WorkloadKind,
)

GIB = 1024**3
"""Bytes in a GiB."""
MIB = 1024**2
"""Bytes in a MiB."""

DEMO_MASTER_PORT = 29500
"""``MASTER_PORT`` of the demo's first torchrun job; later jobs count up from it."""
DEMO_DRIVER = DriverInfo(driver_version="550.90.07", cuda_driver_version="12.4", nvml_version="12.550.90.07")
"""Driver versions the demo reports."""
WORKER_NAME = "pt_data_worker"
"""The process name PyTorch gives DataLoader workers."""
STALL_WATTS = 115.0
"""Power of a stalled H100: clocks still up, no kernels running."""
STALL_EDGE_S = 0.25
"""Seconds a stall takes to begin or end in the readings (NVML averages utilization over its sample period)."""


@dataclass(frozen=True, slots=True)
class _SimGpu:
    """A simulated GPU: identity, behaviour and its noise channels."""

    index: int
    uuid: str
    workload: Workload
    load: SmoothNoise
    power: SmoothNoise
    temperature: SmoothNoise
    clock: SmoothNoise
    pcie: SmoothNoise
    gpm: SmoothNoise
    nvlink: SmoothNoise
    speed: SmoothNoise
    energy_base: float
    model: GpuModel = H100
    """What kind of GPU it is."""
    mig: bool = False
    """True when the GPU is split into MIG devices: NVML then gives it no utilization or video engine figures."""


@dataclass(frozen=True, slots=True)
class _SimProcess:
    """A simulated process: fixed identity plus the noise its CPU use follows."""

    pid: int
    ppid: int
    role: ProcessRole
    device_index: int
    trainer_pid: int | None
    name: str
    cmdline: str
    user: str
    create_time: float
    core: int
    rss_bytes: int
    cpu_range: tuple[float, float]
    running_share: float
    gpu_memory_bytes: int
    memory_moves: bool
    num_workers: int | None
    guest: bool
    cpu: SmoothNoise
    status: SmoothNoise
    job: int = 0
    """The scenario's job number: the ranks of one job step together."""
    ranks: int = 1
    """GPU processes in its job."""
    model: Model | None = None
    """What the trainer reports of its model through ``gpusight.torch``; None for workers and uninstrumented runs."""
    gpu_instance_id: int | None = None
    """The MIG slice it runs in; None on a whole GPU."""
    workload: Workload | None = None
    """Its own load (a GPU process on a MIG slice sets its slice's activity); None for workers."""
    usage_unknown: bool = False
    """True when its backend cannot tell its GPU share (ROCm through ``/dev/kfd``)."""


class DemoSource:
    """Simulated snapshots of one scenario (see :data:`SCENARIOS`); cheap enough to poll at 4 Hz."""

    kind = SourceKind.DEMO
    """Value of ``Snapshot.source`` for demo data."""

    def __init__(self, scenario: str = "healthy", seed: int = 0, clock: Callable[[], float] = time.time) -> None:
        if scenario not in SCENARIO_SPECS:
            raise ValueError(f"unknown demo scenario {scenario!r}; choose one of: {', '.join(SCENARIOS)}")
        self.scenario = scenario
        """Name of the scenario shown."""
        self.seed = seed
        """Seed of every random choice and noise channel."""
        self.clock = clock
        """Source of the simulated time (epoch seconds); tests and the demo prefill replace it."""
        self.label = f"demo: {scenario} (simulated)"
        """Label put on every snapshot."""
        self._spec: Scenario = SCENARIO_SPECS[scenario]
        self._start = clock()
        rng = random.Random(f"gpusight-demo/{scenario}/{seed}")
        self._gpus = self._build_gpus(rng)
        self._hints: dict[int, ProcessHints] = {}
        self._processes = self._build_processes(rng)
        self._grouping: Grouping | None = None
        self._trainers = tuple(
            tuple(p for p in self._processes if p.role == ProcessRole.GPU and p.device_index == gpu.index)
            for gpu in self._gpus
        )
        self._cores = tuple(SmoothNoise(seed, f"core{c}", 2.5) for c in range(self._spec.cores))
        self._migs = tuple(
            (mig, f"MIG-{uuid.UUID(int=rng.getrandbits(128), version=4)}", SmoothNoise(seed, f"mig{n}", 2.2))
            for n, mig in enumerate(self._spec.mig)
        )
        self._host_noise = SmoothNoise(seed, "host", 4.0)
        self._driver = _driver(self._gpus)

    def _build_gpus(self, rng: random.Random) -> tuple[_SimGpu, ...]:
        workloads = [FREE] * self._spec.gpu_count
        for job in self._spec.jobs:
            if job.guest or job.mig_instance is not None:
                continue
            for index, workload in zip(job.gpus, job.workloads, strict=True):
                workloads[index] = workload
        split = {mig.gpu for mig in self._spec.mig}
        for index in split:
            workloads[index] = MIG_PARENT
        uptime = rng.uniform(3, 20) * 86400.0
        gpus = []
        for index, workload in enumerate(workloads):
            channel = f"gpu{index}"
            gpus.append(
                _SimGpu(
                    index=index,
                    uuid=f"GPU-{uuid.UUID(int=rng.getrandbits(128), version=4)}",
                    workload=workload,
                    load=SmoothNoise(self.seed, channel + "load", 0.9 if workload.bursty else 2.2),
                    power=SmoothNoise(self.seed, channel + "power", 1.6),
                    temperature=SmoothNoise(self.seed, channel + "temp", 9.0),
                    clock=SmoothNoise(self.seed, channel + "clock", 3.0),
                    pcie=SmoothNoise(self.seed, channel + "pcie", 0.8),
                    gpm=SmoothNoise(self.seed, channel + "gpm", 1.9),
                    nvlink=SmoothNoise(self.seed, channel + "nvlink", 0.7),
                    speed=SmoothNoise(self.seed, channel + "speed", 2.0),
                    energy_base=uptime * (workload.power[0] + workload.power[1]) * 0.5,
                    mig=index in split,
                    model=self._spec.gpu_model(index),
                )
            )
        return tuple(gpus)

    def _build_processes(self, rng: random.Random) -> tuple[_SimProcess, ...]:
        processes: list[_SimProcess] = []
        next_pid = rng.randrange(20_000, 90_000)
        next_core = 2
        for number, job in enumerate(self._spec.jobs):
            next_pid += rng.randrange(500, 40_000)
            parent = next_pid if job.launcher is not None else next_pid - rng.randrange(50, 400)
            created = self._start - job.age_hours * 3600.0
            trainers = []
            for index, workload in zip(job.gpus, job.workloads, strict=True):
                next_pid += rng.randrange(1, 4)
                trainers.append((next_pid, index, workload))
            for rank, (pid, index, workload) in enumerate(trainers):
                self._hints[pid] = _hints(job, number, rank, parent, created)
                channel = f"pid{pid}"
                processes.append(
                    _SimProcess(
                        pid=pid, ppid=parent, role=ProcessRole.GPU, device_index=index, trainer_pid=None,
                        name=_comm(job), cmdline=job.cmdline, user=job.user, create_time=round(created + 1.5, 2),
                        core=next_core, rss_bytes=int(job.rss_gib * GIB * rng.uniform(0.95, 1.05)),
                        cpu_range=workload.trainer_cpu, running_share=0.0,
                        gpu_memory_bytes=int(workload.gpu_memory_gib * GIB) // (2 * MIB) * (2 * MIB),
                        memory_moves=workload.util[1] > 0 and not workload.server, num_workers=workload.workers,
                        guest=job.guest,
                        cpu=SmoothNoise(self.seed, channel, 1.3),
                        status=SmoothNoise(self.seed, channel + "status", 0.7),
                        job=number, ranks=len(trainers), model=None if workload.shares is None else job.model,
                        gpu_instance_id=job.mig_instance, workload=workload, usage_unknown=job.usage_unknown,
                    )
                )
                next_core += 2
                for _ in range(workload.workers):
                    next_pid += rng.randrange(1, 3)
                    channel = f"pid{next_pid}"
                    processes.append(
                        _SimProcess(
                            pid=next_pid, ppid=pid, role=ProcessRole.DATALOADER_WORKER, device_index=index, trainer_pid=pid,
                            name=WORKER_NAME, cmdline=job.cmdline, user=job.user,
                            create_time=round(created + 38.0 + rng.uniform(0, 0.4), 2), core=next_core,
                            rss_bytes=int(rng.uniform(2.1, 3.4) * GIB), cpu_range=workload.worker_cpu,
                            running_share=workload.worker_running, gpu_memory_bytes=0, memory_moves=False,
                            num_workers=None, guest=job.guest, cpu=SmoothNoise(self.seed, channel, 1.1),
                            status=SmoothNoise(self.seed, channel + "status", 0.6),
                        )
                    )
                    next_core += 1
        return tuple(processes)

    def poll(self) -> Snapshot:
        """The simulated machine at the clock's current time."""
        t = self.clock()
        devices = tuple(self._device(gpu, t) for gpu in self._gpus)
        processes = tuple(self._process(proc, devices[proc.device_index], t) for proc in self._processes)
        processes = self._with_speed(processes, devices, t)
        if self._grouping is None:  # the demo's processes never change: group them once
            self._grouping = group_jobs(processes, self._hints, JobTracker())
        return Snapshot(
            timestamp=t,
            source=self.kind,
            host=self._host(processes, t),
            driver=self._driver,
            devices=devices,
            processes=self._grouping.apply(processes),
            jobs=self._grouping.jobs,
            mig_devices=self._mig_devices(processes, t),
            label=self.label,
        )

    def _mig_devices(self, processes: tuple[ProcessSample, ...], t: float) -> tuple[MigDeviceSample, ...]:
        """The MIG devices at ``t``, numbered per parent in order; each slice's activity is its job's."""
        devices = []
        numbers: dict[int, int] = {}
        for mig, mig_uuid, noise in self._migs:
            inside = [p for p in self._processes if p.gpu_instance_id == mig.gpu_instance_id and p.device_index == mig.gpu]
            used = sum(s.gpu_memory_bytes or 0 for s in processes if s.pid in {p.pid for p in inside})
            workload = inside[0].workload if inside else None
            number = numbers[mig.gpu] = numbers.get(mig.gpu, -1) + 1
            devices.append(mig_device(mig, number, mig_uuid, workload, used, noise, t))
        return tuple(devices)

    def _device(self, gpu: _SimGpu, t: float) -> DeviceSample:
        w, hw = gpu.workload, gpu.model
        x = gpu.load.unit(t)
        if w.bursty:
            x = x * x * x
        util = round(w.util[0] + (w.util[1] - w.util[0]) * x)
        power = w.power[0] + (w.power[1] - w.power[0]) * (0.6 * x + 0.4 * gpu.power.unit(t))
        busy = _busy(w, t)
        if busy < 1.0:  # a stall: no kernels, power down to what the clocks alone draw
            util = round(util * busy)
            power = STALL_WATTS + (power - STALL_WATTS) * busy
        heat = 0.25 * x + 0.75 * gpu.temperature.unit(t)
        temp = round(w.temperature[0] + (w.temperature[1] - w.temperature[0]) * heat)
        clock = (w.clock_sm[0] + (w.clock_sm[1] - w.clock_sm[0]) * gpu.clock.unit(t)) * hw.clock_scale
        throttle = w.throttle
        if w.hot_throttle is not None and temp >= w.temperature[1] - 1:
            throttle = throttle + (w.hot_throttle,)
        pcie = (x if w.bursty else gpu.pcie.unit(t)) * busy
        nvlink_tx = nvlink_rx = None
        if w.nvlink_gbs is not None:  # ring all-reduce: each GPU receives about what it sends, a moment apart
            low, high = w.nvlink_gbs
            nvlink_tx = round((low + (high - low) * gpu.nvlink.unit(t)) * 1e9 * busy)
            nvlink_rx = round((low + (high - low) * gpu.nvlink.unit(t - 0.3)) * 1e9 * busy)
        gpm = 0.94 + 0.06 * gpu.gpm.unit(t)
        device = DeviceSample(
            index=gpu.index,
            name=hw.name,
            uuid=gpu.uuid,
            pci_bus_id=f"{hw.pci_domain}:{0x18 + 0x10 * gpu.index:02X}:00.0",  # as an 8-GPU board numbers its buses
            minor_number=gpu.index,
            utilization_gpu_percent=float(util),
            utilization_memory_percent=float(round(util * w.memory_util_share * gpm)),
            memory_used_bytes=sum(self._gpu_memory(p, t) for p in self._trainers[gpu.index]),
            memory_total_bytes=hw.memory_total_bytes,
            memory_reserved_bytes=hw.memory_reserved_bytes,
            power_watts=round(power * hw.power_scale, 2),
            power_limit_watts=hw.power_limit_watts,
            temperature_celsius=float(temp),
            fan_percent=None,
            clock_sm_mhz=round(clock / hw.clock_step_mhz) * hw.clock_step_mhz,
            clock_memory_mhz=hw.memory_clock_mhz,
            pstate=0,
            energy_joules=round(gpu.energy_base + (t - self._start) * (w.power[0] + w.power[1]) * 0.5, 3),
            throttle_reasons=throttle,
            pcie_tx_bytes_per_s=round((w.pcie_tx_gbs[0] + (w.pcie_tx_gbs[1] - w.pcie_tx_gbs[0]) * pcie) * 1e9),
            pcie_rx_bytes_per_s=round((w.pcie_rx_gbs[0] + (w.pcie_rx_gbs[1] - w.pcie_rx_gbs[0]) * pcie) * 1e9),
            ecc_errors_uncorrected=0,
            mig_mode=False,
            compute_capability=(9, 0),
            sm_active_percent=round(util * w.sm_share * gpm, 1),
            sm_occupancy_percent=round(util * w.occupancy_share * gpm, 1),
            tensor_active_percent=round(util * w.tensor_share * gpm, 1),
            dram_active_percent=round(util * w.dram_share * gpm, 1),
            nvlink_tx_bytes_per_s=nvlink_tx,
            nvlink_rx_bytes_per_s=nvlink_rx,
            decoder_percent=_engine(w.decoder, gpu.gpm.unit(t + 11.0) * busy),
            encoder_percent=None if w.decoder is None else 0.0,
            jpeg_percent=_engine(w.jpeg, gpu.gpm.unit(t + 23.0) * busy),
            ofa_percent=None if w.jpeg is None else 0.0,
            health=self._health(gpu.index, t),
            vendor=hw.vendor if self._spec.gpus else None,  # the NVIDIA scenarios keep their recorded form
            kernel_driver=hw.kernel_driver,
            kernel_driver_version=hw.kernel_driver_version,
        )
        if not hw.nvidia:
            return _read_from_sysfs(device)
        if gpu.mig:  # NVML reads no utilization, GPM or video engines on a MIG-enabled GPU as a whole
            return replace(device, utilization_gpu_percent=None, utilization_memory_percent=None, mig_mode=True,
                           sm_active_percent=None, sm_occupancy_percent=None, tensor_active_percent=None,
                           dram_active_percent=None)
        return device

    def _health(self, index: int, t: float) -> DeviceHealth | None:
        """GPU ``index``'s health at ``t``; None in scenarios that read none."""
        faults = self._spec.faults
        if not faults:
            return None
        return demo_health(faults[index] if index < len(faults) else Faults(), self._start, t)

    def _gpu_memory(self, proc: _SimProcess, t: float) -> int:
        """A trainer's GPU memory: steady, with the small steps a caching allocator makes while busy."""
        if not proc.memory_moves:
            return proc.gpu_memory_bytes
        return proc.gpu_memory_bytes + round(proc.status.value(t * 0.05) * 64) * 2 * MIB

    def _process(self, proc: _SimProcess, device: DeviceSample, t: float) -> ProcessSample:
        lo, hi = proc.cpu_range
        cpu = round(lo + (hi - lo) * proc.cpu.unit(t), 1)
        if proc.role == ProcessRole.GPU:
            util = 0.0 if proc.guest else device.utilization_gpu_percent or 0.0
            mig = proc.gpu_instance_id is not None  # NVML gives no per-process utilization on MIG
            sample = ProcessSample(
                pid=proc.pid, role=ProcessRole.GPU, device_index=proc.device_index, ppid=proc.ppid, name=proc.name,
                cmdline=proc.cmdline, user=proc.user, gpu_memory_bytes=self._gpu_memory(proc, t),
                sm_percent=None if mig else float(max(0, round(util - 3 * proc.status.unit(t)))),
                gpu_memory_percent=None if mig else 0.0 if proc.guest else device.utilization_memory_percent,
                gpu_instance_id=proc.gpu_instance_id, compute_instance_id=None if not mig else 0,
                decoder_percent=None if proc.guest else device.decoder_percent,
                encoder_percent=None if proc.guest else device.encoder_percent,
                gpu_process_type=GpuProcessType.COMPUTE, cpu_percent=cpu,
                rss_bytes=proc.rss_bytes, elapsed_seconds=round(max(0.0, t - proc.create_time), 2),
                create_time=proc.create_time, status="running" if cpu >= 50 else "sleeping",
                num_workers=proc.num_workers,
            )
            return sample if self._gpus[proc.device_index].model.nvidia else _read_from_fdinfo(sample, proc.usage_unknown)
        running = proc.status.unit(t) < proc.running_share
        if not proc.guest and _busy(self._gpus[proc.device_index].workload, t) < 0.5:  # asleep on a full queue
            cpu, running = round(0.2 + 1.3 * proc.cpu.unit(t), 1), False
        return ProcessSample(
            pid=proc.pid, role=ProcessRole.DATALOADER_WORKER, device_index=proc.device_index, trainer_pid=proc.trainer_pid,
            ppid=proc.ppid, name=proc.name, cmdline=proc.cmdline, user=proc.user, cpu_percent=cpu,
            rss_bytes=proc.rss_bytes, elapsed_seconds=round(max(0.0, t - proc.create_time), 2),
            create_time=proc.create_time, status="running" if running else "sleeping",
        )

    def _with_speed(
        self, processes: tuple[ProcessSample, ...], devices: tuple[DeviceSample, ...], t: float
    ) -> tuple[ProcessSample, ...]:
        """``processes`` with what each instrumented trainer reports of its speed; the ranks of a job take the
        slowest rank's steps per second, as data-parallel ranks do."""
        breakdowns: dict[int, dict[str, float]] = {}
        rates: dict[int, float] = {}
        for proc in self._processes:
            model, gpu = proc.model, self._gpus[proc.device_index]
            shares = gpu.workload.shares
            if model is None or shares is None:
                continue
            device = devices[proc.device_index]
            breakdown = step_breakdown(shares, proc.ranks, gpu.speed, t, _starved(gpu.workload, device),
                                       _busy(gpu.workload, t))
            breakdowns[proc.pid] = breakdown
            rate = step_rate(model, breakdown["compute"], device.clock_sm_mhz, _simulated_tflops(model, gpu.model))
            rates[proc.job] = min(rate, rates.get(proc.job, rate))
        if not breakdowns:
            return processes
        return tuple(
            sample if proc.model is None or sample.pid not in breakdowns
            else with_speed(sample, proc.model, breakdowns[sample.pid], rates[proc.job],
                            peak_for(self._gpus[proc.device_index].model.name, proc.model.math_mode))
            for proc, sample in zip(self._processes, processes, strict=True)
        )

    def _host(self, processes: tuple[ProcessSample, ...], t: float) -> HostSample:
        spec = self._spec
        cores = [1.0 + 4.0 * noise.unit(t) for noise in self._cores]
        total_cpu = 0.0
        for proc, sample in zip(self._processes, processes, strict=True):
            load = sample.cpu_percent or 0.0
            total_cpu += load
            core = proc.core
            while load > 0:
                index = core % spec.cores
                room = 100.0 - cores[index]
                used = min(room, load)
                cores[index] += used
                load -= used
                core += 1
                if core - proc.core >= spec.cores:
                    break
        busy = total_cpu / 100.0 + spec.cores * 0.02
        wobble = self._host_noise.value(t)
        rss = sum(sample.rss_bytes or 0 for sample in processes)
        iowait = spec.iowait[0] + (spec.iowait[1] - spec.iowait[0]) * self._host_noise.unit(0.7 * t)
        total = spec.memory_gib * GIB
        return HostSample(
            hostname=spec.hostname,
            cpu_percent_per_core=tuple(round(min(100.0, c), 1) for c in cores),
            iowait_percent=round(iowait, 1),
            load_average=(round(busy * (1.0 + 0.05 * wobble), 2), round(busy * 0.99, 2), round(busy * 0.97, 2)),
            memory_used_bytes=min(total, int(total * 0.035) + rss),
            memory_total_bytes=total,
            swap_used_bytes=0,
            swap_total_bytes=0,
        )

    def close(self) -> None:
        """Nothing to release; present for the source protocol."""


def _driver(gpus: tuple[_SimGpu, ...]) -> DriverInfo | None:
    """NVIDIA's driver versions on a machine with H100s; None without (other drivers' versions ride on their GPUs)."""
    return DEMO_DRIVER if any(gpu.model.nvidia for gpu in gpus) else None


def _read_from_sysfs(device: DeviceSample) -> DeviceSample:
    """``device`` as the amdgpu backend reads it: junction and memory temperatures from hwmon but no edge sensor
    (MI300X), and nothing of what only NVML gives (GPM, NVLink, clock-event reasons, MIG, energy, PCIe rates,
    video engines, ECC count, pstate, the ``/dev/nvidiaN`` minor number)."""
    core = device.temperature_celsius
    return replace(
        device, temperature_celsius=None,
        temperature_junction_celsius=None if core is None else core + JUNCTION_OVER_CORE,
        temperature_memory_celsius=None if core is None else core - MEMORY_UNDER_CORE,
        minor_number=None, pstate=None, energy_joules=None, throttle_reasons=(), pcie_tx_bytes_per_s=None,
        pcie_rx_bytes_per_s=None, ecc_errors_uncorrected=None, mig_mode=None, compute_capability=None,
        sm_active_percent=None, sm_occupancy_percent=None, tensor_active_percent=None, dram_active_percent=None,
        nvlink_tx_bytes_per_s=None, nvlink_rx_bytes_per_s=None, decoder_percent=None, encoder_percent=None,
        jpeg_percent=None, ofa_percent=None,
    )


def _read_from_fdinfo(sample: ProcessSample, usage_unknown: bool) -> ProcessSample:
    """A GPU process on an AMD GPU as DRM fdinfo gives it: its memory and engine share, no NVML-only figures
    (memory-controller share, context type, video engines); its share N/A with the reason where the counters
    stay flat."""
    return replace(
        sample, gpu_memory_percent=None, gpu_process_type=None, decoder_percent=None, encoder_percent=None,
        sm_percent=None if usage_unknown else sample.sm_percent,
        gpu_usage_note=KFD_USAGE_NOTE if usage_unknown else None,
    )


def _simulated_tflops(model: Model, gpu: GpuModel) -> float:
    """The peak the simulated trainer's speed follows: its GPU's from the peak table, or an H100's where the table
    lacks it (the speed is simulated either way; the peak shown, and so MFU, stays the table's)."""
    return peak_for(gpu.name, model.math_mode).tflops or peak_for(H100.name, model.math_mode).tflops or 0.0


def _engine(span: tuple[float, float] | None, unit: float) -> float | None:
    """A video engine's utilization at ``unit`` (0-1) of its range; None where the scenario reports none."""
    if span is None:
        return None
    return float(round(span[0] + (span[1] - span[0]) * unit))


def _busy(workload: Workload, t: float) -> float:
    """How much of the time the GPU works at ``t``: 1.0 between stalls (and without any), 0.0 inside one,
    in between over ``STALL_EDGE_S`` at its edges."""
    if workload.stall is None:
        return 1.0
    period, idle = workload.stall
    phase = t % period
    if phase >= idle:
        return 1.0
    return max(0.0, 1.0 - min(phase, idle - phase) / STALL_EDGE_S)


def _starved(workload: Workload, device: DeviceSample) -> float | None:
    """For a GPU starved in bursts, how idle it is now (0 at the top of its utilization range, 1 at the bottom);
    None for a GPU whose load wanders smoothly."""
    util = device.utilization_gpu_percent
    low, high = workload.util
    if not workload.bursty or util is None or high <= low:
        return None
    return min(1.0, max(0.0, (high - util) / (high - low)))


def prefill_seconds(scenario: str) -> float:
    """Simulated history to run before ``scenario`` shows: long enough for its advice to have held."""
    return SCENARIO_SPECS[scenario].prefill_s


def _hints(job: Job, number: int, rank: int, parent: int, created: float) -> ProcessHints:
    """What the host would read about rank ``rank`` of ``job`` (its scenario's ``number``-th), started by ``parent``.

    A torchrun job's ranks carry the distributed environment and have the launcher as parent; other
    runs have their shell as parent, or a Jupyter server, which sets ``JPY_PARENT_PID`` in its kernels.
    """
    argv = tuple((job.launcher or job.parent).split())
    parent_name = parse_command(argv).program.lstrip("-")[:15]
    env: dict[str, str] = {}
    if job.launcher is not None:
        size = str(len(job.gpus))
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(DEMO_MASTER_PORT + number), "RANK": str(rank),
               "LOCAL_RANK": str(rank), "WORLD_SIZE": size, "LOCAL_WORLD_SIZE": size,
               "TORCHELASTIC_RUN_ID": f"{job.user}-{number}"}
    else:
        sign = find_sign(parse_command(argv))
        if sign is not None and sign.kind is WorkloadKind.NOTEBOOK:
            env = {"JPY_PARENT_PID": str(parent)}
    return ProcessHints(env=env, parent_name=parent_name, parent_argv=argv, parent_start=round(created, 2))


def _comm(job: Job) -> str:
    """The kernel's process name for the trainer: the executable's base name, cut to 15 bytes."""
    return job.cmdline.split()[0].rsplit("/", 1)[-1][:15]
