"""``gpusight --serve`` end to end: a real exporter process on the fake NVML, real GPU processes, real scrapes.

The node: a torchrun-like job with two ranks on GPUs 0 and 1, a process with a hostile name and argv (and a
secret on its command line) on GPU 2, a GPU without power readings or GPM (3), one with GPM (0) and a lost GPU (4).
Advice thresholds are set to hold at once, so advice stands within a poll or two.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from gpusight import metric_names as names
from support.exporter import RunningExporter, promtool_problems, serving
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env
from support.procs import read_comm, wait_until
from support.workloads import torchrun_job

SECRET = "--api-token=hunter2-never-exported"
"""On the hostile process's command line: must never be served without --serve-cmdline."""

HOSTILE_SOURCE = 'import ctypes,time;ctypes.CDLL(None).prctl(15,b"ev\\xffil\\x1b[31m",0,0,0);time.sleep(600)'
"""Names itself with a byte that is not UTF-8 and an escape sequence (PR_SET_NAME), then sleeps."""

ADVICE_AT_ONCE = "[advice]\nwindow_s = 1\nhold_s = 0\nthrottle_hold_s = 0\nidle_hold_s = 0\n"
"""Config that lets advice stand after the first polls."""


@dataclass
class Node:
    """The processes and scenario of the fake node."""

    env: dict[str, str]
    """Environment that loads the fake NVML with the node's scenario."""
    config: Path
    """The advice config file."""
    ranks: list[int]
    """Pids of rank 0 and 1."""
    hostile: int
    """Pid of the hostile process."""


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, fake_nvml_lib: Path) -> Iterator[Node]:
    tmp = tmp_path_factory.mktemp("node")
    argv = [b"\xff\xfe-bad-argv0", "-c", HOSTILE_SOURCE, SECRET]
    hostile = subprocess.Popen(argv, executable=sys.executable)
    try:
        wait_until(lambda: read_comm(hostile.pid) not in (None, "python3", Path(sys.executable).name[:15]),
                   "the hostile process to rename itself")
        with torchrun_job(tmp, nproc=2) as job:
            gpus = [
                FakeGpu(util_gpu=95, compute_processes=[(job.ranks[0], 20 << 30)], gpm_supported=1,
                        gpm={2: 61.5, 3: 40.0, 5: 12.5, 10: 33.0}),
                FakeGpu(util_gpu=95, throttle=0x44, compute_processes=[(job.ranks[1], 21 << 30)]),
                FakeGpu(util_gpu=0, compute_processes=[(hostile.pid, 3 << 30)]),
                FakeGpu(power_mw=None, energy_mj=None, clock_mem=None),
                FakeGpu(lost=True),
            ]
            scenario = FakeScenario(gpus=gpus).write(tmp / "scenario.txt")
            config = tmp / "config.toml"
            config.write_text(ADVICE_AT_ONCE)
            yield Node(fake_nvml_env(fake_nvml_lib, scenario), config, job.ranks, hostile.pid)
    finally:
        hostile.kill()
        hostile.wait()


def _families(text: str) -> dict[str, list[Sample]]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def _by_gpu(samples: list[Sample]) -> dict[str, float]:
    return {s.labels[names.LABEL_GPU]: s.value for s in samples}


@pytest.fixture(scope="module")
def exporter(node: Node) -> Iterator[RunningExporter]:
    with serving(["--interval", "0.3", "--config", str(node.config), "--hostname", "node-a"], node.env) as running:
        yield running


@pytest.fixture(scope="module")
def scrape(exporter: RunningExporter) -> str:
    """A scrape once the job, the hostile process and advice are all served."""
    for needle in ('rule="throttling"', names.SM_ACTIVE.name + "{", 'rank="1"'):
        text = exporter.wait_for(needle)
    return text


def test_promtool_finds_no_error_and_only_dcgm_exporters_own_label_spelling(scrape: str) -> None:
    # promtool's lint (exit 3) flags dcgm-exporter's own camelCase label `modelName` on every device series, as it
    # does on dcgm-exporter's real output (tests/data/dcgm-exporter/metrics.txt); anything else is ours to fix.
    assert promtool_problems(scrape) == []


def test_device_series_carry_dcgm_exporters_labels_and_units(scrape: str) -> None:
    families = _families(scrape)
    [gpu0] = [s for s in families[names.FB_USED.name] if s.labels[names.LABEL_GPU] == "0"]
    assert gpu0.labels == {
        "gpu": "0", "UUID": "GPU-00000000-0000-0000-0000-000000000000", "pci_bus_id": "00000000:01:00.0",
        "device": "nvidia0", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "node-a", "hostname": "node-a",
        "DCGM_FI_DRIVER_VERSION": "550.54.15"}
    assert gpu0.value == 10 * 1024  # 10 GiB in MiB
    assert _by_gpu(families[names.FB_FREE.name])["0"] == 80 * 1024 - 10 * 1024 - 512
    assert _by_gpu(families[names.POWER_USAGE.name])["0"] == 250.0
    assert _by_gpu(families[names.ENERGY.name])["0"] == 123_456_789
    assert _by_gpu(families[names.SM_ACTIVE.name]) == {"0": pytest.approx(0.615)}
    assert _by_gpu(families[names.TENSOR_ACTIVE.name]) == {"0": pytest.approx(0.125)}
    assert _by_gpu(families[names.CLOCK_EVENTS.name])["1"] == 0x44
    assert _by_gpu(families[names.GPU_UTIL.name])["1"] == 95.0


def test_unknown_metrics_are_absent_never_zero_and_a_lost_gpu_has_no_device_series(scrape: str) -> None:
    families = _families(scrape)
    assert "3" not in _by_gpu(families[names.POWER_USAGE.name])  # no power reading on GPU 3
    assert "3" not in _by_gpu(families[names.ENERGY.name])
    assert "3" not in _by_gpu(families[names.MEM_CLOCK.name])
    assert "3" in _by_gpu(families[names.GPU_TEMP.name])  # what it does report is there
    assert set(_by_gpu(families[names.DRAM_ACTIVE.name])) == {"0"}  # GPM only on GPU 0
    for metric in names.DEVICE_METRICS:
        assert "4" not in _by_gpu(families.get(metric.name, [])), metric.name
    assert _by_gpu(families[names.GPU_LOST.name]) == {"0": 0.0, "1": 0.0, "2": 0.0, "3": 0.0, "4": 1.0}


def test_advice_jobs_and_ranks_are_served_without_pids(scrape: str, node: Node) -> None:
    families = _families(scrape)
    advice = {(s.labels["rule"], s.labels["scope"], s.labels["severity"]) for s in families[names.ADVICE.name]}
    assert ("throttling", "gpu1", "warn") in advice
    summaries = {s.labels["rule"]: s.labels[names.LABEL_SUMMARY] for s in families[names.ADVICE.name]}
    assert summaries["throttling"] == "clocks throttled"  # fixed words per rule, never the figures
    ranks = {(s.labels[names.LABEL_GPU], s.labels[names.LABEL_RANK]): s.labels[names.LABEL_JOB]
             for s in families[names.PROCESS_MEMORY.name]}
    assert ranks[("0", "0")] == ranks[("1", "1")] != ranks[("2", "0")]
    job = ranks[("0", "0")]
    memory = {s.labels[names.LABEL_GPU]: s.value for s in families[names.PROCESS_MEMORY.name]}
    assert memory["1"] == 21 << 30
    world = {s.labels[names.LABEL_JOB]: s.value for s in families[names.JOB_WORLD_SIZE.name]}
    assert world[job] == 2
    info = [s.labels for s in families[names.JOB_INFO.name] if s.labels[names.LABEL_JOB] == job]
    assert info[0][names.LABEL_KIND] == "training"
    for pid in (*node.ranks, node.hostile):
        assert f'"{pid}"' not in scrape  # no label value is a pid


def test_a_hostile_name_and_argv_never_fail_a_scrape_and_command_lines_stay_out(scrape: str) -> None:
    families = _families(scrape)
    [hostile] = [s.labels for s in families[names.PROCESS_INFO.name] if s.labels[names.LABEL_GPU] == "2"]
    assert hostile[names.LABEL_PROCESS] == "ev\ufffdil"  # the byte replaced, the escape sequence dropped
    assert names.LABEL_COMMAND not in hostile
    assert "hunter2" not in scrape and "-bad-argv0" not in scrape


def test_command_lines_are_served_only_with_serve_cmdline(node: Node) -> None:
    with serving(["--interval", "0.3", "--serve-cmdline"], node.env) as running:
        text = running.wait_for("hunter2")
    families = _families(text)
    [hostile] = [s.labels for s in families[names.PROCESS_INFO.name] if s.labels[names.LABEL_GPU] == "2"]
    assert hostile[names.LABEL_COMMAND].startswith("'\ufffd\ufffd-bad-argv0' -c ")
    assert hostile[names.LABEL_COMMAND].endswith(SECRET)  # opted in: the whole (short) command line
    assert "\x1b" not in text


def test_the_served_data_says_it_is_live_and_how_old_it_is(exporter: RunningExporter, scrape: str) -> None:
    families = _families(scrape)
    [build] = families[names.BUILD_INFO.name]
    assert build.labels[names.LABEL_SOURCE] == "nvml"
    [stamp] = families[names.SNAPSHOT_TIME.name]
    assert abs(stamp.value - time.time()) < 60


def test_gpus_selects_the_gpus_served(node: Node) -> None:
    with serving(["--gpus", "1,3"], node.env) as running:
        text = running.wait_for(names.GPU_UTIL.name)
    assert set(_by_gpu(_families(text)[names.GPU_TEMP.name])) == {"1", "3"}


def test_a_scrape_never_waits_for_nvml_and_the_snapshot_age_grows(tmp_path: Path, fake_nvml_lib: Path) -> None:
    scenario = FakeScenario(gpus=[FakeGpu()])
    path = scenario.write(tmp_path / "scenario.txt")
    with serving(["--interval", "0.2"], fake_nvml_env(fake_nvml_lib, path)) as running:
        running.wait_for(names.GPU_UTIL.name)
        scenario.call_delay_ms = 30_000  # the driver hangs: every NVML call now takes 30 s
        scenario.write(path)
        time.sleep(1.0)  # let the sampler enter a hung call
        ages = []
        for _ in range(3):
            status, _, body = running.get(timeout=5.0)  # well under one hung call
            assert status == 200
            [age] = _families(body.decode())[names.SNAPSHOT_AGE.name]
            ages.append(age.value)
            time.sleep(1.0)
    assert ages[0] >= 0.5
    assert ages[2] - ages[0] >= 1.5


def test_a_gpu_that_falls_off_the_bus_flips_its_lost_series_and_loses_its_device_series(
        tmp_path: Path, fake_nvml_lib: Path) -> None:
    scenario = FakeScenario(gpus=[FakeGpu(), FakeGpu()])
    path = scenario.write(tmp_path / "scenario.txt")
    with serving(["--interval", "0.2"], fake_nvml_env(fake_nvml_lib, path)) as running:
        before = _families(running.wait_for(names.GPU_UTIL.name))
        scenario.gpus[1].lost = True
        scenario.write(path)
        deadline = time.monotonic() + 30
        while True:
            after = _families(running.scrape())
            if _by_gpu(after[names.GPU_LOST.name]).get("1") == 1.0:
                break
            assert time.monotonic() < deadline, "GPU 1 was never reported lost"
            time.sleep(0.2)
    lost = {s.labels[names.LABEL_GPU]: s.labels for s in after[names.GPU_LOST.name]}
    assert lost == {s.labels[names.LABEL_GPU]: s.labels for s in before[names.GPU_LOST.name]}  # the same series
    assert lost["1"][names.LABEL_UUID] == "GPU-00000000-0000-0000-0000-000000000001"
    assert set(_by_gpu(before[names.GPU_UTIL.name])) == {"0", "1"}
    for metric in names.DEVICE_METRICS:
        assert "1" not in _by_gpu(after.get(metric.name, [])), metric.name
