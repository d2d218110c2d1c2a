"""FLOPs per step, the math mode, the peak and the FLOP/s utilization (MFU, or HFU for counted FLOPs).

FLOPs per step are given (``flops_per_step=``: MFU), counted once by ``torch.utils.flop_counter.FlopCounterMode``
over one whole training step (forward, backward and optimizer: the FLOPs that run, activation recomputation
included, so their share of the peak is the hardware FLOPs utilization, HFU), or estimated as 6 x trainable
parameters x tokens per step (``flops="6N"``: decoder-only transformers; the PaLM paper's estimate, MFU). The peak
is the table's (:func:`gpusight.facts.peak_flops.peak_for`) for the GPU this process uses and the math mode of its
matrix multiplications (CUDA, ROCm or XPU), or ``peak_tflops=``. No GPU is ever initialised here.
"""

from __future__ import annotations

from typing import Any

import torch

from gpusight.facts.peak_flops import peak_for
from gpusight.snapshot.model import FlopsSource, MathMode
from gpusight.torch.accelerator import AUTOCAST_DEVICES, accelerator_in_use
from gpusight.torch.instrument import exit_quietly
from gpusight.torch.window import WindowStats

FLOPS_CHOICES = ("count", "6N", None)
"""The values ``flops=`` takes."""
_HALF = {torch.bfloat16: MathMode.BF16, torch.float16: MathMode.FP16}
_NO_GPU = "no GPU in use (CUDA, ROCm or XPU): give peak_tflops= to get a utilization"


def math_mode(module: Any = None) -> MathMode:
    """The arithmetic of the matrix multiplications now: autocast's dtype when autocast is on, else the dtype of
    ``module``'s parameters when half, else TF32 when float32 matmuls may use it, else FP32."""
    for device in AUTOCAST_DEVICES:
        if torch.is_autocast_enabled(device):
            mode = _HALF.get(torch.get_autocast_dtype(device))
            if mode is not None:
                return mode
    if module is not None:
        for parameter in module.parameters():
            if parameter.is_floating_point():
                mode = _HALF.get(parameter.dtype)
                if mode is not None:
                    return mode
                break
    if torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() in ("high", "medium"):
        return MathMode.TF32
    return MathMode.FP32


def trainable_parameters(module: Any) -> int:
    """The number of parameters of ``module`` that require gradients."""
    return sum(parameter.numel() for parameter in module.parameters() if parameter.requires_grad)


class FlopsMeter:
    """Knows the FLOPs per step and the peak, and turns steps per second into achieved TFLOP/s and a utilization.

    As an instrument it counts one step's FLOPs: :meth:`start` before the step body, :meth:`stop` after it.
    """

    def __init__(self, model: Any, *, flops_per_step: float | None, flops: str | None,
                 peak_tflops: float | None) -> None:
        """See :class:`~gpusight.torch.meter.LoopMeter` for the arguments."""
        if flops not in FLOPS_CHOICES:
            raise ValueError(f'flops must be "count", "6N" or None, not {flops!r}')
        if flops_per_step is not None and not flops_per_step > 0:
            raise ValueError("flops_per_step must be positive")
        if peak_tflops is not None and not peak_tflops > 0:
            raise ValueError("peak_tflops must be positive")
        self._model = model
        self._given = flops_per_step
        self._how = flops
        self._peak_given = peak_tflops
        self._counted: float | None = None
        self._count_failed: str | None = None
        self._counter: Any = None
        self._mode: MathMode | None = None
        self._parameters: int | None = None
        self._peaks: dict[MathMode, tuple[float | None, str]] = {}

    def wants_count(self) -> bool:
        """Whether a step should still run under the FLOP counter."""
        return self._given is None and self._how == "count" and self._counted is None and self._count_failed is None

    def start(self) -> None:
        """Start counting the FLOPs of the step that begins."""
        from torch.utils.flop_counter import FlopCounterMode

        try:
            counter = FlopCounterMode(display=False)
            counter.__enter__()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        except Exception as error:  # noqa: BLE001 - counting is best effort; the loop must go on
            self._count_failed = f"FlopCounterMode failed: {error}"
            return
        self._counter = counter

    def stop(self) -> None:
        """Stop counting and keep the count; a count of 0 (e.g. torch.compile'd code) leaves the FLOPs unknown."""
        counter, self._counter = self._counter, None
        if counter is None:
            return
        try:
            counter.__exit__(None, None, None)
            total = counter.get_total_flops()
        except Exception as error:  # noqa: BLE001 - counting is best effort; the loop must go on
            self._count_failed = f"FlopCounterMode failed: {error}"
            return
        if total > 0:
            self._counted = float(total)
        else:
            self._count_failed = ("FlopCounterMode counted no FLOPs in a step (torch.compile'd code is not seen): "
                                  "give flops_per_step=")

    def abandon(self) -> None:
        """Stop counting without keeping the count (the step did not end normally); the next early step tries again."""
        counter, self._counter = self._counter, None
        if counter is not None:
            exit_quietly(counter)

    def see_forward(self, module: Any) -> None:
        """Note the math mode from inside the forward pass of ``module``."""
        self._mode = math_mode(module)

    def figures(self, stats: WindowStats) -> dict[str, Any]:
        """The speed fields of :class:`WindowStats` other than throughput, for the window ``stats``."""
        flops, source, note = self._per_step(stats)
        mode = self._mode if self._mode is not None else math_mode(self._model)
        peak, peak_source = self._peak(mode)
        rate = stats.steps_per_second
        achieved = flops * rate / 1e12 if flops is not None and rate is not None else None
        utilization = achieved / peak if achieved is not None and peak is not None else None
        if utilization is None and note is None:
            note = peak_source if peak is None else "no steps measured yet"
        return {
            "flops_per_step": flops,
            "flops_source": source,
            "achieved_tflops": achieved,
            "peak_tflops": peak,
            "peak_source": peak_source if peak is not None else None,
            "math_mode": mode,
            "flops_utilization_fraction": utilization,
            "flops_utilization_note": None if utilization is not None else note,
        }

    def _per_step(self, stats: WindowStats) -> tuple[float | None, FlopsSource | None, str | None]:
        """(FLOPs per step, their source, why unknown)."""
        if self._given is not None:
            return self._given, FlopsSource.GIVEN, None
        if self._how == "count":
            if self._counted is not None:
                return self._counted, FlopsSource.COUNTED, None
            return None, None, self._count_failed or "FLOPs per step not counted yet (counted on the second step)"
        if self._how == "6N":
            return self._estimate(stats)
        return None, None, "FLOPs per step unknown: flops=None and no flops_per_step="

    def _estimate(self, stats: WindowStats) -> tuple[float | None, FlopsSource | None, str | None]:
        """6 x trainable parameters x tokens per step (the window's mean)."""
        if self._model is None:
            return None, None, 'flops="6N" needs model='
        tokens, rate = stats.tokens_per_second, stats.steps_per_second
        if tokens is None or not rate:
            return None, None, 'flops="6N" needs batches of token ids (an integer tensor such as input_ids)'
        if self._parameters is None:
            self._parameters = trainable_parameters(self._model)
        return 6.0 * self._parameters * tokens / rate, FlopsSource.ESTIMATE_6N, None

    def _peak(self, mode: MathMode) -> tuple[float | None, str]:
        """(peak TFLOP/s, its source or why there is none) for ``mode`` on this process's GPU."""
        if self._peak_given is not None:
            return self._peak_given, "given"
        known = self._peaks.get(mode)
        if known is not None:
            return known
        accelerator = accelerator_in_use()
        if accelerator is None:
            return None, _NO_GPU
        peak = peak_for(accelerator.device_name(), mode)
        self._peaks[mode] = (peak.tflops, peak.source)
        return self._peaks[mode]
