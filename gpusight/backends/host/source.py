"""The host source: CPU, memory and swap of the machine, and psutil details of the GPU processes.

Each GPU process reported by NVML is joined with its user, command line, CPU and memory, and is
followed by the PyTorch DataLoader workers found in its process tree.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import psutil

from gpusight.backends.cadence import same_period
from gpusight.backends.host.cpu import CpuMeter
from gpusight.backends.host.dataloader_workers import attribute_workers
from gpusight.backends.host.procenv import HintReader
from gpusight.backends.host.procinfo import NOTE_ACCESS_DENIED, ProcessDetailsReader, ProcessFacts
from gpusight.backends.host.proctree import Descendant, ProcessTree
from gpusight.backends.host.trainer_status import TrainerStatus, TrainerStatusReader
from gpusight.facts.jobs import Grouping, JobTracker, ProcessHints, group_jobs, kind_undecided
from gpusight.snapshot.model import (
    ErrorNote,
    HostReading,
    HostSample,
    JobSample,
    ProcessRole,
    ProcessSample,
)

ERROR_SCOPE = "host"
"""``ErrorNote.scope`` of faults met by this source."""

PROCESS_REFRESH_SECONDS = 1.0
"""How often the GPU processes' psutil details (CPU, memory, status, workers, status records) are
re-read while the set of GPU processes stays the same. The process table shows them once a second;
reading 64 processes' ``/proc`` files at every 0.25 s poll was the sampler's largest cost."""

_T = TypeVar("_T")


def _one_line(exc: BaseException) -> str:
    """``Type: message`` on one line."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _order(sample: ProcessSample) -> tuple[bool, int, int]:
    """Sort key: device index (unknown last), then pid."""
    return (sample.device_index is None, sample.device_index or 0, sample.pid)


def _fact_fields(facts: ProcessFacts) -> dict[str, Any]:
    """The ``ProcessSample`` fields that psutil provides, from ``facts``."""
    return {
        "ppid": facts.ppid,
        "name": facts.name,
        "cmdline": facts.cmdline,
        "user": facts.user,
        "cpu_percent": facts.cpu_percent,
        "cpu_wait_percent": facts.cpu_wait_percent,
        "rss_bytes": facts.rss_bytes,
        "create_time": facts.create_time,
        "elapsed_seconds": facts.elapsed_seconds,
        "status": facts.status,
        "note": facts.note,
    }


def _status_fields(status: TrainerStatus | None) -> dict[str, Any]:
    """The ``ProcessSample`` fields a trainer's own status record provides (empty without one).

    The rolling wait share and step rate are given only while the trainer iterates its data; between
    epochs they describe the past, so they are left unknown.
    """
    if status is None:
        return {}
    fraction = status.input_wait_fraction if status.active else None
    return {
        **(_speed_fields(status) if status.active else {}),
        **_breakdown_fields(status),
        "input_wait_percent": None if fraction is None else round(fraction * 100.0, 1),
        "steps_per_second": None if status.steps_per_second is None or not status.active else round(status.steps_per_second, 2),
        "loader_num_workers": status.loader_num_workers,
        "loader_pin_memory": status.loader_pin_memory,
        "loader_persistent_workers": status.loader_persistent_workers,
        "loader_prefetch_factor": status.loader_prefetch_factor,
        "loader_batch_size": status.loader_batch_size,
        "cuda_allocated_bytes": status.cuda_allocated_bytes,
        "cuda_reserved_bytes": status.cuda_reserved_bytes,
        "cuda_peak_bytes": status.cuda_peak_bytes,
        "autocast": status.autocast,
    }


def _speed_fields(status: TrainerStatus) -> dict[str, Any]:
    """The throughput and FLOPs fields of an iterating trainer's record."""
    utilization = status.flops_utilization_fraction
    return {
        "samples_per_second": _rounded(status.samples_per_second, 2),
        "tokens_per_second": _rounded(status.tokens_per_second, 1),
        "batch_size_source": status.batch_size_source,
        "flops_per_step": status.flops_per_step,
        "flops_source": status.flops_source,
        "achieved_tflops": _significant(status.achieved_tflops, 4),
        "peak_tflops": status.peak_tflops,
        "peak_source": status.peak_source,
        "math_mode": status.math_mode,
        "flops_utilization_percent": None if utilization is None else round(utilization * 100.0, 2),
        "flops_utilization_note": status.flops_utilization_note,
    }


def _breakdown_fields(status: TrainerStatus) -> dict[str, Any]:
    """The step-time breakdown of a record, in percent (it describes profiled steps, so it outlives an epoch's end)."""
    shares = status.breakdown
    if shares is None:
        return {}
    return {
        f"step_{_BREAKDOWN_FIELDS[part]}_percent": round(share * 100.0, 1) for part, share in shares.items()
    } | {"breakdown_source": status.breakdown_source}


_BREAKDOWN_FIELDS = {"data": "data", "compute": "compute", "communication": "comm", "copy": "copy", "idle": "idle"}
"""Record breakdown part -> the middle of its ``ProcessSample.step_*_percent`` field."""


def _significant(value: float | None, digits: int) -> float | None:
    """``value`` to ``digits`` significant digits (a small CPU job's TFLOP/s must not round to 0); None stays None."""
    return None if value is None else float(f"{value:.{digits}g}")


def _rounded(value: float | None, digits: int) -> float | None:
    """``value`` rounded to ``digits`` decimals; None stays None."""
    return None if value is None else round(value, digits)


class HostSource:
    """Polls the host and the GPU processes' trees with psutil. Use from one thread.

    ``poll`` is cheap enough for 0.1-1 s intervals: it reads a few ``/proc`` files per GPU
    process and never scans every process on the machine (except in the fallback described in
    ``gpusight.backends.host.proctree``), and it never raises. GPU processes instrumented with
    ``gpusight.torch`` also carry what their status record says (input wait, steps/s, loader
    settings, CUDA memory); only the records of the shown pids are looked at. The GPU processes
    are grouped into jobs (see :mod:`gpusight.facts.jobs`) from hints read once per process
    (:mod:`gpusight.backends.host.procenv`).
    """

    def __init__(
        self,
        process_refresh_seconds: float = PROCESS_REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Prepare caches and take the CPU baseline, so the first poll already has CPU percents.

        Process details are re-read at every poll when the GPU processes change, when a process
        still lacks its first CPU reading, and once every ``process_refresh_seconds`` of ``clock`` time
        (as the clock enters a new period, in step with NVML's process lists: :mod:`gpusight.backends.cadence`);
        in between, each poll joins NVML's fresh figures to the details last read.
        """
        self._cpu = CpuMeter()
        self._process_details = ProcessDetailsReader()
        self._tree = ProcessTree()
        self._status = TrainerStatusReader()
        self._hints = HintReader(clock=clock)
        self._jobs = _Jobs()
        self._refresh_seconds = process_refresh_seconds
        self._clock = clock
        self._details: _Details | None = None

    def poll(self, gpu_processes: Sequence[ProcessSample]) -> HostReading:
        """Read the host and enrich ``gpu_processes`` (NVML fields set) with psutil details.

        The result lists GPU processes in (device, pid) order, each followed by its DataLoader
        workers in pid order; a process on several devices has its workers after its first row.
        GPU rows carry their job, rank and container (:mod:`gpusight.backends.host.containers`; workers carry none), and
        the reading the jobs.
        """
        errors: list[ErrorNote] = []
        host = self._host(errors)
        jobs: tuple[JobSample, ...] = ()
        try:
            processes, jobs = self._processes(gpu_processes)
        except Exception as exc:  # noqa: BLE001 - poll never raises: keep the NVML rows, say why
            errors.append(ErrorNote(ERROR_SCOPE, f"process details unavailable: {_one_line(exc)}"))
            processes = tuple(sorted(gpu_processes, key=_order))
        return HostReading(host=host, processes=processes, jobs=jobs, errors=tuple(errors))

    def close(self) -> None:
        """Drop cached process objects."""
        self._process_details.clear()

    def _host(self, errors: list[ErrorNote]) -> HostSample:
        """Host-wide CPU, load, memory and swap; a part that fails is None plus an error note."""

        def attempt(what: str, read: Callable[[], _T]) -> _T | None:
            try:
                return read()
            except Exception as exc:  # noqa: BLE001 - poll never raises
                errors.append(ErrorNote(ERROR_SCOPE, f"{what} unavailable: {_one_line(exc)}"))
                return None

        cpu = attempt("CPU times", self._cpu.read)
        load = attempt("load average", psutil.getloadavg)
        memory = attempt("memory", psutil.virtual_memory)
        swap = attempt("swap", psutil.swap_memory)
        hostname = attempt("host name", socket.gethostname)
        return HostSample(
            hostname=hostname.split(".")[0] if hostname else None,
            cpu_percent_per_core=cpu[0] if cpu else (),
            iowait_percent=cpu[1] if cpu else None,
            load_average=(load[0], load[1], load[2]) if load else None,
            memory_used_bytes=memory.total - memory.available if memory else None,
            memory_total_bytes=memory.total if memory else None,
            swap_used_bytes=swap.used if swap else None,
            swap_total_bytes=swap.total if swap else None,
        )

    def _processes(
        self, gpu_processes: Sequence[ProcessSample]
    ) -> tuple[tuple[ProcessSample, ...], tuple[JobSample, ...]]:
        """GPU processes enriched, each followed by its workers, and their jobs."""
        ordered = sorted(gpu_processes, key=_order)
        pids = tuple(dict.fromkeys(sample.pid for sample in ordered))
        details = self._details
        now = self._clock()
        if details is None or not details.still_good(pids, now, self._refresh_seconds):
            details = self._details = self._read_details(pids, now)
        return details.joined(ordered, self._jobs)

    def _read_details(self, pids: tuple[int, ...], now: float) -> _Details:
        """Read psutil facts, worker trees, status records and job hints of ``pids`` now."""
        facts = {pid: self._process_details.read(pid) for pid in pids}
        tree = self._tree.descendants(pid for pid in pids if facts[pid].found)
        workers = attribute_workers(set(pids), tree)
        worker_rows = {
            trainer: [(tree[pid], self._process_details.read(pid, ppid=tree[pid].ppid)) for pid in found]
            for trainer, found in workers.items()
        }
        self._process_details.forget_unseen()
        statuses = {pid: self._status.read(pid, facts[pid].create_time) for pid in pids if facts[pid].found}
        self._status.forget_unseen()
        hints = {}
        for pid in pids:
            info = facts[pid]
            if info.found:
                hints[pid] = self._read_hints(pid, info, statuses.get(pid) is not None, bool(workers.get(pid)))
        self._hints.forget_unseen()
        return _Details(pids, now, facts, worker_rows, statuses, hints)

    def _read_hints(self, pid: int, info: ProcessFacts, has_status: bool, has_workers: bool) -> ProcessHints:
        """The job hints of ``pid``, with the TCP port it listens on when nothing else tells its kind."""
        hints = self._hints.read(pid, info.create_time, info.ppid, has_status)
        if kind_undecided(info.cmdline, info.name, hints, has_workers):
            hints = dataclasses.replace(hints, listen_port=self._hints.probe(pid, info.create_time))
        return hints


_RowKey = tuple[int, int | None, int | None, int | None]
"""A joined row's pid, GPU, and MIG GPU and compute instance."""


@dataclasses.dataclass
class _Details:
    """The psutil side of the GPU processes as last read, joined to each poll's NVML rows."""

    pids: tuple[int, ...]
    read_at: float
    facts: dict[int, ProcessFacts]
    workers: dict[int, list[tuple[Descendant, ProcessFacts]]]
    statuses: dict[int, TrainerStatus | None]
    hints: dict[int, ProcessHints]
    _last: tuple[list[ProcessSample], tuple[ProcessSample, ...], tuple[JobSample, ...]] | None = None
    _grouping: tuple[tuple[tuple[int, int | None], ...], Grouping] | None = None
    _joined: dict[_RowKey, tuple[ProcessSample, tuple[int, int | None] | None, ProcessSample]] = dataclasses.field(
        default_factory=dict)
    _extras: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)
    _worker_rows: dict[tuple[int, int | None], list[ProcessSample]] = dataclasses.field(default_factory=dict)

    def still_good(self, pids: tuple[int, ...], now: float, refresh_seconds: float) -> bool:
        """True while the same processes are shown, all primed, and the details are recent enough."""
        if pids != self.pids or not same_period(self.read_at, now, refresh_seconds):
            return False
        every = [*self.facts.values(), *(facts for rows in self.workers.values() for _, facts in rows)]
        return not any(facts.found and facts.note is None and facts.cpu_percent is None for facts in every)

    def joined(
        self, ordered: list[ProcessSample], jobs: _Jobs
    ) -> tuple[tuple[ProcessSample, ...], tuple[JobSample, ...]]:
        """``ordered`` NVML rows with their details and jobs; the previous result when the rows are unchanged.

        The jobs are looked at again only when the details or the (pid, GPU) pairs change.
        """
        if self._last is not None and self._last[0] == ordered:
            return self._last[1], self._last[2]
        placed = tuple((sample.pid, sample.device_index) for sample in ordered)
        if self._grouping is None or self._grouping[0] != placed:
            self._grouping = (placed, jobs.group(jobs.bare_rows(ordered, self.facts, self.workers), self.hints))
        grouping = self._grouping[1]
        result = self._join(ordered, grouping.places)
        self._last = (ordered, result, grouping.jobs)
        return result, grouping.jobs

    def _join(
        self, ordered: list[ProcessSample], places: Mapping[int, tuple[int, int | None]]
    ) -> tuple[ProcessSample, ...]:
        """``ordered`` NVML rows with their details and jobs (``places``), each trainer followed by its workers.

        A row whose NVML side and job are those of the last join is that join's row again (the same object):
        the NVML side of most rows changes once a second, and building a row of sixty fields per process at
        every poll was the host side's largest cost.
        """
        result: list[ProcessSample] = []
        listed: set[int] = set()
        joined: dict[_RowKey, tuple[ProcessSample, tuple[int, int | None] | None, ProcessSample]] = {}
        for sample in ordered:
            key = (sample.pid, sample.device_index, sample.gpu_instance_id, sample.compute_instance_id)
            place = places.get(sample.pid)
            last = self._joined.get(key)
            if last is not None and last[1] == place and (last[0] is sample or last[0] == sample):
                row = last[2]
            else:
                row = dataclasses.replace(sample, **self._extra(sample.pid),
                                          job=place[0] if place is not None else None,
                                          rank=place[1] if place is not None else None)
            joined[key] = (sample, place, row)
            result.append(row)
            if sample.pid in listed:
                continue
            listed.add(sample.pid)
            result.extend(self._workers_of(sample))
        self._joined = joined
        return tuple(result)

    def _extra(self, pid: int) -> dict[str, Any]:
        """The fields the details give the row of ``pid`` (psutil, status record, workers, container), made once."""
        extra = self._extras.get(pid)
        if extra is None:
            info = self.facts[pid]
            known = info.found and info.note != NOTE_ACCESS_DENIED
            hints = self.hints.get(pid)
            extra = self._extras[pid] = {
                **_fact_fields(info),
                **_status_fields(self.statuses.get(pid)),
                "num_workers": len(self.workers.get(pid, [])) if known else None,
                "container": hints.container if hints is not None else None,
            }
        return extra

    def _workers_of(self, trainer: ProcessSample) -> list[ProcessSample]:
        """The DataLoader worker rows of ``trainer``, made once per trainer and GPU."""
        key = (trainer.pid, trainer.device_index)
        rows = self._worker_rows.get(key)
        if rows is None:
            rows = self._worker_rows[key] = [_worker(trainer, node, facts)
                                             for node, facts in self.workers.get(trainer.pid, [])]
        return rows


class _Jobs:
    """Job ids across polls, and the last grouping, reused while its evidence is unchanged."""

    def __init__(self) -> None:
        self._tracker = JobTracker()
        self._last: tuple[list[ProcessSample], list[ProcessHints | None], Grouping] | None = None
        self._bare: dict[tuple[Any, ...], ProcessSample] = {}

    def bare_rows(self, ordered: list[ProcessSample], facts: Mapping[int, ProcessFacts],
                  workers: Mapping[int, list[tuple[Descendant, ProcessFacts]]]) -> list[ProcessSample]:
        """The rows grouping looks at: pid, GPU, parent, name, command line, start and workers; the last poll's row
        where those are the same (so that an unchanged grouping is recognised at a glance)."""
        rows: list[ProcessSample] = []
        bare: dict[tuple[Any, ...], ProcessSample] = {}
        for sample in ordered:
            info = facts[sample.pid]
            key = (sample.pid, sample.device_index, info.ppid, info.name, info.cmdline, info.create_time,
                   len(workers.get(sample.pid, [])))
            row = self._bare.get(key)
            if row is None:
                row = ProcessSample(pid=key[0], device_index=key[1], ppid=key[2], name=key[3], cmdline=key[4],
                                    create_time=key[5], num_workers=key[6])
            rows.append(bare.setdefault(key, row))
        self._bare = bare
        return rows

    def group(self, rows: list[ProcessSample], hints: dict[int, ProcessHints]) -> Grouping:
        """The jobs of ``rows`` (see :func:`group_jobs`); the previous ones when rows and hints are the same."""
        evidence = [hints.get(row.pid) for row in rows]
        if self._last is None or self._last[0] != rows or self._last[1] != evidence:
            self._last = (rows, evidence, group_jobs(rows, hints, self._tracker))
        return self._last[2]


def _worker(trainer: ProcessSample, node: Descendant, facts: ProcessFacts) -> ProcessSample:
    """A DataLoader worker row; the walk's parent and name fill in what psutil could not read."""
    fields = _fact_fields(facts)
    fields["ppid"] = facts.ppid if facts.ppid is not None else node.ppid
    fields["name"] = facts.name if facts.name is not None else node.name
    return ProcessSample(
        pid=node.pid,
        role=ProcessRole.DATALOADER_WORKER,
        device_index=trainer.device_index,
        trainer_pid=trainer.pid,
        **fields,
    )
