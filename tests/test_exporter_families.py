"""The exporter's families from hand-built snapshots: containers, cluster jobs, caps, keys and hostile text.

Every snapshot goes through a real ``prometheus_client`` registry and ``generate_latest``, then is parsed back.
"""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from prometheus_client.samples import Sample

from gpusight import metric_names as names
from gpusight.prometheus_exporter.basic_auth import BcryptUsers, Verdict
from gpusight.prometheus_exporter.exposition import Exposition
from gpusight.prometheus_exporter.families import ExportOptions, SnapshotCollector
from gpusight.prometheus_exporter.labels import COMMAND_LABEL_MAX, label_value
from gpusight.prometheus_exporter.server import ListenAddress, ServeError, parse_listen
from gpusight.snapshot.model import (
    Advice,
    ContainerRuntime,
    ContainerSample,
    DeviceSample,
    HostSample,
    JobSample,
    ProcessRole,
    ProcessSample,
    Severity,
    Snapshot,
    SourceKind,
    WorkloadKind,
)

NOW = 1_800_000_000.0
POD = ContainerSample(ContainerRuntime.CRIO, id="a" * 64, name="trainer-0", pod_uid="1234-abcd",
                      pod_namespace="research")
SLURM = ContainerSample(ContainerRuntime.SLURM, slurm_job_id="4242")


def _scrape(snapshot: Snapshot | None, **options: object) -> dict[str, list[Sample]]:
    registry = CollectorRegistry(auto_describe=False)
    settings = ExportOptions(hostname="n1", **options)  # type: ignore[arg-type]
    registry.register(SnapshotCollector(lambda: snapshot, settings, clock=lambda: NOW))
    return {f.name: f.samples for f in text_string_to_metric_families(generate_latest(registry).decode())}


def _gpu(pid: int, device: int, memory: int | None, job: int | None = None, rank: int | None = None,
         **fields: object) -> ProcessSample:
    return ProcessSample(pid, device_index=device, gpu_memory_bytes=memory, job=job, rank=rank, name="python",
                         user="alice", **fields)  # type: ignore[arg-type]


def test_before_the_first_poll_only_build_info_is_served() -> None:
    assert set(_scrape(None)) == {names.BUILD_INFO.name}


def test_jobs_carry_their_cluster_key_pod_and_slurm_ids() -> None:
    processes = (
        _gpu(10, 0, 1 << 30, job=1, rank=0, container=POD),
        _gpu(11, 1, 2 << 30, job=1, rank=1, container=POD),
        _gpu(20, 2, 3 << 30, job=2, container=SLURM),
    )
    jobs = (JobSample(1, WorkloadKind.TRAINING, "pod", (10, 11), (0, 1), world_size=16,
                      cluster_key="pod:research/trainer-0"),
            JobSample(2, WorkloadKind.UNKNOWN, "slurm", (20,), (2,), cluster_key="slurm:4242"))
    families = _scrape(Snapshot(NOW - 2, SourceKind.NVML, processes=processes, jobs=jobs))
    info = {s.labels[names.LABEL_JOB]: s.labels for s in families[names.JOB_INFO.name]}
    assert info["1"] | {} == {"Hostname": "n1", "hostname": "n1", "gpusight_job": "1",
                              "cluster_job": "pod:research/trainer-0", "kind": "training", "slurm_job_id": "",
                              "pod": "trainer-0", "namespace": "research"}
    assert (info["2"]["cluster_job"], info["2"]["slurm_job_id"], info["2"]["pod"]) == ("slurm:4242", "4242", "")
    memory = {s.labels[names.LABEL_JOB]: s.value for s in families[names.JOB_MEMORY.name]}
    assert memory == {"1": 3 << 30, "2": 3 << 30}
    process = {s.labels[names.LABEL_RANK]: s.labels for s in families[names.PROCESS_INFO.name]
               if s.labels[names.LABEL_JOB] == "1"}
    assert (process["1"]["container"], process["1"]["pod"], process["1"]["namespace"]) == \
        ("a" * 12, "trainer-0", "research")
    [age] = families[names.SNAPSHOT_AGE.name]
    assert age.value == 2.0


def test_ranks_fall_back_to_the_place_in_the_job_and_workers_are_summed_on_their_trainer() -> None:
    processes = (
        _gpu(30, 0, 5 << 30, job=3, num_workers=2, input_wait_percent=41.5),
        ProcessSample(31, role=ProcessRole.DATALOADER_WORKER, trainer_pid=30, device_index=0, cpu_percent=80.0),
        ProcessSample(32, role=ProcessRole.DATALOADER_WORKER, trainer_pid=30, device_index=0, cpu_percent=15.5),
        _gpu(40, 1, 4 << 30, job=3),
    )
    jobs = (JobSample(3, WorkloadKind.TRAINING, "parent", (40, 30), (0, 1)),)
    families = _scrape(Snapshot(NOW, SourceKind.NVML, processes=processes, jobs=jobs))
    by_gpu = {s.labels[names.LABEL_GPU]: s.labels[names.LABEL_RANK] for s in families[names.PROCESS_MEMORY.name]}
    assert by_gpu == {"0": "1", "1": "0"}  # places in JobSample.pids
    [workers] = families[names.WORKERS.name][:1]
    assert workers.value == 2
    assert [s.value for s in families[names.WORKERS_CPU.name]] == [95.5]
    assert [s.value for s in families[names.INPUT_WAIT.name]] == [41.5]
    assert names.PROCESS_SM.name not in families  # unknown everywhere: absent, not 0


def test_process_series_are_capped_largest_memory_first_and_the_drop_is_counted() -> None:
    processes = tuple(_gpu(100 + i, 0, (i + 1) << 20, job=i + 1) for i in range(10))
    families = _scrape(Snapshot(NOW, SourceKind.NVML, processes=processes), max_process_series=4)
    kept = sorted(s.value for s in families[names.PROCESS_MEMORY.name])
    assert kept == [7 << 20, 8 << 20, 9 << 20, 10 << 20]
    assert [s.value for s in families[names.SERIES_DROPPED.name]] == [6]
    assert len(families[names.PROCESS_INFO.name]) == 4


def test_repeated_keys_are_served_once() -> None:
    processes = (_gpu(1, 0, 2 << 20, job=1, rank=0), _gpu(2, 0, 1 << 20, job=1, rank=0))
    families = _scrape(Snapshot(NOW, SourceKind.NVML, processes=processes))
    assert [s.value for s in families[names.PROCESS_MEMORY.name]] == [2 << 20]
    assert [s.value for s in families[names.SERIES_DROPPED.name]] == [1]


def test_hostile_strings_in_every_label_source_never_fail_generate_latest() -> None:
    bad = "x\udcff\ud800\x1b]0;t\x07\n\"\\"
    snapshot = Snapshot(
        NOW, SourceKind.REPLAY, host=HostSample(cpu_percent_per_core=(10.0, 30.0), iowait_percent=2.0),
        devices=(DeviceSample(0, name=bad, uuid=bad, pci_bus_id=bad, minor_number=3, utilization_gpu_percent=5.0),),
        processes=(_gpu(1, 0, 1, job=1, cmdline=bad + " " + "y" * 500,
                        container=ContainerSample(ContainerRuntime.DOCKER, id=bad, name=bad)),),
        jobs=(JobSample(1, WorkloadKind.UNKNOWN, bad, (1,), (0,), cluster_key=bad),),
        advice=(Advice(bad + ":gpu0", Severity.WARN, bad, bad, bad, bad),),
    )
    families = _scrape(snapshot, cmdline=True)
    [info] = families[names.PROCESS_INFO.name]
    assert info.labels[names.LABEL_COMMAND].startswith("x\ufffd\ufffd?\"\\ yyy")
    assert len(info.labels[names.LABEL_COMMAND]) == COMMAND_LABEL_MAX
    [device] = families[names.GPU_UTIL.name]
    assert device.labels[names.LABEL_DEVICE] == "nvidia3" and device.labels[names.LABEL_MODEL] == "x\ufffd\ufffd?\"\\"
    assert [s.value for s in families[names.HOST_CPU.name]] == [20.0]
    assert [s.labels[names.LABEL_SOURCE] for s in families[names.BUILD_INFO.name]] == ["replay"]


@pytest.mark.parametrize(("text", "expected"), [
    ("abc", "abc"), (None, ""), ("caf\udcc3\udca9", "café"), ("a\udcffb", "a\ufffdb"), ("\ud83d", "\ufffd"),
    ("\x1b[31mred\x1b[0m", "red"), ("tab\there", "tab?here"),
])
def test_label_value(text: str | None, expected: str) -> None:
    assert label_value(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("9400", ListenAddress("127.0.0.1", 9400)), ("0.0.0.0:9400", ListenAddress("0.0.0.0", 9400)),
    ("[::1]:9400", ListenAddress("::1", 9400)), ("[::]:0", ListenAddress("::", 0)),
    ("node.example:80", ListenAddress("node.example", 80)),
])
def test_parse_listen(text: str, expected: ListenAddress) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["", ":9400", "::1:9400", "[::1]", "[]:9400", "host:", "host:http", "65536", "-1",
                                  "٩٤٠٠"])
def test_parse_listen_refuses(text: str) -> None:
    with pytest.raises(ServeError):
        parse_listen(text)


def test_bcrypt_users_judge_basic_auth_headers() -> None:
    """A password may hold colons; a wrong password, an unknown user, a malformed header or another scheme is
    denied; a right password is allowed again from memory (cost 4 keeps the test quick)."""
    import base64

    import bcrypt

    users = BcryptUsers({b"prom": bcrypt.hashpw(b"pw:with:colons", bcrypt.gensalt(4)),
                         b"other": bcrypt.hashpw(b"x", bcrypt.gensalt(4))})

    def header(raw: bytes) -> str:
        return "Basic " + base64.b64encode(raw).decode()

    for _ in range(2):
        assert users.check(header(b"prom:pw:with:colons")) is Verdict.ALLOWED
        assert users.check(header(b"other:x")) is Verdict.ALLOWED
    for raw in (b"prom:pw", b"other:pw:with:colons", b"prom", b":x", b"nobody:x"):
        assert users.check(header(raw)) is Verdict.DENIED, raw
    for value in (None, "", "Bearer abc", "Basic !!!", "basic " + header(b"other:x")[6:]):
        assert users.check(value) is Verdict.DENIED, value


def test_the_exposition_is_byte_for_byte_what_generate_latest_writes_as_families_change() -> None:
    snapshots = [
        Snapshot(NOW, SourceKind.NVML, devices=(DeviceSample(0, uuid="GPU-a", utilization_gpu_percent=5.0,
                                                             clock_sm_mhz=1980),),
                 processes=(_gpu(1, 0, 1 << 30, job=1, rank=0), _gpu(2, 0, 2 << 30, job=1, rank=1))),
        Snapshot(NOW + 1, SourceKind.NVML, devices=(DeviceSample(0, uuid="GPU-a", utilization_gpu_percent=7.0,
                                                                 clock_sm_mhz=1980),),
                 processes=(_gpu(1, 0, 1 << 30, job=1, rank=0), _gpu(2, 0, 3 << 30, job=1, rank=1))),
        Snapshot(NOW + 2, SourceKind.NVML, devices=(DeviceSample(0, uuid="GPU-a", lost=True),)),
    ]
    current: list[Snapshot] = []
    collector = SnapshotCollector(lambda: current[-1], ExportOptions(hostname="n1"), clock=lambda: NOW + 5)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    exposition = Exposition(collector)
    for snapshot in snapshots + snapshots[:1]:
        current.append(snapshot)
        assert exposition.render() == generate_latest(registry)
