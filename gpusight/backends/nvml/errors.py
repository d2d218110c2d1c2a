"""NVML return codes: their names, how gpusight treats each kind, and one-line reasons for the user."""

from __future__ import annotations

import pynvml

UNSUPPORTED_CODES = frozenset({
    pynvml.NVML_ERROR_NOT_SUPPORTED,
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
    pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
})
"""The call (or this form of it) does not exist on this GPU or driver: stop asking."""

TRANSIENT_CODES = frozenset({
    pynvml.NVML_ERROR_TIMEOUT,
    pynvml.NVML_ERROR_IRQ_ISSUE,
    pynvml.NVML_ERROR_INSUFFICIENT_SIZE,
    pynvml.NVML_ERROR_IN_USE,
    pynvml.NVML_ERROR_MEMORY,
    pynvml.NVML_ERROR_NO_DATA,
    pynvml.NVML_ERROR_NOT_FOUND,
    pynvml.NVML_ERROR_NOT_READY,
})
"""Worth another try next poll, not worth telling the user about."""

LOST_MESSAGE = "GPU is lost (fell off the bus or stopped responding)"
"""Shown for a GPU that answers NVML_ERROR_GPU_IS_LOST."""

_NAMES: dict[int, str] = {value: name for name, value in vars(pynvml).items()
          if name.startswith("NVML_ERROR_") and isinstance(value, int)}


def error_name(code: int) -> str:
    """The symbolic name of an NVML return code, e.g. ``NVML_ERROR_NOT_SUPPORTED``."""
    return _NAMES.get(code, f"NVML error {code}")


def describe(error: pynvml.NVMLError) -> str:
    """One line for an NVML error: its text and its code name."""
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - str() may call into a broken library
        text = "NVML error"
    return f"{text} ({error_name(error.value)})"


def init_failure_reason(code: int, library_path: str | None = None, no_driver_hint: str | None = None) -> str:
    """Why NVML could not start, in one line the user can act on; ``no_driver_hint`` ends the line when the machine
    has no usable NVIDIA driver (the command line suggests its demo there)."""
    name = error_name(code)
    hint = f"; {no_driver_hint}" if no_driver_hint else ""
    if code == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
        where = f" at {library_path}" if library_path else ""
        return f"NVML library (libnvidia-ml.so.1) not found{where}: no NVIDIA driver installed ({name}){hint}"
    if code == pynvml.NVML_ERROR_DRIVER_NOT_LOADED:
        return f"NVIDIA driver not loaded: the kernel module is not running ({name}){hint}"
    if code == pynvml.NVML_ERROR_NO_PERMISSION:
        return f"no permission to open the NVIDIA devices (/dev/nvidia*) ({name})"
    if code == pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return f"NVML library and kernel driver versions differ: reload the driver or reboot ({name})"
    return f"NVML initialization failed: {describe(pynvml.NVMLError(code))}"
