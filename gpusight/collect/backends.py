"""The registry of GPU backends: one line per vendor, and how ``--backend`` picks among them.

A fourth vendor is one more package beside :mod:`gpusight.collect.nvml` and one more line in :data:`BACKENDS`.
"""

from __future__ import annotations

from gpusight.collect.amdgpu.entry import AMDGPU_ENTRY
from gpusight.collect.backend import BackendEntry, BackendOptions, GpuBackend, Roots
from gpusight.collect.gpu_backends import GpuBackends
from gpusight.collect.model import Vendor

AUTO = "auto"
"""``--backend auto`` (the default): NVML, and every other backend that finds its GPUs on this machine."""


def _open_nvml(options: BackendOptions) -> GpuBackend:
    from gpusight.collect.nvml.source import NvmlSource

    return NvmlSource(gpus=options.gpus, no_driver_hint=options.no_driver_hint)


def _open_intel(options: BackendOptions) -> GpuBackend:
    from gpusight.collect.intel.source import IntelBackend

    return IntelBackend(options.roots)


def _intel_present(roots: Roots) -> bool:
    from gpusight.collect.drm.sysfs import find_cards
    from gpusight.collect.intel.source import INTEL_DRIVERS

    return bool(find_cards(roots.sysfs, INTEL_DRIVERS))


def _always(_roots: Roots) -> bool:
    return True


BACKENDS: tuple[BackendEntry, ...] = (
    BackendEntry("nvml", Vendor.NVIDIA, "NVIDIA GPUs through NVML (libnvidia-ml.so.1)", _always, _open_nvml),
    AMDGPU_ENTRY,
    BackendEntry("intel", Vendor.INTEL, "Intel GPUs under xe or i915, from sysfs, hwmon and DRM fdinfo", _intel_present,
                 _open_intel),
)
"""Every backend, in the order their GPUs are numbered on a mixed machine (NVIDIA first keeps NVML's indexes)."""

BACKEND_NAMES: tuple[str, ...] = tuple(entry.name for entry in BACKENDS)
"""The names ``--backend`` accepts besides ``auto``."""


class BackendChoiceError(ValueError):
    """``--backend`` named a backend that does not exist."""


def parse_backend_choice(text: str) -> tuple[str, ...]:
    """The backend names in ``--backend`` (``auto``, one name, or several joined with commas), registry order."""
    names = {part.strip() for part in text.split(",") if part.strip()}
    if not names or names == {AUTO}:
        return (AUTO,)
    unknown = sorted(names - set(BACKEND_NAMES) - {AUTO})
    if unknown or AUTO in names:
        offered = ", ".join((AUTO,) + BACKEND_NAMES)
        problem = f"unknown {', '.join(unknown)}" if unknown else "auto goes alone"
        raise BackendChoiceError(f"--backend: {problem}; choose {offered}, or several backends joined with commas")
    return tuple(name for name in BACKEND_NAMES if name in names)


def chosen_entries(choice: tuple[str, ...], roots: Roots) -> tuple[BackendEntry, ...]:
    """The backends to open: those named, or under ``auto`` NVML and each other backend whose GPUs are present."""
    if choice != (AUTO,):
        return tuple(entry for entry in BACKENDS if entry.name in choice)
    return tuple(entry for entry in BACKENDS if entry.present(roots))


def open_backends(choice: tuple[str, ...], options: BackendOptions) -> tuple[GpuBackends, bool]:
    """The chosen backends opened as one source, and whether it applies ``options.gpus`` itself.

    NVML alone opens only the GPUs asked for (as it always has); with several backends every GPU is read and the
    caller keeps the ones asked for, by their joined indexes.
    """
    entries = chosen_entries(choice, options.roots)
    alone = len(entries) == 1 and entries[0].name == "nvml"
    backend_options = options if alone else BackendOptions(options.roots, None, options.no_driver_hint)
    return GpuBackends([entry.open(backend_options) for entry in entries]), alone
