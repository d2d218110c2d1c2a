"""Demo or replay data cut down to the GPUs asked for (``--gpus``, ``--cuda-visible``), as a source the sampler polls.

The NVML backend opens only the GPUs asked for itself; other sources are wrapped here, and the request is resolved
against the GPUs of their first snapshot (:mod:`gpusight.facts.gpu_selection` does the resolving and the cutting).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, runtime_checkable

from gpusight.facts.gpu_selection import GpuIdentity, GpuRequest, GpuSelection, resolve_gpus, select_gpus
from gpusight.sampling.source import SnapshotSource
from gpusight.sampling.steering import Command, LeadIn, PlaybackState, SteerableSource
from gpusight.snapshot.model import Snapshot


@runtime_checkable
class GpuSelecting(Protocol):
    """A source asked for some GPUs, which can say when they do not exist."""

    @property
    def selection_error(self) -> str | None:
        """Why the GPUs asked for cannot be shown (one line listing the GPUs there are), or None."""
        ...


class GpuSelectingSource:
    """Demo or replay data limited to the requested GPUs (the NVML source selects GPUs itself).

    The request is resolved against the GPUs of the first snapshot; ``selection_error`` then says
    when it names a GPU that is not there.
    """

    def __init__(self, source: SnapshotSource, request: GpuRequest) -> None:
        self.source = source
        """The wrapped source."""
        self.request = request
        """The GPUs asked for."""
        self.kind = source.kind
        """The wrapped source's kind."""
        self._selection: GpuSelection | None = None

    @property
    def selection_error(self) -> str | None:
        """Why the request cannot be met (e.g. no GPU 7 in the data), or None; known after the first poll."""
        return None if self._selection is None else self._selection.error

    def poll(self) -> Snapshot:
        """The wrapped source's snapshot with only the selected GPUs."""
        snapshot = self.source.poll()
        if self._selection is None:
            identities = {d.index: GpuIdentity(d.index, d.uuid, d.name, tuple(
                m.uuid for m in snapshot.mig_devices if m.device_index == d.index and m.uuid is not None))
                for d in snapshot.devices}
            self._selection = resolve_gpus(self.request, identities, identities.__getitem__)
        return select_gpus(snapshot, self._selection)

    def take_lead_in(self) -> LeadIn | None:
        """The wrapped replay's lead-in with only the selected GPUs (see ``SteerableSource``)."""
        lead_in = self.source.take_lead_in() if isinstance(self.source, SteerableSource) else None
        if lead_in is None or self._selection is None:
            return lead_in
        selection = self._selection
        return dataclasses.replace(lead_in, snapshots=tuple(select_gpus(s, selection) for s in lead_in.snapshots))

    def playback_state(self) -> PlaybackState | None:
        """The wrapped replay's playback state (see ``SteerableSource``)."""
        return self.source.playback_state() if isinstance(self.source, SteerableSource) else None

    def steer(self, command: Command) -> None:
        """Pass ``command`` to the wrapped replay (see ``SteerableSource``); nothing for other sources."""
        if isinstance(self.source, SteerableSource):
            self.source.steer(command)

    def start_indexing(self) -> None:
        """Have the wrapped replay index its recording (see ``SteerableSource``); nothing for other sources."""
        if isinstance(self.source, SteerableSource):
            self.source.start_indexing()

    @property
    def finished(self) -> bool:
        """True once the wrapped replay has played its last snapshot (see ``SteerableSource``)."""
        return isinstance(self.source, SteerableSource) and self.source.finished

    def close(self) -> None:
        """Close the wrapped source."""
        self.source.close()
