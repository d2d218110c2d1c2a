"""The live source: the GPU backends (NVML, amdgpu, Intel) joined with psutil for the host and the GPU processes' trees."""

from __future__ import annotations

import time

from gpusight.backends.host.source import HostSource
from gpusight.backends.interface import BackendOptions, GpuReader, Roots
from gpusight.snapshot.model import Snapshot, SourceKind

LIVE_LABEL = "live"
"""Label shown for live data."""


class LiveSource:
    """Polls the GPU backends, then psutil for the host and for the processes the backends reported."""

    kind = SourceKind.NVML
    """Value of ``Snapshot.source`` for live data (``"nvml"`` whatever the backends, as recordings always said)."""

    def __init__(self, gpu: GpuReader | None = None, host: HostSource | None = None) -> None:
        if gpu is None:
            from gpusight.backends.registry import AUTO, open_backends

            gpu, _ = open_backends((AUTO,), BackendOptions(Roots.from_environment()))
        self.gpu: GpuReader = gpu
        """The GPU side: one backend, or several joined (:class:`~gpusight.backends.joined.GpuBackends`)."""
        self.host = host if host is not None else HostSource()
        """The host side."""

    @property
    def selection_error(self) -> str | None:
        """Why the GPUs the backend was asked for do not exist, or None (see ``NvmlBackend.selection_error``)."""
        error = getattr(self.gpu, "selection_error", None)
        return error if isinstance(error, str) else None

    def poll(self) -> Snapshot:
        """Take one live snapshot; faults on either side become error notes."""
        gpu = self.gpu.poll()
        host = self.host.poll(gpu.processes)
        return Snapshot(
            timestamp=time.time(),
            source=self.kind,
            host=host.host,
            driver=gpu.driver,
            devices=gpu.devices,
            mig_devices=gpu.mig_devices,
            processes=host.processes,
            jobs=host.jobs,
            errors=gpu.errors + host.errors,
            label=LIVE_LABEL,
        )

    def close(self) -> None:
        """Stop the backends' helper threads and release handles."""
        self.gpu.close()
        self.host.close()
