"""Which unit nvmlDeviceGetPcieThroughput's "KB/s" is: compared with the byte counters and GPM under a steady copy.

Usage: ``python scripts/realgpu/pcie_units.py OUT.json``. A child process copies a 256 MiB pinned
buffer to the GPU (then back) in a loop; meanwhile, for each direction, the cumulative byte counters
(fields 197/198) and a GPM sample are taken before and after twenty throughput calls, so all three
sources cover the same steady traffic.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

import pynvml

COPY = """
import sys, time, torch
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 6.0
host = torch.empty(256 << 20, dtype=torch.uint8).pin_memory()
device = torch.empty_like(host, device="cuda")
for direction in ("h2d", "d2h"):
    print(direction, flush=True)
    end = time.time() + seconds
    while time.time() < end:
        (device.copy_(host, non_blocking=True) if direction == "h2d" else host.copy_(device, non_blocking=True))
        torch.cuda.synchronize()
"""
"""A program copying a pinned 256 MiB buffer host-to-device, then device-to-host, ``argv[1]`` seconds each
(6 by default), printing each direction's name as it starts."""


def counters(handle: object) -> dict[int, tuple[int, float]]:
    """Fields 197 (TX) and 198 (RX): value and the driver's timestamp in seconds."""
    values = pynvml.nvmlDeviceGetFieldValues(handle, [197, 198])
    return {int(v.fieldId): (int(v.value.ullVal), v.timestamp / 1e6) for v in values}


def gpm_pcie(handle: object, first: object, second: object) -> dict[str, float]:
    """GPM PCIe TX/RX in MiB/s between two samples."""
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = 2
    request.sample1, request.sample2 = first, second
    request.metrics[0].metricId, request.metrics[1].metricId = 20, 21
    pynvml.nvmlGpmMetricsGet(request)
    return {"gpm_tx_mib_s": request.metrics[0].value, "gpm_rx_mib_s": request.metrics[1].value}


def measure(handle: object, samples: list[object]) -> dict[str, float]:
    """Counter rates, mean throughput readings and GPM rates over the same ~1 s."""
    before = counters(handle)
    pynvml.nvmlGpmSampleGet(handle, samples[0])
    tx = [pynvml.nvmlDeviceGetPcieThroughput(handle, pynvml.NVML_PCIE_UTIL_TX_BYTES) for _ in range(20)]
    rx = [pynvml.nvmlDeviceGetPcieThroughput(handle, pynvml.NVML_PCIE_UTIL_RX_BYTES) for _ in range(20)]
    pynvml.nvmlGpmSampleGet(handle, samples[1])
    after = counters(handle)
    rates = {}
    for field, name in ((197, "counter_tx_bytes_s"), (198, "counter_rx_bytes_s")):
        (v0, t0), (v1, t1) = before[field], after[field]
        rates[name] = (v1 - v0) / (t1 - t0)
    return {**rates, "throughput_tx_kb_s": statistics.fmean(tx), "throughput_rx_kb_s": statistics.fmean(rx),
            **gpm_pcie(handle, samples[0], samples[1])}


def main(argv: list[str]) -> int:
    """Run the copy child and write the measurements to the JSON file named on the command line."""
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    samples = [pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()]
    child = subprocess.Popen([sys.executable, "-c", COPY], stdout=subprocess.PIPE, text=True)
    results = {}
    for _ in range(2):
        direction = child.stdout.readline().strip() if child.stdout else ""
        time.sleep(2.0)
        results[direction] = [measure(handle, samples) for _ in range(3)]
    child.wait(30)
    with open(argv[1], "w", encoding="utf-8") as stream:
        json.dump(results, stream, indent=1)
    for direction, runs in results.items():
        print(direction, json.dumps(runs[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
