"""The demo source: each scenario is labelled simulated, plausible, deterministic, moving, and tells its story."""

import itertools
import statistics

import pytest

from gpusight.demo.catalog import DEFAULT_SCENARIO, SCENARIOS
from gpusight.demo.scenarios import SCENARIO_SPECS
from gpusight.demo.source import DemoSource
from gpusight.snapshot.model import ProcessRole, Vendor

GIB = 1024**3
START = 1_750_000_000.0
STEP = 0.5
WINDOW = 240  # two minutes of polls at 0.5 s


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def window(scenario: str, seed: int = 0, polls: int = WINDOW):
    """Snapshots of ``scenario`` every ``STEP`` seconds from ``START``."""
    clock = FakeClock()
    source = DemoSource(scenario, seed=seed, clock=clock)
    snapshots = []
    for i in range(polls):
        clock.now = START + i * STEP
        snapshots.append(source.poll())
    source.close()
    return snapshots


@pytest.fixture(scope="module")
def windows():
    return {name: window(name) for name in SCENARIOS}


def gpus_of(snapshot):
    return [p for p in snapshot.processes if p.role == ProcessRole.GPU]


def workers_of(snapshot):
    return [p for p in snapshot.processes if p.role == ProcessRole.DATALOADER_WORKER]


def test_scenario_list_has_the_required_stories_and_mixed_is_default():
    required = {
        "healthy", "input-bound", "small-batch", "throttling", "idle-holding", "imbalance", "mixed",
        "serving", "stalls", "comm-bound", "amd", "mixed-vendor",
    }
    assert required <= set(SCENARIOS)
    assert DEFAULT_SCENARIO == "mixed"
    assert all(text.strip() and "\n" not in text for text in SCENARIOS.values())


def test_every_scenario_named_for_help_has_a_spec_and_every_spec_a_name():
    assert list(SCENARIO_SPECS) == list(SCENARIOS)


def test_unknown_scenario_names_the_valid_ones():
    with pytest.raises(ValueError) as info:
        DemoSource("no-such-story")
    message = str(info.value)
    assert "no-such-story" in message
    for name in SCENARIOS:
        assert name in message


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_snapshot_is_labelled_simulated(windows, scenario):
    for snapshot in windows[scenario]:
        assert snapshot.source == "demo"
        assert snapshot.label == f"demo: {scenario} (simulated)"


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_values_stay_within_physical_bounds(windows, scenario):
    for snapshot in windows[scenario]:
        assert [d.index for d in snapshot.devices] == list(range(len(snapshot.devices)))
        for d in snapshot.devices:
            assert d.uuid.startswith("GPU-")
            if d.vendor == Vendor.AMD:
                assert_within_an_mi300x_bounds(d)
                continue
            assert d.name == "NVIDIA H100 80GB HBM3"
            if d.mig_mode:  # NVML gives a MIG-enabled GPU no utilization, GPM or video engine figures: None, never 0
                assert (d.utilization_gpu_percent, d.utilization_memory_percent, d.sm_active_percent,
                        d.decoder_percent) == (None,) * 4
                continue
            assert 0 <= d.utilization_gpu_percent <= 100
            assert 0 <= d.utilization_memory_percent <= 100
            assert 79 * GIB < d.memory_total_bytes < 81 * GIB
            assert 0 <= d.memory_used_bytes <= d.memory_total_bytes
            assert d.power_limit_watts == 700
            assert 50 <= d.power_watts <= d.power_limit_watts * 1.02
            assert 20 <= d.temperature_celsius <= 92
            assert 200 <= d.clock_sm_mhz <= 1980
            assert d.energy_joules > 0
            for value in (d.sm_active_percent, d.sm_occupancy_percent, d.tensor_active_percent, d.dram_active_percent):
                assert value is not None and 0 <= value <= 100
            assert d.sm_active_percent <= d.utilization_gpu_percent
            assert 0 <= d.pcie_rx_bytes_per_s <= 64e9 and 0 <= d.pcie_tx_bytes_per_s <= 64e9
        host = snapshot.host
        assert host.cpu_percent_per_core and all(0 <= c <= 100 for c in host.cpu_percent_per_core)
        assert 0 <= host.iowait_percent <= 100
        assert 0 < host.memory_used_bytes <= host.memory_total_bytes
        for p in snapshot.processes:
            assert 0 <= p.cpu_percent <= 200
            assert p.elapsed_seconds > 0 and p.rss_bytes > 0
            assert p.user and p.cmdline and p.name


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_device_memory_is_what_its_processes_hold(windows, scenario):
    for snapshot in windows[scenario][:20]:
        for d in snapshot.devices:
            held = sum(p.gpu_memory_bytes for p in gpus_of(snapshot) if p.device_index == d.index)
            assert d.memory_used_bytes == held


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_workers_follow_their_trainer(windows, scenario):
    snapshot = windows[scenario][0]
    assert len({p.pid for p in snapshot.processes}) == len(snapshot.processes)
    trainer = None
    counted = {}
    for p in snapshot.processes:
        if p.role == ProcessRole.GPU:
            trainer = p
            counted[p.pid] = 0
            nvidia = snapshot.devices[p.device_index].vendor != Vendor.AMD  # fdinfo tells no context type
            assert p.trainer_pid is None and p.gpu_process_type == ("compute" if nvidia else None)
            continue
        assert p.role == ProcessRole.DATALOADER_WORKER
        assert trainer is not None, "a worker came before any trainer"
        assert p.trainer_pid == trainer.pid and p.ppid == trainer.pid
        assert p.device_index == trainer.device_index and p.user == trainer.user
        assert p.name == "pt_data_worker" and p.cmdline == trainer.cmdline
        assert p.status in ("running", "sleeping")
        counted[trainer.pid] += 1
    for p in gpus_of(snapshot):
        assert p.num_workers == counted[p.pid]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_same_seed_and_clock_give_the_same_snapshots(scenario):
    assert window(scenario, seed=3, polls=12) == window(scenario, seed=3, polls=12)


def test_a_snapshot_depends_on_the_time_not_on_the_polls_before_it():
    clock = FakeClock()
    fresh = DemoSource("mixed", seed=1, clock=clock)
    busy = DemoSource("mixed", seed=1, clock=clock)
    for i in range(30):
        clock.now = START + 7.3 * i
        busy.poll()
    clock.now = START + 42.0
    assert fresh.poll() == busy.poll()


def test_different_seeds_differ():
    a, b = window("mixed", seed=1, polls=1)[0], window("mixed", seed=2, polls=1)[0]
    assert [p.pid for p in a.processes] != [p.pid for p in b.processes]
    assert [d.power_watts for d in a.devices] != [d.power_watts for d in b.devices]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_data_moves_between_polls(windows, scenario):
    snapshots = windows[scenario]
    for a, b in itertools.pairwise(snapshots):
        assert a.timestamp < b.timestamp
        assert [d.power_watts for d in a.devices] != [d.power_watts for d in b.devices]
        assert a.host.cpu_percent_per_core != b.host.cpu_percent_per_core
    busy = [d.index for d in snapshots[0].devices if (d.utilization_gpu_percent or 0) > 0]
    for index in busy:
        assert len({s.devices[index].utilization_gpu_percent for s in snapshots}) >= 4


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_energy_only_grows_and_processes_age(windows, scenario):
    first, last = windows[scenario][0], windows[scenario][-1]
    for a, b in zip(first.devices, last.devices, strict=True):
        if a.vendor == Vendor.AMD:  # amdgpu's hwmon gives power, no energy counter
            assert a.energy_joules is None and b.energy_joules is None
        else:
            assert b.energy_joules > a.energy_joules
    for a, b in zip(first.processes, last.processes, strict=True):
        assert a.pid == b.pid
        assert b.elapsed_seconds - a.elapsed_seconds == pytest.approx(last.timestamp - first.timestamp, abs=0.02)


def test_healthy_keeps_four_gpus_busy_with_six_workers_each(windows):
    for snapshot in windows["healthy"]:
        assert len(snapshot.devices) == 4
        assert all(90 <= d.utilization_gpu_percent <= 98 for d in snapshot.devices)
        assert [p.num_workers for p in gpus_of(snapshot)] == [6, 6, 6, 6]
        assert all(not d.throttle_reasons for d in snapshot.devices)
    assert any("torchrun" not in p.cmdline and "train.py" in p.cmdline for p in windows["healthy"][0].processes)


def test_input_bound_starves_the_gpus_while_workers_pin_the_cores(windows):
    snapshots = windows["input-bound"]
    utils = [d.utilization_gpu_percent for s in snapshots for d in s.devices]
    assert statistics.mean(utils) < 50
    assert min(utils) >= 15 and max(utils) <= 40
    assert max(utils) - min(utils) >= 15, "utilization should come in bursts"
    for snapshot in snapshots:
        workers = workers_of(snapshot)
        assert workers and statistics.mean(w.cpu_percent for w in workers) > 90
        pinned = sum(1 for w in workers if w.cpu_percent >= 95)
        busy_cores = sum(1 for c in snapshot.host.cpu_percent_per_core if c >= 90)
        assert busy_cores >= pinned
    assert max(d.pcie_rx_bytes_per_s for s in snapshots for d in s.devices) > 5e9


def test_small_batch_uses_little_memory_at_moderate_utilization(windows):
    for snapshot in windows["small-batch"]:
        for d in snapshot.devices:
            assert 0.10 <= d.memory_used_bytes / d.memory_total_bytes <= 0.15
            assert 40 <= d.utilization_gpu_percent <= 70


def test_throttling_shows_thermal_and_power_cap_reasons(windows):
    snapshots = windows["throttling"]
    for snapshot in snapshots:
        for d in snapshot.devices:
            assert d.throttle_reasons
            assert d.clock_sm_mhz < 1980
        thermal = [d for d in snapshot.devices if "sw_thermal" in d.throttle_reasons]
        capped = [d for d in snapshot.devices if "sw_power_cap" in d.throttle_reasons]
        assert thermal and all(87 <= d.temperature_celsius <= 90 for d in thermal)
        assert capped and all(d.power_watts >= 0.97 * d.power_limit_watts for d in capped)
    assert any("hw_thermal" in d.throttle_reasons for s in snapshots for d in s.devices)


def test_idle_holding_gpu_sits_idle_with_memory_held_by_an_old_python(windows):
    snapshots = windows["idle-holding"]
    held = [
        d.index for d in snapshots[0].devices if d.utilization_gpu_percent <= 2 and d.memory_used_bytes > 20 * GIB
    ]
    assert held
    index = held[0]
    for snapshot in snapshots:
        d = snapshot.devices[index]
        assert d.utilization_gpu_percent <= 2 and d.memory_used_bytes > 30 * GIB
        owner = [p for p in gpus_of(snapshot) if p.device_index == index]
        assert len(owner) == 1
        assert owner[0].name.startswith("python") and owner[0].elapsed_seconds > 3600
        assert owner[0].cpu_percent < 5


def test_imbalance_is_a_ddp_straggler_among_busy_waiting_ranks(windows):
    for snapshot in windows["imbalance"]:
        utils = [d.utilization_gpu_percent for d in snapshot.devices]
        assert len(utils) == 4
        assert 50 <= utils[2] <= 64 and all(94 <= u <= 98 for i, u in enumerate(utils) if i != 2)
        assert len({p.user for p in gpus_of(snapshot)}) == 1


def test_mixed_is_a_shared_eight_gpu_server_with_several_stories(windows):
    snapshot = windows["mixed"][0]
    assert len(snapshot.devices) == 8
    assert len({p.user for p in gpus_of(snapshot)}) >= 4
    utils = [d.utilization_gpu_percent for d in snapshot.devices]
    assert max(utils) >= 90 and min(utils) <= 2
    assert any(d.throttle_reasons and "gpu_idle" not in d.throttle_reasons for d in snapshot.devices)
    small = [d for d in snapshot.devices if d.memory_used_bytes / d.memory_total_bytes < 0.15]
    assert any(d.utilization_gpu_percent > 30 for d in small)
    assert any(w.cpu_percent >= 95 for w in workers_of(snapshot))
    assert snapshot.driver is not None and snapshot.driver.driver_version


def test_serving_is_servers_without_workers_or_launcher_holding_their_kv_cache(windows):
    snapshots = windows["serving"]
    first = snapshots[0]
    assert not workers_of(first)
    assert {job.kind for job in first.jobs} == {"inference"}
    assert all(job.launcher_pid is None and job.world_size is None for job in first.jobs)
    vllm = [p for p in gpus_of(first) if "vllm serve" in p.cmdline]
    assert sorted(p.device_index for p in vllm) == [0, 1] and vllm[0].job == vllm[1].job
    for snapshot in snapshots:
        for index in (0, 1):
            d = snapshot.devices[index]
            assert 0.88 <= d.memory_used_bytes / d.memory_total_bytes <= 0.91
            assert d.memory_used_bytes == first.devices[index].memory_used_bytes, "a server's reserve never moves"
    utils = [s.devices[0].utilization_gpu_percent for s in snapshots]
    assert max(utils) - min(utils) >= 20, "utilization should swing with the requests"
    idle = [s.devices[2] for s in snapshots]
    assert all(d.utilization_gpu_percent == 0 and d.memory_used_bytes > 0.8 * d.memory_total_bytes for d in idle)
    small = [s.devices[3] for s in snapshots]
    assert statistics.mean(d.utilization_gpu_percent for d in small) > 60
    assert statistics.mean(d.sm_active_percent for d in small) < 35


def test_stalls_are_a_regular_square_wave_with_the_workers_asleep(windows):
    snapshots = windows["stalls"]
    stalled = [s.devices[0].utilization_gpu_percent <= 10 for s in snapshots]
    assert 0.25 <= sum(stalled) / len(stalled) <= 0.45
    starts = [snapshots[i].timestamp for i in range(1, len(snapshots)) if stalled[i] and not stalled[i - 1]]
    assert len(starts) >= 10
    assert {round(b - a, 1) for a, b in itertools.pairwise(starts)} == {7.0}
    for snapshot, down in zip(snapshots, stalled, strict=True):
        workers = [w for w in workers_of(snapshot) if w.device_index == 0]
        assert len(workers) == 6
        if down:
            assert all(w.status == "sleeping" and w.cpu_percent < 2 for w in workers)
            assert snapshot.devices[0].power_watts < 150
        else:
            assert snapshot.devices[0].utilization_gpu_percent >= 20


def test_stalls_notebook_holds_memory_on_a_gpu_another_users_trainer_keeps_busy(windows):
    for snapshot in windows["stalls"]:
        on_gpu1 = [p for p in gpus_of(snapshot) if p.device_index == 1]
        notebook = next(p for p in on_gpu1 if "ipykernel_launcher" in p.cmdline)
        trainer = next(p for p in on_gpu1 if p is not notebook)
        assert notebook.user != trainer.user
        assert notebook.sm_percent == 0 and notebook.gpu_memory_bytes > 10 * GIB and notebook.cpu_percent < 5
        assert snapshot.devices[1].utilization_gpu_percent >= 90
    kinds = {job.kind for job in windows["stalls"][0].jobs}
    assert kinds == {"training", "notebook"}


def test_comm_bound_ranks_are_equally_busy_with_few_sms_and_heavy_nvlink(windows):
    for snapshot in windows["comm-bound"]:
        utils = [d.utilization_gpu_percent for d in snapshot.devices]
        assert min(utils) >= 93
        for d in snapshot.devices:
            assert d.sm_active_percent < 40
            assert 90e9 <= d.nvlink_tx_bytes_per_s <= 165e9 and 90e9 <= d.nvlink_rx_bytes_per_s <= 165e9
    assert windows["comm-bound"][0].jobs[0].world_size == 4


def test_other_scenarios_report_no_nvlink_rates(windows):
    """NVLink rates stay unknown where the story does not need them, as they were before they existed."""
    for name in ("mixed", "small-batch", "serving", "stalls"):
        assert all(d.nvlink_tx_bytes_per_s is None for d in windows[name][0].devices)


NVML_ONLY = (
    "sm_active_percent", "sm_occupancy_percent", "tensor_active_percent", "dram_active_percent",
    "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s", "energy_joules", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s",
    "mig_mode", "compute_capability", "pstate", "minor_number", "memory_reserved_bytes", "decoder_percent",
)


def assert_read_as_amdgpu_reads_an_mi300x(device):
    """What the amdgpu backend gives of an MI300X: junction and memory but no edge temperature, none of NVML's own."""
    assert (device.vendor, device.name) == (Vendor.AMD, "AMD Instinct MI300X")
    assert (device.kernel_driver, device.kernel_driver_version) == ("amdgpu", "6.10.5")
    assert device.memory_total_bytes == 205_822_885_888 and device.power_limit_watts == 750.0
    assert device.temperature_celsius is None
    assert device.temperature_memory_celsius < device.temperature_junction_celsius
    assert device.throttle_reasons == () and device.fan_percent is None
    assert [name for name in NVML_ONLY if getattr(device, name) is not None] == []
    assert device.utilization_gpu_percent is not None and device.utilization_memory_percent is not None


def assert_within_an_mi300x_bounds(d):
    """An MI300X's figures stay within its limits: 192 GB, 750 W, 2100 MHz, junction below its 110 C limit."""
    assert_read_as_amdgpu_reads_an_mi300x(d)
    assert 0 <= d.utilization_gpu_percent <= 100 and 0 <= d.utilization_memory_percent <= 100
    assert 0 <= d.memory_used_bytes <= d.memory_total_bytes
    assert 50 <= d.power_watts <= d.power_limit_watts * 1.02
    assert 20 <= d.temperature_memory_celsius < d.temperature_junction_celsius <= 105
    assert 200 <= d.clock_sm_mhz <= 2100


def test_amd_is_eight_mi300x_with_the_stories_advice_needs(windows):
    for snapshot in windows["amd"]:
        assert len(snapshot.devices) == 8
        for device in snapshot.devices:
            assert_read_as_amdgpu_reads_an_mi300x(device)
        assert snapshot.driver is None  # no NVML: amdgpu's version rides on each GPU
        utils = [d.utilization_gpu_percent for d in snapshot.devices]
        assert 50 <= utils[2] <= 64 and all(94 <= utils[i] <= 98 for i in (0, 1, 3))
        assert utils[4] <= 40 and utils[5] == 0 and snapshot.devices[5].memory_used_bytes > 30 * GIB
        assert utils[7] == 0 and snapshot.devices[7].memory_used_bytes == 0


def test_amd_process_of_unknown_usage_says_why_and_the_others_have_theirs(windows):
    for snapshot in windows["amd"]:
        gpu = gpus_of(snapshot)
        unknown = [p for p in gpu if p.sm_percent is None]
        assert [p.device_index for p in unknown] == [6]
        assert "/dev/kfd" in unknown[0].gpu_usage_note and unknown[0].gpu_memory_bytes > 100 * GIB
        assert snapshot.devices[6].utilization_gpu_percent >= 90
        known = [p for p in gpu if p.sm_percent is not None]
        assert all(p.gpu_usage_note is None and p.gpu_memory_percent is None for p in known)
        assert all(p.gpu_process_type is None for p in gpu)


def test_mixed_vendor_numbers_nvidia_first_and_names_both_drivers(windows):
    for snapshot in windows["mixed-vendor"]:
        vendors = [d.vendor for d in snapshot.devices]
        assert vendors == [Vendor.NVIDIA] * 4 + [Vendor.AMD] * 4
        for device in snapshot.devices[4:]:
            assert_read_as_amdgpu_reads_an_mi300x(device)
        for device in snapshot.devices[:4]:
            assert device.kernel_driver is None and device.temperature_celsius is not None
            assert device.sm_active_percent is not None and device.temperature_junction_celsius is None
        assert snapshot.driver.driver_version and snapshot.driver.cuda_driver_version
        assert {p.device_index for p in gpus_of(snapshot) if p.sm_percent is None} == {6}


def test_nvidia_scenarios_name_no_other_driver(windows):
    for name in SCENARIOS:
        if name not in ("amd", "mixed-vendor"):
            snapshot = windows[name][0]
            assert snapshot.driver.driver_version
            assert {(d.vendor, d.kernel_driver) for d in snapshot.devices} == {(None, None)}
