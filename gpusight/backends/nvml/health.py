"""A GPU's health counters: ECC counts, remapped rows or retired pages, PCIe link and replays, NVLink errors.

The counters that change slowly (ECC, rows, pages, replays, NVLink errors) are read at most every
``HEALTH_PERIOD_S`` and the last values reported in between; the current PCIe link is read every poll
(two calls of microseconds) since it changes with load; the link's maxima once. An unsupported call
reads None and is never made again (``CallGuard``). Xid events come from :mod:`gpusight.backends.nvml.xid`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pynvml

from gpusight.backends.nvml.calls import CallGuard
from gpusight.snapshot.model import DeviceHealth, XidEvent

HEALTH_PERIOD_S = 5.0
"""Least time between two reads of the slowly changing health counters."""

NVLINK_ERROR_FIELDS = (
    ("nvlink_crc_flit_errors", 38),  # NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL
    ("nvlink_crc_data_errors", 45),  # NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL
    ("nvlink_replay_errors", 52),  # NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL
    ("nvlink_recovery_errors", 59),  # NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL
)
"""DeviceHealth field and the NVML field id summing that counter over all links.

They ride in the device's one ``nvmlDeviceGetFieldValues`` batch of the poll when the counters are due,
where ``nvmlDeviceGetNvLinkErrorCounter`` would take a call per link and counter (4 x 18 on an H100)
plus ``nvmlDeviceGetNvLinkState`` per link; dcgm-exporter serves the same totals
(``DCGM_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL``). A GPU without NVLink answers NOT_SUPPORTED per field, and
the batch drops them."""

NVLINK_ERROR_FIELD_IDS = tuple(field_id for _, field_id in NVLINK_ERROR_FIELDS)
"""The field ids of :data:`NVLINK_ERROR_FIELDS`."""

_ECC = (
    ("ecc_volatile_corrected", "ecc_corrected", "NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_VOLATILE_ECC"),
    ("ecc_aggregate_corrected", "ecc_corrected_aggregate", "NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_AGGREGATE_ECC"),
    ("ecc_aggregate_uncorrected", "ecc_uncorrected_aggregate", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED",
     "NVML_AGGREGATE_ECC"),
)
"""DeviceHealth field, guard key, error type and counter type of each ECC count read here (the volatile
uncorrected count is ``DeviceSample.ecc_errors_uncorrected``, read by the device reader when these are due)."""


class HealthReader:
    """Reads one GPU's health counters; see the module docstring. Calls may raise ``GpuLost`` through the guard."""

    def __init__(self, handle: object, guard: CallGuard) -> None:
        self._handle = handle
        self._guard = guard
        self._slow: dict[str, Any] = {}
        self._due = 0.0
        self._maxima: tuple[int | None, int | None] | None = None

    def due(self, now: float) -> bool:
        """True when the slow counters are read at monotonic time ``now`` (then the field batch carries NVLink's)."""
        return now >= self._due

    def read(self, now: float, ecc_enabled: bool, fields: Mapping[int, tuple[float | int, int, float]]) -> (
            DeviceHealth | None):
        """The counters at monotonic time ``now`` (Xid fields left empty); None where nothing could be read.

        ``fields`` is the poll's field batch, field id -> (value, width, time), holding the NVLink error
        totals that are supported when ``due(now)``.
        """
        g, h = self._guard, self._handle
        if self.due(now):
            self._due = now + HEALTH_PERIOD_S
            self._slow = self._read_slow(ecc_enabled)
            self._slow.update({name: int(fields[field_id][0]) if field_id in fields else None
                               for name, field_id in NVLINK_ERROR_FIELDS})
        gen_max, width_max = self._link_maxima()
        health = DeviceHealth(
            pcie_link_gen=g.call("pcie_link_gen", pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
            pcie_link_width=g.call("pcie_link_width", pynvml.nvmlDeviceGetCurrPcieLinkWidth, h),
            pcie_link_gen_max=gen_max, pcie_link_width_max=width_max, **self._slow,
        )
        return None if health == DeviceHealth() else health

    def _link_maxima(self) -> tuple[int | None, int | None]:
        """The link's highest generation and width, asked until known (or unsupported), then kept."""
        if self._maxima is None:
            g, h = self._guard, self._handle
            gen = g.call("pcie_link_gen_max", pynvml.nvmlDeviceGetMaxPcieLinkGeneration, h)
            width = g.call("pcie_link_width_max", pynvml.nvmlDeviceGetMaxPcieLinkWidth, h)
            known = all(v is not None or not g.supported(k)
                        for k, v in (("pcie_link_gen_max", gen), ("pcie_link_width_max", width)))
            if not known:
                return gen, width
            self._maxima = (gen, width)
        return self._maxima

    def _read_slow(self, ecc_enabled: bool) -> dict[str, Any]:
        g, h = self._guard, self._handle
        values: dict[str, Any] = {}
        if ecc_enabled:
            for name, key, error_type, counter_type in _ECC:
                values[name] = g.call(key, pynvml.nvmlDeviceGetTotalEccErrors, h,
                                      getattr(pynvml, error_type), getattr(pynvml, counter_type))
        rows = g.call("remapped_rows", pynvml.nvmlDeviceGetRemappedRows, h)
        if rows is not None:
            values.update(remapped_rows_correctable=int(rows[0]), remapped_rows_uncorrectable=int(rows[1]),
                          remap_pending=bool(rows[2]), remap_failed=bool(rows[3]))
        else:
            values.update(self._retired_pages())
        values["pcie_replay_count"] = g.call("pcie_replay", pynvml.nvmlDeviceGetPcieReplayCounter, h)
        return values

    def _retired_pages(self) -> dict[str, Any]:
        """Retired page counts and the pending flag (GPUs before A100; they answer NOT_SUPPORTED on later ones)."""
        g, h = self._guard, self._handle
        causes = (("retired_pages_single_bit", "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS"),
                  ("retired_pages_double_bit", "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR"))
        values: dict[str, Any] = {}
        for name, cause in causes:
            pages = g.call("retired_pages", pynvml.nvmlDeviceGetRetiredPages, h, getattr(pynvml, cause))
            values[name] = None if pages is None else len(pages)
        pending = g.call("retired_pages_pending", pynvml.nvmlDeviceGetRetiredPagesPendingStatus, h)
        values["retired_pages_pending"] = None if pending is None else bool(pending)
        return values


def with_xids(health: DeviceHealth | None, total: int | None,
              recent: tuple[XidEvent, ...]) -> DeviceHealth | None:
    """``health`` with the Xid count and events added (a health of only those where no counter was read)."""
    if total is None and not recent:
        return health
    return dataclasses.replace(health or DeviceHealth(), xid_total=total, xid_recent=recent)
