"""The interface every snapshot source (live NVML+host, demo, replay) implements."""

from __future__ import annotations

from typing import Protocol

from gpusight.snapshot.model import Snapshot, SourceKind


class SnapshotSource(Protocol):
    """Something the sampler can poll for whole snapshots."""

    kind: SourceKind
    """The value of ``Snapshot.source``."""

    def poll(self) -> Snapshot:
        """Take one snapshot. Must not raise for expected faults: report them in ``errors``."""
        ...

    def close(self) -> None:
        """Release handles, threads and files."""
        ...
