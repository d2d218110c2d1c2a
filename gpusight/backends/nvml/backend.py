"""The NVML source: GPUs, their processes and the driver versions, read through pynvml.

Called from one sampler thread. ``poll`` never raises: a missing driver, a lost GPU or an
unsupported call becomes ``None`` fields and ``ErrorNote``s. The other threads are the PCIe
throughput poller, used on GPUs without PCIe byte counters or GPM, and the Xid event listener.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pynvml

from gpusight.backends.interface import BackendOptions
from gpusight.backends.nvml.calls import GpuLost, raw_text_call
from gpusight.backends.nvml.device import DeviceReader
from gpusight.backends.nvml.entry import NAME
from gpusight.backends.nvml.errors import LOST_MESSAGE, describe, init_failure_reason
from gpusight.backends.nvml.health import with_xids
from gpusight.backends.nvml.mig import mig_uuids
from gpusight.backends.nvml.pcie import PcieThroughputPoller
from gpusight.backends.nvml.xid import XidListener
from gpusight.facts.gpu_selection import (
    FILTER_SCOPE,
    GpuIdentity,
    GpuRequest,
    SelectedMig,
    keep_migs,
    names_mig,
    resolve_gpus,
)
from gpusight.snapshot.model import (
    DeviceHealth,
    DeviceSample,
    DriverInfo,
    ErrorNote,
    GpuReading,
    MigDeviceSample,
    ProcessSample,
    Vendor,
)

INIT_RETRY_S = 10.0
"""Least time between two attempts to start NVML after a failure."""

LOST_RETRY_S = 3.0
"""How often a lost GPU is looked for again."""

CLOSED_MESSAGE = "NVML source is closed"
"""Reason reported by a poll after ``close``."""

_driver_version = raw_text_call(pynvml.nvmlSystemGetDriverVersion)
_nvml_version = raw_text_call(pynvml.nvmlSystemGetNVMLVersion)
_device_name = raw_text_call(pynvml.nvmlDeviceGetName)
_device_uuid = raw_text_call(pynvml.nvmlDeviceGetUUID)


def format_cuda_version(value: int) -> str:
    """NVML's integer CUDA version (``12040``) as ``"12.4"``."""
    return f"{value // 1000}.{value % 1000 // 10}"


@dataclass
class _Slot:
    """What the source knows about one watched GPU between polls."""

    index: int
    cuda_index: int | None = None
    mig: tuple[SelectedMig, ...] | None = None
    """Only these MIG devices are kept (the GPU was asked for through them); None keeps all."""
    reader: DeviceReader | None = None
    lost: bool = False
    error: str | None = None
    retry_at: float = 0.0
    health: DeviceHealth | None = None
    """The health last read, kept so that a lost GPU still shows why it went (its Xid, a pending remap)."""


class NvmlBackend:
    """GPU readings from NVML; ``library_path`` loads that library instead of the default ``libnvidia-ml.so.1``.

    NVML starts lazily on the first ``poll``. Loading a library by path replaces pynvml's
    process-wide library, which is meant for tests and tools, not for two different libraries at once.
    With ``gpus`` only the requested GPUs are opened and polled, in the request's order; the others
    are never touched, except that a request naming UUIDs reads every GPU's UUID once at start.
    """

    def __init__(self, library_path: str | None = None, *, init_retry_s: float = INIT_RETRY_S,
                 lost_retry_s: float = LOST_RETRY_S, clock: Callable[[], float] = time.monotonic,
                 gpus: GpuRequest | None = None, no_driver_hint: str | None = None) -> None:
        self.library_path = library_path
        """Library loaded instead of the default one, or None."""
        self.no_driver_hint = no_driver_hint
        """Ends the failure reason when the machine has no usable NVIDIA driver (see ``init_failure_reason``)."""
        self.gpus = gpus
        """The GPUs asked for, or None for every GPU."""
        self._init_retry_s = init_retry_s
        self._lost_retry_s = lost_retry_s
        self._clock = clock
        self._initialized = False
        self._closed = False
        self._failure: str | None = None
        self._next_init_at = 0.0
        self._driver: DriverInfo | None = None
        self._slots: list[_Slot] = []
        self._selection_notes: tuple[ErrorNote, ...] = ()
        self._selection_error: str | None = None
        self._poller = PcieThroughputPoller()
        self._xids = XidListener()
        self._notes: list[ErrorNote] = []

    @classmethod
    def from_options(cls, options: BackendOptions) -> NvmlBackend:
        """NVML, opening only the GPUs asked for when it is the only backend (the registry opens it so)."""
        return cls(gpus=options.gpus, no_driver_hint=options.no_driver_hint)

    @property
    def name(self) -> str:
        """The backend's name, as ``--backend`` spells it."""
        return NAME

    @property
    def vendor(self) -> Vendor:
        """Whose GPUs it reads (the live source marks each device with it)."""
        return Vendor.NVIDIA

    @property
    def available(self) -> bool:
        """True while NVML is initialized and answering."""
        return self._initialized and not self._closed

    @property
    def selection_error(self) -> str | None:
        """Why ``gpus`` names a GPU that does not exist (one line listing the GPUs there are), or None.

        Known once NVML has started; the source then reports no GPUs and does not retry.
        """
        return self._selection_error

    @property
    def pcie_poller_running(self) -> bool:
        """True while the background PCIe throughput thread runs."""
        return self._poller.running

    @property
    def xid_listener_running(self) -> bool:
        """True while the background Xid event thread runs."""
        return self._xids.running

    def poll(self) -> GpuReading:
        """Read every GPU once; never raises."""
        if self._closed:
            return GpuReading(errors=(ErrorNote(NAME, CLOSED_MESSAGE),))
        try:
            return self._poll()
        except Exception as error:  # noqa: BLE001 - a bug or a broken library must not kill the sampler
            return GpuReading(driver=self._driver,
                              errors=(ErrorNote(NAME, f"unexpected {type(error).__name__}: {error}"),))

    def close(self) -> None:
        """Stop the PCIe and Xid threads, free GPM buffers and the event set, and shut NVML down. Safe to call twice.

        Call it from the thread that polls, never during a poll. NVML is shut down only once both
        threads have stopped: while one of their calls still blocks, NVML is left running (the process
        is on its way out), since shutting it down under a call in flight is undefined behaviour.
        """
        if self._closed:
            return
        self._closed = True
        self._poller.close()
        self._xids.close()
        for slot in self._slots:
            if slot.reader is not None:
                slot.reader.close()
        self._slots = []
        if self._initialized and not self._poller.running and not self._xids.running:
            self._initialized = False
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError:
                pass

    def _poll(self) -> GpuReading:
        if not self._initialized and not self._start():
            scope = NAME if self._selection_error is None else FILTER_SCOPE
            return GpuReading(errors=(ErrorNote(scope, self._failure or "NVML unavailable"),))
        devices: list[DeviceSample] = []
        processes: list[ProcessSample] = []
        errors: list[ErrorNote] = []
        migs: list[MigDeviceSample] = []
        self._xids.collect()
        for slot in self._slots:
            found: list[ProcessSample] = []
            device = self._read_slot(slot, found, errors)
            health = with_xids(device.health, *self._xids.state(slot.index))
            if health is not device.health:
                device = dataclasses.replace(device, health=health)
            if slot.cuda_index is not None:
                device = dataclasses.replace(device, cuda_index=slot.cuda_index)
            devices.append(device)
            slot_migs = list(slot.reader.mig_devices) if slot.reader is not None and not device.lost else []
            if slot.mig is not None:
                slot_migs, found = keep_migs(slot.mig, slot_migs, found)
            migs.extend(slot_migs)
            processes.extend(found)
        errors.extend(self._notes)
        self._notes.clear()
        return GpuReading(driver=self._driver, devices=tuple(devices), processes=tuple(processes),
                          errors=tuple(errors) + self._selection_notes, mig_devices=tuple(migs))

    def _read_slot(self, slot: _Slot, processes: list[ProcessSample], errors: list[ErrorNote]) -> DeviceSample:
        index = slot.index
        now = self._clock()
        if slot.reader is None and now >= slot.retry_at:
            self._attach(index, slot, now)
        if slot.reader is not None:
            try:
                sample, found, notes = slot.reader.read()
            except GpuLost:
                self._mark_lost(slot, now)
            else:
                slot.lost = False
                slot.health = sample.health
                processes.extend(found)
                errors.extend(notes)
                return sample
        if slot.lost:
            errors.append(ErrorNote(f"gpu{index}", LOST_MESSAGE))
            return DeviceSample(index=index, lost=True, error=LOST_MESSAGE, health=slot.health)
        errors.append(ErrorNote(f"gpu{index}", slot.error or "GPU unavailable"))
        return DeviceSample(index=index, error=slot.error)

    def _attach(self, index: int, slot: _Slot, now: float) -> None:
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError as error:
            if error.value in (pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_UNKNOWN):
                self._mark_lost(slot, now)
            else:
                slot.lost = False
                slot.error = f"cannot open GPU {index}: {describe(error)}"
                slot.retry_at = now + self._lost_retry_s
            return
        slot.reader = DeviceReader(index, handle, self._poller, self._clock)
        slot.error = None
        note = self._xids.register(index, handle)
        if note is not None:
            self._notes.append(note)

    def _mark_lost(self, slot: _Slot, now: float) -> None:
        if slot.reader is not None:
            slot.reader.close()
            slot.reader = None
        slot.lost = True
        slot.retry_at = now + self._lost_retry_s

    def _start(self) -> bool:
        now = self._clock()
        if now < self._next_init_at:
            return False
        self._next_init_at = now + self._init_retry_s
        reason = self._load_library()
        if reason is None:
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError as error:
                reason = init_failure_reason(error.value, self.library_path, self.no_driver_hint)
        if reason is None:
            try:
                count = pynvml.nvmlDeviceGetCount()
            except pynvml.NVMLError as error:
                reason = f"NVML started but could not count the GPUs: {describe(error)}"
                try:
                    pynvml.nvmlShutdown()
                except pynvml.NVMLError:
                    pass
        self._failure = reason
        if reason is not None:
            return False
        self._initialized = True
        self._driver = self._read_driver()
        if self.gpus is None:
            self._slots = [_Slot(index) for index in range(count)]
            return True
        lookup = self._identify_with_mig if names_mig(self.gpus) else self._identify
        selection = resolve_gpus(self.gpus, range(count), lookup)
        if selection.error is not None:
            self._refuse_selection(selection.error)
            return False
        self._slots = [_Slot(gpu.index, gpu.cuda_index, gpu.mig) for gpu in selection.gpus]
        self._selection_notes = tuple(ErrorNote(FILTER_SCOPE, note) for note in selection.notes)
        return True

    def _refuse_selection(self, reason: str) -> None:
        """Shut NVML down for good: the GPUs asked for do not exist, and asking again will not change that."""
        self._selection_error = self._failure = reason
        self._next_init_at = math.inf
        self._initialized = False
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass

    @classmethod
    def _identify_with_mig(cls, index: int) -> GpuIdentity:
        """``_identify`` with the UUIDs of the GPU's MIG devices (read only when ``gpus`` names a MIG device)."""
        identity = cls._identify(index)
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError:
            return identity
        return dataclasses.replace(identity, mig_uuids=mig_uuids(handle))

    @staticmethod
    def _identify(index: int) -> GpuIdentity:
        """UUID and name of the GPU at ``index``, for resolving ``gpus`` (None where NVML does not say)."""
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError:
            return GpuIdentity(index)
        values: list[str | None] = []
        for getter in (_device_uuid, _device_name):
            try:
                values.append(getter(handle))
            except pynvml.NVMLError:
                values.append(None)
        return GpuIdentity(index, values[0], values[1])

    def _load_library(self) -> str | None:
        """Load ``library_path`` into pynvml; the failure reason, or None."""
        if self.library_path is None:
            return None
        try:
            library = ctypes.CDLL(self.library_path)
        except OSError:
            return init_failure_reason(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, self.library_path, self.no_driver_hint)
        pynvml.nvmlLib = library
        pynvml._nvmlGetFunctionPointer_cache.clear()
        return None

    @staticmethod
    def _read_driver() -> DriverInfo:
        def ask(fn: Callable[[], Any]) -> Any:
            try:
                return fn()
            except pynvml.NVMLError:
                return None

        cuda = ask(pynvml.nvmlSystemGetCudaDriverVersion_v2)
        if cuda is None:
            cuda = ask(pynvml.nvmlSystemGetCudaDriverVersion)
        return DriverInfo(
            driver_version=ask(_driver_version),
            cuda_driver_version=None if cuda is None else format_cuda_version(int(cuda)),
            nvml_version=ask(_nvml_version),
        )
