"""MIG instances, hardware health and video engines served by a real ``gpusight --serve --replay`` of hand-built
snapshots (tests/support/health_fleet.py), under dcgm-exporter's names and labels and gpusight's own."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from gpusight import metric_names as names
from gpusight.prometheus_exporter.families import ExportOptions, SnapshotCollector
from gpusight.prometheus_exporter.health_families import UNKNOWN_XID, XidTally
from gpusight.snapshot.model import DeviceHealth, DeviceSample, Snapshot, SourceKind, XidEvent
from support.exporter import promtool_problems, serving
from support.health_fleet import HOSTILE_PROFILE, MIG_PIDS, MIG_PROFILES, write_fleet_recording


@pytest.fixture(scope="module")
def scrape(tmp_path_factory: pytest.TempPathFactory) -> str:
    recording = write_fleet_recording(tmp_path_factory.mktemp("health") / "node.jsonl", time.time(), 120)
    with serving(["--replay", str(recording), "--loop", "--hostname", "node-07"]) as exporter:
        return exporter.wait_for('gpu="5",hostname="node-07"} 79.0')  # GPU 5 fell off the bus


@pytest.fixture(scope="module")
def families(scrape: str) -> dict[str, list[Sample]]:
    found: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(scrape):
        found.setdefault(family.name, []).extend(family.samples)
    return found


def _by_gpu(samples: list[Sample]) -> dict[str, float]:
    return {s.labels[names.LABEL_GPU]: s.value for s in samples if names.LABEL_GPU_I_ID not in s.labels}


def _instances(samples: list[Sample]) -> dict[str, Sample]:
    return {s.labels[names.LABEL_GPU_I_ID]: s for s in samples if names.LABEL_GPU_I_ID in s.labels}


def test_each_mig_instance_has_its_memory_under_its_parents_labels_and_dcgm_exporters_mig_labels(families) -> None:
    used = _instances(families[names.FB_USED.name])
    assert sorted(used) == ["1", "2", "5"]
    [parent] = [s for s in families[names.FB_USED.name]
                if s.labels[names.LABEL_GPU] == "0" and names.LABEL_GPU_I_ID not in s.labels]
    for gi, sample in used.items():
        assert {k: v for k, v in sample.labels.items() if k not in names.MIG_LABELS} == parent.labels
        assert sample.value == int(gi) * 1024  # MiB
    assert used["1"].labels[names.LABEL_GPU_I_PROFILE] == "3g.40gb"
    free = _instances(families[names.FB_FREE.name])
    assert free["2"].value == 20 * 1024 - 2 * 1024


def test_instance_activity_is_served_only_where_gpm_gave_it_never_the_parents(families) -> None:
    assert {gi: s.value for gi, s in _instances(families[names.SM_ACTIVE.name]).items()} == {"1": 0.5}
    assert {gi: s.value for gi, s in _instances(families[names.TENSOR_ACTIVE.name]).items()} == {"1": 0.25}
    assert _instances(families[names.GPU_UTIL.name]) == {}
    assert "0" not in _by_gpu(families[names.GPU_UTIL.name])  # the MIG GPU's own utilization is unknown: absent


def test_processes_carry_the_instance_they_run_in(families) -> None:
    info = {s.labels[names.LABEL_PROCESS]: s.labels for s in families[names.PROCESS_INFO.name]}
    for gi in MIG_PIDS:
        labels = info[f"train{gi}"]
        assert labels[names.LABEL_GPU_I_ID] == str(gi)
        if gi != 5:
            assert labels[names.LABEL_GPU_I_PROFILE] == MIG_PROFILES[gi]
    memory = {s.labels[names.LABEL_GPU_I_ID]: s.value for s in families[names.PROCESS_MEMORY.name]}
    assert memory == {str(gi): float(gi << 30) for gi in MIG_PIDS}


def test_a_hostile_profile_is_one_escaped_label_value(families) -> None:
    profile = _instances(families[names.FB_USED.name])["5"].labels[names.LABEL_GPU_I_PROFILE]
    assert profile != HOSTILE_PROFILE and "\n" not in profile and "\x1b" not in profile
    assert profile.startswith('1g.10gb"') and profile.endswith('{x="y"}')


def test_health_under_dcgm_exporters_names(families) -> None:
    assert _by_gpu(families[names.XID_ERRORS.name]) == {"0": 0.0, "1": 48.0, "2": 0.0, "3": 0.0, "4": 0.0, "5": 79.0}
    assert _by_gpu(families[names.ROW_REMAP_PENDING.name])["2"] == 1.0
    assert _by_gpu(families[names.UNCORRECTABLE_REMAPPED_ROWS.name])["2"] == 1.0
    assert _by_gpu(families[names.ECC_DBE_VOL.name])["1"] == 2.0
    assert _by_gpu(families[names.ECC_SBE_AGG.name])["1"] == 3.0
    link = {name.name: _by_gpu(families[name.name])["3"]
            for name in (names.PCIE_LINK_GEN, names.PCIE_LINK_WIDTH, names.PCIE_MAX_LINK_GEN, names.PCIE_MAX_LINK_WIDTH)}
    assert link == {names.PCIE_LINK_GEN.name: 3, names.PCIE_LINK_WIDTH.name: 8, names.PCIE_MAX_LINK_GEN.name: 5,
                    names.PCIE_MAX_LINK_WIDTH.name: 16}
    assert _by_gpu(families[names.PCIE_REPLAY.name])["3"] == 12.0
    assert names.RETIRED_SBE.name not in families  # no GPU read retired pages: never sent as 0
    assert names.NVLINK_CRC_FLIT.name not in families


def test_gpusights_xid_counter_last_xid_and_drain_flags(families) -> None:
    counted = {(s.labels[names.LABEL_GPU], s.labels[names.LABEL_XID]): s.value
               for s in families[names.XID_COUNT.name] if s.name.endswith("_total")}
    assert counted == {("1", "79"): 1.0, ("1", "48"): 1.0, ("5", "79"): 1.0}
    assert _by_gpu(families[names.XID_LAST.name]) == {"1": 48.0, "5": 79.0}
    assert sorted(_by_gpu(families[names.XID_LAST_TIME.name])) == ["1", "5"]
    assert _by_gpu(families[names.DRAIN.name]) == {"0": 0.0, "1": 1.0, "2": 1.0, "3": 1.0, "4": 0.0, "5": 1.0}
    assert _by_gpu(families[names.GPU_LOST.name])["5"] == 1.0
    lost = [s.labels for s in families[names.XID_ERRORS.name] if s.labels[names.LABEL_GPU] == "5"]
    assert lost[0][names.LABEL_UUID].startswith("GPU-00000005")  # the labels it had before it was lost
    scores = _by_gpu(families[names.HEALTH_SCORE.name])
    assert scores["0"] == scores["4"] == 100.0 and scores["2"] == 50.0


def test_video_engines(families) -> None:
    assert _by_gpu(families[names.DEC_UTIL.name]) == {"4": 95.0}
    assert _by_gpu(families[names.ENC_UTIL.name]) == {"4": 0.0}
    assert _by_gpu(families[names.JPEG_UTIL.name]) == {"4": 40.0}
    assert names.OFA_UTIL.name not in families


def test_every_health_video_and_own_gpu_metric_is_served_and_documented(families) -> None:
    declared = {m.name for m in (*names.HEALTH_METRICS, *names.VIDEO_METRICS, *names.GPUSIGHT_DEVICE_METRICS)}
    # the hand-built node reads no retired pages, NVLink or OFA: those are absent, never 0
    unread = {names.RETIRED_SBE.name, names.RETIRED_DBE.name, names.RETIRED_PENDING.name, names.NVLINK_CRC_FLIT.name,
              names.NVLINK_CRC_DATA.name, names.NVLINK_REPLAY.name, names.NVLINK_RECOVERY.name, names.OFA_UTIL.name}
    assert declared - set(families) == unread
    docs = (Path(__file__).resolve().parents[1] / "docs" / "exporter.md").read_text(encoding="utf-8")
    assert [name for name in sorted(declared) if f"`{name}" not in docs] == []


def test_promtool_accepts_it_all(scrape: str) -> None:
    assert promtool_problems(scrape) == []


def _device(total: int, *codes: int) -> DeviceSample:
    events = tuple(XidEvent(code, float(n)) for n, code in enumerate(codes))
    return DeviceSample(0, uuid="GPU-x", health=DeviceHealth(xid_total=total, xid_recent=events))


def _tallies(*devices: DeviceSample) -> Iterator[dict[str, int]]:
    tally = XidTally()
    for device in devices:
        yield dict(tally.update(device))


def test_the_xid_counter_only_grows_and_counts_events_missed_between_scrapes() -> None:
    steps = list(_tallies(_device(1, 79), _device(1, 79), _device(3, 79, 48, 48),
                          _device(30, *([48] * 16)), _device(30, *([48] * 16))))
    assert steps[0] == steps[1] == {"79": 1}
    assert steps[2] == {"79": 1, "48": 2}
    assert steps[3] == {"79": 1, "48": 18, UNKNOWN_XID: 11}  # 27 new events, 16 of them still in the snapshot
    assert steps[4] == steps[3]
    assert sum(steps[3].values()) == 30


def test_a_replay_starting_over_starts_the_counts_over() -> None:
    steps = list(_tallies(_device(2, 79, 48), _device(1, 79)))
    assert steps == [{"79": 1, "48": 1}, {"79": 1}]


def test_a_gpu_fallen_off_the_bus_keeps_its_health_series_and_counts_under_its_labels() -> None:
    now = 1_800_000_000.0
    before = DeviceSample(0, name="NVIDIA H100 80GB HBM3", uuid="GPU-x", pci_bus_id="00000000:10:00.0", minor_number=0,
                          utilization_gpu_percent=90.0, health=DeviceHealth(xid_total=0))
    lost = DeviceSample(0, lost=True, health=DeviceHealth(xid_total=1, xid_recent=(XidEvent(79, now - 1),)))
    snapshots = iter([Snapshot(now - 2, SourceKind.NVML, devices=(before,)), Snapshot(now, SourceKind.NVML, devices=(lost,))])
    collector = SnapshotCollector(lambda: next(snapshots), ExportOptions(hostname="node-07"), clock=lambda: now)
    first = {f.name: f.samples for f in collector.collect()}
    second = {f.name: f.samples for f in collector.collect()}
    [xid] = second[names.XID_ERRORS.name]
    assert xid.value == 79.0 and xid.labels == first[names.XID_ERRORS.name][0].labels  # the same series as before
    assert [(s.labels[names.LABEL_UUID], s.value) for s in second[names.DRAIN.name]] == [("GPU-x", 1.0)]
    assert [(s.labels[names.LABEL_XID], s.value) for s in second[names.XID_COUNT.name]
            if s.name.endswith("_total")] == [("79", 1.0)]
    assert names.GPU_UTIL.name not in second  # the rest of a lost GPU is unknown: absent
