"""``gpusight --cluster`` against a hostile or broken exporter, through a real Prometheus and the real binary.

One node serves, under dcgm-exporter's and gpusight's names, label values holding Rich markup, a raw OSC 8
hyperlink to evil.example, CSI, BEL, an 8-bit CSI and a bidi override (host, model, UUID, MIG profile, process,
user, pod, namespace, container, Slurm job, cluster job, advice), and values no GPU can have: -1, NaN, +Inf, -Inf,
1e308, and finite but impossible ones. ``--once`` and ``--json`` must print the labels as inert text and the values
as N/A (``null``); the TUI, in a real pty, must write no hyperlink, BEL or bidi override from a label, on the fleet
and on the host screen. Skipped with a reason where Prometheus is not installed.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.samples import Sample

from gpusight import metric_names as m
from support.exposition import ExpositionServer
from support.prometheus import PrometheusServer, Target, require_prometheus
from support.terminal import PtyTerminal, gpusight_argv

LINK = "[link=http://evil.example/]click[/link]"
"""Rich markup that would become a live hyperlink if a label were read as markup."""
OSC8 = "\x1b]8;;http://evil.example/\x1b\\osc\x1b]8;;\x1b\\"
"""A raw OSC 8 hyperlink."""


def hostile(tag: str) -> str:
    """A label value carrying every attack, starting with ``tag`` so it can be found on screen."""
    return f"{tag}{LINK}[b]B[/b][/]{OSC8}\x1b[31mred\x07bel\x9b2Jc1\u202eltr\U0001f600"  # beyond U+FFFF too


HOST = hostile("evilhost")
BAD = {1: -1.0, 2: math.nan, 3: math.inf, 4: -math.inf, 5: 1e308}
"""GPU index -> the value every one of its device metrics has."""
IMPOSSIBLE = {m.GPU_UTIL: 250.0, m.FB_USED: 1e12, m.FB_FREE: 1e12, m.POWER_USAGE: 1e6, m.GPU_TEMP: 1000.0,
              m.SM_ACTIVE: 7.0, m.PCIE_TX: 1e14, m.PCIE_RX: 1e14}
"""GPU 6's values: finite, and beyond what any GPU reads."""
GOOD = {m.GPU_UTIL: 50.0, m.FB_USED: 1000.0, m.FB_FREE: 80000.0, m.POWER_USAGE: 300.0, m.GPU_TEMP: 40.0,
        m.SM_ACTIVE: 0.5, m.PCIE_TX: 1e9, m.PCIE_RX: 1e9}
"""GPU 0's values: ordinary ones, shown as figures."""
GPU_FIELDS = ("utilization_percent", "memory_used_bytes", "memory_total_bytes", "power_watts", "temperature_celsius",
              "sm_active_percent", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")
PROCESS_VALUES = (m.PROCESS_MEMORY, m.PROCESS_SM, m.PROCESS_CPU, m.WORKERS, m.WORKERS_CPU, m.INPUT_WAIT)
FORBIDDEN = ("\x1b", "\x07", "\x9b", "\u202e")
"""What no line of plain output may hold."""


class _HostileNode:
    def collect(self) -> Iterator[Metric]:
        hosts = [HOST, HOST]
        device = list(m.DEVICE_LABELS)

        def labels(index: int) -> list[str]:
            values = {m.LABEL_GPU: str(index), m.LABEL_UUID: hostile(f"uuid{index}"), m.LABEL_PCI_BUS_ID: "0",
                      m.LABEL_DEVICE: f"nvidia{index}", m.LABEL_MODEL: hostile(f"model{index}"),
                      m.LABEL_HOSTNAME: HOST, m.LABEL_HOSTNAME_NEW: HOST, m.LABEL_DRIVER: "550.54.15"}
            return [values[label] for label in device]

        mig = {m.FB_USED: -1.0, m.FB_FREE: 5000.0}
        for metric in GOOD:
            family = GaugeMetricFamily(metric.name, metric.help, labels=device)
            family.add_metric(labels(0), GOOD[metric])
            for index, value in BAD.items():
                family.add_metric(labels(index), value)
            family.add_metric(labels(6), IMPOSSIBLE[metric])
            if metric in mig:  # a MIG instance of GPU 0, in the same family with two labels more
                instance = dict(zip(device + list(m.MIG_LABELS), labels(0) + ["1", hostile("profile")], strict=True))
                family.samples.append(Sample(metric.name, instance, mig[metric]))
            yield family

        def own(metric: m.MetricName, values: list[str], value: float) -> Metric:
            family = GaugeMetricFamily(metric.name, metric.help, labels=list(m.HOST_LABELS) + list(metric.labels))
            family.add_metric(hosts + values, value)
            return family

        yield own(m.BUILD_INFO, ["test", "nvml"], 1)
        yield own(m.HOST_CPU, [], -1)
        yield own(m.JOB_INFO, ["1", hostile("cjob"), "training", "", "", ""], 1)
        yield own(m.JOB_WORLD_SIZE, ["1"], -1)
        yield own(m.PROCESS_INFO, ["1", hostile("rank"), "0", hostile("proc"), hostile("user"), hostile("ctr"),
                                   hostile("pod"), hostile("ns"), hostile("slurm")], 1)
        for metric in PROCESS_VALUES:
            yield own(metric, ["1", hostile("rank"), "0"], -1)
        yield own(m.ADVICE, ["evil:gpu0", hostile("rule"), "warn", hostile("scope"), hostile("summary")], 1)


def exposition() -> bytes:
    """The hostile node in the Prometheus text format, written by prometheus_client."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_HostileNode())  # type: ignore[arg-type]
    return generate_latest(registry)


@pytest.fixture(scope="module")
def prometheus() -> Iterator[PrometheusServer]:
    require_prometheus()
    server = ExpositionServer({"/evil": exposition})
    with PrometheusServer([Target(server.address, "/evil", "evil")]) as running:
        yield running
    server.close()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, timeout=60,
                          encoding="utf-8", errors="replace")


def test_once_prints_hostile_labels_as_text_and_impossible_values_as_na(prometheus) -> None:
    result = run_cli("--cluster", prometheus.url, "--once", "--cluster-history", "20")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for character in FORBIDDEN:
        assert character not in out, f"{character!r} reached stdout"
    assert "evilhost[link=http://evil.example/]click[/link][b]B[/b][/]" in out  # the markup, as text
    assert "proc[link=http://evil.example/]" in out and "profile[lin" in out
    rows = {int(line.split()[0]): line for line in out.splitlines() if re.match(r"^ {2}\s*\d+ ", line)}
    assert set(rows) == {0, *BAD, 6}, out
    assert re.match(r"^\s+0\s+50%\s+1000MiB/79\.1GiB\s+300W\s+40C", rows[0]), rows[0]
    for index in (*BAD, 6):
        assert re.match(rf"^\s+{index}\s+N/A\s+N/A\s+N/A\s+N/A\s+N/A", rows[index]), rows[index]
    mig = next(line for line in out.splitlines() if line.strip().startswith("MIG 1"))
    assert "N/A" in mig and "-1" not in mig, mig
    assert not re.search(r"-1(\.0)? ?(%|C|W|MiB|B)\b", out), out


def _refuse(constant: str) -> float:
    raise AssertionError(f"{constant} in JSON output")


def test_json_has_null_for_impossible_values_and_stays_valid_json(prometheus) -> None:
    result = run_cli("--cluster", prometheus.url, "--json", "--cluster-history", "20")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout, parse_constant=_refuse)
    (node,) = document["nodes"]
    assert node["host"] == HOST  # JSON carries the raw label, escaped by JSON itself
    assert node["cpu_percent"] is None
    gpus = {gpu["index"]: gpu for gpu in node["gpus"]}
    assert gpus[0]["utilization_percent"] == 50 and gpus[0]["power_watts"] == 300
    for index in (*BAD, 6):
        assert {field: gpus[index][field] for field in GPU_FIELDS} == dict.fromkeys(GPU_FIELDS), index
    assert gpus[0]["mig"][0]["memory_used_bytes"] is None
    (process,) = document["processes"]
    assert [process[f] for f in ("memory_bytes", "sm_percent", "cpu_percent", "workers", "workers_cpu_percent",
                                 "input_wait_percent")] == [None] * 6
    assert document["jobs"][0]["world_size"] is None
    for history in document["history"]:
        for series in history["series"]:
            if series["gpu"] != 0:
                assert set(series["values"]) <= {None}, (history["metric"], series)


HYPERLINK = re.compile(rb"\x1b\]8;[^\x07\x1b]*evil\.example")


def test_tui_writes_no_hyperlink_bel_or_bidi_from_labels_on_the_fleet_or_host_screen(prometheus) -> None:
    argv = gpusight_argv("--cluster", prometheus.url, "--interval", "1", "--cluster-history", "20")
    env = dict(os.environ, GPUSIGHT_PARTIAL_OUTPUT="0")
    with PtyTerminal(argv, (200, 50), env=env) as term:
        text = lambda: bytes(term.output).decode("utf-8", "replace")  # noqa: E731 - read again on every check
        term.wait_for(lambda: "evilhost" in text() and "N/A" in text(), "the hostile node", 60)
        mark = len(term.output)
        term.send(b"\r")
        host = lambda: bytes(term.output[mark:]).decode("utf-8", "replace")  # noqa: E731
        term.wait_for(lambda: "History (range" in host(), "the host screen", 30)
        term.wait_for(lambda: "util 0-100%" in host() and "proc[link=" in host(), "its charts and processes", 30)
        term.wait_for(lambda: "model1[link=" in host() and "profile[link=" in host(), "its GPU table", 30)
        output = bytes(term.output)
        assert not HYPERLINK.search(output), HYPERLINK.search(output)
        assert b"\x07bel" not in output and "\u202e".encode() not in output and b"\xc2\x9b" not in output
        assert "Traceback" not in text()
        assert term.quit() == 0


def test_the_focus_hosts_charts_are_queried_by_a_name_beyond_the_basic_plane(prometheus) -> None:
    """The host screen's power, temperature and PCIe charts come from one query naming the host; a name with a
    character beyond U+FFFF (the emoji in HOST) must reach Prometheus as UTF-8, not as a surrogate pair it refuses."""
    from gpusight.cluster.source import ClusterSource

    source = ClusterSource(prometheus.url, history_seconds=20)
    source.poll()
    frame = source.poll(focus_host=HOST)
    assert not [p for p in frame.problems if "refused a query" in p], frame.problems
    power = next(h for h in frame.history if h.metric == m.POWER_USAGE.name)
    assert any(host == HOST for host, _ in power.series), power.series.keys()
