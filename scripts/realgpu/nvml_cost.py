"""Cost of NVML on the real driver: each call gpusight makes, timed alone, and one NvmlBackend poll, timed call by call.

Usage: ``python scripts/realgpu/nvml_cost.py OUT.json [REPEATS]``. Part 1 calls each pynvml function
``REPEATS`` times (default 200; the 20 ms PCIe throughput call 10 times) on GPU 0 and keeps the
median and 90th percentile. Part 2 wraps every public pynvml function with a timer and polls
``gpusight.backends.nvml.backend.NvmlBackend`` ``REPEATS`` times, 0.12 s apart (so GPM samples on every poll),
giving the time per call type inside real polls and the time of a whole poll.
"""

from __future__ import annotations

import functools
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pynvml


def _summary(samples_ns: list[int], errors: dict[str, int]) -> dict[str, Any]:
    ordered = sorted(samples_ns)
    if not ordered:
        return {"calls": 0, "errors": errors}
    return {
        "calls": len(ordered),
        "median_us": statistics.median(ordered) / 1000,
        "p90_us": ordered[int(0.9 * (len(ordered) - 1))] / 1000,
        "mean_us": statistics.fmean(ordered) / 1000,
        "errors": errors,
    }


def time_call(fn: Callable[[], object], repeats: int) -> dict[str, Any]:
    """Median, p90 and mean of ``repeats`` calls of ``fn`` (after 3 warm-ups), and the NVML errors seen."""
    errors: dict[str, int] = defaultdict(int)
    samples = []
    for attempt in range(repeats + 3):
        start = time.perf_counter_ns()
        try:
            fn()
        except pynvml.NVMLError as error:
            errors[str(error)] += 1
        elapsed = time.perf_counter_ns() - start
        if attempt >= 3:
            samples.append(elapsed)
    return _summary(samples, dict(errors))


def isolated_calls(handle: Any, repeats: int) -> dict[str, Any]:
    """Each call on its own, in a tight loop."""
    p = pynvml
    fields = [197, 198, 83]
    calls: dict[str, Callable[[], object]] = {
        "nvmlDeviceGetUtilizationRates": lambda: p.nvmlDeviceGetUtilizationRates(handle),
        "nvmlDeviceGetMemoryInfo_v2": lambda: p.nvmlDeviceGetMemoryInfo(handle, version=p.nvmlMemory_v2),
        "nvmlDeviceGetMemoryInfo": lambda: p.nvmlDeviceGetMemoryInfo(handle),
        "nvmlDeviceGetPowerUsage": lambda: p.nvmlDeviceGetPowerUsage(handle),
        "nvmlDeviceGetFieldValues(197,198,83)": lambda: p.nvmlDeviceGetFieldValues(handle, fields),
        "nvmlDeviceGetFieldValues(197,198)": lambda: p.nvmlDeviceGetFieldValues(handle, fields[:2]),
        "nvmlDeviceGetFieldValues(83)": lambda: p.nvmlDeviceGetFieldValues(handle, fields[2:]),
        "nvmlDeviceGetTotalEnergyConsumption": lambda: p.nvmlDeviceGetTotalEnergyConsumption(handle),
        "nvmlDeviceGetTemperatureV": lambda: p.nvmlDeviceGetTemperatureV(handle, p.NVML_TEMPERATURE_GPU),
        "nvmlDeviceGetTemperature": lambda: p.nvmlDeviceGetTemperature(handle, p.NVML_TEMPERATURE_GPU),
        "nvmlDeviceGetFanSpeed": lambda: p.nvmlDeviceGetFanSpeed(handle),
        "nvmlDeviceGetClockInfo(SM)": lambda: p.nvmlDeviceGetClockInfo(handle, p.NVML_CLOCK_SM),
        "nvmlDeviceGetClockInfo(MEM)": lambda: p.nvmlDeviceGetClockInfo(handle, p.NVML_CLOCK_MEM),
        "nvmlDeviceGetPerformanceState": lambda: p.nvmlDeviceGetPerformanceState(handle),
        "nvmlDeviceGetCurrentClocksEventReasons": lambda: p.nvmlDeviceGetCurrentClocksEventReasons(handle),
        "nvmlDeviceGetEnforcedPowerLimit": lambda: p.nvmlDeviceGetEnforcedPowerLimit(handle),
        "nvmlDeviceGetEccMode": lambda: p.nvmlDeviceGetEccMode(handle),
        "nvmlDeviceGetTotalEccErrors": lambda: p.nvmlDeviceGetTotalEccErrors(
            handle, p.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, p.NVML_VOLATILE_ECC),
        "nvmlDeviceGetMigMode": lambda: p.nvmlDeviceGetMigMode(handle),
        "nvmlDeviceGetCudaComputeCapability": lambda: p.nvmlDeviceGetCudaComputeCapability(handle),
        "nvmlDeviceGetName": lambda: p.nvmlDeviceGetName(handle),
        "nvmlDeviceGetUUID": lambda: p.nvmlDeviceGetUUID(handle),
        "nvmlDeviceGetComputeRunningProcesses_v3": lambda: p.nvmlDeviceGetComputeRunningProcesses_v3(handle),
        "nvmlDeviceGetGraphicsRunningProcesses_v3": lambda: p.nvmlDeviceGetGraphicsRunningProcesses_v3(handle),
        "nvmlDeviceGetProcessUtilization(last 1 s)": lambda: p.nvmlDeviceGetProcessUtilization(
            handle, int((time.time() - 1.0) * 1e6)),
        "nvmlGpmQueryDeviceSupport": lambda: p.nvmlGpmQueryDeviceSupport(handle),
    }
    results = {name: time_call(fn, repeats) for name, fn in calls.items()}
    results["nvmlDeviceGetPcieThroughput(TX)"] = time_call(
        lambda: p.nvmlDeviceGetPcieThroughput(handle, p.NVML_PCIE_UTIL_TX_BYTES), 10)
    results.update(_gpm_calls(handle, repeats))
    return results


def _gpm_calls(handle: Any, repeats: int) -> dict[str, Any]:
    """nvmlGpmSampleGet and nvmlGpmMetricsGet (six metrics, as gpusight asks) timed alone."""
    p = pynvml
    try:
        if not p.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice:
            return {"gpm": {"supported": False}}
        samples = [p.nvmlGpmSampleAlloc(), p.nvmlGpmSampleAlloc()]
    except p.NVMLError as error:
        return {"gpm": {"error": str(error)}}
    result = {"nvmlGpmSampleGet": time_call(lambda: p.nvmlGpmSampleGet(handle, samples[0]), repeats)}
    time.sleep(0.15)
    p.nvmlGpmSampleGet(handle, samples[1])

    def metrics() -> None:
        request = p.c_nvmlGpmMetricsGet_t()
        request.version = p.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = 6
        request.sample1, request.sample2 = samples[0], samples[1]
        for slot, metric in enumerate((2, 3, 5, 10, 20, 21)):
            request.metrics[slot].metricId = metric
        p.nvmlGpmMetricsGet(request)

    result["nvmlGpmMetricsGet(6 metrics)"] = time_call(metrics, repeats)
    for sample in samples:
        p.nvmlGpmSampleFree(sample)
    return result


def timed_polls(repeats: int) -> dict[str, Any]:
    """Poll NvmlBackend ``repeats`` times with every public pynvml function timed (outermost calls only)."""
    from gpusight.backends.host.source import HostSource
    from gpusight.backends.nvml.backend import NvmlBackend

    per_call: dict[str, list[int]] = defaultdict(list)
    depth = [0]

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            start = time.perf_counter_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    per_call[name].append(time.perf_counter_ns() - start)
        return wrapper

    originals = {name: value for name, value in vars(pynvml).items() if name.startswith("nvml") and callable(value)}
    for name, fn in originals.items():
        setattr(pynvml, name, timed(name, fn))
    source = NvmlBackend()
    host = HostSource()
    source.poll()
    per_call.clear()
    polls, host_polls = [], []
    try:
        for _ in range(repeats):
            start = time.perf_counter_ns()
            reading = source.poll()
            middle = time.perf_counter_ns()
            host.poll(reading.processes)
            polls.append(middle - start)
            host_polls.append(time.perf_counter_ns() - middle)
            time.sleep(0.12)
    finally:
        source.close()
        host.close()
        for name, fn in originals.items():
            setattr(pynvml, name, fn)
    calls = {name: {**_summary(samples, {}), "per_poll": len(samples) / repeats}
             for name, samples in sorted(per_call.items())}
    return {
        "nvml_poll": _summary(polls, {}),
        "host_poll": _summary(host_polls, {}),
        "calls": calls,
        "errors_last_poll": [f"{e.scope}: {e.message}" for e in reading.errors],
        "processes_last_poll": len(reading.processes),
    }


def main(argv: list[str]) -> int:
    """Write both parts to the JSON file named on the command line."""
    out = argv[1]
    repeats = int(argv[2]) if len(argv) > 2 else 200
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    report: dict[str, Any] = {
        "driver": pynvml.nvmlSystemGetDriverVersion(),
        "name": pynvml.nvmlDeviceGetName(handle),
        "pynvml": getattr(pynvml, "__version__", None),
        "isolated": isolated_calls(handle, repeats),
    }
    pynvml.nvmlShutdown()
    report["in_poll"] = timed_polls(repeats)
    with open(out, "w", encoding="utf-8") as stream:
        json.dump(report, stream, indent=2)
    poll = report["in_poll"]["nvml_poll"]
    print(f"nvml_cost: NvmlBackend.poll median {poll.get('median_us', 0):.0f} us over {poll.get('calls')} polls")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
