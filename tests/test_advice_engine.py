"""The advice engine: hysteresis without flicker, ordering by severity, determinism, window bookkeeping."""

from __future__ import annotations

import itertools
import random

from gpusight.advice.config import Thresholds
from gpusight.advice.context import Context
from gpusight.advice.engine import SEVERITY_RANK, AdviceEngine
from gpusight.sampling.history import History
from gpusight.snapshot.model import (
    DeviceSample,
    HostSample,
    ProcessRole,
    ProcessSample,
    Snapshot,
)

GIB = 2**30
HZ = 4
T0 = 1_700_000_000.0


def device(index=0, util=95.0, used=40.0, **fields) -> DeviceSample:
    return DeviceSample(index=index, utilization_gpu_percent=util, memory_used_bytes=int(used * GIB), memory_total_bytes=80 * GIB, **fields)


def proc(pid=100, dev=0, **fields) -> ProcessSample:
    fields.setdefault("cpu_percent", 60.0)
    fields.setdefault("num_workers", 4)
    fields.setdefault("gpu_memory_bytes", 30 * GIB)
    fields.setdefault("user", "alice")
    return ProcessSample(pid=pid, device_index=dev, **fields)


def snap(t, devices, processes=(), iowait=1.0) -> Snapshot:
    cores = (100.0,) * 4 + (3.0,) * 12
    return Snapshot(T0 + t, "demo", HostSample(cpu_percent_per_core=cores, iowait_percent=iowait), devices=tuple(devices), processes=tuple(processes))


def drive(frames, engine=None):
    """Feed snapshots through History + engine; return the advice after each."""
    history, engine = History(), engine or AdviceEngine()
    out = []
    for s in frames:
        history.append(s)
        out.append(engine(s, history))
    return out


def presence(outputs, advice_id):
    return [any(a.id == advice_id for a in advice) for advice in outputs]


def transitions(flags):
    return sum(1 for a, b in itertools.pairwise(flags) if a != b)


def throttled_at(step: int) -> bool:
    """Throttle reason on for 3 polls, off for 2, over and over, until 60 s; then off for good."""
    return step < 60 * HZ and step % 5 < 3


def throttle_frames(steps):
    for step in range(steps):
        reasons = ("hw_thermal",) if throttled_at(step) else ()
        yield snap(step / HZ, [device(throttle_reasons=reasons, clock_sm_mhz=1500)], [proc()])


def test_oscillating_condition_appears_once_stays_and_clears_after_the_clear_window():
    t = Thresholds()
    outputs = drive(throttle_frames(100 * HZ))
    flags = presence(outputs, "throttling:gpu0")
    assert transitions(flags) == 2  # appears once, clears once: no flicker
    first_on = flags.index(True)
    assert first_on / HZ >= t.throttle_hold_s
    last_true_step = max(s for s in range(len(flags)) if throttled_at(s))
    first_off = flags.index(False, first_on)
    assert (first_off - last_true_step) / HZ == t.clear_s


def test_a_condition_shorter_than_its_hold_never_shows():
    frames = [snap(s / HZ, [device(throttle_reasons=("hw_thermal",) if s < 10 * HZ else ())], [proc()]) for s in range(40 * HZ)]
    assert not any(presence(drive(frames), "throttling:gpu0"))


def test_a_rare_condition_does_not_accumulate_into_advice():
    """True on one poll in five for minutes: never held, never shown."""
    frames = [snap(s / HZ, [device(throttle_reasons=("hw_thermal",) if s % 5 == 0 else ())], [proc()]) for s in range(120 * HZ)]
    assert not any(presence(drive(frames), "throttling:gpu0"))


def test_window_means_ride_out_a_utilization_signal_around_the_threshold():
    """Utilization swinging 30 % / 70 % around the 50 % line every few polls: under-used advice never flickers."""
    frames = []
    for s in range(120 * HZ):
        util = 30.0 if (s // 3) % 2 == 0 else 66.0
        workers = [ProcessSample(pid=1000 + k, role=ProcessRole.DATALOADER_WORKER, device_index=0, trainer_pid=100, cpu_percent=20.0) for k in range(4)]
        frames.append(snap(s / HZ, [device(util=util)], [proc(cpu_percent=40.0), *workers]))
    flags = presence(drive(frames), "gpu_underused:gpu0")
    assert transitions(flags) == 1 and flags[-1]


def test_advice_is_ordered_by_severity_then_scope():
    frames = [
        snap(
            s / HZ,
            [
                device(0, util=92.0),
                device(1, util=95.0, throttle_reasons=("hw_thermal",)),
                device(2, util=0.0, used=0.2),
                device(3, util=20.0),
            ],
            [proc(100, 0), proc(101, 1, user="bob"), proc(103, 3, cpu_percent=20.0, num_workers=0, user="carol")],
            iowait=30.0,
        )
        for s in range(60 * HZ)
    ]
    advice = drive(frames)[-1]
    ids = [a.id for a in advice]
    # the all-clear "healthy" comes after the info advice that asks for something, whatever its scope
    assert ids == ["storage_bound:host", "throttling:gpu1", "free_capacity:gpu2", "healthy:gpu0"]
    ranks = [SEVERITY_RANK[a.severity] for a in advice]
    assert ranks == sorted(ranks)


def test_pid_scopes_sort_numerically_after_gpus():
    frames = [
        snap(
            s / HZ,
            [device(0, util=0.0, used=20.0), device(1, util=0.0, used=20.0)],
            [proc(900, 0, cpu_percent=0.0, num_workers=0), proc(10000, 1, cpu_percent=0.0, num_workers=0)],
        )
        for s in range(130 * HZ)
    ]
    ids = [a.id for a in drive(frames)[-1]]
    assert ids == ["idle_holding:pid900", "idle_holding:pid10000"]


def _mixed_frames(seed):
    rng = random.Random(seed)
    frames = []
    for s in range(90 * HZ):
        devices = [
            device(0, util=rng.uniform(10, 40), used=8.0, sm_active_percent=rng.uniform(50, 90), tensor_active_percent=0.5, compute_capability=(9, 0)),
            device(1, util=rng.uniform(80, 100), throttle_reasons=("sw_power_cap",) if rng.random() < 0.7 else ()),
            device(2, util=rng.uniform(0, 2), used=1.0),
        ]
        processes = [proc(100, 0, cpu_percent=rng.uniform(20, 100)), proc(101, 1, ppid=7), proc(102, 2, cpu_percent=0.0, num_workers=0, ppid=7)]
        processes += [ProcessSample(pid=500 + k, role=ProcessRole.DATALOADER_WORKER, device_index=0, trainer_pid=100, cpu_percent=rng.uniform(60, 100)) for k in range(4)]
        rng.shuffle(processes)
        frames.append(snap(s / HZ, devices, processes, iowait=rng.uniform(0, 15)))
    return frames


def test_engine_is_deterministic_and_ignores_process_order():
    first = drive(_mixed_frames(1))
    assert drive(_mixed_frames(1)) == first
    shuffled = []
    for f in _mixed_frames(1):
        processes = list(f.processes)
        random.Random(f.timestamp).shuffle(processes)
        shuffled.append(Snapshot(f.timestamp, f.source, f.host, devices=f.devices, processes=tuple(processes)))
    assert drive(shuffled) == first
    assert any(first[-1])


def test_time_going_backwards_forgets_hysteresis_state():
    engine, history = AdviceEngine(), History()
    for s in range(40 * HZ):
        frame = snap(s / HZ, [device(util=92.0)], [proc()])
        history.append(frame)
        advice = engine(frame, history)
    assert [a.id for a in advice] == ["healthy:gpu0"]
    history = History()
    frame = snap(0.0, [device(util=92.0)], [proc()])
    history.append(frame)
    assert engine(frame, history) == ()


def test_healthy_yields_only_to_advice_on_the_same_gpu():
    frames = [snap(s / HZ, [device(0, util=92.0), device(1, util=92.0, throttle_reasons=("hw_thermal",))], [proc(100, 0), proc(101, 1)]) for s in range(60 * HZ)]
    ids = {a.id for a in drive(frames)[-1]}
    assert "healthy:gpu0" in ids and "throttling:gpu1" in ids and "healthy:gpu1" not in ids


def test_window_sample_count_matches_the_history():
    """The engine's bounded look-back agrees with History.samples_within on irregular timestamps."""
    rng = random.Random(3)
    history = History(capacity=500)
    t = T0
    for _ in range(1200):
        t += rng.choice((0.1, 0.25, 0.5, 2.0))
        history.append(Snapshot(t, "demo"))
        for seconds in (1.0, 30.0, 120.0, 10_000.0):
            ctx = Context(Snapshot(t, "demo"), history, Thresholds())
            assert ctx.samples_within(seconds) == history.samples_within(seconds)


def _finding(rule, scope, devices, severity="warn"):
    from gpusight.advice.context import Finding
    from gpusight.snapshot.model import Advice

    return Finding(Advice(f"{rule}:{scope}", severity, scope, rule, "", ""), frozenset(devices))


def test_one_verdict_per_gpu_by_precedence_and_no_tuning_where_the_gpu_waits_outside():
    from gpusight.advice.verdict import consistent

    findings = [
        _finding("gpu_underused", "gpu0", {0}),  # storage-bound GPU: dropped
        _finding("batch_headroom", "gpu0", {0}, "info"),  # tuning on a storage-bound GPU: dropped
        _finding("storage_bound", "host", {0}),
        _finding("gpu_underused", "gpu1", {1}),  # covered by heavy copies: dropped
        _finding("pcie_h2d", "gpu1", {1}),
        _finding("launch_bound", "gpu2", {2}),
        _finding("batch_headroom", "gpu2", {2}, "info"),  # launch-bound GPU waits on nothing outside: kept
        _finding("straggler", "job3", {3, 4, 5}),
        _finding("input_bound", "gpu5", {5}),  # the slow rank's own story: kept, straggler too (not all covered)
        _finding("imbalance", "job3", {3, 4, 5}),  # same GPUs as the straggler: dropped
        _finding("mixed_precision", "gpu4", {4}, "info"),  # straggler-held GPU: dropped
        _finding("throttling", "gpu4", {4}),  # not a bottleneck verdict: kept
    ]
    kept = [f.advice.id for f in consistent(findings)]
    assert kept == [
        "storage_bound:host",
        "pcie_h2d:gpu1",
        "launch_bound:gpu2",
        "batch_headroom:gpu2",
        "straggler:job3",
        "input_bound:gpu5",
        "throttling:gpu4",
    ]


def test_a_contradicted_finding_builds_no_hold_and_appears_only_after_the_contradiction_ends():
    """A storage-bound GPU with spare memory: batch_headroom never shows while iowait is high; once storage is
    fixed, it needs its own full hold time before it appears."""
    t = Thresholds()

    def frame(s):
        iowait = 30.0 if s < 60 * HZ else 1.0
        workers = [ProcessSample(pid=1000 + k, role=ProcessRole.DATALOADER_WORKER, device_index=0, trainer_pid=100, cpu_percent=10.0) for k in range(4)]
        return snap(s / HZ, [device(util=30.0, used=8.0)], [proc(cpu_percent=20.0, gpu_memory_bytes=8 * GIB), *workers], iowait=iowait)

    outputs = drive(frame(s) for s in range(120 * HZ))
    headroom = presence(outputs, "batch_headroom:gpu0")
    storage = presence(outputs, "storage_bound:host")
    assert any(storage) and not any(h and s for h, s in zip(headroom, storage, strict=True))
    first = headroom.index(True)
    last_storage = max(i for i, shown in enumerate(storage) if shown)
    condition_ended = last_storage / HZ - t.clear_s  # storage advice stays clear_s after its condition ends
    assert first / HZ >= condition_ended + t.hold_s - 1 / HZ
