"""The live UI recording in the compact format closes the file cleanly when the user quits."""

from __future__ import annotations

import time

from gpusight.recordings.opening import read_recording
from gpusight.snapshot.model import Snapshot
from support.terminal import PtyGpusight


def test_quitting_the_ui_closes_a_compact_recording(tmp_path):
    path = tmp_path / "ui.gtop"
    app = PtyGpusight((100, 30), controlling=True, args=("--demo", "healthy", "--record", str(path), "--interval", "0.25"))
    with app:
        app.wait_up()
        deadline = time.monotonic() + 20
        while sum(isinstance(i, Snapshot) for i in read_recording(path)) < 4:
            assert time.monotonic() < deadline, "no snapshots recorded"
            time.sleep(0.1)
        assert app.quit() == 0
    items = list(read_recording(path))
    assert len(items) >= 4 and all(isinstance(i, Snapshot) for i in items)  # no "interrupted": closed cleanly
