"""Video and media engine utilization of one GPU: NVENC, NVDEC, NVJPG and OFA.

Each is one call of microseconds answering the driver's latest sample (percent, sampling period),
so all four are read every poll. A GPU without the engine, or a MIG-enabled one, answers
NOT_SUPPORTED: None, never asked again.
"""

from __future__ import annotations

from dataclasses import dataclass

import pynvml

from gpusight.backends.nvml.calls import CallGuard

_ENGINES = (
    ("encoder", "nvmlDeviceGetEncoderUtilization"),
    ("decoder", "nvmlDeviceGetDecoderUtilization"),
    ("jpeg", "nvmlDeviceGetJpgUtilization"),
    ("ofa", "nvmlDeviceGetOfaUtilization"),
)
"""Guard key and pynvml function of each engine (a function missing from an old pynvml reads None)."""


@dataclass(frozen=True, slots=True)
class EnginePercents:
    """Utilization percent of each engine over NVML's last sampling period; None where unsupported."""

    encoder: float | None
    """NVENC."""
    decoder: float | None
    """NVDEC."""
    jpeg: float | None
    """NVJPG."""
    ofa: float | None
    """Optical flow accelerator."""


def read_engines(guard: CallGuard, handle: object) -> EnginePercents:
    """The four engines' utilization through ``guard`` (which may raise ``GpuLost``)."""
    values = []
    for key, name in _ENGINES:
        answer = guard.call(key, getattr(pynvml, name, None), handle)
        values.append(None if answer is None else float(answer[0]))
    return EnginePercents(*values)
