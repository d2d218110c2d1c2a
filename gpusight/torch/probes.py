"""What the wrapper reads from torch and from the loader: loader settings, GPU memory, autocast state.

All of it is read a few times a second at most, never per step. No GPU is initialised here: memory is read only
once the program itself has initialised CUDA, ROCm (``torch.cuda``) or XPU (``torch.xpu``).
"""

from __future__ import annotations

from typing import Any

import torch

from gpusight.torch.accelerator import AUTOCAST_DEVICES, accelerator_in_use

_LOADER_SETTINGS = (
    ("num_workers", int),
    ("pin_memory", bool),
    ("persistent_workers", bool),
    ("prefetch_factor", int),
    ("batch_size", int),
)


def loader_settings(loader: object) -> dict[str, Any]:
    """The DataLoader settings ``loader`` exposes (any iterable: missing or odd-typed ones are None)."""
    settings: dict[str, Any] = {}
    for name, kind in _LOADER_SETTINGS:
        value = getattr(loader, name, None)
        valid = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        settings[name] = value if valid else None
    return settings


def cuda_memory() -> dict[str, int] | None:
    """Allocated, reserved and peak bytes on the calling thread's GPU (CUDA, ROCm or XPU: the record's ``cuda``
    section, named before other vendors); None when no GPU is in use."""
    accelerator = accelerator_in_use()
    return None if accelerator is None else accelerator.memory()


def autocast_active() -> bool:
    """Whether autocast is enabled on the calling thread for a GPU (CUDA/ROCm or XPU) or the CPU."""
    return any(torch.is_autocast_enabled(device) for device in AUTOCAST_DEVICES)
