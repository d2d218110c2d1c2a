"""The registry of GPU backends: one line per vendor, and how ``--backend`` picks among them.

Each vendor's ``entry`` module declares its line; this module only lists them. Listing them imports no vendor's
backend: a vendor's reading code loads when it is opened, so a machine without AMD or Intel GPUs never loads theirs.
A fourth vendor is one more package beside :mod:`gpusight.backends.nvml` and one more entry in :data:`BACKENDS`
(the checklist is in docs/backends.md).
"""

from __future__ import annotations

from gpusight.backends.amdgpu import entry as amdgpu
from gpusight.backends.intel import entry as intel
from gpusight.backends.interface import BackendEntry, BackendOptions, Roots
from gpusight.backends.joined import GpuBackends
from gpusight.backends.nvml import entry as nvml

AUTO = "auto"
"""``--backend auto`` (the default): NVML, and every other backend that finds its GPUs on this machine."""


BACKENDS: tuple[BackendEntry, ...] = (nvml.ENTRY, amdgpu.ENTRY, intel.ENTRY)
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
