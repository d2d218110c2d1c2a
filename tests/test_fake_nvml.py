"""The fake libnvidia-ml.so.1 itself, driven through the real pynvml: the contract other tests rely on."""

from __future__ import annotations

import ctypes
import threading
import time

import pytest

from support.fake_nvml import (
    DRIVER_NOT_LOADED,
    NO_PERMISSION,
    NOT_SUPPORTED,
    FakeGpu,
    FakeMig,
    FakeScenario,
    Sine,
    Square,
    build_fake_nvml,
)

EPOCH_MS = 1_700_000_000_000
"""The fake's waves count time from here (milliseconds since the Unix epoch)."""

HALF_MS = 600_000.0
"""Ten minutes: each half of the slow square waves below, so a test sits in one half whatever its speed."""


def wave_clock_ms() -> float:
    """Now on the fake's wave clock."""
    return time.time() * 1000 - EPOCH_MS


def slow_square(high: float, low: float, on: bool) -> Square:
    """A square wave of ten-minute halves that is one second into its ``high`` (on) or ``low`` half now."""
    into = 1000.0 if on else HALF_MS + 1000.0
    return Square(high, low, HALF_MS, HALF_MS, phase_ms=wave_clock_ms() - into)


def sm_active_between(nvml, first, second) -> float:
    """GPM metric 2 (SM activity) between two samples, through nvmlGpmMetricsGet."""
    request = nvml.c_nvmlGpmMetricsGet_t()
    request.version = nvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = 1
    request.sample1, request.sample2 = first, second
    request.metrics[0].metricId = 2
    nvml.nvmlGpmMetricsGet(request)
    return request.metrics[0].value


def test_build_is_cached_and_named_like_the_real_library(fake_nvml_lib):
    assert build_fake_nvml() == fake_nvml_lib
    assert fake_nvml_lib.name == "libnvidia-ml.so.1"


def test_without_a_scenario_init_says_driver_not_loaded(fake_pynvml, monkeypatch):
    monkeypatch.delenv("FAKE_NVML_SCENARIO")

    with pytest.raises(fake_pynvml.NVMLError) as error:
        fake_pynvml.nvmlInit()

    assert error.value.value == DRIVER_NOT_LOADED


def test_plain_library_name_resolves_to_the_fake_in_this_process(fake_nvml_lib):
    library = ctypes.CDLL("libnvidia-ml.so.1")

    assert library._handle == ctypes.CDLL(str(fake_nvml_lib))._handle


def test_versioned_structs_and_two_step_lists(fake_pynvml, nvml_scenario):
    nvml = fake_pynvml
    gpu = FakeGpu(mem_total=1000, mem_used=300, mem_reserved=100, compute_processes=[(11, 5), (12, None)],
                  process_samples=[(11, 40, 7, 100), (12, 1, 2, 50)])
    nvml_scenario.write(FakeScenario(gpus=[gpu]))
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)

    v2 = nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
    v1 = nvml.nvmlDeviceGetMemoryInfo(handle)
    procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    samples = nvml.nvmlDeviceGetProcessUtilization(handle, 60)
    with pytest.raises(nvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetProcessUtilization(handle, 100)

    assert (v2.total, v2.used, v2.reserved, v2.free) == (1000, 300, 100, 600)
    assert (v1.total, v1.used, v1.free) == (1000, 400, 600)
    assert [(p.pid, p.usedGpuMemory) for p in procs] == [(11, 5), (12, None)]
    assert [(s.pid, s.smUtil, s.memUtil, s.timeStamp) for s in samples] == [(11, 40, 7, 100)]
    assert nvml_scenario.count("nvmlDeviceGetComputeRunningProcesses_v3") == 2


def test_field_values_carry_a_return_code_each(fake_pynvml, nvml_scenario):
    nvml = fake_pynvml
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(pcie_tx_bytes=7, energy_mj=9, pcie_counter_time_us=123,
                                                   errors={"energy_field": NOT_SUPPORTED})]))
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)

    values = nvml.nvmlDeviceGetFieldValues(handle, [197, 198, 83])

    assert [(v.fieldId, v.nvmlReturn) for v in values] == [(197, 0), (198, NOT_SUPPORTED), (83, NOT_SUPPORTED)]
    assert (values[0].value.ullVal, values[0].timestamp) == (7, 123)


def test_gpm_metrics_between_two_samples(fake_pynvml, nvml_scenario):
    nvml = fake_pynvml
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(gpm_supported=1, gpm={2: 12.5})]))
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice == 1
    first, second = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
    nvml.nvmlGpmSampleGet(handle, first)
    nvml.nvmlGpmSampleGet(handle, second)
    request = nvml.c_nvmlGpmMetricsGet_t()
    request.version = nvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = 2
    request.sample1, request.sample2 = first, second
    request.metrics[0].metricId, request.metrics[1].metricId = 2, 3

    nvml.nvmlGpmMetricsGet(request)
    nvml.nvmlGpmSampleFree(first)
    nvml.nvmlGpmSampleFree(second)

    assert (request.metrics[0].nvmlReturn, request.metrics[0].value) == (0, 12.5)
    assert request.metrics[1].nvmlReturn == NOT_SUPPORTED


def test_lost_gpu_and_call_log_thread_ids(fake_pynvml, nvml_scenario):
    nvml = fake_pynvml
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(), FakeGpu(lost=True)]))
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    seen: list[int] = []

    def other_thread():
        seen.append(threading.get_native_id())
        nvml.nvmlDeviceGetUtilizationRates(handle)

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    with pytest.raises(nvml.NVMLError_GpuIsLost):
        nvml.nvmlDeviceGetHandleByIndex(1)

    calls = [c for c in nvml_scenario.calls() if c.symbol == "nvmlDeviceGetUtilizationRates"]
    assert [(c.device, c.thread_id) for c in calls] == [(0, seen[0])]


@pytest.mark.parametrize("on", [True, False])
def test_square_waves_follow_the_wall_clock_for_utilization_gpm_and_processes(fake_pynvml, nvml_scenario, on):
    nvml = fake_pynvml
    wave = slow_square(97, 3, on)
    gpu = FakeGpu(util_gpu=wave, util_mem=slow_square(40, 10, on), gpm_supported=1, gpm={2: slow_square(80.5, 1.5, on)},
                  live_process_samples=[(4321, 7, wave)])
    nvml_scenario.write(FakeScenario(gpus=[gpu]))
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)

    util = nvml.nvmlDeviceGetUtilizationRates(handle)
    first, second = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
    nvml.nvmlGpmSampleGet(handle, first)
    time.sleep(0.01)
    nvml.nvmlGpmSampleGet(handle, second)
    sm_active = sm_active_between(nvml, first, second)
    before_us = int(time.time() * 1e6)
    samples = nvml.nvmlDeviceGetProcessUtilization(handle, 0)
    again = nvml.nvmlDeviceGetProcessUtilization(handle, samples[0].timeStamp)

    assert (util.gpu, util.memory) == ((97, 40) if on else (3, 10))
    assert sm_active == (80.5 if on else 1.5)
    assert [(s.pid, s.smUtil, s.memUtil) for s in samples] == [(4321, 97 if on else 3, 7)]
    assert samples[0].timeStamp >= before_us
    assert again[0].timeStamp > samples[0].timeStamp  # a fresh sample each call


def test_sine_wave_at_its_peak_and_trough(fake_pynvml, nvml_scenario):
    nvml = fake_pynvml
    period = 10 * 86_400_000.0  # ten days: flat enough around the peak that rounding hides the test's duration
    now = wave_clock_ms()
    peak, trough = Sine(50, 40, period, phase_ms=now - period / 4), Sine(50, 40, period, phase_ms=now + period / 4)
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(util_gpu=peak), FakeGpu(util_gpu=trough)]))
    nvml.nvmlInit()

    values = [nvml.nvmlDeviceGetUtilizationRates(nvml.nvmlDeviceGetHandleByIndex(i)).gpu for i in (0, 1)]

    assert values == [90, 10]


def test_nvlink_counters_answer_all_links_in_kib_and_integrate_their_rates(fake_pynvml, nvml_scenario):
    nvml = fake_pynvml
    all_links = 0xFFFFFFFF
    gpus = [FakeGpu(nvlink_tx_kib=5_000, nvlink_rx_kib=9, errors={"nvlink_counters": 999}),
            FakeGpu(nvlink_tx_rate=slow_square(2e9, 0, on=True), nvlink_rx_rate=3e8, pcie_tx_rate=1e8,
                    pcie_rx_bytes=1)]
    nvml_scenario.write(FakeScenario(gpus=gpus))
    nvml.nvmlInit()
    static, moving = (nvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))

    failed = nvml.nvmlDeviceGetFieldValues(static, [(138, all_links), (139, 0), (197, 0)])
    first = nvml.nvmlDeviceGetFieldValues(moving, [(138, all_links), (139, all_links), (197, 0), (198, 0)])
    time.sleep(0.2)
    second = nvml.nvmlDeviceGetFieldValues(moving, [(138, all_links), (139, all_links), (197, 0), (198, 0)])

    assert [(v.fieldId, v.nvmlReturn) for v in failed] == [(138, 999), (139, 2), (197, NOT_SUPPORTED)]
    assert all(v.nvmlReturn == 0 for v in [*first, *second])
    elapsed = (second[0].timestamp - first[0].timestamp) / 1e6
    rates = [(b.value.ullVal - a.value.ullVal) / elapsed for a, b in zip(first, second, strict=True)]
    assert rates[0] == pytest.approx(2e9 / 1024, rel=0.02)  # KiB per second
    assert rates[1] == pytest.approx(3e8 / 1024, rel=0.02)
    assert rates[2] == pytest.approx(1e8, rel=0.02)  # PCIe counters count bytes
    assert (first[3].value.ullVal, rates[3]) == (1, 0.0)


def test_the_old_static_syntax_still_reads_exactly(fake_pynvml, nvml_scenario):
    nvml = fake_pynvml
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(throttle=0x48, energy_mj=2**62 + 3, util_gpu=87)]))
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)

    assert nvml.nvmlDeviceGetCurrentClocksEventReasons(handle) == 0x48
    assert nvml.nvmlDeviceGetTotalEnergyConsumption(handle) == 2**62 + 3
    assert nvml.nvmlDeviceGetUtilizationRates(handle).gpu == 87


def test_a_malformed_wave_leaves_the_key_out(fake_pynvml, nvml_scenario):
    nvml = fake_pynvml
    nvml_scenario.path.write_text("device 0 uuid GPU-x\ndevice 0 util_gpu square 100 0 0 0\ndevice 0 util_mem 5\n")
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)

    with pytest.raises(nvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetUtilizationRates(handle)


# ---- health and video engines ----

def test_health_counters_and_engines_answer_through_pynvml(fake_pynvml, nvml_scenario):
    from support.fake_nvml import FakeHealth

    health = FakeHealth(ecc_corrected=4, ecc_corrected_aggregate=40, ecc_uncorrected_aggregate=2, remap_corrected=5,
                        remap_uncorrected=1, remap_pending=1, pcie_gen=3, pcie_width=8, pcie_replay=9,
                        enc_util=Square(80, 80, 1000, 1000), dec_util=97, jpg_util=None)
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(ecc_uncorrected=1, health=health)]))
    p = fake_pynvml
    p.nvmlInit()
    h = p.nvmlDeviceGetHandleByIndex(0)

    ecc = [p.nvmlDeviceGetTotalEccErrors(h, error, counter) for error in (0, 1) for counter in (0, 1)]
    assert ecc == [4, 40, 1, 2]
    assert p.nvmlDeviceGetRemappedRows(h) == (5, 1, 1, 0)
    link = (p.nvmlDeviceGetCurrPcieLinkGeneration(h), p.nvmlDeviceGetMaxPcieLinkGeneration(h),
            p.nvmlDeviceGetCurrPcieLinkWidth(h), p.nvmlDeviceGetMaxPcieLinkWidth(h))
    assert link == (3, 5, 8, 16) and p.nvmlDeviceGetPcieReplayCounter(h) == 9
    assert p.nvmlDeviceGetEncoderUtilization(h) == [80, 167000]
    assert p.nvmlDeviceGetDecoderUtilization(h) == [97, 167000]
    for call in (p.nvmlDeviceGetJpgUtilization, p.nvmlDeviceGetRetiredPagesPendingStatus):
        with pytest.raises(p.NVMLError) as error:
            call(h)
        assert error.value.value == NOT_SUPPORTED
    with pytest.raises(p.NVMLError):
        p.nvmlDeviceGetRetiredPages(h, 0)  # A100 and later remap rows instead


def test_retired_pages_two_step_list_and_nvlink_error_fields(fake_pynvml, nvml_scenario):
    from support.fake_nvml import FakeHealth

    health = FakeHealth(remap_corrected=None, retired_sbe=3, retired_dbe=1, retired_pending=1, nvlink_crc_flit=7)
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(health=health)]))
    p = fake_pynvml
    p.nvmlInit()
    h = p.nvmlDeviceGetHandleByIndex(0)

    assert len(p.nvmlDeviceGetRetiredPages(h, 0)) == 3 and len(p.nvmlDeviceGetRetiredPages(h, 1)) == 1
    assert p.nvmlDeviceGetRetiredPagesPendingStatus(h) == 1
    flit, data = p.nvmlDeviceGetFieldValues(h, [38, 45])
    assert (flit.nvmlReturn, flit.value.ullVal, data.nvmlReturn) == (0, 7, NOT_SUPPORTED)


def test_xid_events_are_delivered_once_per_event_set_with_their_instance(fake_pynvml, nvml_scenario):
    from support.fake_nvml import FakeHealth

    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(), FakeGpu()]))
    p = fake_pynvml
    p.nvmlInit()
    handles = [p.nvmlDeviceGetHandleByIndex(i) for i in range(2)]
    assert p.nvmlDeviceGetSupportedEventTypes(handles[0]) == p.nvmlEventTypeXidCriticalError
    sets = [p.nvmlEventSetCreate() for _ in range(2)]
    for event_set in sets:
        for handle in handles:
            p.nvmlDeviceRegisterEvents(handle, p.nvmlEventTypeXidCriticalError, event_set)
    with pytest.raises(p.NVMLError) as error:
        p.nvmlEventSetWait_v2(sets[0], 30)
    assert error.value.value == p.NVML_ERROR_TIMEOUT

    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(), FakeGpu(health=FakeHealth(xids=[(1, 48, 2, 1)]))]))
    data = p.nvmlEventSetWait_v2(sets[0], 1000)

    assert (data.eventType, data.eventData, data.gpuInstanceId, data.computeInstanceId) == (8, 48, 2, 1)
    assert ctypes.addressof(data.device.contents) == ctypes.addressof(handles[1].contents)
    with pytest.raises(p.NVMLError):
        p.nvmlEventSetWait_v2(sets[0], 30)  # delivered once to this set ...
    assert p.nvmlEventSetWait_v2(sets[1], 30).eventData == 48  # ... and once to the other
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(lost=True), FakeGpu()]))
    with pytest.raises(p.NVMLError) as error:
        p.nvmlEventSetWait_v2(sets[1], 30)
    assert error.value.value == p.NVML_ERROR_GPU_IS_LOST
    for event_set in sets:
        p.nvmlEventSetFree(event_set)
# ---- MIG ----

def _mig_gpu() -> FakeGpu:
    return FakeGpu(mig_mode=1, util_gpu=77, temp=50, gpm_supported=1, max_mig_devices=7, mig_devices={
        0: FakeMig(gpu_instance_id=2, compute_instance_id=0, uuid="MIG-aaaa", name="NVIDIA H100 80GB HBM3 MIG 3g.40gb",
                   mem_total=40192 << 20, mem_used=3 << 30, sm_count=60, slices=(3, 3, 40192),
                   compute_processes=[(501, 2 << 30)], gpm={2: 42.5}),
        2: FakeMig(gpu_instance_id=9, compute_instance_id=1, uuid="MIG-bbbb", name="NVIDIA H100 80GB HBM3 MIG 1g.10gb",
                   mem_total=9856 << 20, compute_processes=[(502, 1 << 30)], gpm={2: 7.0}),
    })


def _started_mig_parent(nvml, nvml_scenario):
    """NVML started on a scenario with ``_mig_gpu()``; the parent's handle."""
    nvml_scenario.write(FakeScenario(gpus=[_mig_gpu()]))
    nvml.nvmlInit()
    return nvml.nvmlDeviceGetHandleByIndex(0)


def test_mig_handles_are_distinct_and_map_back_to_their_parent(fake_pynvml, nvml_scenario):
    nvml = fake_pynvml
    parent = _started_mig_parent(nvml, nvml_scenario)

    assert nvml.nvmlDeviceGetMaxMigDeviceCount(parent) == 7
    first, third = (nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, i) for i in (0, 2))
    with pytest.raises(nvml.NVMLError) as empty:
        nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 1)

    assert empty.value.value == nvml.NVML_ERROR_NOT_FOUND
    assert len({ctypes.cast(h, ctypes.c_void_p).value for h in (parent, first, third)}) == 3
    assert (nvml.nvmlDeviceIsMigDeviceHandle(first).value, nvml.nvmlDeviceIsMigDeviceHandle(parent).value) == (1, 0)
    back = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(third)
    assert ctypes.cast(back, ctypes.c_void_p).value == ctypes.cast(parent, ctypes.c_void_p).value
    assert (nvml.nvmlDeviceGetGpuInstanceId(third), nvml.nvmlDeviceGetComputeInstanceId(third)) == (9, 1)
    assert (nvml.nvmlDeviceGetUUID(first), nvml.nvmlDeviceGetName(third)) == \
        ("MIG-aaaa", "NVIDIA H100 80GB HBM3 MIG 1g.10gb")
    memory = nvml.nvmlDeviceGetMemoryInfo(first)
    assert (memory.total, memory.used) == (40192 << 20, 3 << 30)
    attributes = nvml.nvmlDeviceGetAttributes_v2(first)
    assert (attributes.multiprocessorCount, attributes.gpuInstanceSliceCount, attributes.computeInstanceSliceCount,
            attributes.memorySizeMB) == (60, 3, 3, 40192)


def test_calls_fail_on_mig_as_the_driver_documents(fake_pynvml, nvml_scenario):
    nvml = fake_pynvml
    parent = _started_mig_parent(nvml, nvml_scenario)
    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 0)

    def code(call, *args):
        with pytest.raises(nvml.NVMLError) as failure:
            call(*args)
        return failure.value.value

    assert code(nvml.nvmlDeviceGetUtilizationRates, parent) == NOT_SUPPORTED
    assert code(nvml.nvmlDeviceGetUtilizationRates, mig) == NOT_SUPPORTED
    assert code(nvml.nvmlDeviceGetProcessUtilization, parent, 0) == NOT_SUPPORTED
    assert code(nvml.nvmlDeviceGetTemperature, mig, nvml.NVML_TEMPERATURE_GPU) == NOT_SUPPORTED
    assert code(nvml.nvmlDeviceGetPowerUsage, mig) == NOT_SUPPORTED
    assert code(nvml.nvmlDeviceGetGpuInstanceId, parent) == NOT_SUPPORTED
    assert nvml.nvmlDeviceGetTemperature(parent, nvml.NVML_TEMPERATURE_GPU) == 50  # whole-GPU readings stay the parent's


def test_process_lists_on_a_mig_parent_and_its_mig_devices(fake_pynvml, nvml_scenario):
    nvml = fake_pynvml
    parent = _started_mig_parent(nvml, nvml_scenario)
    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 2)

    aggregate = nvml.nvmlDeviceGetComputeRunningProcesses(parent)
    own = nvml.nvmlDeviceGetComputeRunningProcesses(mig)

    assert [(p.pid, p.gpuInstanceId, p.computeInstanceId) for p in aggregate] == [(501, 2, 0), (502, 9, 1)]
    assert [(p.pid, p.usedGpuMemory, p.gpuInstanceId) for p in own] == [(502, 1 << 30, 9)]
    gpu = _mig_gpu()
    gpu.errors = {"compute_procs": NO_PERMISSION}  # an unprivileged user
    nvml_scenario.write(FakeScenario(gpus=[gpu]))
    with pytest.raises(nvml.NVMLError) as refused:
        nvml.nvmlDeviceGetComputeRunningProcesses(parent)
    assert refused.value.value == NO_PERMISSION
    assert [p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(mig)] == [502]


def test_gpm_samples_one_gpu_instance(fake_pynvml, nvml_scenario):
    nvml = fake_pynvml
    parent = _started_mig_parent(nvml, nvml_scenario)
    samples = [nvml.nvmlGpmSampleAlloc() for _ in range(3)]
    nvml.nvmlGpmMigSampleGet(parent, 9, samples[0])
    nvml.nvmlGpmMigSampleGet(parent, 9, samples[1])
    nvml.nvmlGpmMigSampleGet(parent, 2, samples[2])

    assert sm_active_between(nvml, samples[0], samples[1]) == 7.0
    with pytest.raises(nvml.NVMLError):  # two samples of different GPU instances
        sm_active_between(nvml, samples[1], samples[2])
    with pytest.raises(nvml.NVMLError) as unknown:
        nvml.nvmlGpmMigSampleGet(parent, 5, samples[0])
    assert unknown.value.value == nvml.NVML_ERROR_INVALID_ARGUMENT
    for sample in samples:
        nvml.nvmlGpmSampleFree(sample)
