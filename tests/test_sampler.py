"""The sampler thread: cadence without overlap, pause, interval changes, faults that must not kill it, and a
stop that neither waits on nor closes the source under a poll that blocks (a hung NVML call)."""

import threading
import time

from gpusight.backends.live import LiveSource
from gpusight.sampling.history import History
from gpusight.sampling.sampler import MIN_INTERVAL, Sampler, clamp_interval
from gpusight.snapshot.model import Advice, DeviceSample, Snapshot
from support.fake_nvml import FakeGpu, FakeScenario


class CountingSource:
    """A source that records how many polls run at once and can be made slow or faulty."""

    kind = "demo"

    def __init__(self, delay=0.0, fail_on=()):
        self.delay = delay
        self.fail_on = set(fail_on)
        self.calls = 0
        self.active = 0
        self.max_active = 0
        self.closed = False
        self.active_at_close = None
        self._lock = threading.Lock()

    def poll(self):
        with self._lock:
            self.calls += 1
            call = self.calls
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            if call in self.fail_on:
                raise RuntimeError("boom")
            time.sleep(self.delay)
            return Snapshot(timestamp=time.time(), source="demo", devices=(DeviceSample(index=0, utilization_gpu_percent=float(call)),))
        finally:
            with self._lock:
                self.active -= 1

    def close(self):
        self.active_at_close = self.active
        self.closed = True


def wait_for(predicate, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_slow_polls_never_overlap_and_every_snapshot_reaches_subscribers():
    source = CountingSource(delay=0.15)
    sampler = Sampler(source, interval=0.1)
    received = []
    sampler.subscribe(lambda frame: received.append(frame.snapshot))
    sampler.start()
    assert wait_for(lambda: len(received) >= 5)
    sampler.stop()
    assert wait_for(lambda: source.closed)
    assert source.max_active == 1
    assert [s.devices[0].utilization_gpu_percent for s in received] == sorted(s.devices[0].utilization_gpu_percent for s in received)
    assert len(sampler.history) == source.calls


def test_pause_stops_polling_and_resume_restarts_it():
    source = CountingSource()
    sampler = Sampler(source, interval=0.1)
    sampler.start()
    assert wait_for(lambda: source.calls >= 2)
    sampler.pause()
    time.sleep(0.15)  # let an in-flight wait finish
    paused_at = source.calls
    time.sleep(0.5)
    assert source.calls <= paused_at + 1
    assert sampler.paused
    sampler.resume()
    assert wait_for(lambda: source.calls >= paused_at + 3)
    sampler.stop()


def test_interval_is_clamped_to_the_minimum():
    sampler = Sampler(CountingSource(), interval=0.01)
    assert sampler.interval == MIN_INTERVAL
    assert sampler.set_interval(2.0) == 2.0
    assert clamp_interval(0.0) == MIN_INTERVAL


def test_a_source_exception_becomes_an_error_note_and_sampling_goes_on():
    source = CountingSource(fail_on={1})
    sampler = Sampler(source, interval=0.1)
    first = sampler.poll_once()
    second = sampler.poll_once()
    assert first.errors and "RuntimeError: boom" in first.errors[0].message
    assert first.errors[0].scope == "sampler"
    assert second.errors == ()
    assert second.devices[0].utilization_gpu_percent == 2.0


def test_advice_is_computed_from_history_that_includes_the_new_snapshot():
    seen = []

    def advisor(snapshot, history):
        seen.append(len(history))
        return (Advice("x:gpu0", "info", "gpu0", "t", "e", "a"),)

    sampler = Sampler(CountingSource(), advisor=advisor)
    snap = sampler.poll_once()
    assert seen == [1]
    assert snap.advice[0].id == "x:gpu0"
    assert sampler.latest_frame.snapshot is snap


class BrokenRecorder:
    def __init__(self):
        self.writes = 0

    def write(self, snapshot):
        self.writes += 1
        raise OSError(28, "No space left on device")

    def close(self):
        pass


def test_a_failing_recorder_is_dropped_with_a_standing_error():
    recorder = BrokenRecorder()
    sampler = Sampler(CountingSource(), recorder=recorder, history=History(10))
    first = sampler.poll_once()
    second = sampler.poll_once()
    assert recorder.writes == 1
    assert sampler.recorder is None
    for snap in (first, second):
        assert any(e.scope == "record" and "No space left" in e.message for e in snap.errors)


def test_max_gap_tracks_the_longest_pause_between_polls():
    sampler = Sampler(CountingSource())
    sampler.poll_once()
    time.sleep(0.2)
    sampler.poll_once()
    assert sampler.max_gap >= 0.2


def test_stop_without_a_thread_closes_the_source_once():
    source = CountingSource()
    sampler = Sampler(source)
    sampler.poll_once()
    sampler.stop()
    assert source.closed
    source.closed = False
    sampler.stop()
    sampler.start()
    assert not source.closed
    assert not any(t.name == "gpusight-sampler" and t.is_alive() for t in threading.enumerate())


def test_stop_does_not_wait_for_a_slow_poll_and_the_thread_closes_the_source_after_it():
    source = CountingSource(delay=3.0)
    sampler = Sampler(source, interval=0.1)
    received = []
    sampler.subscribe(received.append)
    sampler.start()
    assert wait_for(lambda: source.active == 1)

    sampler.stop()

    assert source.active == 1 and not source.closed  # stop returned while the poll still runs
    assert wait_for(lambda: source.closed)
    assert source.active_at_close == 0
    assert received == []  # a poll that ends after stop is not published


def test_stop_during_a_blocked_nvml_call_returns_at_once_and_nvml_shuts_down_after_the_call(
        nvml_scenario, make_nvml_source):
    blocked_s = 1.5
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu()]))
    sampler = Sampler(LiveSource(gpu=make_nvml_source()), interval=0.1)
    sampler.poll_once()  # NVML started and the GPU attached
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu()], call_delay_ms=int(blocked_s * 1000)))
    sampler.start()
    assert wait_for(lambda: any(c.symbol.endswith(".delay") for c in nvml_scenario.calls()))
    blocked_at = time.monotonic()
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu()]))  # only the call already waiting blocks

    sampler.stop()

    assert time.monotonic() - blocked_at < blocked_s  # stop returned while the call still blocked
    assert nvml_scenario.count("nvmlShutdown") == 0
    assert wait_for(lambda: nvml_scenario.count("nvmlShutdown") == 1)
    calls = nvml_scenario.calls()
    assert calls[-1].symbol == "nvmlShutdown" and calls[-1].argument == 0  # nothing in flight, nothing after
