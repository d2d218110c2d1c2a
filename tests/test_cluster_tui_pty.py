"""``python -m gpusight --cluster URL`` in a real pty against a real Prometheus scraping three simulated nodes.

Two nodes follow gpusight.metric_names (a job spanning both with a slow rank, an idle GPU holding memory), the
third serves a stored sample of plain dcgm-exporter output. The view must show all three with charts and
advice at 160x45 and 80x24, open a host with Enter, and show a node that stops answering as down within a
few scrapes. Skipped with a reason where Prometheus is not installed.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator

import pytest
from test_cluster_prometheus import DCGM_SAMPLE, training_nodes

from support.exposition import ExpositionServer, render
from support.prometheus import PrometheusServer, Target, require_prometheus
from support.terminal import PtyTerminal, gpusight_argv

HISTORY = "20"
"""Seconds of history asked for (1 s steps, a 10 s advice window)."""

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]")


def visible(output: bytes) -> str:
    """The terminal output with its escape sequences removed (enough to find words the screen drew)."""
    return ANSI.sub(b" ", output).decode("utf-8", "replace")


class Fleet:
    """The three simulated nodes behind one HTTP server; ``kill`` makes gpu-b answer 404 from then on."""

    def __init__(self) -> None:
        nodes = {node.host: node for node in training_nodes()}
        dcgm = DCGM_SAMPLE.read_bytes()
        self.alive = {"gpu-a": True, "gpu-b": True}
        routes = {f"/{host}": (lambda host=host: render(nodes[host]) if self.alive[host] else None) for host in nodes}
        routes["/dcgm"] = lambda: dcgm
        self.server = ExpositionServer(routes)
        self.targets = [Target(self.server.address, path, path[1:]) for path in routes]

    def kill(self, host: str) -> None:
        self.alive[host] = False


@pytest.fixture()
def fleet() -> Iterator[tuple[Fleet, PrometheusServer]]:
    require_prometheus()
    nodes = Fleet()
    with PrometheusServer(nodes.targets) as prometheus:
        yield nodes, prometheus
    nodes.server.close()


@pytest.mark.parametrize("size", [(160, 45), (80, 24)])
def test_cluster_view_in_a_pty_shows_three_nodes_charts_advice_and_a_killed_node(fleet, size) -> None:
    nodes, prometheus = fleet
    argv = gpusight_argv("--cluster", prometheus.url, "--interval", "1", "--cluster-history", HISTORY)
    # Words are read out of the byte stream, not from a terminal emulator: whole changed lines keep them whole.
    env = dict(os.environ, GPUSIGHT_PARTIAL_OUTPUT="0")
    with PtyTerminal(argv, size, env=env) as term:
        screen = lambda: visible(bytes(term.output))  # noqa: E731 - read again on every check
        term.wait_for(lambda: all(host in screen() for host in ("gpu-a", "gpu-b", "dgx-a100-01")), "three nodes", 60)
        term.wait_for(lambda: "dcgm only" in screen(), "the dcgm-only node named as such", 30)
        # Fleet advice: beside the table when wide, its one-line summary when narrow.
        marker = "Straggler" if size[0] >= 120 else "WARN"
        term.wait_for(lambda: marker in screen(), "the straggler advice", 60)
        term.wait_for(lambda: "without gpusight --serve" in screen(), "the panels that need gpusight --serve", 30)
        mark = len(term.output)
        for key in b"/gpu-a\r":  # typed, not pasted: the filter must get every key (p is also the pause key)
            term.send(bytes([key]))
            time.sleep(0.15)
        time.sleep(0.5)
        term.send(b"\r")  # the table has the keys back and its cursor is on gpu-a's row
        term.wait_for(lambda: "History (range" in visible(bytes(term.output[mark:])), "gpu-a's screen", 30)
        term.wait_for(lambda: "util 0-100%" in visible(bytes(term.output[mark:])), "gpu-a's charts", 30)
        if size[0] >= 120:
            term.wait_for(lambda: "train.py" in visible(bytes(term.output[mark:])), "gpu-a's processes", 30)
        mark = len(term.output)
        term.send(b"\x1b")
        term.send(b"\x1b")  # closes the filter
        term.wait_for(lambda: "gpu-b" in visible(bytes(term.output[mark:])), "back on the fleet", 30)
        mark = len(term.output)
        nodes.kill("gpu-b")
        term.wait_for(lambda: "DOWN" in visible(bytes(term.output[mark:])), "gpu-b shown down", 30)
        assert "Traceback" not in screen() and "PAUSED" not in screen()
        assert term.quit() == 0
