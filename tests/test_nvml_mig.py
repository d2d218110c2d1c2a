"""MIG read from NVML end to end: the fake libnvidia-ml.so.1 with MIG devices, through the real pynvml, into
``NvmlBackend`` and the real ``gpusight --json`` (with ``--gpus MIG-...`` and ``--cuda-visible``)."""

import json
import subprocess
import sys
import time

import pytest

from gpusight.backends.nvml.mig import FIRST_SAMPLE_NOTE, NO_GPM_NOTE, NO_MIG_SAMPLING_NOTE
from gpusight.backends.nvml.processes import PROCESS_LIST_PERIOD_S
from gpusight.facts.gpu_selection import CudaVisible, GpuIds
from support.fake_nvml import NO_PERMISSION, FakeMig, FakeScenario, count_calls, fake_nvml_env
from support.mig import ANY_TENSOR, DRAM_BANDWIDTH, MIG3, SM_ACTIVE, SM_OCCUPANCY, mig3_gpu, mig3_scenario

PIDS = (4101, 4102, 4103)
"""Process ids the fake lists in the three instances (NvmlBackend reports NVML's fields only, so no real process)."""

GPM_GAP_S = 0.12
"""GPM needs samples at least 100 ms apart."""


def by_index(reading):
    return {m.mig_index: m for m in reading.mig_devices}


def test_three_instances_with_ids_profile_memory_and_their_processes(nvml_scenario, make_nvml_source):
    nvml_scenario.write(mig3_scenario(PIDS))
    source = make_nvml_source()

    reading = source.poll()

    assert reading.errors == ()
    migs = by_index(reading)
    assert sorted(migs) == [0, 1, 2]
    for spec in MIG3:
        mig = migs[spec.mig_index]
        assert (mig.device_index, mig.gpu_instance_id, mig.compute_instance_id) == (0, spec.gpu_instance_id, 0)
        assert (mig.profile, mig.uuid, mig.sm_count) == (spec.profile, spec.uuid, spec.sm_count)
        assert (mig.memory_used_bytes, mig.memory_total_bytes) == (spec.memory_used_bytes, spec.memory_total_bytes)
    placed = {p.pid: (p.device_index, p.gpu_instance_id, p.compute_instance_id, p.gpu_memory_bytes)
              for p in reading.processes}
    assert placed == {pid: (0, spec.gpu_instance_id, 0, spec.process_memory_bytes) for pid, spec in zip(PIDS, MIG3, strict=True)}


def test_the_parent_utilization_is_none_on_mig_never_zero_or_a_figure(nvml_scenario, make_nvml_source):
    nvml_scenario.write(mig3_scenario(PIDS))  # the scenario also gives util_gpu 77: the driver does not answer it
    source = make_nvml_source()

    device = source.poll().devices[0]

    assert device.mig_mode is True
    assert (device.utilization_gpu_percent, device.utilization_memory_percent) == (None, None)
    assert all(p.sm_percent is None for p in source.poll().processes)


def test_hopper_reads_each_instance_activity_from_gpm_mig_sampling(nvml_scenario, make_nvml_source):
    nvml_scenario.write(mig3_scenario(PIDS, gpm=True))
    source = make_nvml_source()

    first = by_index(source.poll())
    time.sleep(GPM_GAP_S)
    second = by_index(source.poll())

    assert all(m.sm_active_percent is None and m.utilization_note == FIRST_SAMPLE_NOTE for m in first.values())
    for spec in MIG3:
        mig = second[spec.mig_index]
        assert (mig.sm_active_percent, mig.sm_occupancy_percent, mig.tensor_active_percent, mig.dram_active_percent) \
            == (spec.gpm[SM_ACTIVE], spec.gpm[SM_OCCUPANCY], spec.gpm[ANY_TENSOR], spec.gpm[DRAM_BANDWIDTH])
        assert mig.utilization_note is None


def test_ampere_without_gpm_has_no_activity_per_instance_and_says_why(nvml_scenario, make_nvml_source):
    nvml_scenario.write(mig3_scenario(PIDS, gpm=False, name="NVIDIA A100-SXM4-80GB"))
    source = make_nvml_source()

    source.poll()
    time.sleep(GPM_GAP_S)
    reading = source.poll()

    assert len(reading.mig_devices) == 3
    for mig in reading.mig_devices:
        assert (mig.sm_active_percent, mig.tensor_active_percent, mig.dram_active_percent) == (None, None, None)
        assert mig.utilization_note == NO_GPM_NOTE
    assert reading.errors == ()


def test_a_driver_without_gpm_mig_sampling_says_so_and_the_whole_gpu_keeps_its_gpm(nvml_scenario, make_nvml_source):
    gpu = mig3_gpu(PIDS, gpm=True)
    gpu.gpm = {SM_ACTIVE: 64.0}  # the whole GPU's
    for mig in gpu.mig_devices.values():
        mig.errors = {"gpm_sample": 3}  # NOT_SUPPORTED
    nvml_scenario.write(FakeScenario(gpus=[gpu]))
    source = make_nvml_source()

    source.poll()
    time.sleep(GPM_GAP_S)
    reading = source.poll()

    assert {m.utilization_note for m in reading.mig_devices} == {NO_MIG_SAMPLING_NOTE}
    assert all(m.sm_active_percent is None for m in reading.mig_devices)
    assert reading.devices[0].sm_active_percent == 64.0
    assert reading.errors == ()


def test_an_unprivileged_user_gets_the_processes_from_each_mig_device(nvml_scenario, make_nvml_source):
    nvml_scenario.write(mig3_scenario(PIDS, errors={"compute_procs": NO_PERMISSION}))
    source = make_nvml_source()

    readings = [source.poll() for _ in range(2)]

    for reading in readings:
        assert {(p.pid, p.gpu_instance_id) for p in reading.processes} == \
            {(pid, spec.gpu_instance_id) for pid, spec in zip(PIDS, MIG3, strict=True)}
        assert reading.errors == ()  # a refused parent list is expected in MIG mode, not a fault
    # the refusal is remembered: one refused call of the parent, then per poll each MIG device's two-step list
    assert count_calls(nvml_scenario.call_log, "nvmlDeviceGetComputeRunningProcesses_v3", 0) == 1 + 2 * 3 * 2


def test_a_process_listed_by_the_parent_and_its_mig_device_appears_once_on_its_instance(nvml_scenario,
                                                                                       make_nvml_source):
    # unprivileged: the parent's compute list is refused, its graphics list still names the first process
    gpu = mig3_gpu(PIDS, errors={"compute_procs": NO_PERMISSION}, graphics_processes=[(PIDS[0], 5 << 30)])
    nvml_scenario.write(FakeScenario(gpus=[gpu]))
    source = make_nvml_source()

    processes = source.poll().processes

    assert sorted(p.pid for p in processes) == sorted(PIDS)
    [first] = [p for p in processes if p.pid == PIDS[0]]
    assert (first.gpu_instance_id, first.gpu_process_type.value) == (MIG3[0].gpu_instance_id, "compute+graphics")
    assert first.gpu_memory_bytes == MIG3[0].process_memory_bytes


def test_static_facts_are_read_once_per_instance_and_memory_every_poll(nvml_scenario, make_nvml_source):
    nvml_scenario.write(mig3_scenario(PIDS))
    source = make_nvml_source()

    for _ in range(4):
        source.poll()

    log = nvml_scenario.call_log
    assert count_calls(log, "nvmlDeviceGetAttributes_v2") == 3
    assert count_calls(log, "nvmlDeviceGetGpuInstanceId") == 3
    assert count_calls(log, "nvmlDeviceGetMaxMigDeviceCount") == 1
    assert count_calls(log, "nvmlDeviceGetMemoryInfo") == 3 * 4  # the MIG devices' memory (the parent uses _v2)


def test_instances_reconfigured_mid_run_appear_and_disappear(nvml_scenario, make_nvml_source):
    nvml_scenario.write(mig3_scenario(PIDS))
    now = [1000.0]  # a clock the test moves
    source = make_nvml_source(clock=lambda: now[0])
    assert [m.profile for m in source.poll().mig_devices] == ["3g.40gb", "2g.20gb", "1g.10gb"]

    gpu = mig3_gpu(PIDS)
    del gpu.mig_devices[1]  # the 2g.20gb destroyed; two 1g.10gb created, one in its place
    gpu.mig_devices[1] = FakeMig(gpu_instance_id=11, uuid="MIG-aaaa0000-0000-0000-0000-000000000011",
                                 name="NVIDIA H100 80GB HBM3 MIG 1g.10gb", mem_total=9856 << 20, mem_used=1 << 30,
                                 compute_processes=[(4201, 1 << 30)])
    gpu.mig_devices[3] = FakeMig(gpu_instance_id=12, uuid="MIG-aaaa0000-0000-0000-0000-000000000012",
                                 name="NVIDIA H100 80GB HBM3 MIG 1g.10gb", mem_total=9856 << 20)
    nvml_scenario.write(FakeScenario(gpus=[gpu]))
    now[0] += PROCESS_LIST_PERIOD_S  # the process lists are read again
    reading = source.poll()

    assert [(m.mig_index, m.gpu_instance_id, m.profile) for m in reading.mig_devices] == \
        [(0, 2, "3g.40gb"), (1, 11, "1g.10gb"), (2, 9, "1g.10gb"), (3, 12, "1g.10gb")]
    assert {p.pid: p.gpu_instance_id for p in reading.processes} == {4101: 2, 4201: 11, 4103: 9}
    assert reading.errors == ()


def test_profile_spelled_from_the_attributes_when_the_name_lacks_it(nvml_scenario, make_nvml_source):
    gpu = mig3_gpu(PIDS)
    gpu.mig_devices[0] = FakeMig(gpu_instance_id=1, compute_instance_id=1, name="NVIDIA H100 80GB HBM3",
                                 mem_total=40192 << 20, sm_count=16, slices=(3, 1, 40192))
    nvml_scenario.write(FakeScenario(gpus=[gpu]))
    source = make_nvml_source()

    mig = by_index(source.poll())[0]

    assert (mig.profile, mig.compute_instance_id, mig.sm_count) == ("1c.3g.40gb", 1, 16)


def test_a_failing_mig_call_becomes_a_note_and_the_rest_is_read(nvml_scenario, make_nvml_source):
    gpu = mig3_gpu(PIDS)
    gpu.mig_devices[1].errors = {"memory": 999}
    nvml_scenario.write(FakeScenario(gpus=[gpu]))
    source = make_nvml_source()

    reading, again = source.poll(), source.poll()

    migs = by_index(reading)
    assert (migs[1].memory_used_bytes, migs[1].profile) == (None, "2g.20gb")
    assert again.errors == ()  # noted once, not on every poll
    assert migs[0].memory_used_bytes == MIG3[0].memory_used_bytes
    assert [e.scope for e in reading.errors] == ["gpu0"] and reading.errors[0].message.startswith("mig1_memory: ")


def test_selecting_one_mig_device_by_uuid_prefix_keeps_it_and_its_processes(nvml_scenario, make_nvml_source):
    nvml_scenario.write(mig3_scenario(PIDS))
    source = make_nvml_source(gpus=GpuIds((MIG3[1].uuid[:8].lower(),)))

    reading = source.poll()

    assert [d.index for d in reading.devices] == [0]
    assert [(m.uuid, m.cuda_index) for m in reading.mig_devices] == [(MIG3[1].uuid, None)]
    assert [p.pid for p in reading.processes] == [PIDS[1]]


def test_cuda_visible_mig_uuids_number_the_instances_as_cuda_does(nvml_scenario, make_nvml_source):
    nvml_scenario.write(mig3_scenario(PIDS))
    source = make_nvml_source(gpus=CudaVisible(f"{MIG3[2].uuid},{MIG3[0].uuid}"))

    reading = source.poll()

    assert [(d.index, d.cuda_index) for d in reading.devices] == [(0, None)]
    assert {m.uuid: m.cuda_index for m in reading.mig_devices} == {MIG3[2].uuid: 0, MIG3[0].uuid: 1}
    assert sorted(p.pid for p in reading.processes) == [PIDS[0], PIDS[2]]


def test_an_unknown_mig_uuid_is_refused_naming_the_mig_devices_there_are(nvml_scenario, make_nvml_source):
    nvml_scenario.write(mig3_scenario(PIDS))
    source = make_nvml_source(gpus=GpuIds(("MIG-ffff",)))

    reading = source.poll()

    assert reading.devices == ()
    error = source.selection_error
    assert error is not None and "no MIG device has a UUID starting with 'MIG-ffff'" in error
    assert all(spec.uuid in error for spec in MIG3)


# ---- the real command line ----

@pytest.fixture
def three_sleepers():
    started = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]) for _ in range(3)]
    yield [p.pid for p in started]
    for proc in started:
        proc.kill()
        proc.wait()


def gpusight_json(env, *args):
    out = subprocess.run([sys.executable, "-m", "gpusight", "--json", *args], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_json_shows_three_mig_devices_with_their_processes(tmp_path, fake_nvml_lib, three_sleepers):
    path = mig3_scenario(three_sleepers).write(tmp_path / "mig3.scenario")

    data = gpusight_json(fake_nvml_env(fake_nvml_lib, path))

    assert data["devices"][0]["utilization_gpu_percent"] is None
    migs = data["mig_devices"]
    assert [(m["gpu_instance_id"], m["profile"], m["memory_total_bytes"]) for m in migs] == \
        [(s.gpu_instance_id, s.profile, s.memory_total_bytes) for s in MIG3]
    placed = {p["pid"]: p["gpu_instance_id"] for p in data["processes"] if p["role"] == "gpu"}
    assert placed == {pid: s.gpu_instance_id for pid, s in zip(three_sleepers, MIG3, strict=True)}


def test_json_with_gpus_naming_a_mig_device(tmp_path, fake_nvml_lib, three_sleepers):
    path = mig3_scenario(three_sleepers).write(tmp_path / "mig3.scenario")

    data = gpusight_json(fake_nvml_env(fake_nvml_lib, path), "--gpus", MIG3[2].uuid)

    assert [m["uuid"] for m in data["mig_devices"]] == [MIG3[2].uuid]
    assert [p["pid"] for p in data["processes"] if p["role"] == "gpu"] == [three_sleepers[2]]


def test_json_with_cuda_visible_mig_devices(tmp_path, fake_nvml_lib, three_sleepers):
    path = mig3_scenario(three_sleepers).write(tmp_path / "mig3.scenario")
    env = fake_nvml_env(fake_nvml_lib, path)
    env["CUDA_VISIBLE_DEVICES"] = f"{MIG3[1].uuid},{MIG3[0].uuid}"

    data = gpusight_json(env, "--cuda-visible")

    assert [(m["uuid"], m["cuda_index"]) for m in data["mig_devices"]] == [(MIG3[0].uuid, 1), (MIG3[1].uuid, 0)]
    assert sorted(p["pid"] for p in data["processes"] if p["role"] == "gpu") == sorted(three_sleepers[:2])


def test_gpus_naming_no_mig_device_fails_listing_them(tmp_path, fake_nvml_lib):
    path = mig3_scenario(PIDS).write(tmp_path / "mig3.scenario")

    out = subprocess.run([sys.executable, "-m", "gpusight", "--json", "--gpus", "MIG-0bad"], capture_output=True,
                         text=True, env=fake_nvml_env(fake_nvml_lib, path), timeout=60)

    assert out.returncode != 0
    assert "MIG-0bad" in out.stderr and MIG3[0].uuid in out.stderr


def test_a_recording_carries_the_mig_devices_and_its_replay_selects_one(tmp_path, fake_nvml_lib, three_sleepers):
    path = mig3_scenario(three_sleepers).write(tmp_path / "mig3.scenario")
    env = fake_nvml_env(fake_nvml_lib, path)
    recording = tmp_path / "run.jsonl"
    gpusight_json(env, "--record", str(recording))

    data = gpusight_json(env, "--replay", str(recording), "--gpus", MIG3[1].uuid[:10])

    assert [(m["uuid"], m["profile"]) for m in data["mig_devices"]] == [(MIG3[1].uuid, MIG3[1].profile)]
    assert [p["pid"] for p in data["processes"] if p["role"] == "gpu"] == [three_sleepers[1]]
