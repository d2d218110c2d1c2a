"""Simulated nodes served in the Prometheus text format, for Prometheus to scrape in tests and the fleet benchmark.

A :class:`SimNode` is what one node's exporter knows at one moment; :func:`render` writes it with
``prometheus_client`` (never by hand) under the names of ``gpusight.metric_names``: dcgm-exporter's device
metrics, plus gpusight's own series when ``gpusight`` is True. :class:`ExpositionServer` serves callables
that produce the text on each scrape, so the values can move, and a route can be removed to kill a node.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from gpusight import metric_names as m

TOTAL_MIB = 81559
"""Framebuffer of an H100 80GB in MiB."""


@dataclass
class SimGpu:
    """One GPU's figures."""

    index: int
    util: float = 0.0
    fb_used_mib: float = 0.0
    power: float = 70.0
    temp: float = 35.0
    sm_active: float | None = None
    """0-1 ratio; None leaves ``DCGM_FI_PROF_SM_ACTIVE`` out (dcgm-exporter's defaults have none)."""
    pcie_tx: float | None = None
    pcie_rx: float | None = None


@dataclass
class SimJob:
    """One job of a node (``gpusight_job_info``)."""

    job: int
    cluster_job: str = ""
    kind: str = "training"
    world_size: int | None = None
    steps_per_second: float | None = None
    """With the rest below: the ``gpusight_job_*`` speed series, left out while None."""
    tokens_per_second: float | None = None
    flops_per_second: float | None = None
    peak_flops_per_second: float | None = None
    step_time_percent: dict[str, float] | None = None
    """data, compute, communication, copy and idle."""


@dataclass
class SimProcess:
    """One GPU process of a node."""

    job: int
    rank: str
    gpu: int
    name: str = "python"
    user: str = "alice"
    sm: float | None = None
    memory_bytes: int = 0


@dataclass
class SimNode:
    """What one node's exporter serves."""

    host: str
    gpus: list[SimGpu] = field(default_factory=list)
    jobs: list[SimJob] = field(default_factory=list)
    processes: list[SimProcess] = field(default_factory=list)
    gpusight: bool = True
    """Serve gpusight's own series (``gpusight --serve``) rather than dcgm-exporter's alone."""


class _NodeCollector:
    def __init__(self, node: SimNode) -> None:
        self.node = node

    def collect(self) -> Iterator[Metric]:
        node = self.node
        hosts = [node.host, node.host] if node.gpusight else [node.host]
        host_labels = list(m.HOST_LABELS if node.gpusight else (m.LABEL_HOSTNAME,))
        device_labels = [label for label in m.DEVICE_LABELS if node.gpusight or label != m.LABEL_HOSTNAME_NEW]

        def device_values(gpu: SimGpu) -> list[str]:
            values = {m.LABEL_GPU: str(gpu.index), m.LABEL_UUID: f"GPU-{node.host}-{gpu.index:04d}",
                      m.LABEL_PCI_BUS_ID: f"00000000:{gpu.index + 0x10:02X}:00.0", m.LABEL_DEVICE: f"nvidia{gpu.index}",
                      m.LABEL_MODEL: "NVIDIA H100 80GB HBM3", m.LABEL_HOSTNAME: node.host,
                      m.LABEL_HOSTNAME_NEW: node.host, m.LABEL_DRIVER: "550.54.15"}
            return [values[label] for label in device_labels]

        figures: list[tuple[m.MetricName, Callable[[SimGpu], float | None]]] = [
            (m.GPU_UTIL, lambda g: g.util), (m.FB_USED, lambda g: g.fb_used_mib),
            (m.FB_FREE, lambda g: TOTAL_MIB - g.fb_used_mib), (m.POWER_USAGE, lambda g: g.power),
            (m.GPU_TEMP, lambda g: g.temp), (m.SM_ACTIVE, lambda g: g.sm_active), (m.PCIE_TX, lambda g: g.pcie_tx),
            (m.PCIE_RX, lambda g: g.pcie_rx),
        ]
        for metric, read in figures:
            family = GaugeMetricFamily(metric.name, metric.help, labels=device_labels)
            for gpu in node.gpus:
                value = read(gpu)
                if value is not None:
                    family.add_metric(device_values(gpu), value)
            if family.samples:
                yield family
        if not node.gpusight:
            return
        info = GaugeMetricFamily(m.BUILD_INFO.name, m.BUILD_INFO.help, labels=host_labels + list(m.BUILD_INFO.labels))
        info.add_metric(hosts + ["test"], 1)
        yield info
        jobs = GaugeMetricFamily(m.JOB_INFO.name, m.JOB_INFO.help, labels=host_labels + list(m.JOB_INFO.labels))
        world = GaugeMetricFamily(m.JOB_WORLD_SIZE.name, m.JOB_WORLD_SIZE.help,
                                  labels=host_labels + list(m.JOB_WORLD_SIZE.labels))
        for job in node.jobs:
            jobs.add_metric(hosts + [str(job.job), job.cluster_job, job.kind, "", "", ""], 1)
            if job.world_size is not None:
                world.add_metric(hosts + [str(job.job)], job.world_size)
        yield jobs
        yield world
        yield from _speed_families(node.jobs, hosts, host_labels)
        process_labels = host_labels + list(m.PROCESS_INFO.labels)
        infos = GaugeMetricFamily(m.PROCESS_INFO.name, m.PROCESS_INFO.help, labels=process_labels)
        memory = GaugeMetricFamily(m.PROCESS_MEMORY.name, m.PROCESS_MEMORY.help,
                                   labels=host_labels + list(m.PROCESS_MEMORY.labels))
        sm = GaugeMetricFamily(m.PROCESS_SM.name, m.PROCESS_SM.help, labels=host_labels + list(m.PROCESS_SM.labels))
        for process in node.processes:
            key = [str(process.job), process.rank, str(process.gpu)]
            infos.add_metric(hosts + key + [process.name, process.user, "", "", "", ""], 1)
            memory.add_metric(hosts + key, process.memory_bytes)
            if process.sm is not None:
                sm.add_metric(hosts + key, process.sm)
        yield infos
        yield memory
        yield sm
        age = GaugeMetricFamily(m.SNAPSHOT_AGE.name, m.SNAPSHOT_AGE.help, labels=host_labels)
        age.add_metric(hosts, 0.1)
        yield age


def _speed_families(jobs: list[SimJob], hosts: list[str], host_labels: list[str]) -> Iterator[Metric]:
    """The job speed families of the jobs that have speed (FLOP/s labelled MFU)."""
    for metric, read in ((m.JOB_STEPS, "steps_per_second"), (m.JOB_TOKENS, "tokens_per_second"),
                         (m.JOB_FLOPS, "flops_per_second"), (m.JOB_PEAK_FLOPS, "peak_flops_per_second")):
        family = GaugeMetricFamily(metric.name, metric.help, labels=host_labels + list(metric.labels))
        for job in jobs:
            value = getattr(job, read)
            if value is not None:
                family.add_metric(hosts + [str(job.job)] + (["MFU"] if len(metric.labels) > 1 else []), value)
        yield family
    parts = GaugeMetricFamily(m.JOB_STEP_TIME.name, m.JOB_STEP_TIME.help,
                              labels=host_labels + list(m.JOB_STEP_TIME.labels))
    for job in jobs:
        for part, percent in (job.step_time_percent or {}).items():
            parts.add_metric(hosts + [str(job.job), part], percent)
    yield parts


def render(node: SimNode) -> bytes:
    """``node`` in the Prometheus text format, written by prometheus_client."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_NodeCollector(node))  # type: ignore[arg-type]
    return generate_latest(registry)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


class ExpositionServer:
    """An HTTP server on 127.0.0.1 answering each route with the bytes its callable returns at that moment."""

    def __init__(self, routes: dict[str, Callable[[], bytes | None]] | None = None) -> None:
        self.routes: dict[str, Callable[[], bytes | None]] = dict(routes or {})
        """Path -> body maker; a path removed, or a maker returning None, answers 404."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the standard library's name
                make = server.routes.get(self.path.split("?")[0])
                body = None if make is None else make()
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        """The port it listens on."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        """Stop serving and close the socket (scrapes then get 'connection refused')."""
        self.httpd.shutdown()
        self.httpd.server_close()
