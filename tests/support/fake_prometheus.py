"""A fake Prometheus: a real threaded HTTP server on a loopback port answering ``/api/v1/query`` and
``/api/v1/query_range`` with generated JSON in Prometheus's API format, for fleets far larger than a real
Prometheus in a test could hold.

It serves a fleet of ``hosts`` nodes of ``gpus`` GPUs each, named ``node-00000`` ... (``Hostname`` label).
Every query is answered from the metric names it mentions: ``up`` gives one series per node, and each of
``metrics`` (the device metrics named in the query) one series per GPU, with the labels that place it
(``Hostname``, ``gpu``, ``instance``; the utilization series also ``UUID`` and ``modelName``) plus
``extra_labels`` on every series of a query without ``max by`` (hostile label text, or the fat labels of a
misconfigured relabel; an aggregation drops them, as Prometheus does). A range query
gets one point per step. Values come from ``value(host, gpu, metric)``, a string as Prometheus writes it, so
bad values (``"NaN"``, ``"+Inf"``, ``"-1"``, ``"1e308"``) can be served as they are. The body is streamed in
chunks (``Transfer-Encoding: chunked``), so 50,000 series (about 30 MB) cost the server little memory; with
``gzip`` it is compressed for a client that asks (``Accept-Encoding: gzip``), as Prometheus does: 30 MB of JSON
then arrive as about 1 MB on the wire.

    with FakePrometheus(hosts=6250) as prometheus:
        ...  # prometheus.url; prometheus.bytes_sent
"""

from __future__ import annotations

import json
import re
import threading
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from gpusight import metric_names as m

DEFAULT_METRICS = (m.GPU_UTIL, m.FB_USED, m.FB_FREE, m.POWER_USAGE, m.GPU_TEMP)
"""The device metrics served by default: enough for every column of the cluster table."""

DCGM_RAW_LABELS = {
    "DCGM_FI_DRIVER_VERSION": "550.54.15", "device": "nvidia0", "pci_bus_id": "00000000:18:00.0",
    "container": "pytorch-trainer-main", "namespace": "ml-training-production-europe-west4",
    "pod": "llm-pretrain-70b-run-2026-11-26-worker-0123-7f9c8d6b5-abcde",
    "endpoint": "gpu-metrics", "service": "nvidia-dcgm-exporter", "err_code": "0", "err_msg": "",
    "cluster": "gke-europe-west4-a3-highgpu-8g-pool-0", "Hostname_ip": "10.164.0.123",
}
"""Labels a Kubernetes dcgm-exporter series carries beside the ones that place it (about 450 bytes)."""

Value = Callable[[str, int, m.MetricName], str]
"""A sample's value as Prometheus writes it, for (host, GPU index, metric)."""

CHUNK_BYTES = 64 * 1024
"""Bytes gathered before a chunk is written."""


def default_value(host: str, gpu: int, metric: m.MetricName) -> str:
    """A plausible figure for every metric: utilization 0-99, 1-80,000 MiB used, 70-369 W, 30-79 C."""
    seed = int(host.rsplit("-", 1)[-1] or 0) * 8 + gpu
    figures = {m.GPU_UTIL.name: seed % 100, m.FB_USED.name: 1 + seed % 80000, m.FB_FREE.name: 81559 - seed % 80000,
               m.POWER_USAGE.name: 70 + seed % 300, m.GPU_TEMP.name: 30 + seed % 50}
    return str(figures.get(metric.name, 1))


def host_name(index: int) -> str:
    """The name of the fleet's ``index``-th node."""
    return f"node-{index:05d}"


class FakePrometheus:
    """The fake server; a context manager that starts it on a free loopback port and stops it on exit."""

    def __init__(self, hosts: int, gpus: int = 8, *, metrics: tuple[m.MetricName, ...] = DEFAULT_METRICS,
                 extra_labels: dict[str, str] | None = None, value: Value = default_value, gzip: bool = False) -> None:
        self.hosts = hosts
        """Nodes in the fleet."""
        self.gpus = gpus
        """GPUs per node."""
        self.metrics = {metric.name: metric for metric in metrics}
        """The device metrics served, by name."""
        self.extra_labels = dict(extra_labels or {})
        """Labels added to every series."""
        self.value = value
        """Each sample's value."""
        self.gzip = gzip
        """Compress the answers of clients that accept gzip."""
        self.bytes_sent = 0
        """Bytes of answer bodies written so far (compressed where they were)."""
        self.queries: list[str] = []
        """The ``query`` parameter of every request, in order."""
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-prometheus", daemon=True)

    @property
    def url(self) -> str:
        """The server's base URL."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakePrometheus:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, query: str, times: list[float]) -> Iterator[str]:
        """The JSON of the answer to ``query`` at ``times`` (one instant, or a range's steps), in pieces."""
        kind = "vector" if len(times) == 1 and not query.startswith("range:") else "matrix"
        query = query.removeprefix("range:")
        names = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", query))
        yield f'{{"status":"success","data":{{"resultType":"{kind}","result":['
        aggregated = "max by" in query  # Prometheus keeps only the labels named in ``by (...)``
        extra = "" if aggregated else "".join(f",{json.dumps(k)}:{json.dumps(v)}" for k, v in self.extra_labels.items())
        first = True
        if "up" in names:
            for h in range(self.hosts):
                labels = f'{{"__name__":"up","instance":"10.{h // 250}.{h % 250}.1:9400","job":"dcgm"{extra}}}'
                yield ("" if first else ",") + self._item(labels, kind, times, "1")
                first = False
        for name in sorted(names & set(self.metrics)):
            metric = self.metrics[name]
            for h in range(self.hosts):
                host = host_name(h)
                for gpu in range(self.gpus):
                    identity = (f',"UUID":"GPU-{h:08x}-{gpu:04x}","modelName":"NVIDIA H100 80GB HBM3"'
                                if metric is m.GPU_UTIL else "")
                    labels = (f'{{"__name__":"{name}","Hostname":"{host}","gpu":"{gpu}",'
                              f'"instance":"10.{h // 250}.{h % 250}.1:9400"{identity}{extra}}}')
                    yield ("" if first else ",") + self._item(labels, kind, times, self.value(host, gpu, metric))
                    first = False
        yield "]}}"

    @staticmethod
    def _item(labels: str, kind: str, times: list[float], value: str) -> str:
        if kind == "vector":
            return f'{{"metric":{labels},"value":[{times[0]:.3f},"{value}"]}}'
        return f'{{"metric":{labels},"values":[' + ",".join(f'[{t:.3f},"{value}"]' for t in times) + "]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                query = params.get("query", "")
                with fake._lock:
                    fake.queries.append(query)
                if parts.path == "/api/v1/query":
                    times = [float(params.get("time", "1800000000"))]
                elif parts.path == "/api/v1/query_range":
                    start, end, step = (float(params[k]) for k in ("start", "end", "step"))
                    count = int((end - start) / step) + 1
                    times = [start + i * step for i in range(count)]
                    query = "range:" + query
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                gzipped = fake.gzip and "gzip" in self.headers.get("Accept-Encoding", "")
                if gzipped:
                    self.send_header("Content-Encoding", "gzip")
                self.end_headers()
                try:
                    self._stream(fake.answer(query, times), zlib.compressobj(wbits=31) if gzipped else None)
                except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: its right
                    self.close_connection = True

            def _stream(self, pieces: Iterator[str], compressor: zlib._Compress | None) -> None:
                pending: list[str] = []
                size = 0
                for piece in [*pieces, ""]:
                    pending.append(piece)
                    size += len(piece)
                    if size >= CHUNK_BYTES or not piece:
                        data = "".join(pending).encode()
                        if compressor is not None:
                            data = compressor.compress(data) + (b"" if piece else compressor.flush())
                        pending, size = [], 0
                        if data:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                            with fake._lock:
                                fake.bytes_sent += len(data)
                self.wfile.write(b"0\r\n\r\n")

        return Handler
