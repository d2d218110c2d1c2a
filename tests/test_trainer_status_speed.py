"""The speed and breakdown sections of a trainer's status record: parsed, checked, and joined to the GPU process.

Records are real files in a real runtime directory for a real child process; the host source reads them as it does
in the monitor.
"""

from __future__ import annotations

import json
import os

import pytest
from test_trainer_status import record, runtime_dir, write  # noqa: F401  (fixture)

from gpusight.backends.host.source import HostSource
from gpusight.backends.host.trainer_status import StatusFormatError, parse_status
from gpusight.snapshot.model import BatchSizeSource, BreakdownSource, FlopsSource, MathMode, ProcessSample
from support.procs import sleeper

SPEED = {
    "samples_per_second": 256.0, "tokens_per_second": 524288.0, "batch_size_source": "batch",
    "flops_per_step": 3.2e15, "flops_source": "6N", "achieved_tflops": 400.0, "peak_tflops": 989.5,
    "peak_source": "NVIDIA H100 datasheet (SXM), BF16 dense", "math_mode": "bf16",
    "flops_utilization_fraction": 0.4042, "flops_utilization_note": None,
}
BREAKDOWN = {"data": 0.38, "compute": 0.42, "communication": 0.1, "copy": 0.02, "idle": 0.08, "source": "device"}


def raw(**overrides: object) -> str:
    """A record of this test process with the speed and breakdown sections, ``overrides`` applied."""
    return json.dumps(record(os.getpid(), **{"speed": SPEED, "breakdown": BREAKDOWN, **overrides}))


def test_speed_and_breakdown_are_parsed_with_their_sources():
    status = parse_status(raw())
    assert status.samples_per_second == 256.0 and status.tokens_per_second == 524288.0
    assert status.batch_size_source is BatchSizeSource.BATCH
    assert status.flops_source is FlopsSource.ESTIMATE_6N and status.flops_source.utilization_name == "MFU"
    assert status.math_mode is MathMode.BF16
    assert status.breakdown is not None and sum(status.breakdown.values()) == pytest.approx(1.0)
    assert status.breakdown_source is BreakdownSource.DEVICE


@pytest.mark.parametrize(
    ("speed", "breakdown", "complaint"),
    [
        ({**SPEED, "flops_source": "guessed"}, BREAKDOWN, "flops_source"),
        ({**SPEED, "math_mode": "fp8"}, BREAKDOWN, "math_mode"),
        ({**SPEED, "achieved_tflops": -1.0}, BREAKDOWN, "negative"),
        ({**SPEED, "peak_source": 7}, BREAKDOWN, "string"),
        (SPEED, {**BREAKDOWN, "idle": 0.5}, "sum to 1"),
        (SPEED, {**BREAKDOWN, "data": 1.5}, "0..1"),
        (SPEED, {k: v for k, v in BREAKDOWN.items() if k != "copy"}, "0..1"),
        (SPEED, {**BREAKDOWN, "source": "gpu"}, "source"),
    ],
)
def test_impossible_speed_or_breakdown_values_refuse_the_record(speed, breakdown, complaint):
    with pytest.raises(StatusFormatError, match=complaint):
        parse_status(raw(speed=speed, breakdown=breakdown))


def test_hostile_long_text_is_cut():
    status = parse_status(raw(speed={**SPEED, "peak_source": "\x1b]8;;http://evil/\x07" + "x" * 5000}))
    assert status.peak_source is not None and len(status.peak_source) == 240


def joined(folder, **fields: object) -> ProcessSample:
    """The GPU process row the host source makes for a live process whose record has ``fields`` and both sections."""
    with sleeper() as proc:
        write(folder, proc.pid, record(proc.pid, speed=SPEED, breakdown=BREAKDOWN, **fields))
        source = HostSource()
        try:
            reading = source.poll([ProcessSample(pid=proc.pid, device_index=0)])
        finally:
            source.close()
    [sample] = [p for p in reading.processes if p.pid == proc.pid]
    return sample


def test_the_host_source_puts_speed_and_breakdown_on_the_process(runtime_dir):  # noqa: F811
    sample = joined(runtime_dir)
    assert sample.flops_utilization_percent == pytest.approx(40.42)
    assert (sample.achieved_tflops, sample.peak_tflops, sample.flops_per_step) == (400.0, 989.5, 3.2e15)
    assert sample.flops_source is FlopsSource.ESTIMATE_6N and sample.math_mode is MathMode.BF16
    parts = (sample.step_data_percent, sample.step_compute_percent, sample.step_comm_percent,
             sample.step_copy_percent, sample.step_idle_percent)
    assert parts == pytest.approx((38.0, 42.0, 10.0, 2.0, 8.0)) and sum(parts) == pytest.approx(100.0)
    assert sample.breakdown_source is BreakdownSource.DEVICE


def test_between_epochs_the_rates_are_unknown_but_the_last_breakdown_stays(runtime_dir):  # noqa: F811
    sample = joined(runtime_dir, active=False)
    assert sample.samples_per_second is None and sample.flops_utilization_percent is None
    assert sample.step_compute_percent == pytest.approx(42.0)
