"""Reads one NVML device per poll into a ``DeviceSample`` plus its processes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pynvml

from gpusight.backends.nvml.calls import CallGuard, field_value, raw_text_call
from gpusight.backends.nvml.engines import read_engines
from gpusight.backends.nvml.errors import UNSUPPORTED_CODES
from gpusight.backends.nvml.gpm import GpmMetrics, GpmReader
from gpusight.backends.nvml.health import NVLINK_ERROR_FIELD_IDS, HealthReader
from gpusight.backends.nvml.mig import MigReader, merge_processes
from gpusight.backends.nvml.pcie import KIB, CounterRate, PcieThroughputPoller
from gpusight.backends.nvml.processes import DeviceProcessLister
from gpusight.snapshot.model import DeviceSample, ErrorNote, MigDeviceSample, ProcessSample
from gpusight.snapshot.throttle import decode_throttle_reasons

FIELD_PCIE_TX = 197
"""NVML_FI_DEV_PCIE_COUNT_TX_BYTES: cumulative bytes sent by the GPU."""
FIELD_PCIE_RX = 198
"""NVML_FI_DEV_PCIE_COUNT_RX_BYTES: cumulative bytes received by the GPU."""
FIELD_ENERGY = 83
"""NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: millijoules since the driver loaded."""
FIELD_NVLINK_TX = 138
"""NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: cumulative KiB of data the GPU sent over NVLink (no protocol overhead)."""
FIELD_NVLINK_RX = 139
"""NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: cumulative KiB of data the GPU received over NVLink."""
ALL_LINKS = 0xFFFFFFFF
"""scopeId asking an NVLink throughput field for the sum over all links (UINT_MAX, per nvml.h)."""
_FIELD_SCOPES = {FIELD_NVLINK_TX: ALL_LINKS, FIELD_NVLINK_RX: ALL_LINKS}
_FIELD_PAIRS = ((FIELD_PCIE_TX, FIELD_PCIE_RX), (FIELD_NVLINK_TX, FIELD_NVLINK_RX))

ENERGY_PERIOD_S = 5.0
"""Least time between two reads of the energy counter; the last value read is reported in between.

Reading it costs about 3 ms (H100, driver 580.159.04: the field or its own call alike), most of a
whole poll, while every other device call costs microseconds; the counter is shown in kWh to the Wh.
"""

_Field = tuple[float | int, int, float]
"""A field value read: (value, width in bits, timestamp in seconds)."""

_device_name = raw_text_call(pynvml.nvmlDeviceGetName)
_device_uuid = raw_text_call(pynvml.nvmlDeviceGetUUID)


class DeviceReader:
    """Keeps the handle, static values and per-call memory of one GPU; ``read`` may raise ``GpuLost``."""

    def __init__(self, index: int, handle: object, pcie_poller: PcieThroughputPoller,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.index = index
        """NVML device index."""
        self.handle = handle
        """NVML device handle."""
        self._guard = CallGuard(index, lambda: pynvml.nvmlDeviceGetMemoryInfo(handle))
        self._poller = pcie_poller
        self._static: dict[str, Any] = {}
        self._fields = [FIELD_PCIE_TX, FIELD_PCIE_RX, FIELD_NVLINK_TX, FIELD_NVLINK_RX, FIELD_ENERGY,
                        *NVLINK_ERROR_FIELD_IDS]
        self._rates = {field_id: CounterRate() for pair in _FIELD_PAIRS for field_id in pair}
        self._gpm = GpmReader(handle, self._guard)
        self._processes = DeviceProcessLister(index, handle, self._guard)
        self._health = HealthReader(handle, self._guard)
        self._mig = MigReader(index, handle, self._guard)
        self.mig_devices: tuple[MigDeviceSample, ...] = ()
        """The GPU's MIG devices at the last ``read`` (none outside MIG mode)."""
        self._watched = False
        self._clock = clock
        self._energy_mj: float | None = None
        self._ecc_uncorrected: int | None = None
        self._energy_due = 0.0

    def read(self) -> tuple[DeviceSample, list[ProcessSample], list[ErrorNote]]:
        """Poll the device: its sample, its GPU processes and the notes worth reporting."""
        now = self._clock()
        g, h = self._guard, self.handle
        utilization = g.call("utilization", pynvml.nvmlDeviceGetUtilizationRates, h)
        used, total, reserved = self._memory()
        power = g.call("power", pynvml.nvmlDeviceGetPowerUsage, h)
        energy_due = now >= self._energy_due
        health_due = self._health.due(now)
        fields = self._read_fields(with_energy=energy_due, with_health=health_due)
        if energy_due:
            self._read_energy(fields, now)
        energy = self._energy_mj
        gpm = self._gpm.read(now)
        tx, rx = self._pcie(fields, gpm)
        nvlink_tx, nvlink_rx = self._counter_rates(fields, FIELD_NVLINK_TX, FIELD_NVLINK_RX, KIB)
        engines = read_engines(g, h)
        if health_due:  # a slow counter, read with the health counters
            self._ecc_uncorrected = self._ecc_errors()
        sample = DeviceSample(
            index=self.index,
            name=self._once("name", _device_name, h),
            uuid=self._once("uuid", _device_uuid, h),
            pci_bus_id=self._once("pci_bus_id", _pci_bus_id, h),
            minor_number=self._once("minor_number", pynvml.nvmlDeviceGetMinorNumber, h),
            utilization_gpu_percent=None if utilization is None else float(utilization.gpu),
            utilization_memory_percent=None if utilization is None else float(utilization.memory),
            memory_used_bytes=used,
            memory_total_bytes=total,
            memory_reserved_bytes=reserved,
            power_watts=None if power is None else power / 1000.0,
            power_limit_watts=self._power_limit(),
            temperature_celsius=self._temperature(),
            fan_percent=_as_float(g.call("fan", pynvml.nvmlDeviceGetFanSpeed, h)),
            clock_sm_mhz=g.call("clock_sm", pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
            clock_memory_mhz=g.call("clock_memory", pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_MEM),
            pstate=g.call("pstate", pynvml.nvmlDeviceGetPerformanceState, h),
            energy_joules=None if energy is None else energy / 1000.0,
            throttle_reasons=self._throttle(),
            pcie_tx_bytes_per_s=tx,
            pcie_rx_bytes_per_s=rx,
            nvlink_tx_bytes_per_s=nvlink_tx,
            nvlink_rx_bytes_per_s=nvlink_rx,
            ecc_errors_uncorrected=self._ecc_uncorrected,
            mig_mode=self._mig_mode(),
            compute_capability=self._compute_capability(),
            sm_active_percent=None if gpm is None else gpm.sm_active_percent,
            sm_occupancy_percent=None if gpm is None else gpm.sm_occupancy_percent,
            tensor_active_percent=None if gpm is None else gpm.tensor_active_percent,
            dram_active_percent=None if gpm is None else gpm.dram_active_percent,
            encoder_percent=engines.encoder,
            decoder_percent=engines.decoder,
            jpeg_percent=engines.jpeg,
            ofa_percent=engines.ofa,
            health=self._health.read(now, self._ecc_enabled(), fields),
        )
        processes = self._processes.read(now, mig=bool(sample.mig_mode))
        if sample.mig_mode:
            migs, per_instance = self._mig.read(now, with_processes=self._processes.denied)
            processes = merge_processes(processes, per_instance)
            self.mig_devices = tuple(migs)
        else:
            self.mig_devices = ()
        return sample, processes, g.take_notes()

    def close(self) -> None:
        """Release GPM buffers and stop background PCIe polling of this device."""
        self._gpm.close()
        self._mig.close()
        self._poller.forget(self.index)

    def _once(self, key: str, fn: Any, *args: object) -> Any:
        """A static value: asked until it is known (or known unsupported), then kept."""
        if key in self._static:
            return self._static[key]
        value = self._guard.call(key, fn, *args)
        if value is not None or not self._guard.supported(key):
            self._static[key] = value
        return value

    def _memory(self) -> tuple[int | None, int | None, int | None]:
        g = self._guard
        version = getattr(pynvml, "nvmlMemory_v2", None)
        if version is not None and g.supported("memory_v2"):
            info = g.call("memory_v2", pynvml.nvmlDeviceGetMemoryInfo, self.handle, version=version)
            if info is not None:
                return int(info.used), int(info.total), int(info.reserved)
            if g.supported("memory_v2"):
                return None, None, None
        info = g.call("memory", pynvml.nvmlDeviceGetMemoryInfo, self.handle)
        if info is None:
            return None, None, None
        return int(info.used), int(info.total), None

    def _power_limit(self) -> float | None:
        limit = self._once("power_limit", pynvml.nvmlDeviceGetEnforcedPowerLimit, self.handle)
        return None if limit is None else limit / 1000.0

    def _temperature(self) -> float | None:
        g = self._guard
        sensor = pynvml.NVML_TEMPERATURE_GPU
        if g.supported("temperature_v"):
            value = g.call("temperature_v", getattr(pynvml, "nvmlDeviceGetTemperatureV", None), self.handle, sensor)
            if value is not None or g.supported("temperature_v"):
                return _as_float(value)
        return _as_float(g.call("temperature", pynvml.nvmlDeviceGetTemperature, self.handle, sensor))

    def _throttle(self) -> tuple[str, ...]:
        g = self._guard
        mask = None
        if g.supported("clocks_event_reasons"):
            mask = g.call("clocks_event_reasons",
                          getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None), self.handle)
        if mask is None and not g.supported("clocks_event_reasons"):
            mask = g.call("throttle_reasons", pynvml.nvmlDeviceGetCurrentClocksThrottleReasons, self.handle)
        return () if mask is None else decode_throttle_reasons(int(mask))

    def _ecc_enabled(self) -> bool:
        mode = self._once("ecc_mode", pynvml.nvmlDeviceGetEccMode, self.handle)
        return mode is not None and mode[0] == pynvml.NVML_FEATURE_ENABLED

    def _ecc_errors(self) -> int | None:
        if not self._ecc_enabled():
            return None
        return self._guard.call("ecc_errors", pynvml.nvmlDeviceGetTotalEccErrors, self.handle,
                                pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC)

    def _mig_mode(self) -> bool | None:
        mode = self._once("mig_mode", pynvml.nvmlDeviceGetMigMode, self.handle)
        return None if mode is None else bool(mode[0])

    def _compute_capability(self) -> tuple[int, int] | None:
        value = self._once("compute_capability", pynvml.nvmlDeviceGetCudaComputeCapability, self.handle)
        return None if value is None else (int(value[0]), int(value[1]))

    def _read_energy(self, fields: dict[int, _Field], now: float) -> None:
        """Keep the energy counter from ``fields`` or its own call; the next read is due ``ENERGY_PERIOD_S`` after a value."""
        value: float | int | None = fields[FIELD_ENERGY][0] if FIELD_ENERGY in fields else None
        if value is None and FIELD_ENERGY not in self._fields:
            value = self._guard.call("energy", pynvml.nvmlDeviceGetTotalEnergyConsumption, self.handle)
        self._energy_mj = None if value is None else float(value)
        if value is not None:
            self._energy_due = now + ENERGY_PERIOD_S

    def _read_fields(self, with_energy: bool, with_health: bool) -> dict[int, _Field]:
        """One nvmlDeviceGetFieldValues call for the wanted fields (energy only when ``with_energy``, the NVLink
        error totals only when ``with_health``).

        Returns field id -> (value, width bits, seconds).
        """
        wanted = [f for f in self._fields
                  if (with_energy or f != FIELD_ENERGY) and (with_health or f not in NVLINK_ERROR_FIELD_IDS)]
        if not wanted:
            return {}
        request = [(f, _FIELD_SCOPES.get(f, 0)) for f in wanted]
        values = self._guard.call("field_values", pynvml.nvmlDeviceGetFieldValues, self.handle, request)
        if values is None:
            if not self._guard.supported("field_values"):
                self._fields = []
            return {}
        now = time.time()
        result = {}
        for entry in values:
            field_id = int(entry.fieldId)
            code = int(entry.nvmlReturn)
            if code == pynvml.NVML_SUCCESS:
                value, width = field_value(entry)
                stamp = entry.timestamp / 1e6 if entry.timestamp > 0 else now
                result[field_id] = (value, width, stamp)
                self._guard.succeeded(f"field {field_id}")
            elif code in UNSUPPORTED_CODES:
                self._fields = [f for f in self._fields if f != field_id]
            elif code == pynvml.NVML_ERROR_GPU_IS_LOST:
                self._guard.call("field_values", _raise, code)
            else:
                self._guard.call(f"field {field_id}", _raise, code)
        for pair in _FIELD_PAIRS:  # a pair is read together or not at all
            if pair[0] not in self._fields or pair[1] not in self._fields:
                self._fields = [f for f in self._fields if f not in pair]
        return result

    def _pcie(self, fields: dict[int, _Field], gpm: GpmMetrics | None) -> tuple[float | None, float | None]:
        """PCIe rates: GPM where it reports them, else the byte counters, else the throughput thread.

        GPM goes first because the byte counters are wrong under heavy traffic: on an H100 (driver
        580.159.04) copying 55 GB/s, counter deltas over a second read 0.02 to 2.4 GB/s or went
        backwards, while GPM, nvmlDeviceGetPcieThroughput and ``nvidia-smi dmon`` agreed within 6 %.
        """
        if self._gpm.supported and self._gpm.pcie_supported:
            self._fields = [f for f in self._fields if f not in (FIELD_PCIE_TX, FIELD_PCIE_RX)]
            return (None, None) if gpm is None else (gpm.pcie_tx_bytes_per_s, gpm.pcie_rx_bytes_per_s)
        if FIELD_PCIE_TX in self._fields:
            return self._counter_rates(fields, FIELD_PCIE_TX, FIELD_PCIE_RX)
        if self._gpm.supported and self._gpm.pcie_supported is None:
            return None, None
        if not self._watched:
            self._poller.watch(self.index, self.handle)
            self._watched = True
        return self._poller.latest(self.index)

    def _counter_rates(self, fields: dict[int, _Field], tx_field: int, rx_field: int,
                       unit_bytes: int = 1) -> tuple[float | None, float | None]:
        """Whole bytes per second of a (TX, RX) pair of cumulative counters counting ``unit_bytes`` each; None where unread.

        The counters are differenced in their own units, so a 32-bit counter still unwraps.
        """
        rates: list[float | None] = []
        for field_id in (tx_field, rx_field):
            if field_id not in fields:
                rates.append(None)
                continue
            value, width, stamp = fields[field_id]
            rate = self._rates[field_id].update(int(value), stamp, width)
            rates.append(None if rate is None else float(round(rate * unit_bytes)))  # whole bytes per second
        return rates[0], rates[1]


def _pci_bus_id(handle: object) -> str:
    """The GPU's PCI bus id (``busId`` of ``nvmlDeviceGetPciInfo_v3``), invalid UTF-8 replaced."""
    raw = pynvml.nvmlDeviceGetPciInfo_v3(handle).busId
    return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)


def _as_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _raise(code: int) -> None:
    """Raise the NVMLError for ``code`` so a per-field return goes through the same guard as a call."""
    raise pynvml.NVMLError(code)

