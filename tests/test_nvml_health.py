"""Hardware health and video engines read from NVML: the real pynvml against the fake libnvidia-ml.so.1.

Xid events, remapped rows, ECC counts, the PCIe link, NVLink errors and the NVENC/NVDEC/NVJPG/OFA engines,
through ``NvmlBackend``, ``LiveSource`` and the real ``gpusight --json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from gpusight.backends.live import LiveSource
from gpusight.backends.nvml.health import HEALTH_PERIOD_S
from gpusight.backends.nvml.xid import XidListener
from gpusight.facts.health import HealthLevel, assess
from gpusight.facts.xid_catalog import XidAction, xid_info
from support import health_scenarios
from support.fake_nvml import (
    NO_PERMISSION,
    UNSUPPORTED_HEALTH,
    FakeGpu,
    FakeHealth,
    FakeScenario,
    fake_nvml_env,
)
from support.procs import sleeper

XID_THREAD = XidListener.THREAD_NAME


def wait_for(source, predicate, timeout=10.0):
    """Poll ``source`` until ``predicate(reading)`` holds; return that reading (fail after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reading = source.poll()
        if predicate(reading):
            return reading
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def xid_codes(device):
    return [event.code for event in device.health.xid_recent]


# ---- Xid events ----

def test_xid_79_and_48_injected_mid_run_arrive_in_a_later_poll_from_the_side_thread(nvml_scenario, make_nvml_source):
    nvml_scenario.write(health_scenarios.xid(codes=()))
    source = make_nvml_source()
    first = source.poll()
    assert first.devices[0].health.xid_total == 0 and first.devices[0].health.xid_recent == ()

    before = time.time()
    nvml_scenario.write(health_scenarios.xid(codes=(79, 48)))
    reading = wait_for(source, lambda r: r.devices[0].health.xid_total == 2)

    gpu0, gpu1 = reading.devices
    assert xid_codes(gpu0) == [79, 48]
    assert [(e.gpu_instance_id, e.compute_instance_id) for e in gpu0.health.xid_recent] == [(None, None), (3, 0)]
    assert all(before <= e.timestamp <= time.time() for e in gpu0.health.xid_recent)
    assert gpu1.health.xid_total == 0  # the other GPU, registered in the same event set, got nothing
    assert {f.key for f in assess(gpu0, time.time()).findings} >= {"xid79", "xid48"}
    assert assess(gpu0, time.time()).needs_drain
    # the poll never waits for events: every wait ran on the listener thread, none on the polling thread
    waits = [c for c in nvml_scenario.calls() if c.symbol == "nvmlEventSetWait_v2"]
    polls = {c.thread_id for c in nvml_scenario.calls() if c.symbol == "nvmlDeviceGetUtilizationRates"}
    assert waits and polls == {threading.get_native_id()}
    assert {c.thread_id for c in waits}.isdisjoint(polls)
    registered = [c.device for c in nvml_scenario.calls() if c.symbol == "nvmlDeviceRegisterEvents"]
    assert sorted(registered) == [0, 1] and nvml_scenario.count("nvmlEventSetCreate") == 1


def test_xid_total_only_grows_and_each_event_is_counted_once(nvml_scenario, make_nvml_source):
    nvml_scenario.write(health_scenarios.xid(codes=(79,)))
    source = make_nvml_source()
    wait_for(source, lambda r: r.devices[0].health.xid_total == 1)
    for _ in range(3):
        assert source.poll().devices[0].health.xid_total == 1  # not delivered again

    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(health=FakeHealth(xids=[(7, 31)])), FakeGpu()]))
    reading = wait_for(source, lambda r: r.devices[0].health.xid_total == 2)

    assert xid_codes(reading.devices[0]) == [79, 31]  # the scenario forgot 79; gpusight did not


def test_xid_recent_keeps_the_latest_sixteen(nvml_scenario, make_nvml_source):
    events = [(seq, 13) for seq in range(1, 21)]
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(health=FakeHealth(xids=[(0, 31)]))]))
    source = make_nvml_source()
    wait_for(source, lambda r: r.devices[0].health.xid_total == 1)
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(health=FakeHealth(xids=events))]))

    health = wait_for(source, lambda r: r.devices[0].health.xid_total == 21).devices[0].health

    assert len(health.xid_recent) == 16 and {e.code for e in health.xid_recent} == {13}


def test_a_gpu_lost_with_xid_79_keeps_its_health_and_the_listener_survives(nvml_scenario, make_nvml_source):
    nvml_scenario.write(health_scenarios.xid(codes=()))
    source = make_nvml_source()
    source.poll()

    nvml_scenario.write(health_scenarios.xid(codes=(79,), lost=True))  # the Xid, then the GPU is gone
    reading = wait_for(source, lambda r: r.devices[0].health is not None and r.devices[0].health.xid_total == 1)

    lost = reading.devices[0]
    assert lost.lost and xid_codes(lost) == [79]
    assert lost.health.pcie_link_width_max == 16  # the counters last read stay with it
    assert assess(lost, time.time()).findings[0].key == "xid79"
    # the listener keeps waiting while GPU 0 answers GPU_IS_LOST, without spinning, and still hears GPU 1
    time.sleep(1.5)
    assert source.xid_listener_running
    assert nvml_scenario.count("nvmlEventSetWait_v2") < 10
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(lost=True, health=FakeHealth(xids=[(1, 79)])),
                                           FakeGpu(health=FakeHealth(xids=[(1, 94)]))]))
    reading = wait_for(source, lambda r: r.devices[1].health.xid_total == 1)
    assert xid_codes(reading.devices[1]) == [94] and reading.devices[0].health.xid_total == 1


def test_registration_refused_is_one_note_and_xid_total_none(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(errors={"register_events": NO_PERMISSION}),
                                           FakeGpu(health=FakeHealth(event_types=None))]))
    source = make_nvml_source()

    readings = [source.poll() for _ in range(3)]

    notes = [n for r in readings for n in r.errors if "Xid events" in n.message]
    assert [(n.scope, "NVML_ERROR_NO_PERMISSION" in n.message) for n in notes] == [("gpu0", True), ("gpu1", False)]
    assert all(d.health.xid_total is None for d in readings[-1].devices)
    assert readings[-1].devices[0].health.remap_pending is False  # the other counters are still read
    assert nvml_scenario.count("nvmlDeviceRegisterEvents") == 1  # GPU 1 said it has no Xid events: not asked
    assert not source.xid_listener_running


def test_close_stops_the_listener_frees_the_event_set_then_shuts_nvml_down(nvml_scenario, make_nvml_source):
    nvml_scenario.write(health_scenarios.xid(codes=()))
    source = make_nvml_source()
    source.poll()
    assert source.xid_listener_running and XID_THREAD in {t.name for t in threading.enumerate()}

    source.close()

    assert not source.xid_listener_running
    assert XID_THREAD not in {t.name for t in threading.enumerate()}
    symbols = [c.symbol for c in nvml_scenario.calls()]
    assert symbols.index("nvmlEventSetFree") < symbols.index("nvmlShutdown")
    [shutdown] = [c for c in nvml_scenario.calls() if c.symbol == "nvmlShutdown"]
    assert shutdown.argument == 0  # no wait was in flight when NVML shut down


# ---- counters ----

def test_a_pending_row_remap_drains_the_gpu(nvml_scenario, make_nvml_source):
    nvml_scenario.write(health_scenarios.remap_pending())

    device = make_nvml_source().poll().devices[0]

    health = device.health
    assert (health.remapped_rows_correctable, health.remapped_rows_uncorrectable) == (0, 1)
    assert (health.remap_pending, health.remap_failed) == (True, False)
    assert (health.retired_pages_single_bit, health.retired_pages_pending) == (None, None)  # A100+: rows, not pages
    assert (device.ecc_errors_uncorrected, health.ecc_aggregate_uncorrected) == (1, 1)
    verdict = assess(device, time.time())
    assert verdict.needs_drain and verdict.findings[0].key == "remap_pending"


def test_retired_pages_are_read_where_rows_are_not_remapped(nvml_scenario, make_nvml_source):
    health = FakeHealth(remap_corrected=None, retired_sbe=2, retired_dbe=1, retired_pending=1)
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(name="Tesla V100-SXM2-32GB", health=health)]))

    device = make_nvml_source().poll().devices[0]

    assert (device.health.retired_pages_single_bit, device.health.retired_pages_double_bit) == (2, 1)
    assert device.health.retired_pages_pending is True and device.health.remap_pending is None
    assert assess(device, time.time()).findings[0].key == "retired_pending"


def test_pcie_link_at_gen3_x8_on_a_gen5_x16_card(nvml_scenario, make_nvml_source):
    nvml_scenario.write(health_scenarios.pcie_degraded())

    device = make_nvml_source().poll().devices[0]

    health = device.health
    assert (health.pcie_link_gen, health.pcie_link_width) == (3, 8)
    assert (health.pcie_link_gen_max, health.pcie_link_width_max) == (5, 16)
    assert health.pcie_replay_count == 57
    findings = {f.key: f for f in assess(device, time.time()).findings}
    assert findings["pcie_width"].level is HealthLevel.DRAIN and "Gen3 x8 (can run Gen5 x16)" in findings[
        "pcie_width"].evidence


def test_slow_counters_are_read_every_few_seconds_and_the_link_every_poll(nvml_scenario, make_device_reader):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(health=FakeHealth(nvlink_crc_flit=3, nvlink_replay=1))]))
    reader, clock = make_device_reader()

    healths = []
    for step in (0.0, 1.0, HEALTH_PERIOD_S):
        clock.now += step
        healths.append(reader.read()[0].health)
        nvml_scenario.write(FakeScenario(gpus=[FakeGpu(health=FakeHealth(nvlink_crc_flit=9, nvlink_replay=1,
                                                                         pcie_gen=2))]))

    assert [h.nvlink_crc_flit_errors for h in healths] == [3, 3, 9]
    assert [h.pcie_link_gen for h in healths] == [5, 2, 2]
    assert nvml_scenario.count("nvmlDeviceGetRemappedRows") == 2
    assert nvml_scenario.count("nvmlDeviceGetTotalEccErrors") == 2 * 4  # three aggregate counts and the volatile one
    assert nvml_scenario.count("nvmlDeviceGetCurrPcieLinkGeneration") == 3
    assert nvml_scenario.count("nvmlDeviceGetMaxPcieLinkGeneration") == 1  # a static value, read once
    # NVLink errors ride in the poll's one batch with energy, both due at the first and third poll only
    assert nvml_scenario.count("nvmlDeviceGetFieldValues") == 2
    assert healths[0].nvlink_crc_data_errors is None  # a counter the GPU does not give stays None


def test_unsupported_everything_reads_none_and_is_not_asked_again(nvml_scenario, make_device_reader):
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(ecc_mode=None, ecc_uncorrected=None, health=UNSUPPORTED_HEALTH)]))
    reader, clock = make_device_reader()

    samples = []
    for _ in range(3):
        samples.append(reader.read()[0])
        clock.now += HEALTH_PERIOD_S

    device = samples[-1]
    assert device.health is None  # nothing of it could be read
    assert (device.encoder_percent, device.decoder_percent, device.jpeg_percent, device.ofa_percent) == (None,) * 4
    for symbol in ("nvmlDeviceGetRemappedRows", "nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetCurrPcieLinkWidth",
                   "nvmlDeviceGetMaxPcieLinkWidth", "nvmlDeviceGetDecoderUtilization",
                   "nvmlDeviceGetOfaUtilization"):
        assert nvml_scenario.count(symbol) == 1, symbol
    assert nvml_scenario.count("nvmlDeviceGetTotalEccErrors") == 0  # ECC is off: its counts are not asked
    assert assess(device, time.time()).score is None


# ---- video engines ----

def test_a_busy_decoder_per_gpu_and_per_process(nvml_scenario, make_nvml_source):
    with sleeper() as proc:
        nvml_scenario.write(health_scenarios.decoder_busy(pid=proc.pid))
        source = LiveSource(gpu=make_nvml_source())
        try:
            snapshot = wait_for(source, lambda s: any(p.decoder_percent is not None for p in s.processes))
        finally:
            source.close()

    device = snapshot.devices[0]
    assert (device.decoder_percent, device.encoder_percent, device.jpeg_percent, device.ofa_percent) == (
        97.0, 0.0, 40.0, 0.0)
    [process] = [p for p in snapshot.processes if p.pid == proc.pid]
    assert (process.decoder_percent, process.encoder_percent, process.sm_percent) == (88.0, 0.0, 9.0)


# ---- the real command line ----

def test_json_carries_health_xids_and_engines(tmp_path, fake_nvml_lib):
    path = health_scenarios.pcie_degraded()
    path.gpus[0].health.xids = [(1, 79), (2, 48, 3, 0)]
    path.gpus[0].health.dec_util = 97
    env = fake_nvml_env(fake_nvml_lib, path.write(tmp_path / "s.scenario"))

    out = subprocess.run([sys.executable, "-m", "gpusight", "--json", "--duration", "1.5", "--interval", "0.5"],
                         capture_output=True, text=True, env=env, timeout=60)

    assert out.returncode == 0, out.stderr
    [gpu] = json.loads(out.stdout)["devices"]
    health = gpu["health"]
    assert gpu["decoder_percent"] == 97 and gpu["encoder_percent"] is None
    assert (health["pcie_link_gen"], health["pcie_link_width"], health["pcie_replay_count"]) == (3, 8, 57)
    assert health["xid_total"] == 2
    assert [(e["code"], e["gpu_instance_id"]) for e in health["xid_recent"]] == [(79, None), (48, 3)]


# ---- the catalog and the scenario files ----

def test_catalog_actions_follow_nvidias_immediate_action_column():
    assert xid_info(79).action is XidAction.REBOOT_NODE
    assert [xid_info(c).drains for c in (48, 64, 74, 95, 119)] == [True] * 5
    assert xid_info(94).action is XidAction.RESTART_APP  # contained: the application restarts ...
    assert xid_info(94).drains  # ... and the row remap it leaves pending needs a reset before the next job
    assert xid_info(63).action is XidAction.IGNORE and xid_info(109).action is XidAction.RESET_GPU
    assert not xid_info(61).drains and not xid_info(12345).drains


def test_scenario_files_match_their_builders():
    for name, build in health_scenarios.SCENARIOS.items():
        assert health_scenarios.scenario_path(name).read_text(encoding="utf-8") == build().text(), name

