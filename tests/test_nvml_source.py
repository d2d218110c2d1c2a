"""NvmlBackend against the fake libnvidia-ml.so.1 through the real pynvml: values, units, faults, threads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

from gpusight.backends.host.source import HostSource
from gpusight.backends.live import LiveSource
from gpusight.backends.nvml.backend import NvmlBackend
from gpusight.backends.nvml.device import ENERGY_PERIOD_S
from gpusight.backends.nvml.errors import LOST_MESSAGE
from gpusight.backends.nvml.processes import PROCESS_LIST_PERIOD_S, UTILIZATION_PERIOD_S
from gpusight.snapshot.model import DeviceHealth, DeviceSample, DriverInfo, ErrorNote, ProcessSample
from gpusight.snapshot.throttle import decode_throttle_reasons
from support.fake_nvml import (
    DRIVER_NOT_LOADED,
    FUNCTION_NOT_FOUND,
    GPU_IS_LOST,
    LIB_RM_VERSION_MISMATCH,
    NO_PERMISSION,
    NOT_SUPPORTED,
    TIMEOUT,
    UNKNOWN,
    FakeGpu,
    FakeHealth,
    FakeScenario,
    run_python_with_fake_nvml,
)

MIB = 1 << 20
PCIE_THREAD = "gpusight-nvml-pcie"


class ManualClock:
    """A monotonic clock the test moves by hand (for the init and lost-GPU retry intervals)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def wait_until(predicate, timeout=10.0, step=0.02):
    """Poll ``predicate`` until it returns a truthy value; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("condition not met in time")


@pytest.fixture
def children():
    """Start real sleeping child processes on demand; all are killed afterwards."""
    started: list[subprocess.Popen] = []

    def start(count: int) -> list[int]:
        for _ in range(count):
            started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]))
        return [p.pid for p in started[-count:]]

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def test_scenario_values_come_out_exactly_in_gpusight_units(nvml_scenario, make_nvml_source):
    gpu = FakeGpu(name="NVIDIA H100 80GB HBM3", uuid="GPU-abc", pci_bus_id="00000000:3B:00.0", minor=5, util_gpu=87, util_mem=31, mem_total=81559 * MIB,
                  mem_used=40000 * MIB, mem_reserved=555 * MIB, power_mw=312_345, power_limit_mw=700_000, temp=67,
                  fan=42, clock_sm=1755, clock_mem=2619, pstate=2, energy_mj=9_876_543, ecc_mode=1,
                  ecc_uncorrected=3, mig_mode=0, compute_capability=(9, 0),
                  health=FakeHealth(ecc_corrected=7, ecc_corrected_aggregate=70, ecc_uncorrected_aggregate=9,
                                    remap_corrected=2, remap_uncorrected=1, remap_pending=0, remap_failed=0,
                                    pcie_gen=4, pcie_gen_max=5, pcie_width=16, pcie_width_max=16, pcie_replay=6,
                                    nvlink_crc_flit=11, nvlink_crc_data=12, nvlink_replay=13, nvlink_recovery=14,
                                    enc_util=5, dec_util=61, jpg_util=17, ofa_util=2))
    nvml_scenario.write(FakeScenario(gpus=[gpu], driver_version="550.54.15", cuda_driver_version=12040,
                                     nvml_version="12.550.54.15"))
    source = make_nvml_source()

    reading = source.poll()

    assert source.available
    assert reading.driver == DriverInfo("550.54.15", "12.4", "12.550.54.15")
    assert reading.errors == ()
    assert reading.devices == (DeviceSample(
        index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-abc", pci_bus_id="00000000:3B:00.0", minor_number=5,
        utilization_gpu_percent=87.0,
        utilization_memory_percent=31.0, memory_used_bytes=40000 * MIB, memory_total_bytes=81559 * MIB,
        memory_reserved_bytes=555 * MIB, power_watts=312.345, power_limit_watts=700.0, temperature_celsius=67.0,
        fan_percent=42.0, clock_sm_mhz=1755, clock_memory_mhz=2619, pstate=2, energy_joules=9876.543,
        throttle_reasons=(), ecc_errors_uncorrected=3, mig_mode=False, compute_capability=(9, 0),
        encoder_percent=5.0, decoder_percent=61.0, jpeg_percent=17.0, ofa_percent=2.0,
        health=DeviceHealth(
            xid_total=0, ecc_volatile_corrected=7, ecc_aggregate_corrected=70, ecc_aggregate_uncorrected=9,
            remapped_rows_correctable=2, remapped_rows_uncorrectable=1, remap_pending=False, remap_failed=False,
            pcie_link_gen=4, pcie_link_gen_max=5, pcie_link_width=16, pcie_link_width_max=16, pcie_replay_count=6,
            nvlink_crc_flit_errors=11, nvlink_crc_data_errors=12, nvlink_replay_errors=13,
            nvlink_recovery_errors=14)),)


def test_values_follow_the_scenario_between_polls(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(util_gpu=10, temp=40)]))
    source = make_nvml_source()
    assert source.poll().devices[0].utilization_gpu_percent == 10.0

    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(util_gpu=95, temp=81)]))
    device = source.poll().devices[0]

    assert (device.utilization_gpu_percent, device.temperature_celsius) == (95.0, 81.0)


def test_unsupported_calls_read_none_and_are_not_repeated(nvml_scenario, make_nvml_source):
    gpu = FakeGpu(fan=None, mig_mode=None, errors={"pstate": NOT_SUPPORTED, "power": FUNCTION_NOT_FOUND,
                                                   "pci_info": NOT_SUPPORTED, "minor": NOT_SUPPORTED})
    nvml_scenario.write(FakeScenario(gpus=[gpu]))
    source = make_nvml_source()

    readings = [source.poll() for _ in range(3)]

    device = readings[-1].devices[0]
    assert (device.fan_percent, device.pstate, device.power_watts, device.mig_mode) == (None, None, None, None)
    assert (device.pci_bus_id, device.minor_number) == (None, None)
    assert device.temperature_celsius == 45.0
    assert all(r.errors == () for r in readings)
    for symbol in ("nvmlDeviceGetFanSpeed", "nvmlDeviceGetPerformanceState", "nvmlDeviceGetPowerUsage",
                   "nvmlDeviceGetMigMode", "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetMinorNumber"):
        assert nvml_scenario.count(symbol) == 1, symbol
    assert nvml_scenario.count("nvmlDeviceGetUtilizationRates") == 3


def test_static_values_are_read_once(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu()]))
    source = make_nvml_source()

    for _ in range(3):
        source.poll()

    for symbol in ("nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetMinorNumber",
                   "nvmlDeviceGetEnforcedPowerLimit",
                   "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetEccMode", "nvmlSystemGetDriverVersion",
                   "nvmlDeviceGetHandleByIndex_v2"):
        assert nvml_scenario.count(symbol) == 1, symbol
    assert nvml_scenario.count("nvmlDeviceGetMemoryInfo_v2") == 3


def test_memory_falls_back_to_v1_when_v2_is_missing(nvml_scenario, make_nvml_source):
    gpu = FakeGpu(mem_total=1000 * MIB, mem_used=300 * MIB, mem_reserved=20 * MIB,
                  errors={"memory_v2": FUNCTION_NOT_FOUND})
    nvml_scenario.write(FakeScenario(gpus=[gpu]))
    source = make_nvml_source()

    source.poll()
    device = source.poll().devices[0]

    assert (device.memory_used_bytes, device.memory_total_bytes, device.memory_reserved_bytes) == (
        320 * MIB, 1000 * MIB, None)
    assert nvml_scenario.count("nvmlDeviceGetMemoryInfo_v2") == 1
    assert nvml_scenario.count("nvmlDeviceGetMemoryInfo") == 2


def test_temperature_and_throttle_fall_back_to_the_older_calls(nvml_scenario, make_nvml_source):
    gpu = FakeGpu(temp=71, throttle=0x60,
                  errors={"temperature_v": FUNCTION_NOT_FOUND, "clocks_event_reasons": FUNCTION_NOT_FOUND})
    nvml_scenario.write(FakeScenario(gpus=[gpu]))
    source = make_nvml_source()

    source.poll()
    device = source.poll().devices[0]

    assert device.temperature_celsius == 71.0
    assert device.throttle_reasons == ("sw_thermal", "hw_thermal")
    assert nvml_scenario.count("nvmlDeviceGetTemperatureV") == 1
    assert nvml_scenario.count("nvmlDeviceGetTemperature") == 2
    assert nvml_scenario.count("nvmlDeviceGetCurrentClocksEventReasons") == 1
    assert nvml_scenario.count("nvmlDeviceGetCurrentClocksThrottleReasons") == 2


@pytest.mark.parametrize(("mask", "names"), [
    (0x0, ()),
    (0x1, ("gpu_idle",)),
    (0x1FF, ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost", "sw_thermal",
             "hw_thermal", "hw_power_brake", "display_clock_setting")),
    (0x4 | 0x80, ("sw_power_cap", "hw_power_brake")),
    (0x8 | 0x10000, ("hw_slowdown",)),
])
def test_throttle_reasons_decode_from_the_driver_mask(nvml_scenario, make_nvml_source, mask, names):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(throttle=mask)]))

    device = make_nvml_source().poll().devices[0]

    assert device.throttle_reasons == names
    assert decode_throttle_reasons(mask) == names


def test_ecc_errors_only_when_ecc_is_enabled(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(ecc_mode=0, ecc_uncorrected=5), FakeGpu(ecc_mode=1,
                                                                                         ecc_uncorrected=5)]))
    source = make_nvml_source()

    devices = source.poll().devices

    assert [d.ecc_errors_uncorrected for d in devices] == [None, 5]
    assert nvml_scenario.count("nvmlDeviceGetTotalEccErrors", device=0) == 0


def test_unexpected_error_is_reported_once_and_the_poll_goes_on(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(power_mw=100_000, errors={"power": NO_PERMISSION})]))
    source = make_nvml_source()

    first, second = source.poll(), source.poll()

    assert first.devices[0].power_watts is None
    assert first.devices[0].temperature_celsius == 45.0
    assert [(e.scope, "NVML_ERROR_NO_PERMISSION" in e.message, "power" in e.message) for e in first.errors] == [
        ("gpu0", True, True)]
    assert second.errors == ()
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(power_mw=100_000)]))
    assert source.poll().devices[0].power_watts == 100.0
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(power_mw=100_000, errors={"power": NO_PERMISSION})]))
    assert len(source.poll().errors) == 1


def test_timeout_gives_none_for_one_poll_and_is_retried(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(util_gpu=77, errors={"utilization": TIMEOUT})]))
    source = make_nvml_source()

    reading = source.poll()
    assert reading.devices[0].utilization_gpu_percent is None
    assert reading.errors == ()

    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(util_gpu=77)]))
    assert source.poll().devices[0].utilization_gpu_percent == 77.0
    assert nvml_scenario.count("nvmlDeviceGetUtilizationRates") == 2


def test_invalid_utf8_in_the_gpu_name_is_replaced(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(name="PLACEHOLDER")]))
    raw = nvml_scenario.path.read_bytes().replace(b"PLACEHOLDER", b"Bad\xff\xfeName")
    nvml_scenario.path.write_bytes(raw)

    device = make_nvml_source().poll().devices[0]

    assert device.name == "Bad\ufffd\ufffdName"


# ---- PCIe ----

def test_pcie_rates_come_from_the_field_counters_differenced(nvml_scenario, make_nvml_source):
    def scenario(tx, rx, time_us):
        return FakeScenario(gpus=[FakeGpu(pcie_tx_bytes=tx, pcie_rx_bytes=rx, pcie_counter_time_us=time_us,
                                          pcie_tx_kbps=1, pcie_rx_kbps=1, energy_mj=5_000)])

    nvml_scenario.write(scenario(1_000, 50_000, 1_000_000))
    source = make_nvml_source()
    first = source.poll().devices[0]
    nvml_scenario.write(scenario(1_000 + 2_000_000, 50_000 + 500_000, 1_500_000))
    second = source.poll().devices[0]
    nvml_scenario.write(scenario(10, 10, 2_000_000))
    reset = source.poll().devices[0]

    assert (first.pcie_tx_bytes_per_s, first.pcie_rx_bytes_per_s) == (None, None)
    assert (second.pcie_tx_bytes_per_s, second.pcie_rx_bytes_per_s) == (4_000_000.0, 1_000_000.0)
    assert (reset.pcie_tx_bytes_per_s, reset.pcie_rx_bytes_per_s) == (None, None)
    assert second.energy_joules == 5.0
    assert nvml_scenario.count("nvmlDeviceGetFieldValues") == 3
    assert nvml_scenario.count("nvmlDeviceGetTotalEnergyConsumption") == 0
    assert nvml_scenario.count("nvmlDeviceGetPcieThroughput") == 0
    assert not source.pcie_poller_running


# ---- NVLink ----

def test_nvlink_rates_come_from_the_all_link_kib_counters_in_the_pcie_batch(nvml_scenario, make_nvml_source):
    def scenario(tx_kib, rx_kib, time_us):
        return FakeScenario(gpus=[FakeGpu(nvlink_tx_kib=tx_kib, nvlink_rx_kib=rx_kib, pcie_counter_time_us=time_us,
                                          pcie_tx_bytes=0, pcie_rx_bytes=0)])

    nvml_scenario.write(scenario(1_000, 7, 1_000_000))
    source = make_nvml_source()
    first = source.poll().devices[0]
    nvml_scenario.write(scenario(1_000 + 2_000_000, 7 + 500_000, 1_500_000))
    second = source.poll().devices[0]

    assert (first.nvlink_tx_bytes_per_s, first.nvlink_rx_bytes_per_s) == (None, None)
    assert (second.nvlink_tx_bytes_per_s, second.nvlink_rx_bytes_per_s) == (4_000_000 * 1024.0, 1_000_000 * 1024.0)
    assert (second.pcie_tx_bytes_per_s, second.pcie_rx_bytes_per_s) == (0.0, 0.0)
    assert nvml_scenario.count("nvmlDeviceGetFieldValues") == 2  # one batch per poll for PCIe, NVLink and energy


def test_a_gpu_without_nvlink_reads_none_and_is_not_asked_again(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(pcie_tx_bytes=0, pcie_rx_bytes=0)]))
    source = make_nvml_source()
    first = source.poll().devices[0]
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(pcie_tx_bytes=0, pcie_rx_bytes=0, nvlink_tx_rate=1e9,
                                                   nvlink_rx_rate=1e9)]))
    later = [source.poll().devices[0] for _ in range(2)]

    assert [(d.nvlink_tx_bytes_per_s, d.nvlink_rx_bytes_per_s) for d in [first, *later]] == [(None, None)] * 3
    assert later[1].pcie_tx_bytes_per_s == 0.0


def test_nvlink_rates_match_the_rates_the_fake_integrates(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(nvlink_tx_rate=3e9, nvlink_rx_rate=5e8)]))
    source = make_nvml_source()
    source.poll()
    time.sleep(0.2)
    device = source.poll().devices[0]

    assert device.nvlink_tx_bytes_per_s == pytest.approx(3e9, rel=0.02)
    assert device.nvlink_rx_bytes_per_s == pytest.approx(5e8, rel=0.02)


def test_energy_falls_back_to_its_own_call_when_the_field_is_unsupported(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(energy_mj=42_000, errors={"energy_field": NOT_SUPPORTED})]))
    source = make_nvml_source()

    energies = [source.poll().devices[0].energy_joules for _ in range(2)]

    assert energies == [42.0, 42.0]
    assert nvml_scenario.count("nvmlDeviceGetTotalEnergyConsumption") == 1  # the second poll keeps the value
    assert nvml_scenario.count("nvmlDeviceGetFieldValues") == 1  # nothing left to ask for after the first


@pytest.mark.parametrize("energy_field", ["supported", "unsupported"])
def test_energy_is_read_at_most_every_period_while_pcie_counters_are_read_every_poll(
        nvml_scenario, make_device_reader, energy_field):
    """On a real H100 one energy read costs about 3 ms, the rest of a poll well under 1 ms."""
    errors = {} if energy_field == "supported" else {"energy_field": NOT_SUPPORTED}

    def scenario(energy_mj, tx):
        return FakeScenario(gpus=[FakeGpu(energy_mj=energy_mj, pcie_tx_bytes=tx, pcie_rx_bytes=0, errors=errors)])

    nvml_scenario.write(scenario(1_000, 0))
    reader, clock = make_device_reader()
    readings = []
    for step, (energy_mj, tx) in enumerate([(1_000, 0), (2_000, 1_000), (3_000, 3_000), (4_000, 6_000)]):
        nvml_scenario.write(scenario(energy_mj, tx))
        clock.now = 1000.0 + step * ENERGY_PERIOD_S / 2
        readings.append(reader.read()[0])
        time.sleep(0.01)  # the fake stamps the counters with the wall clock

    assert [r.energy_joules for r in readings] == [1.0, 1.0, 3.0, 3.0]
    assert all(r.pcie_tx_bytes_per_s for r in readings[1:])
    own_calls = nvml_scenario.count("nvmlDeviceGetTotalEnergyConsumption")
    assert own_calls == (0 if energy_field == "supported" else 2)


def test_pcie_rates_come_from_gpm_without_counters(nvml_scenario, make_nvml_source):
    gpu = FakeGpu(gpm_supported=1, gpm={20: 100.0, 21: 2.5}, pcie_tx_kbps=1, pcie_rx_kbps=1)
    nvml_scenario.write(FakeScenario(gpus=[gpu]))
    source = make_nvml_source()

    first = source.poll().devices[0]
    time.sleep(0.12)
    second = source.poll().devices[0]

    assert (first.pcie_tx_bytes_per_s, first.pcie_rx_bytes_per_s) == (None, None)
    assert (second.pcie_tx_bytes_per_s, second.pcie_rx_bytes_per_s) == (100.0 * MIB, 2.5 * MIB)
    assert nvml_scenario.count("nvmlDeviceGetPcieThroughput") == 0


def test_pcie_rates_come_from_gpm_once_it_reports_them_even_with_counters(nvml_scenario, make_nvml_source):
    """On a real H100 the byte counters were wrong under a 55 GB/s copy; GPM agreed with nvidia-smi dmon."""
    def scenario(tx):
        return FakeScenario(gpus=[FakeGpu(gpm_supported=1, gpm={20: 100.0, 21: 2.5}, pcie_tx_bytes=tx,
                                          pcie_rx_bytes=0, energy_mj=1_000)])

    nvml_scenario.write(scenario(0))
    source = make_nvml_source()
    readings = []
    for tx in (10**9, 2 * 10**9, 3 * 10**9):
        time.sleep(0.12)
        nvml_scenario.write(scenario(tx))
        readings.append(source.poll().devices[0])

    assert [(r.pcie_tx_bytes_per_s, r.pcie_rx_bytes_per_s) for r in readings] == [(None, None)] + [
        (100.0 * MIB, 2.5 * MIB)] * 2
    assert readings[-1].energy_joules == 1.0
    # counters (and energy) on the first poll, counters once more before GPM had two samples, then none
    assert nvml_scenario.count("nvmlDeviceGetFieldValues") == 2


def test_pcie_throughput_runs_on_its_own_thread_for_eight_gpus(nvml_scenario, make_nvml_source):
    gpus = [FakeGpu(pcie_tx_kbps=100 + i, pcie_rx_kbps=200 + i) for i in range(8)]
    nvml_scenario.write(FakeScenario(gpus=gpus, pcie_delay_ms=20))
    source = make_nvml_source()
    sampler_thread = threading.get_native_id()

    def all_rates():
        devices = source.poll().devices
        rates = [(d.pcie_tx_bytes_per_s, d.pcie_rx_bytes_per_s) for d in devices]
        return rates if all(tx is not None and rx is not None for tx, rx in rates) else None

    rates = wait_until(all_rates)

    assert rates == [((100 + i) * 1024.0, (200 + i) * 1024.0) for i in range(8)]
    throughput_threads = {c.thread_id for c in nvml_scenario.calls() if c.symbol == "nvmlDeviceGetPcieThroughput"}
    assert len(throughput_threads) == 1
    assert sampler_thread not in throughput_threads
    assert source.pcie_poller_running

    source.close()

    assert not source.pcie_poller_running
    assert PCIE_THREAD not in {t.name for t in threading.enumerate()}
    calls_after_close = nvml_scenario.count("nvmlDeviceGetPcieThroughput")
    time.sleep(0.15)
    assert nvml_scenario.count("nvmlDeviceGetPcieThroughput") == calls_after_close


# ---- GPM ----

def test_gpm_metrics_between_samples_and_buffers_freed_on_close(nvml_scenario, make_nvml_source):
    metrics = {2: 61.5, 3: 33.25, 5: 12.0, 10: 48.0}
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(gpm_supported=1, gpm=metrics), FakeGpu(gpm_supported=0)]))
    source = make_nvml_source()

    first = source.poll().devices[0]
    time.sleep(0.12)
    second = source.poll().devices
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(gpm_supported=1, gpm={2: 90.0}), FakeGpu(gpm_supported=0)]))
    time.sleep(0.12)
    third = source.poll().devices[0]

    def gpm(d):
        return (d.sm_active_percent, d.sm_occupancy_percent, d.tensor_active_percent, d.dram_active_percent)

    assert gpm(first) == (None, None, None, None)
    assert gpm(second[0]) == (61.5, 33.25, 12.0, 48.0)
    assert gpm(second[1]) == (None, None, None, None)
    assert gpm(third) == (90.0, None, None, None)
    assert nvml_scenario.count("nvmlGpmSampleGet", device=1) == 0
    assert nvml_scenario.count("nvmlGpmSampleAlloc") == 2
    assert nvml_scenario.count("nvmlGpmSampleFree") == 0

    source.close()

    assert nvml_scenario.count("nvmlGpmSampleFree") == 2


def test_gpm_takes_no_new_sample_within_100_ms(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(gpm_supported=1, gpm={2: 10.0})]))
    source = make_nvml_source()

    source.poll()
    source.poll()  # well under 100 ms after the first

    assert nvml_scenario.count("nvmlGpmSampleGet") == 1


# ---- processes ----

def test_compute_and_graphics_processes_of_real_children(nvml_scenario, make_nvml_source, children):
    a, b, c, d = children(4)
    assert all(psutil.pid_exists(pid) for pid in (a, b, c, d))
    gpus = [
        FakeGpu(compute_processes=[(a, 1 << 30), (c, None)], graphics_processes=[(b, 256 * MIB), (c, None)]),
        FakeGpu(compute_processes=[(d, 2 << 30)]),
    ]
    nvml_scenario.write(FakeScenario(gpus=gpus))

    processes = make_nvml_source().poll().processes

    assert processes == (
        ProcessSample(pid=a, device_index=0, gpu_memory_bytes=1 << 30, gpu_process_type="compute"),
        ProcessSample(pid=c, device_index=0, gpu_memory_bytes=None, gpu_process_type="compute+graphics"),
        ProcessSample(pid=b, device_index=0, gpu_memory_bytes=256 * MIB, gpu_process_type="graphics"),
        ProcessSample(pid=d, device_index=1, gpu_memory_bytes=2 << 30, gpu_process_type="compute"),
    )


def test_process_utilization_uses_last_seen_timestamps(nvml_scenario, make_device_reader, children):
    (pid,) = children(1)

    def scenario(samples):
        return FakeScenario(gpus=[FakeGpu(compute_processes=[(pid, 1 << 30)], process_samples=samples)])

    nvml_scenario.write(scenario([(pid, 30, 10, 1_000), (pid, 60, 20, 2_000), (999_999, 5, 5, 2_500)]))
    reader, clock = make_device_reader()
    [first] = reader.read()[1]
    clock.now += UTILIZATION_PERIOD_S
    [second] = reader.read()[1]  # nothing newer than 2 500: NOT_FOUND, no activity to report
    nvml_scenario.write(scenario([(pid, 60, 20, 2_000), (pid, 15, 4, 3_000)]))
    clock.now += UTILIZATION_PERIOD_S
    [third] = reader.read()[1]

    assert (first.sm_percent, first.gpu_memory_percent) == (60.0, 20.0)
    assert (second.sm_percent, second.gpu_memory_percent) == (None, None)
    assert (third.sm_percent, third.gpu_memory_percent) == (15.0, 4.0)
    last_seen = [c.argument for c in nvml_scenario.calls() if c.symbol == "nvmlDeviceGetProcessUtilization.lastSeen"]
    # pynvml asks for the count, then for the samples; the second poll stops at NOT_FOUND
    assert last_seen == [0, 0, 2_500, 2_500, 2_500]


def test_process_utilization_is_asked_at_most_once_per_period(nvml_scenario, make_device_reader, children):
    """On a real H100 one call costs about 2.4 ms; polls in between keep the last samples."""
    (pid,) = children(1)

    def scenario(sm, stamp):
        return FakeScenario(gpus=[FakeGpu(compute_processes=[(pid, 1 << 30)], process_samples=[(pid, sm, 1, stamp)])])

    nvml_scenario.write(scenario(10, 1_000))
    reader, clock = make_device_reader()
    shown = []
    for step in range(5):  # polls 0.4 s apart: 0, 0.4, 0.8, 1.2, 1.6 s
        nvml_scenario.write(scenario(10 * (step + 1), 1_000 * (step + 1)))
        clock.now = 1000.0 + step * 0.4 * UTILIZATION_PERIOD_S
        shown.append(reader.read()[1][0].sm_percent)

    assert shown == [10.0, 10.0, 10.0, 40.0, 40.0]
    last_seen = [c.argument for c in nvml_scenario.calls() if c.symbol == "nvmlDeviceGetProcessUtilization.lastSeen"]
    assert last_seen == [0, 0, 1_000, 1_000]


def test_a_process_without_a_sample_in_the_latest_call_reads_none_like_pmon(nvml_scenario, make_device_reader,
                                                                          children):
    """The real driver returns one sample per active process; a process it has none for shows '-' in pmon."""
    busy, quiet = children(2)

    def scenario(samples):
        procs = [(busy, 1 << 30), (quiet, 1 << 30)]
        return FakeScenario(gpus=[FakeGpu(compute_processes=procs, process_samples=samples)])

    nvml_scenario.write(scenario([(busy, 66, 30, 1_000), (quiet, 33, 14, 900)]))
    reader, clock = make_device_reader()
    first = {p.pid: p.sm_percent for p in reader.read()[1]}
    nvml_scenario.write(scenario([(busy, 99, 44, 2_000), (quiet, 33, 14, 900)]))
    clock.now += UTILIZATION_PERIOD_S
    second = {p.pid: p.sm_percent for p in reader.read()[1]}

    assert first == {busy: 66.0, quiet: 33.0}
    assert second == {busy: 99.0, quiet: None}


def test_process_utilization_unsupported_reads_none(nvml_scenario, make_nvml_source, children):
    (pid,) = children(1)
    gpu = FakeGpu(compute_processes=[(pid, 1 << 20)], process_samples=[(pid, 50, 50, 10)],
                  errors={"process_utilization": NOT_SUPPORTED})
    nvml_scenario.write(FakeScenario(gpus=[gpu]))
    source = make_nvml_source()

    samples = [source.poll().processes[0] for _ in range(2)]

    assert [(s.sm_percent, s.gpu_memory_percent) for s in samples] == [(None, None), (None, None)]
    assert nvml_scenario.count("nvmlDeviceGetProcessUtilization") == 1


# ---- process lists: once a second ----

INTERVAL_S = 0.25
"""The poll period these tests step the clock by (``--interval 0.25``)."""

POLLS_PER_PERIOD = round(PROCESS_LIST_PERIOD_S / INTERVAL_S)

LISTS = ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3")


def _scenario(pids: list[int], sm: int, stamp: int) -> FakeScenario:
    """Eight GPUs like the benchmark's; GPU 0 runs ``pids``, each with one utilization sample of ``sm`` %."""
    first = FakeGpu(compute_processes=[(pid, 1 << 30) for pid in pids],
                    process_samples=[(pid, sm, sm // 2, stamp) for pid in pids])
    return FakeScenario(gpus=[first, *(FakeGpu() for _ in range(7))])


def test_process_lists_are_read_once_a_second_at_a_quarter_second_interval(nvml_scenario, make_nvml_source,
                                                                           children):
    (pid,) = children(1)
    nvml_scenario.write(_scenario([pid], 40, 1_000))
    clock = ManualClock()
    source = make_nvml_source(clock=clock)
    polls = 4 * POLLS_PER_PERIOD
    for _ in range(polls):
        assert [p.pid for p in source.poll().processes] == [pid]
        clock.now += INTERVAL_S

    reads = polls // POLLS_PER_PERIOD
    calls = {name: nvml_scenario.count(name, device=0) for name in LISTS}
    assert calls == {LISTS[0]: 2 * reads, LISTS[1]: reads}  # pynvml asks a non-empty list's size first
    assert nvml_scenario.count("nvmlDeviceGetUtilizationRates", device=0) == polls  # the device, every poll


def test_a_process_that_starts_or_ends_shows_within_a_second(nvml_scenario, make_nvml_source, children):
    first, second = children(2)
    nvml_scenario.write(_scenario([first], 40, 1_000))
    clock = ManualClock()
    source = make_nvml_source(clock=clock)
    source.poll()
    clock.now += INTERVAL_S

    def polls_until(wanted: set[int]) -> tuple[int, dict[int, float | None]]:
        """Polls a quarter second apart until GPU 0 shows ``wanted``: how many it took, and their SM %."""
        for taken in range(1, 2 * POLLS_PER_PERIOD + 1):
            processes = source.poll().processes
            clock.now += INTERVAL_S
            if {p.pid for p in processes} == wanted:
                return taken, {p.pid: p.sm_percent for p in processes}
        return -1, {}

    nvml_scenario.write(_scenario([first, second], 70, 2_000))
    started = polls_until({first, second})
    nvml_scenario.write(_scenario([second], 20, 3_000))
    ended = polls_until({second})

    assert 1 <= started[0] <= POLLS_PER_PERIOD and started[1] == {first: 70.0, second: 70.0}
    assert 1 <= ended[0] <= POLLS_PER_PERIOD and ended[1] == {second: 20.0}




def test_a_one_shot_second_poll_across_a_second_keeps_the_first_poll_samples(nvml_scenario, make_nvml_source,
                                                                             children):
    """``--once`` polls twice 0.3 s apart; asked again so soon, the driver has no newer sample to give."""
    (pid,) = children(1)
    nvml_scenario.write(_scenario([pid], 64, 1_000))
    clock = ManualClock()
    clock.now = 1000.9
    source = make_nvml_source(clock=clock)
    first = source.poll().processes
    clock.now += 0.3  # into the next second: the lists are read again
    second = source.poll().processes

    assert [(p.pid, p.sm_percent) for p in first] == [(pid, 64.0)]
    assert [(p.pid, p.sm_percent) for p in second] == [(pid, 64.0)]

def test_the_host_joins_fresh_nvml_rows_and_fresh_details_once_a_second(nvml_scenario, make_nvml_source, children):
    """The process lists and the processes' /proc details are read at the same poll, so each row is rebuilt once."""
    pids = children(3)
    nvml_scenario.write(_scenario(list(pids), 40, 1_000))
    clock = ManualClock()
    live = LiveSource(make_nvml_source(clock=clock), HostSource(clock=clock))
    seconds = 4
    rows = []
    for step in range(seconds * POLLS_PER_PERIOD + 1):
        nvml_scenario.write(_scenario(list(pids), 40 + step, 1_000 * (step + 1)))  # moving figures
        rows.append(live.poll().processes)
        clock.now += INTERVAL_S
    live.host.close()

    rebuilt = [i for i in range(1, len(rows)) if any(a is not b for a, b in zip(rows[i], rows[i - 1], strict=True))]
    assert {p.pid for p in rows[-1]} == set(pids)
    assert len(rebuilt) <= seconds + 1  # once a second, and once more for the first CPU readings


# ---- lost GPUs ----

def test_gpu_lost_mid_run_then_back(nvml_scenario, make_nvml_source, children):
    (pid,) = children(1)
    clock = ManualClock()

    def scenario(lost, util):
        return FakeScenario(gpus=[FakeGpu(util_gpu=util), FakeGpu(lost=lost, compute_processes=[(pid, 1 << 20)])])

    nvml_scenario.write(scenario(False, 10))
    source = make_nvml_source(clock=clock, lost_retry_s=5.0)
    before = source.poll()
    nvml_scenario.write(scenario(True, 20))
    lost = source.poll()
    handle_calls = nvml_scenario.count("nvmlDeviceGetHandleByIndex_v2", device=1)
    nvml_scenario.write(scenario(False, 30))
    still_lost = source.poll()  # retry not due yet
    handle_calls_while_lost = nvml_scenario.count("nvmlDeviceGetHandleByIndex_v2", device=1)
    clock.now += 5.0
    back = source.poll()

    assert before.devices[1].name == "NVIDIA H100 80GB HBM3" and [p.pid for p in before.processes] == [pid]
    # a lost GPU keeps the health last read, so the user still sees why it went
    assert lost.devices[1] == DeviceSample(index=1, lost=True, error=LOST_MESSAGE, health=before.devices[1].health)
    assert lost.devices[0].utilization_gpu_percent == 20.0
    assert lost.processes == ()
    assert lost.errors == (ErrorNote("gpu1", LOST_MESSAGE),)
    assert still_lost.devices[1].lost and still_lost.devices[0].utilization_gpu_percent == 30.0
    assert handle_calls_while_lost == handle_calls
    assert not back.devices[1].lost
    assert back.devices[1].name == "NVIDIA H100 80GB HBM3"
    assert back.errors == ()
    assert [p.pid for p in back.processes] == [pid]


def test_unknown_error_counts_as_lost_only_when_the_gpu_stopped_answering(nvml_scenario, make_nvml_source):
    gpus = [FakeGpu(errors={"fan": UNKNOWN}, fan=50), FakeGpu(errors={"utilization": UNKNOWN, "memory": UNKNOWN})]
    nvml_scenario.write(FakeScenario(gpus=gpus))

    reading = make_nvml_source().poll()

    assert not reading.devices[0].lost and reading.devices[0].fan_percent is None
    assert reading.devices[1].lost
    assert [e.scope for e in reading.errors] == ["gpu0", "gpu1"]
    assert "NVML_ERROR_UNKNOWN" in reading.errors[0].message


def test_lost_at_start_is_reported_from_the_handle_call(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(), FakeGpu(errors={"handle": GPU_IS_LOST})]))

    reading = make_nvml_source().poll()

    assert [d.lost for d in reading.devices] == [False, True]
    assert reading.errors == (ErrorNote("gpu1", LOST_MESSAGE),)


# ---- init ----

@pytest.mark.parametrize(("code", "words"), [
    (DRIVER_NOT_LOADED, "driver not loaded"),
    (NO_PERMISSION, "no permission"),
    (LIB_RM_VERSION_MISMATCH, "versions differ"),
    (UNKNOWN, "initialization failed"),
])
def test_init_failures_give_a_clear_reason(nvml_scenario, make_nvml_source, code, words):
    nvml_scenario.write(FakeScenario(init_error=code))
    source = make_nvml_source()

    reading = source.poll()

    assert reading.driver is None and reading.devices == ()
    assert len(reading.errors) == 1 and reading.errors[0].scope == "nvml"
    assert words in reading.errors[0].message
    assert not source.available


def test_init_is_retried_at_most_every_ten_seconds(nvml_scenario, make_nvml_source):
    clock = ManualClock()
    nvml_scenario.write(FakeScenario(init_error=DRIVER_NOT_LOADED))
    source = make_nvml_source(clock=clock)
    source.poll()
    nvml_scenario.write(FakeScenario())
    clock.now += 9.0
    early = source.poll()
    clock.now += 1.0
    late = source.poll()

    assert early.devices == () and "driver not loaded" in early.errors[0].message
    assert len(late.devices) == 1 and late.errors == ()
    assert nvml_scenario.count("nvmlInitWithFlags") == 2


def test_missing_library_path_reads_library_not_found(tmp_path):
    missing = tmp_path / "nowhere" / "libnvidia-ml.so.1"
    source = NvmlBackend(library_path=str(missing))

    reading = source.poll()
    source.close()

    assert reading.driver is None
    assert "not found" in reading.errors[0].message and str(missing) in reading.errors[0].message


POLL_AND_PRINT = (
    "import json; from gpusight.backends.nvml.backend import NvmlBackend\n"
    "s = NvmlBackend(); r = s.poll(); s.close()\n"
    "print(json.dumps({'errors': [e.message for e in r.errors], 'names': [d.name for d in r.devices]}))\n"
)


def test_no_nvidia_library_at_all_reads_library_not_found():
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NVML")}
    env["LD_LIBRARY_PATH"] = ""
    probe = subprocess.run([sys.executable, "-c", "import ctypes; ctypes.CDLL('libnvidia-ml.so.1')"], env=env,
                           capture_output=True, check=False)
    if probe.returncode == 0:
        pytest.skip("this machine has a real libnvidia-ml.so.1 on the default search path")

    result = subprocess.run([sys.executable, "-c", POLL_AND_PRINT], env=env, capture_output=True, text=True,
                            check=True, timeout=60)

    out = json.loads(result.stdout)
    assert out["names"] == []
    assert len(out["errors"]) == 1 and "not found" in out["errors"][0] and "no NVIDIA driver" in out["errors"][0]


def test_default_loader_finds_the_fake_through_ld_library_path(nvml_scenario, fake_nvml_lib):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(name="NVIDIA A100-SXM4-80GB")]))

    result = run_python_with_fake_nvml(POLL_AND_PRINT, fake_nvml_lib, nvml_scenario.path)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"errors": [], "names": ["NVIDIA A100-SXM4-80GB"]}


# ---- lifecycle ----

def test_close_shuts_nvml_down_and_later_polls_say_closed(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario())
    source = make_nvml_source()
    source.poll()

    source.close()
    source.close()
    reading = source.poll()

    assert not source.available
    assert reading.devices == () and "closed" in reading.errors[0].message
    assert nvml_scenario.count("nvmlShutdown") == 1


def test_close_leaves_nvml_running_while_a_pcie_call_still_blocks(nvml_scenario, make_nvml_source):
    gpu = FakeGpu(pcie_tx_kbps=100, pcie_rx_kbps=200)
    nvml_scenario.write(FakeScenario(gpus=[gpu], pcie_delay_ms=3000))  # longer than the PCIe thread's 2 s join
    source = make_nvml_source()
    source.poll()
    wait_until(lambda: nvml_scenario.count("nvmlDeviceGetPcieThroughput.delay") > 0)

    source.close()

    assert source.pcie_poller_running  # its call is still blocked
    assert nvml_scenario.count("nvmlShutdown") == 0
    wait_until(lambda: not source.pcie_poller_running)


def test_close_shuts_nvml_down_after_a_short_pcie_call_ends(nvml_scenario, make_nvml_source):
    gpu = FakeGpu(pcie_tx_kbps=100, pcie_rx_kbps=200)
    nvml_scenario.write(FakeScenario(gpus=[gpu], pcie_delay_ms=300))
    source = make_nvml_source()
    source.poll()
    wait_until(lambda: nvml_scenario.count("nvmlDeviceGetPcieThroughput.delay") > 0)

    source.close()

    shutdowns = [call for call in nvml_scenario.calls() if call.symbol == "nvmlShutdown"]
    assert [call.argument for call in shutdowns] == [0]  # no call was in flight
    assert nvml_scenario.calls()[-1].symbol == "nvmlShutdown"


def test_zero_gpus_is_a_valid_reading(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(gpus=[]))

    reading = make_nvml_source().poll()

    assert reading.driver is not None and reading.devices == () and reading.errors == ()
