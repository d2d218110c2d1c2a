"""Ring buffers and history stay bounded and aligned."""

import math

import pytest

from gpusight.sampling.history import DEVICE_METRICS, History, RingBuffer, summarize
from gpusight.snapshot.model import DeviceSample, HostSample, Snapshot


def snap(t, devices=(), cores=(10.0, 30.0), iowait=None):
    return Snapshot(timestamp=t, source="demo", devices=tuple(devices), host=HostSample(cpu_percent_per_core=cores, iowait_percent=iowait))


def test_ring_buffer_keeps_the_newest_values_in_order():
    ring = RingBuffer(4)
    for v in range(10):
        ring.append(v)
    assert ring.values() == [6.0, 7.0, 8.0, 9.0]
    assert ring.values(2) == [8.0, 9.0]
    assert len(ring) == 4


def test_ring_buffer_round_trips_missing_values_as_none():
    ring = RingBuffer(3)
    ring.append(None)
    ring.append(0.0)
    assert ring.values() == [None, 0.0]


def test_ring_buffer_rejects_zero_capacity():
    with pytest.raises(ValueError):
        RingBuffer(0)


def test_history_is_bounded_over_a_long_run():
    history = History(capacity=100)
    for i in range(5000):
        history.append(snap(i * 0.25, [DeviceSample(index=0, utilization_gpu_percent=i % 100)]))
    assert len(history) == 100
    series = history.device(0, "utilization_gpu_percent")
    assert len(series) == 100
    assert series[-1] == float(4999 % 100)
    for metric in DEVICE_METRICS:
        assert len(history.device(0, metric)) == 100


def test_device_appearing_late_is_padded_to_align_with_timestamps():
    history = History(capacity=10)
    history.append(snap(0.0, [DeviceSample(index=0, power_watts=100.0)]))
    history.append(snap(1.0, [DeviceSample(index=0, power_watts=110.0), DeviceSample(index=1, power_watts=50.0)]))
    history.append(snap(2.0, [DeviceSample(index=1, power_watts=55.0)]))
    assert history.timestamps() == [0.0, 1.0, 2.0]
    assert history.device(1, "power_watts") == [None, 50.0, 55.0]
    assert history.device(0, "power_watts") == [100.0, 110.0, None]
    assert history.device_indexes() == [0, 1]


def test_host_cpu_series_is_the_mean_over_cores():
    history = History(capacity=10)
    history.append(snap(0.0, cores=(10.0, 30.0), iowait=4.0))
    history.append(snap(1.0, cores=(), iowait=None))
    assert history.host("cpu_percent") == [20.0, None]
    assert history.host("iowait_percent") == [4.0, None]


def test_window_summary_uses_only_recent_samples():
    history = History(capacity=1000)
    for i in range(100):
        history.append(snap(float(i), [DeviceSample(index=0, temperature_celsius=float(i))]))
    recent = history.device_summary(0, "temperature_celsius", seconds=9.0)
    assert (recent.minimum, recent.maximum, recent.count) == (90.0, 99.0, 10)
    assert math.isclose(recent.mean, 94.5)
    assert history.device_summary(0, "temperature_celsius").count == 100
    assert history.device_summary(7, "temperature_celsius") is None


def test_summarize_ignores_missing_values():
    assert summarize([None, None]) is None
    s = summarize([None, 2.0, 4.0])
    assert (s.minimum, s.mean, s.maximum, s.count) == (2.0, 3.0, 4.0, 2)


def test_unknown_metric_is_an_error():
    with pytest.raises(KeyError):
        History().device(0, "no_such_metric")


def test_derived_cpu_series_sum_trainers_and_their_workers_per_gpu_and_stay_bounded():
    from gpusight.sampling.history import DERIVED_DEVICE_METRICS
    from gpusight.snapshot.model import ProcessRole, ProcessSample

    def frame(t, worker_cpu):
        processes = (
            ProcessSample(pid=1, device_index=0, cpu_percent=80.0, num_workers=2),
            ProcessSample(pid=2, device_index=0, cpu_percent=20.0, num_workers=0),
            *(
                ProcessSample(pid=10 + k, role=ProcessRole.DATALOADER_WORKER, device_index=0, trainer_pid=1, cpu_percent=worker_cpu)
                for k in range(2)
            ),
            ProcessSample(pid=3, device_index=1, cpu_percent=None, num_workers=0),
            ProcessSample(pid=4, device_index=2, cpu_percent=50.0, num_workers=None),
        )
        devices = [DeviceSample(index=i) for i in range(4)]
        return Snapshot(timestamp=t, source="demo", devices=tuple(devices), processes=processes)

    history = History(capacity=50)
    for i in range(200):
        history.append(frame(i * 0.25, float(i % 7)))
    assert history.device(0, "trainer_cpu_percent")[-1] == 100.0
    assert history.device(0, "dataloader_cpu_percent")[-3:] == [2 * float(i % 7) for i in range(197, 200)]
    assert history.device(1, "trainer_cpu_percent")[-1] is None  # CPU unknown: missing, never 0
    assert history.device(1, "dataloader_cpu_percent")[-1] == 0.0  # known to have no workers
    assert history.device(2, "dataloader_cpu_percent")[-1] is None  # worker count unknown
    assert history.device(3, "trainer_cpu_percent")[-1] is None  # no process at all
    for metric in DERIVED_DEVICE_METRICS:
        assert len(history.device(0, metric)) == 50
