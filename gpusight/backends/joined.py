"""Several GPU backends read as one: their GPUs numbered one after another, in the registry's order.

On a mixed machine NVML's GPUs keep their NVML indexes (NVML comes first) and the next backend's GPUs follow, so
``gpu8`` is the first AMD GPU beside eight NVIDIA ones. Every index a reading carries moves with its GPU: devices,
MIG devices, processes and the ``gpuN``/``migN.M`` scopes of its error notes.
"""

from __future__ import annotations

import dataclasses

from gpusight.backends.interface import GpuBackend, GpuReader
from gpusight.facts.gpu_selection import (
    FILTER_SCOPE,
    GpuIdentity,
    GpuRequest,
    GpuSelection,
    resolve_gpus,
    scope_kept,
    selected_parts,
)
from gpusight.snapshot.model import DriverInfo, ErrorNote, GpuReading, ScopeKind, Vendor


def shift_reading(reading: GpuReading, offset: int) -> GpuReading:
    """``reading`` with every GPU index moved up by ``offset``."""
    if offset == 0:
        return reading
    return dataclasses.replace(
        reading,
        devices=tuple(dataclasses.replace(d, index=d.index + offset) for d in reading.devices),
        mig_devices=tuple(dataclasses.replace(m, device_index=m.device_index + offset) for m in reading.mig_devices),
        processes=tuple(p if p.device_index is None else dataclasses.replace(p, device_index=p.device_index + offset)
                        for p in reading.processes),
        errors=tuple(ErrorNote(shift_scope(e.scope, offset), e.message) for e in reading.errors),
    )


def shift_scope(scope: str, offset: int) -> str:
    """A ``gpuN`` or ``migN.M`` scope with N moved up by ``offset``; any other scope unchanged."""
    mig = ScopeKind.parse_mig(scope)
    if mig is not None:
        return ScopeKind.of_mig(mig[0] + offset, mig[1])
    parsed = ScopeKind.parse(scope)
    if parsed is not None and parsed[0] is ScopeKind.GPU and parsed[1] is not None:
        return ScopeKind.GPU.of(parsed[1] + offset)
    return scope


def with_vendor(reading: GpuReading, vendor: Vendor) -> GpuReading:
    """``reading`` with ``vendor`` set on every device that does not name one."""
    if all(d.vendor is not None for d in reading.devices):
        return reading
    devices = tuple(d if d.vendor is not None else dataclasses.replace(d, vendor=vendor) for d in reading.devices)
    return dataclasses.replace(reading, devices=devices)


def first_driver(readings: list[GpuReading]) -> DriverInfo | None:
    """NVIDIA's driver versions (only NVML reports a ``DriverInfo``; other drivers' versions ride on their devices)."""
    return next((r.driver for r in readings if r.driver is not None), None)


class GpuBackends:
    """Polls each backend in turn and joins their readings; a backend that found no GPU is quiet when another did.

    NVML, always tried, reports "no NVIDIA driver" on a machine that has only AMD or Intel GPUs: that note is
    dropped while another backend has GPUs, and kept when no backend has any (the user then learns why nothing shows).
    """

    def __init__(self, backends: list[GpuBackend]) -> None:
        self.backends = backends
        """The backends, in the order their GPUs are numbered."""

    @property
    def name(self) -> str:
        """The backends' names joined with ``+``, e.g. ``"nvml+amdgpu"``."""
        return "+".join(b.name for b in self.backends)

    @property
    def selection_error(self) -> str | None:
        """Why the GPUs asked for do not exist, where a backend judged the request itself (NVML alone); else None."""
        for backend in self.backends:
            error = getattr(backend, "selection_error", None)
            if isinstance(error, str):
                return error
        return None

    def poll(self) -> GpuReading:
        """One reading of every backend's GPUs, renumbered, each device marked with its vendor; never raises."""
        readings = [with_vendor(b.poll(), b.vendor) for b in self.backends]
        if len(readings) == 1:
            return readings[0]
        found = [r for r in readings if r.devices]
        kept = readings if not found else [r for r in readings if r.devices or not _only_startup_notes(r)]
        shifted: list[GpuReading] = []
        offset = 0
        for reading in kept:
            shifted.append(shift_reading(reading, offset))
            offset += len(reading.devices)
        return GpuReading(
            driver=first_driver(shifted),
            devices=tuple(d for r in shifted for d in r.devices),
            processes=tuple(p for r in shifted for p in r.processes),
            errors=tuple(e for r in shifted for e in r.errors),
            mig_devices=tuple(m for r in shifted for m in r.mig_devices),
        )

    def close(self) -> None:
        """Close every backend."""
        for backend in self.backends:
            backend.close()


def _only_startup_notes(reading: GpuReading) -> bool:
    """True when a reading without GPUs says only why its backend could not start (no GPU-scoped fault)."""
    return all(ScopeKind.parse(e.scope) is None for e in reading.errors)


class GpuSelectingReader:
    """A reader of several backends limited to the GPUs asked for, by their joined indexes, UUIDs or names.

    NVML alone opens only the GPUs asked for; several backends are read whole and this keeps the ones asked for (in
    the request's order, with CUDA's numbers), their MIG devices, processes and notes. The request is resolved against
    the first reading that has GPUs; one that names a GPU that is not there leaves a single note and no GPU.
    """

    def __init__(self, reader: GpuReader, request: GpuRequest) -> None:
        self.reader = reader
        """The wrapped reader."""
        self.request = request
        """The GPUs asked for."""
        self._selection: GpuSelection | None = None

    def poll(self) -> GpuReading:
        """The wrapped reading with only the GPUs asked for."""
        reading = self.reader.poll()
        if self._selection is None and reading.devices:
            identities = {d.index: GpuIdentity(d.index, d.uuid, d.name, tuple(
                m.uuid for m in reading.mig_devices if m.device_index == d.index and m.uuid is not None))
                for d in reading.devices}
            self._selection = resolve_gpus(self.request, identities, identities.__getitem__)
        selection = self._selection
        if selection is None:
            return reading
        if selection.error is not None:
            return GpuReading(driver=reading.driver, errors=(ErrorNote(FILTER_SCOPE, selection.error),))
        by_index = {d.index: d for d in reading.devices}
        devices = tuple(dataclasses.replace(by_index[g.index], cuda_index=g.cuda_index)
                        for g in selection.gpus if g.index in by_index)
        migs, processes = selected_parts(selection, reading.mig_devices, reading.processes)
        kept = {ScopeKind.GPU: {g.index for g in selection.gpus}}
        errors = tuple(e for e in reading.errors if scope_kept(e.scope, kept))
        notes = tuple(ErrorNote(FILTER_SCOPE, note) for note in selection.notes)
        return GpuReading(driver=reading.driver, devices=devices, processes=tuple(processes), errors=errors + notes,
                          mig_devices=tuple(migs))

    def close(self) -> None:
        """Close the wrapped reader."""
        self.reader.close()
