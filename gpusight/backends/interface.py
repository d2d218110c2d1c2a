"""The one interface every GPU vendor's backend implements, and the roots the sysfs backends read from.

A backend discovers its GPUs, reads their static and dynamic figures, their processes and their health where the
driver tells it, and returns them as one :class:`~gpusight.snapshot.model.GpuReading` per poll. Every figure it
cannot read is None (shown as N/A), never 0. :mod:`gpusight.backends.registry` lists the backends; the live source
joins their readings (:mod:`gpusight.backends.joined`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gpusight.facts.gpu_selection import GpuRequest
from gpusight.snapshot.model import GpuReading, Vendor

SYSFS_ROOT_VARIABLE = "GPUSIGHT_SYSFS_ROOT"
"""Environment variable naming the sysfs tree the amdgpu and Intel backends read (default ``/sys``)."""
FDINFO_ROOT_VARIABLE = "GPUSIGHT_FDINFO_ROOT"
"""Environment variable naming the tree of processes' DRM file descriptors (default ``/proc``): ``<root>/<pid>/fd/<fd>``
links and their ``<root>/<pid>/fdinfo/<fd>``. Process names, users and parents are still read from the live /proc."""


class GpuReader(Protocol):
    """Anything the live source reads GPUs from: one backend, or several joined. Polled from the sampler thread."""

    def poll(self) -> GpuReading:
        """Read the GPUs once; never raises."""
        ...

    def close(self) -> None:
        """Release handles and threads. Safe to call twice."""
        ...


class GpuBackend(GpuReader, Protocol):
    """One vendor's way of reading its GPUs. Polled from the sampler thread only; ``poll`` never raises."""

    @property
    def name(self) -> str:
        """The backend's name as ``--backend`` spells it, e.g. ``"nvml"``."""
        ...

    @property
    def vendor(self) -> Vendor:
        """Whose GPUs it reads; devices it leaves without a vendor are marked with this one."""
        ...

    def poll(self) -> GpuReading:
        """Read every GPU of this backend once, indexed from 0; faults become None fields and error notes."""
        ...

    def close(self) -> None:
        """Release handles and threads. Safe to call twice."""
        ...


@dataclass(frozen=True, slots=True)
class Roots:
    """Where the sysfs backends read: the sysfs tree and the processes' file-descriptor tree."""

    sysfs: Path = Path("/sys")
    """The sysfs root: ``<sysfs>/class/drm/card*/device/...``."""
    fdinfo: Path = Path("/proc")
    """The root of ``<pid>/fd/<fd>`` and ``<pid>/fdinfo/<fd>``."""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Roots:
        """The roots ``GPUSIGHT_SYSFS_ROOT`` and ``GPUSIGHT_FDINFO_ROOT`` name, or the system's."""
        return cls(Path(environ.get(SYSFS_ROOT_VARIABLE) or "/sys"), Path(environ.get(FDINFO_ROOT_VARIABLE) or "/proc"))


@dataclass(frozen=True, slots=True)
class BackendOptions:
    """What the command line gives every backend when it opens."""

    roots: Roots = Roots()
    """Where the sysfs backends read."""
    gpus: GpuRequest | None = None
    """The GPUs asked for, handed to NVML alone when it is the only backend (it then opens only those)."""
    no_driver_hint: str | None = None
    """Ends NVML's failure reason when no NVIDIA driver answers and no other backend found a GPU."""


@dataclass(frozen=True, slots=True)
class BackendEntry:
    """One line of the registry: a backend's name, its vendor, how to find its GPUs and which class reads them."""

    name: str
    """As ``--backend`` spells it."""
    vendor: Vendor
    """Whose GPUs it reads."""
    summary: str
    """What it reads, for ``--help`` and the docs."""
    present: Callable[[Roots], bool]
    """Cheap check at start: True when this machine has GPUs for it (NVML's is always True: it says itself when no
    driver answers)."""
    backend: str
    """The backend class as ``module:Class`` (a :class:`GpuBackendClass`), imported only when the backend is opened,
    so listing the registry loads no vendor's reading code."""

    def open(self, options: BackendOptions) -> GpuBackend:
        """Import the backend's class and open it; it starts reading on its first poll."""
        module, _, name = self.backend.partition(":")
        backend_class: GpuBackendClass = getattr(importlib.import_module(module), name)
        return backend_class.from_options(options)


class GpuBackendClass(Protocol):
    """What every vendor's backend class offers the registry: one way to open it from the command line's options."""

    def from_options(self, options: BackendOptions) -> GpuBackend:
        """The backend, opened with ``options`` (a classmethod on the backend class)."""
        ...
