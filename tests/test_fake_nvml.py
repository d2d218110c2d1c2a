"""The fake libnvidia-ml.so.1 itself, driven through the real pynvml: the contract other tests rely on."""

from __future__ import annotations

import ctypes
import threading

import pytest

from support.fake_nvml import (
    DRIVER_NOT_LOADED,
    NOT_SUPPORTED,
    FakeGpu,
    FakeScenario,
    build_fake_nvml,
)


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
