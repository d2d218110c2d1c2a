"""What the wrapper reads from torch and from the loader: loader settings, CUDA memory, autocast state.

All of it is read a few times a second at most, never per step. CUDA is never initialised here:
memory is read only once the program itself has initialised CUDA.
"""

from __future__ import annotations

from typing import Any

import torch

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
    """Allocated, reserved and peak bytes on the calling thread's CUDA device; None when CUDA is not in use."""
    # torch leaves cuda.is_initialized unannotated
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        return None
    try:
        device = torch.cuda.current_device()
        return {
            "device": device,
            "allocated_bytes": torch.cuda.memory_allocated(device),
            "reserved_bytes": torch.cuda.memory_reserved(device),
            "peak_bytes": torch.cuda.max_memory_allocated(device),
        }
    except RuntimeError:
        return None


def autocast_active() -> bool:
    """Whether autocast is enabled on the calling thread for CUDA or CPU."""
    return torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("cpu")
