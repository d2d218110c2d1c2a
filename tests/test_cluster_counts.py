"""Every figure of the cluster view is derived once and shown the same everywhere (issue 27, item 6).

A real Prometheus scrapes one simulated node of four GPUs: GPU 0 trains, GPU 1 has been free all along, GPU 3 has a
process starting up (no memory yet), and GPU 2 ran a job that ends during the test. Right after it ends, GPU 2 is
idle and empty *now* but was busy a moment ago, inside the fleet advice's window: the place where the header and
the host rows (which judged the instant) used to count 2 free GPUs while the fleet advice (which judged the window)
counted 1. The cluster view in tmux at 160x45 and 80x24, and ``--cluster --once``, must all show the same figure.
A frame with the nodes' own advice and no fleet advice must not say "nothing looks wrong".
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_cluster_ui import Player, open_host, statics_text
from test_ui_app import screen_text, wait_for
from test_ui_e2e_tmux import Tmux, gpusight_command

from gpusight.cluster.fleet_advice import FleetThresholds, idle_holding
from gpusight.cluster.frame import ClusterFrame, ClusterGpu, ClusterHistory, ClusterNode
from gpusight.cluster.source import ClusterSource
from gpusight.snapshot.model import Advice, Severity
from gpusight.ui.cluster.app import ClusterApp
from gpusight.ui.cluster.table import HOST_ROW
from support.exposition import ExpositionServer, SimGpu, SimJob, SimNode, SimProcess, render
from support.prometheus import PrometheusServer, Target, require_prometheus

REPO = Path(__file__).resolve().parents[1]
HISTORY = "60"
"""Seconds of history: 1 s steps and a 30 s advice window, the time GPU 2 stays busy in the window once it ends."""

SIZES = ((160, 45), (80, 24))
"""The terminal sizes the view is read at, both at once."""


def node() -> SimNode:
    """gpu-a: GPU 0 trains, GPU 1 is free, GPU 2 runs a job (no gpusight process: say, another user's container),
    GPU 3 has a process starting up."""
    return SimNode("gpu-a", [SimGpu(0, 95, 60000, 600, 70), SimGpu(1, 0, 0), SimGpu(2, 80, 30000, 500, 65),
                             SimGpu(3, 0, 0)],
                   jobs=[SimJob(1, "", "training")],
                   processes=[SimProcess(1, "0", 0, "train.py", sm=90, memory_bytes=58 << 30),
                              SimProcess(1, "1", 3, "train.py", sm=0, memory_bytes=0)])


@pytest.fixture()
def fleet() -> Iterator[tuple[SimNode, PrometheusServer]]:
    require_prometheus()
    sim = node()
    server = ExpositionServer({"/gpu-a": lambda: render(sim)})
    try:
        with PrometheusServer([Target(server.address, "/gpu-a", "gpu-a:9400")]) as prometheus:
            yield sim, prometheus
    finally:
        server.close()


def wait(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def figures(screen: str) -> dict[str, str | None]:
    """The free-GPU counts a cluster screen shows: the header's, gpu-a's row's and the fleet advice's."""
    header = re.search(r"(\d+) free", screen.splitlines()[0])
    row = re.search(r"gpu-a\s+up\s.*?\d+ GPUs?, (\d+) free", screen)
    advice = re.search(r"(\d+) GPUs? free on", screen)
    return {name: match.group(1) if match else None
            for name, match in (("header", header), ("row", row), ("advice", advice))}


def test_header_rows_advice_and_once_count_the_same_free_gpus(fleet, tmp_path: Path) -> None:
    sim, prometheus = fleet
    source = ClusterSource(prometheus.url, history_seconds=float(HISTORY))
    wait(lambda: any(a.id == "fleet_free_gpus" for a in source.poll().fleet_advice), "GPU 1's window to fill")
    views = [Tmux(f"gpusight-counts-{os.getpid()}-{width}") for width, _ in SIZES]
    try:
        for view, size in zip(views, SIZES, strict=True):
            view.start(gpusight_command("--cluster", prometheus.url, "--interval", "1", "--cluster-history", HISTORY),
                       size, tmp_path)
        for view in views:
            wait(lambda view=view: all(figures(view.screen()).values()), "the cluster view's free-GPU counts")
        sim.gpus[2] = SimGpu(2, 0, 0)  # GPU 2's job ends: idle and empty now, busy within the window
        wait(lambda: source.poll().nodes[0].gpus[2].utilization_percent == 0, "GPU 2 idle on the server")
        for view, size in zip(views, SIZES, strict=True):
            wait(lambda view=view: re.search(r"\n\s+2 H100 80GB HBM3\s+0%", view.screen()) is not None,
                 f"GPU 2 shown idle at {size}")
            time.sleep(1.5)  # a poll or two more, inside the 30 s window
            screen = view.screen()
            print(screen)
            assert figures(screen) == {"header": "1", "row": "1", "advice": "1"}, (size, screen)
            assert "1 node " in screen.splitlines()[0] and "1 nodes" not in screen, screen
        once = subprocess.run([sys.executable, "-m", "gpusight", "--cluster", prometheus.url, "--once",
                               "--cluster-history", HISTORY], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    finally:
        for view in views:
            view.kill_server()
    assert once.returncode == 0, once.stderr
    print(once.stdout)
    title = once.stdout.splitlines()[0]
    assert ": 1 node, 4 GPUs (1 free), 1 job" in title, title
    assert "gpu-a  up  gpusight --serve  4 GPUs, 1 free" in once.stdout
    assert "1 GPU free on 1 node" in once.stdout
    assert re.search(r"\n\s+2\s+0%\s", once.stdout)  # GPU 2 idle now, and still not free: busy within the window


def node_advice_only() -> ClusterFrame:
    """One node whose gpusight raises its own advice while no fleet rule fires."""
    gpu = ClusterGpu(host="solo", index=0, utilization_percent=90.0, memory_used_bytes=1 << 30,
                     memory_total_bytes=80 << 30)
    advice = tuple(("solo", Advice(id=f"input_bound:{i}", severity=severity, scope=f"job{i}",
                                   title=f"Input-bound job {i}", evidence="input wait 40%", action="more workers"))
                   for i, severity in enumerate((Severity.WARN, Severity.WARN, Severity.WARN, Severity.INFO)))
    return ClusterFrame(timestamp=1_700_000_000.0, url="http://prometheus.test:9090",
                        nodes=(ClusterNode(host="solo", instances=("solo:9400",), up=True, exporter="gpusight",
                                           gpus=(gpu,)),),
                        node_advice=advice)


@pytest.mark.parametrize("size", SIZES)
def test_node_advice_without_fleet_advice_never_says_nothing_looks_wrong(size: tuple[int, int]) -> None:
    async def main() -> None:
        app = ClusterApp(Player(node_advice_only()), "http://prometheus.test:9090", interval=3600)
        async with app.run_test(size=size) as pilot:
            await wait_for(pilot, lambda: app.frames_shown >= 1)
            await pilot.pause()
            screen = screen_text(app)
            assert "node advice: 3 WARN, 1 INFO on 1 host " in screen, screen
            assert "No fleet advice" in screen, screen
            assert "nothing looks wrong" not in screen, screen
            assert "1 node · 1 GPU · 0 free" in screen.splitlines()[0], screen

    asyncio.run(main())


def idle_holder() -> ClusterFrame:
    """One gpusight node raising no advice of its own, whose GPU 0 the fleet rules find idle holding 20 GiB."""
    util = ClusterHistory("DCGM_FI_DEV_GPU_UTIL", 1_699_999_880.0, 2.0, {("solo", 0): (0.0,) * 60})
    memory = ClusterHistory("DCGM_FI_DEV_FB_USED", 1_699_999_880.0, 2.0, {("solo", 0): (20480.0,) * 60})
    gpu = ClusterGpu(host="solo", index=0, utilization_percent=0.0, memory_used_bytes=20 << 30,
                     memory_total_bytes=80 << 30)
    return ClusterFrame(timestamp=1_700_000_000.0, url="http://prometheus.test:9090",
                        nodes=(ClusterNode(host="solo", instances=("solo:9400",), up=True, exporter="gpusight",
                                           gpus=(gpu,)),),
                        fleet_advice=tuple(idle_holding(util, memory, {"solo"}, (), FleetThresholds())),
                        history=(util, memory))


def test_host_screen_shows_the_fleet_advice_about_its_gpus() -> None:
    async def main() -> None:
        app = ClusterApp(Player(idle_holder()), "http://prometheus.test:9090", interval=3600)
        async with app.run_test(size=(160, 45)) as pilot:
            await open_host(pilot, ("solo", HOST_ROW))
            text = statics_text(app.screen)
            assert "solo GPU 0 idle while holding 20.0 GiB" in text, text
            assert "nothing looks wrong" not in text, text

    asyncio.run(main())
