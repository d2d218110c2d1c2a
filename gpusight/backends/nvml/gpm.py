"""GPU performance monitoring (GPM, Hopper and later): SM activity, occupancy, tensor, DRAM and PCIe.

GPM counts between two samples taken at least 100 ms apart. Each device keeps two sample buffers
and alternates between them, one sample per poll, so every poll after the first can compute
metrics between the previous sample and the new one. A MIG GPU instance is sampled the same way
through ``nvmlGpmMigSampleGet(parent, gpu instance id, sample)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pynvml

from gpusight.backends.nvml.calls import CallGuard

MIN_INTERVAL_S = 0.1
"""GPM needs samples at least this far apart."""

MIB = 1 << 20
"""GPM reports PCIe traffic in MiB/s."""

SM_ACTIVE = 2
"""NVML_GPM_METRIC_SM_UTIL."""
SM_OCCUPANCY = 3
"""NVML_GPM_METRIC_SM_OCCUPANCY."""
ANY_TENSOR = 5
"""NVML_GPM_METRIC_ANY_TENSOR_UTIL."""
DRAM_BANDWIDTH = 10
"""NVML_GPM_METRIC_DRAM_BW_UTIL."""
PCIE_TX = 20
"""NVML_GPM_METRIC_PCIE_TX_PER_SEC (MiB/s)."""
PCIE_RX = 21
"""NVML_GPM_METRIC_PCIE_RX_PER_SEC (MiB/s)."""

METRIC_IDS = (SM_ACTIVE, SM_OCCUPANCY, ANY_TENSOR, DRAM_BANDWIDTH, PCIE_TX, PCIE_RX)
"""Metrics gpusight asks for, in one nvmlGpmMetricsGet call."""


@dataclass(frozen=True, slots=True)
class GpmMetrics:
    """GPM metrics between two samples; None where the metric is unsupported."""

    sm_active_percent: float | None = None
    """Percent of SM cycles with a warp resident."""
    sm_occupancy_percent: float | None = None
    """Achieved warp occupancy percent."""
    tensor_active_percent: float | None = None
    """Percent of cycles any tensor pipe was busy."""
    dram_active_percent: float | None = None
    """DRAM bandwidth utilization percent."""
    pcie_tx_bytes_per_s: float | None = None
    """PCIe bytes per second sent by the GPU."""
    pcie_rx_bytes_per_s: float | None = None
    """PCIe bytes per second received by the GPU."""


class GpmReader:
    """GPM for one device, or for its GPU instance ``gpu_instance_id`` (MIG); ``read`` takes one sample per call
    and returns the latest metrics. ``handle`` is the whole GPU's handle in both cases."""

    def __init__(self, handle: object, guard: CallGuard, gpu_instance_id: int | None = None) -> None:
        self._handle = handle
        self._guard = guard
        self._instance = gpu_instance_id
        self._key = "gpm" if gpu_instance_id is None else "gpm_mig"  # a MIG failure must not stop the GPU's GPM
        self._supported: bool | None = None
        self._samples: list[object] = []
        self._previous: int | None = None
        self._previous_time = 0.0
        self._metrics: GpmMetrics | None = None
        self.pcie_supported: bool | None = None
        """Whether GPM reports PCIe traffic; None until the first metrics came back."""

    @property
    def supported(self) -> bool:
        """False when the device has no GPM (or a GPM call proved unsupported); True until then."""
        return self._supported is not False

    def read(self, now: float) -> GpmMetrics | None:
        """Take a sample when at least 100 ms passed since the last one; the latest metrics, or None."""
        if not self._ready():
            return None
        if self._previous is not None and now - self._previous_time < MIN_INTERVAL_S:
            return self._metrics
        current = 0 if self._previous is None else 1 - self._previous
        if self._take(self._samples[current]) is None:
            self._supported = self._guard.supported(f"{self._key}_sample")
            return self._metrics
        if self._previous is not None:
            self._metrics = self._compute(self._samples[self._previous], self._samples[current])
        self._previous, self._previous_time = current, now
        return self._metrics

    def _take(self, sample: object) -> object | None:
        """One GPM sample into ``sample``; None when the call failed."""
        key = f"{self._key}_sample"
        if self._instance is None:
            return self._guard.call(key, pynvml.nvmlGpmSampleGet, self._handle, sample)
        return self._guard.call(key, getattr(pynvml, "nvmlGpmMigSampleGet", None), self._handle, self._instance, sample)

    def close(self) -> None:
        """Free the sample buffers."""
        for sample in self._samples:
            try:
                pynvml.nvmlGpmSampleFree(sample)
            except pynvml.NVMLError:
                pass
        self._samples = []
        self._supported = False

    def _ready(self) -> bool:
        if self._supported is None:
            support = self._guard.call("gpm_support", getattr(pynvml, "nvmlGpmQueryDeviceSupport", None), self._handle)
            if support is None:
                self._supported = False if not self._guard.supported("gpm_support") else None
                return False
            self._supported = bool(support.isSupportedDevice)
            if self._supported:
                self._allocate()
        return bool(self._supported)

    def _allocate(self) -> None:
        while len(self._samples) < 2:
            sample = self._guard.call("gpm_alloc", pynvml.nvmlGpmSampleAlloc)
            if sample is None:
                self.close()
                return
            self._samples.append(sample)

    def _compute(self, first: object, second: object) -> GpmMetrics | None:
        request = pynvml.c_nvmlGpmMetricsGet_t()
        request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(METRIC_IDS)
        request.sample1 = first
        request.sample2 = second
        for slot, metric in enumerate(METRIC_IDS):
            request.metrics[slot].metricId = metric
        if self._guard.call(f"{self._key}_metrics", pynvml.nvmlGpmMetricsGet, request) is None:
            self._supported = self._guard.supported(f"{self._key}_metrics")
            return None
        values: dict[int, float | None] = {}
        for slot, metric in enumerate(METRIC_IDS):
            entry = request.metrics[slot]
            # to 0.01 (percent) or 0.01 MiB/s: the counters' own noise is far above that; a recording stores such
            # values in a few bits instead of an 8-byte float
            values[metric] = round(float(entry.value), 2) if entry.nvmlReturn == pynvml.NVML_SUCCESS else None
        tx, rx = values[PCIE_TX], values[PCIE_RX]
        self.pcie_supported = tx is not None and rx is not None
        return GpmMetrics(
            sm_active_percent=values[SM_ACTIVE],
            sm_occupancy_percent=values[SM_OCCUPANCY],
            tensor_active_percent=values[ANY_TENSOR],
            dram_active_percent=values[DRAM_BANDWIDTH],
            pcie_tx_bytes_per_s=None if tx is None else float(round(tx * MIB)),
            pcie_rx_bytes_per_s=None if rx is None else float(round(rx * MIB)),
        )
