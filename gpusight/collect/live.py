"""The live source: NVML for the GPUs joined with psutil for the host and the GPU processes' trees."""

from __future__ import annotations

import time

from gpusight.collect.host.source import HostSource
from gpusight.collect.model import Snapshot, SourceKind
from gpusight.collect.nvml.source import NvmlSource

LIVE_LABEL = "live"
"""Label shown for live data."""


class LiveSource:
    """Polls NVML, then psutil for the host and for the processes NVML reported."""

    kind = SourceKind.NVML
    """Value of ``Snapshot.source`` for live data."""

    def __init__(self, nvml: NvmlSource | None = None, host: HostSource | None = None) -> None:
        self.nvml = nvml if nvml is not None else NvmlSource()
        """The GPU side."""
        self.host = host if host is not None else HostSource()
        """The host side."""

    @property
    def selection_error(self) -> str | None:
        """Why the GPUs the NVML source was asked for do not exist, or None (see ``NvmlSource.selection_error``)."""
        return self.nvml.selection_error

    def poll(self) -> Snapshot:
        """Take one live snapshot; faults on either side become error notes."""
        gpu = self.nvml.poll()
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
        """Stop NVML helper threads and release handles."""
        self.nvml.close()
        self.host.close()
