"""The host source: CPU, memory and swap of the machine, and psutil details of the GPU processes.

Each GPU process reported by NVML is joined with its user, command line, CPU and memory, and is
followed by the PyTorch DataLoader workers found in its process tree.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psutil

from gputop.collect.dataloader_workers import attribute_workers
from gputop.collect.hostcpu import CpuMeter
from gputop.collect.model import (
    ROLE_DATALOADER_WORKER,
    ErrorNote,
    HostReading,
    HostSample,
    ProcessSample,
)
from gputop.collect.procinfo import NOTE_ACCESS_DENIED, ProcessFacts, ProcessReader
from gputop.collect.proctree import Descendant, ProcessTree
from gputop.collect.trainer_status import TrainerStatus, TrainerStatusReader

ERROR_SCOPE = "host"
"""``ErrorNote.scope`` of faults met by this source."""

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
        "input_wait_percent": None if fraction is None else fraction * 100.0,
        "steps_per_second": status.steps_per_second if status.active else None,
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


class HostSource:
    """Polls the host and the GPU processes' trees with psutil. Use from one thread.

    ``poll`` is cheap enough for 0.1-1 s intervals: it reads a few ``/proc`` files per GPU
    process and never scans every process on the machine (except in the fallback described in
    ``gputop.collect.proctree``), and it never raises. GPU processes instrumented with
    ``gputop.torch`` also carry what their status record says (input wait, steps/s, loader
    settings, CUDA memory); only the records of the shown pids are looked at.
    """

    def __init__(self) -> None:
        """Prepare caches and take the CPU baseline, so the first poll already has CPU percents."""
        self._cpu = CpuMeter()
        self._reader = ProcessReader()
        self._tree = ProcessTree()
        self._status = TrainerStatusReader()

    def poll(self, gpu_processes: Sequence[ProcessSample]) -> HostReading:
        """Read the host and enrich ``gpu_processes`` (NVML fields set) with psutil details.

        The result lists GPU processes in (device, pid) order, each followed by its DataLoader
        workers in pid order; a process on several devices has its workers after its first row.
        """
        errors: list[ErrorNote] = []
        host = self._host(errors)
        try:
            processes = self._processes(gpu_processes)
        except Exception as exc:  # noqa: BLE001 - poll never raises: keep the NVML rows, say why
            errors.append(ErrorNote(ERROR_SCOPE, f"process details unavailable: {_one_line(exc)}"))
            processes = tuple(sorted(gpu_processes, key=_order))
        return HostReading(host=host, processes=processes, errors=tuple(errors))

    def close(self) -> None:
        """Drop cached process objects."""
        self._reader.clear()

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

    def _processes(self, gpu_processes: Sequence[ProcessSample]) -> tuple[ProcessSample, ...]:
        """GPU processes enriched, each followed by its workers."""
        ordered = sorted(gpu_processes, key=_order)
        pids = list(dict.fromkeys(sample.pid for sample in ordered))
        facts = {pid: self._reader.read(pid) for pid in pids}
        tree = self._tree.descendants(pid for pid in pids if facts[pid].found)
        workers = attribute_workers(set(pids), tree)
        worker_facts = {
            pid: self._reader.read(pid, ppid=tree[pid].ppid)
            for found in workers.values()
            for pid in found
        }
        self._reader.forget_unseen()
        statuses = {pid: self._status.read(pid, facts[pid].create_time) for pid in pids if facts[pid].found}
        self._status.forget_unseen()

        result: list[ProcessSample] = []
        listed: set[int] = set()
        for sample in ordered:
            info = facts[sample.pid]
            mine = workers.get(sample.pid, [])
            known = info.found and info.note != NOTE_ACCESS_DENIED
            result.append(
                dataclasses.replace(
                    sample,
                    **_fact_fields(info),
                    **_status_fields(statuses.get(sample.pid)),
                    num_workers=len(mine) if known else None,
                )
            )
            if sample.pid in listed:
                continue
            listed.add(sample.pid)
            result.extend(_worker(sample, tree[pid], worker_facts[pid]) for pid in mine)
        return tuple(result)


def _worker(trainer: ProcessSample, node: Descendant, facts: ProcessFacts) -> ProcessSample:
    """A DataLoader worker row; the walk's parent and name fill in what psutil could not read."""
    fields = _fact_fields(facts)
    fields["ppid"] = facts.ppid if facts.ppid is not None else node.ppid
    fields["name"] = facts.name if facts.name is not None else node.name
    return ProcessSample(
        pid=node.pid,
        role=ROLE_DATALOADER_WORKER,
        device_index=trainer.device_index,
        trainer_pid=trainer.pid,
        **fields,
    )
