"""MIG devices, hardware health (Xid events among it) and the video engines survive a recording in every format."""

from __future__ import annotations

import pytest
from test_recording import demo_snapshots

from gpusight.recordings.opening import open_recorder, read_recording
from gpusight.snapshot.model import Snapshot

WHAT_EACH_CARRIES = {
    "mig": ("mig devices", "process instances"),
    "faulty": ("health", "xid events"),
    "video-decode": ("decoder",),
}
"""What each demo must have put in its recording for the round trip to mean something."""


@pytest.fixture(scope="module", params=list(WHAT_EACH_CARRIES))
def scenario(request) -> tuple[str, list[Snapshot]]:
    """Four minutes of a demo at 0.5 s (in "faulty" an Xid arrives every 90 s)."""
    return request.param, demo_snapshots(480, request.param)


@pytest.mark.parametrize("name", ["run.gtop", "run.jsonl", "run.jsonl.gz"])
def test_recorded_mig_devices_health_and_engines_read_back_exactly(tmp_path, scenario, name):
    demo, snapshots = scenario
    path = tmp_path / name
    writer = open_recorder(path)
    for snapshot in snapshots:
        writer.write(snapshot)
    writer.close()
    assert list(read_recording(path)) == snapshots
    carried = {
        "mig devices": any(s.mig_devices for s in snapshots),
        "process instances": any(p.gpu_instance_id is not None for s in snapshots for p in s.processes),
        "health": any(d.health for s in snapshots for d in s.devices),
        "xid events": len({(d.index, e) for s in snapshots for d in s.devices if d.health
                           for e in d.health.xid_recent}) > len(snapshots[0].devices[0].health.xid_recent)
        if snapshots[0].devices[0].health else False,
        "decoder": any(d.decoder_percent for s in snapshots for d in s.devices),
    }
    assert all(carried[what] for what in WHAT_EACH_CARRIES[demo]), carried
