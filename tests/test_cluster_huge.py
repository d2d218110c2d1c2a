"""A Prometheus answering far more than expected (issue 30, finding 2): ``gpusight --cluster`` keeps its memory
bounded and says in one line what it left out.

The fake Prometheus serves the issue's setup: 6,250 nodes x 8 GPUs, 50,000 series per device metric with the raw
labels of a Kubernetes dcgm-exporter (about 30 MB for one metric's raw series), gzipped as Prometheus does (so
a small answer on the wire unpacks to hundreds of MB). The real binary runs as a child
(``--once``, ``--json``, and the TUI in a real pty); psutil reads its resident memory every 20 ms and kills it once
it passes the issue's bound of 500 MiB (before this change it took 3-4 GiB here).
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from gpusight.cluster.settings import MAX_NODES
from support.fake_prometheus import DCGM_RAW_LABELS, FakePrometheus, host_name
from support.peak_rss import PeakRss
from support.terminal import PtyTerminal, gpusight_argv

MEMORY_BOUND_MIB = 500
"""The issue's bound on peak resident memory."""

HOSTS = 6250
"""Nodes of the fleet: 50,000 GPUs."""

CUT_LINE = f"showing {MAX_NODES:,} of {HOSTS:,} nodes"
"""How the line saying what was cut starts."""

TIMEOUT = "300"
"""--cluster-timeout: the answers are large and the test machine is shared; speed is not what is tested."""

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]")


@pytest.fixture(scope="module")
def prometheus():
    with FakePrometheus(hosts=HOSTS, extra_labels=DCGM_RAW_LABELS, gzip=True) as fake:
        yield fake


def run_bounded(argv: list[str]) -> tuple[float, str, str]:
    """(peak MiB, stdout, stderr) of ``argv``; fails when it passes the bound (it is killed then)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = PeakRss(proc.pid, kill_above=MEMORY_BOUND_MIB)
    out, err = proc.communicate(timeout=900)
    peak.stop()
    assert not peak.killed, f"peak resident memory passed {MEMORY_BOUND_MIB} MiB (killed at {peak.peak:.0f} MiB)"
    assert proc.returncode == 0, err[-2000:]
    return peak.peak, out, err


def test_once_on_a_huge_fleet_stays_under_500_mib_and_says_what_it_cut(prometheus) -> None:
    _, out, err = run_bounded(gpusight_argv("--cluster", prometheus.url, "--once", "--cluster-timeout", TIMEOUT))
    cut = [line for line in err.splitlines() if CUT_LINE in line]
    assert len(cut) == 1, err
    assert "50,000 of DCGM_FI_DEV_" in cut[0]
    assert CUT_LINE in out  # also under Problems in the report
    # The first nodes by name are shown, in full; the rest are not.
    assert host_name(0) in out and host_name(MAX_NODES - 1) in out
    assert host_name(MAX_NODES) not in out and host_name(HOSTS - 1) not in out


def test_json_on_a_huge_fleet_stays_under_500_mib_and_says_what_it_cut(prometheus) -> None:
    _, out, err = run_bounded(gpusight_argv("--cluster", prometheus.url, "--json", "--cluster-timeout", TIMEOUT))
    frame = json.loads(out)
    hosts = [node["host"] for node in frame["nodes"]]
    assert hosts == [host_name(i) for i in range(MAX_NODES)]
    assert all(len(node["gpus"]) == 8 for node in frame["nodes"])
    assert frame["problems"][0].startswith(CUT_LINE)
    assert CUT_LINE in err


def test_tui_on_a_huge_fleet_stays_under_500_mib_and_shows_the_cut_line(prometheus) -> None:
    argv = gpusight_argv("--cluster", prometheus.url, "--interval", "2", "--cluster-timeout", TIMEOUT)
    env = dict(os.environ, GPUSIGHT_PARTIAL_OUTPUT="0")
    with PtyTerminal(argv, (160, 45), env=env) as term:
        peak = PeakRss(term.proc.pid, kill_above=MEMORY_BOUND_MIB)
        screen = lambda: ANSI.sub(" ", bytes(term.output).decode("utf-8", "replace"))  # noqa: E731
        first = len(prometheus.queries)
        term.wait_for(lambda: CUT_LINE in screen() or peak.killed, "the line saying what was cut", 900)
        # Two more polls: the range caches fill on the first, later polls must not grow without bound.
        term.wait_for(lambda: len(prometheus.queries) - first >= 3 * 6 or peak.killed, "two more polls", 900)
        peak.stop()
        term.quit()
    assert not peak.killed, f"peak resident memory passed {MEMORY_BOUND_MIB} MiB (killed at {peak.peak:.0f} MiB)"
    assert host_name(0) in screen()
