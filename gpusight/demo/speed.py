"""What the demo's instrumented trainers report about their speed, as ``gpusight.torch`` would publish it.

A trainer's step splits into data wait, compute, communication, host-to-device copies and idle
(:func:`step_breakdown`), each part moving within its workload's ranges; an input-starved GPU's data share
rises as its bursts of work thin out, and a stall turns the step into idle time. Its steps per second follow
from the compute share: a step spent all in compute reaches the model's ``compute_utilization`` of the GPU's
peak, slowed further by clocks held below boost (:func:`step_rate`). The ranks of a job step together at the
slowest rank's rate; :func:`with_speed` turns that rate into throughput, FLOP/s and MFU (or HFU).
"""

from __future__ import annotations

from dataclasses import replace

from gpusight.demo.noise import SmoothNoise
from gpusight.demo.scenarios import Model, StepShares
from gpusight.facts.peak_flops import Peak
from gpusight.snapshot.model import BreakdownSource, ProcessSample

BOOST_CLOCK_MHZ = 1980.0
"""The simulated H100's boost SM clock: the clock a model's ``compute_utilization`` is reached at."""

PARTS = ("data", "comm", "copy", "idle")
"""The parts of a step given by ranges (``StepShares``); compute is what they leave."""


def _within(low_high: tuple[float, float], unit: float) -> float:
    low, high = low_high
    return low + (high - low) * unit


def step_breakdown(
    shares: StepShares, ranks: int, noise: SmoothNoise, t: float, starved: float | None, busy: float
) -> dict[str, float]:
    """The step-time breakdown in percent at ``t``, by part (``data``, ``compute``, ``comm``, ``copy``, ``idle``),
    summing to 100.

    ``starved`` (0-1, bursty workloads only) places the data share in its range: 1 where the GPU sits idlest;
    ``busy`` (0-1) is the share of time the GPU works between stalls (the rest becomes idle); a job of one rank
    has no communication.
    """
    parts = {name: _within(getattr(shares, name), noise.unit(t + 37.0 * i)) for i, name in enumerate(PARTS)}
    if starved is not None:
        parts["data"] = _within(shares.data, starved)
    if ranks < 2:
        parts["comm"] = 0.0
    parts = {name: value * busy for name, value in parts.items()}
    parts["idle"] += (1.0 - busy) * 100.0
    rounded = {name: round(value, 1) for name, value in parts.items()}
    rounded["compute"] = round(100.0 - sum(rounded.values()), 1)
    return rounded


def step_rate(model: Model, compute_percent: float, clock_mhz: float | None, peak_tflops: float) -> float:
    """Steps per second of a trainer whose steps spend ``compute_percent`` in compute at ``clock_mhz``."""
    clock = 1.0 if clock_mhz is None else min(1.0, clock_mhz / BOOST_CLOCK_MHZ)
    achieved = peak_tflops * 1e12 * model.compute_utilization * compute_percent / 100.0 * clock
    return achieved / (model.flops_per_sample * model.batch_size)


def with_speed(sample: ProcessSample, model: Model, breakdown: dict[str, float], steps: float, peak: Peak) -> ProcessSample:
    """``sample`` with what a trainer of ``model`` publishes at ``steps`` per second with ``breakdown``."""
    flops_per_step = model.flops_per_sample * model.batch_size
    samples = steps * model.batch_size
    achieved = flops_per_step * steps / 1e12
    return replace(
        sample,
        input_wait_percent=breakdown["data"],
        steps_per_second=round(steps, 3),
        samples_per_second=round(samples, 1),
        tokens_per_second=None if model.tokens_per_sample is None else round(samples * model.tokens_per_sample),
        batch_size_source=model.batch_size_source,
        flops_per_step=flops_per_step,
        flops_source=model.flops_source,
        achieved_tflops=round(achieved, 2),
        peak_tflops=peak.tflops,
        peak_source=peak.source,
        math_mode=model.math_mode,
        flops_utilization_percent=None if not peak.tflops else round(achieved / peak.tflops * 100.0, 2),
        flops_utilization_note=None if peak.tflops else peak.source,
        step_data_percent=breakdown["data"],
        step_compute_percent=breakdown["compute"],
        step_comm_percent=breakdown["comm"],
        step_copy_percent=breakdown["copy"],
        step_idle_percent=breakdown["idle"],
        breakdown_source=BreakdownSource.DEVICE,
    )
