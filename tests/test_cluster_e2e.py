"""End to end: a real Prometheus scrapes THREE ``gpusight --serve`` exporters, each on the fake NVML with its own
scenario and ``--hostname``; ``gpusight --cluster URL --once/--json`` shows all three with GPUs, jobs and advice.

The nodes share this machine's processes; each scenario says which of them are on its GPUs. One torchrun-like job
of four ranks spans node-a (ranks 0, 1) and node-b (ranks 2, 3): every rank carries the same rendezvous, so both
exporters give it the same ``cluster_job``. Rank 3 runs at a third of the others' SM: a straggler. On node-c an
idle process holds 20 GiB of a GPU that does nothing, and two GPUs are free.

The same fleet is then driven in ``gpusight --cluster`` in a real pty at 160x45 and 80x24, and one exporter is
stopped: its node must show DOWN within a few scrapes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from gpusight.cluster.source import ClusterSource
from support.exporter import RunningExporter, serving
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env
from support.prometheus import PrometheusServer, Target, require_prometheus
from support.terminal import PtyTerminal, gpusight_argv
from support.workloads import torchrun_job

REPO = Path(__file__).resolve().parents[1]
HISTORY = "20"
"""Seconds of history: 1 s steps and a 10 s advice window, so fleet advice stands within about 10 s."""

ADVICE_AT_ONCE = "[advice]\nwindow_s = 1\nhold_s = 0\nthrottle_hold_s = 0\nidle_hold_s = 0\n"
"""Lets each node's own advice stand after its first polls."""


def busy(pid: int, sm: int, util: int = 95) -> FakeGpu:
    return FakeGpu(util_gpu=util, mem_used=60 << 30, compute_processes=[(pid, 58 << 30)],
                   live_process_samples=[(pid, 40, sm)])


class Cluster(str):
    """The Prometheus URL, with the running exporters by host (to stop one)."""

    exporters: dict[str, RunningExporter]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, fake_nvml_lib: Path) -> Iterator[Cluster]:
    require_prometheus()
    tmp = tmp_path_factory.mktemp("cluster")
    config = tmp / "config.toml"
    config.write_text(ADVICE_AT_ONCE)
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        # a rendezvous on a routable address (two nodes cannot meet on 127.0.0.1), as across real nodes
        with torchrun_job(tmp, nproc=4, extra_env={"MASTER_ADDR": "10.20.0.5"}) as job, ExitStack() as stack:
            ranks = job.ranks
            scenarios = {
                "node-a": [busy(ranks[0], 90), busy(ranks[1], 88), FakeGpu(util_gpu=0, mem_used=0)],
                "node-b": [busy(ranks[2], 91), busy(ranks[3], 30, util=40), FakeGpu(util_gpu=0, mem_used=0)],
                "node-c": [FakeGpu(util_gpu=0, mem_used=21 << 30, compute_processes=[(idle.pid, 20 << 30)]),
                           FakeGpu(util_gpu=0, mem_used=0), FakeGpu(util_gpu=0, mem_used=0)],
            }
            targets = []
            exporters = {}
            for host, gpus in scenarios.items():
                scenario = FakeScenario(gpus=gpus).write(tmp / f"{host}.txt")
                env = {**fake_nvml_env(fake_nvml_lib, scenario), "PYTHONPATH": str(REPO)}
                exporter = stack.enter_context(serving(["--hostname", host, "--config", str(config),
                                                        "--interval", "0.5"], env=env))
                exporters[host] = exporter
                targets.append(Target(exporter.url.split("://", 1)[1], instance=f"{host}:9401"))
            prometheus = stack.enter_context(PrometheusServer(targets))
            url = Cluster(prometheus.url)
            url.exporters = exporters
            yield url
    finally:
        idle.kill()
        idle.wait()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def wait_for_fleet_advice(url: str) -> None:
    source = ClusterSource(url, history_seconds=float(HISTORY))
    deadline = time.monotonic() + 60
    wanted = ("fleet_straggler:", "fleet_idle_holding:node-c/gpu0", "fleet_free_gpus")
    while time.monotonic() < deadline:
        ids = [a.id for a in source.poll().fleet_advice]
        if all(any(i.startswith(w) for i in ids) for w in wanted):
            return
        time.sleep(1)
    raise AssertionError(f"fleet advice never complete: {ids}")


def test_three_exporters_once_and_json(cluster):
    wait_for_fleet_advice(cluster)
    document = json.loads(run_cli("--cluster", cluster, "--json", "--cluster-history", HISTORY).stdout)
    nodes = {n["host"]: n for n in document["nodes"]}
    assert sorted(nodes) == ["node-a", "node-b", "node-c"]
    for node in nodes.values():
        assert node["up"] and node["exporter"] == "gpusight" and len(node["gpus"]) == 3
        assert node["cpu_percent"] is not None
    assert nodes["node-b"]["gpus"][1]["utilization_percent"] == 40
    spanning = {j["cluster_job"] for j in document["jobs"] if j["host"] in ("node-a", "node-b")}
    assert len(spanning) == 1 and next(iter(spanning)).startswith("rdzv:")
    ranks = sorted((p["host"], p["rank"], p["gpu"]) for p in document["processes"] if p["host"] != "node-c")
    assert ranks == [("node-a", "0", 0), ("node-a", "1", 1), ("node-b", "2", 0), ("node-b", "3", 1)]
    advice = {a["id"]: a for a in document["fleet_advice"]}
    straggler = next(a for i, a in advice.items() if i.startswith("fleet_straggler:rdzv:"))
    assert "rank 3 on node-b GPU 1" in straggler["evidence"]
    assert "fleet_idle_holding:node-c/gpu0" in advice
    assert advice["fleet_free_gpus"]["evidence"].startswith("node-c: 2, node-a: 1, node-b: 1")
    assert document["node_advice"], "the nodes' own advice (gpusight_advice) is missing"
    assert document["missing_panels"] == [] and document["problems"] == []

    table = run_cli("--cluster", cluster, "--once", "--cluster-history", HISTORY)
    assert table.returncode == 0, table.stderr
    for host, free in (("node-a", 1), ("node-b", 1), ("node-c", 2)):  # as the fleet advice counts them
        assert f"{host}  up  gpusight --serve  3 GPUs, {free} free  CPU " in table.stdout
    assert "Straggler in rdzv:" in table.stdout and "idle while holding" in table.stdout
    assert "Advice raised on the nodes (gpusight --serve)" in table.stdout


def visible(output: bytes) -> str:
    """The terminal output with its escape sequences removed (enough to find the words the screen drew)."""
    return re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]", b" ", output).decode("utf-8", "replace")


def open_cluster_view(cluster: str, size: tuple[int, int]) -> PtyTerminal:
    """``gpusight --cluster URL`` in a real pty (whole changed lines, so words can be read out of the bytes)."""
    argv = gpusight_argv("--cluster", cluster, "--interval", "1", "--cluster-history", HISTORY)
    return PtyTerminal(argv, size, env={**os.environ, "PYTHONPATH": str(REPO), "GPUSIGHT_PARTIAL_OUTPUT": "0"})


def open_host(term: PtyTerminal, host: str) -> Callable[[], str]:
    """Filter the fleet table to ``host`` and open its screen; what the terminal drew since, read again on each call."""
    mark = len(term.output)
    for key in f"/{host}\r".encode():  # typed one by one: a burst would read as a paste
        term.send(bytes([key]))
        time.sleep(0.15)
    time.sleep(0.5)
    term.send(b"\r")
    return lambda: visible(bytes(term.output[mark:]))


@pytest.mark.parametrize("size", [(160, 45), (80, 24)])
def test_three_exporters_in_the_cluster_view(cluster, size):
    wait_for_fleet_advice(cluster)
    with open_cluster_view(cluster, size) as term:
        screen = lambda: visible(bytes(term.output))  # noqa: E731 - read again on every check
        term.wait_for(lambda: all(re.search(rf"{host}\s+up\b", screen()) for host in ("node-a", "node-b", "node-c")),
                      "three nodes up", 60)
        term.wait_for(lambda: "Straggler" in screen(), "the straggler across node-a and node-b", 60)
        drilled = open_host(term, "node-b")
        term.wait_for(lambda: "History (range" in drilled() and "util 0-100%" in drilled(), "node-b's charts", 30)
        if size[0] >= 120:
            term.wait_for(lambda: "Processes" in drilled() and "python" in drilled(), "node-b's processes", 30)
        mark = len(term.output)
        term.send(b"\x1b")
        term.send(b"\x1b")  # closes the filter
        term.wait_for(lambda: "node-a" in visible(bytes(term.output[mark:])), "back on the fleet", 30)
        time.sleep(0.5)  # q straight after Esc would read as Alt+q
        assert "Traceback" not in screen()
        assert term.quit() == 0


def test_a_stopped_exporter_shows_its_node_down(cluster):
    """Last in this file: it stops node-c's exporter for good."""
    with open_cluster_view(cluster, (80, 24)) as term:
        term.wait_for(lambda: re.search(r"node-c\s+up\b", visible(bytes(term.output))) is not None, "node-c up", 60)
        mark = len(term.output)
        stopped = time.monotonic()
        cluster.exporters["node-c"].proc.terminate()
        term.wait_for(lambda: "DOWN" in visible(bytes(term.output[mark:])), "node-c shown down", 30)
        print(f"node-c shown DOWN {time.monotonic() - stopped:.1f} s after its exporter stopped")
        assert term.quit() == 0
