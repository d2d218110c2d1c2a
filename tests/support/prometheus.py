"""A real Prometheus server (Debian's ``prometheus``) on a loopback port, for tests and benchmarks.

``PrometheusServer`` writes a config scraping the given targets every second, starts ``prometheus`` in its own
process group with a temporary data directory, waits until it is ready and has scraped every target, and on
``stop`` kills the group and removes its files. ``require_prometheus`` skips a test when the binary is missing
(the README's test command installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

PROMETHEUS = "prometheus"
"""The binary looked up on PATH."""

SKIP_REASON = "Prometheus is not installed (apt-get install prometheus; the README's test command does)"
"""Why Prometheus tests are skipped without it."""


def require_prometheus() -> str:
    """The path of ``prometheus``; skips the calling test when it is not on PATH."""
    import pytest

    path = shutil.which(PROMETHEUS)
    if path is None:
        pytest.skip(SKIP_REASON)
    return path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Target:
    """One scrape target: an address, its metrics path and the ``instance`` label Prometheus gives it."""

    address: str
    """``HOST:PORT``."""
    metrics_path: str = "/metrics"
    """The path scraped."""
    instance: str | None = None
    """The ``instance`` label (default: the address); lets one server stand for many targets."""


@dataclass
class PrometheusServer:
    """One Prometheus process scraping ``targets``; use as a context manager or call start/stop."""

    targets: list[Target]
    """What it scrapes."""
    scrape_interval: str = "1s"
    """Its scrape (and evaluation) interval."""
    honor_labels: bool = False
    """Keep the targets' own ``instance``/``job`` labels on conflict."""
    scrape_timeout: str = "1s"
    """How long one scrape may take."""
    scrape_settings: dict[str, object] = field(default_factory=dict)
    """More settings of the scrape job, e.g. ``scheme``, ``tls_config`` and ``basic_auth``."""
    web_config: dict[str, object] | None = None
    """Its ``--web.config.file`` (exporter-toolkit format: ``tls_server_config``, ``basic_auth_users``), if any."""
    check_tls: ssl.SSLContext | None = None
    """With a web config's TLS: the context its own readiness checks use (it may hold a client certificate)."""
    check_headers: dict[str, str] = field(default_factory=dict)
    """Headers its own readiness checks send (an Authorization the web config asks for)."""
    port: int = 0
    """Its HTTP port (chosen on start)."""
    directory: Path | None = None
    """Its config and data folder (removed on stop)."""
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    """The running server."""

    @property
    def url(self) -> str:
        """Its base URL."""
        scheme = "https" if self.web_config and "tls_server_config" in self.web_config else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def config(self) -> str:
        """The configuration file's text (YAML is a superset of JSON, so it is written as JSON)."""
        static = []
        for target in self.targets:
            labels = {"__metrics_path__": target.metrics_path}
            if target.instance is not None:
                labels["instance"] = target.instance
            static.append({"targets": [target.address], "labels": labels})
        return json.dumps({
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval,
                       "scrape_timeout": self.scrape_timeout},
            "scrape_configs": [{"job_name": "gpu", "honor_labels": self.honor_labels, "static_configs": static,
                                **self.scrape_settings}],
        }, indent=1)

    def start(self, timeout: float = 30.0) -> PrometheusServer:
        """Start it and wait until it is ready and has scraped every target once; returns itself."""
        binary = shutil.which(PROMETHEUS)
        if binary is None:
            raise RuntimeError(SKIP_REASON)
        self.directory = Path(tempfile.mkdtemp(prefix="gpusight-prometheus-"))
        config = self.directory / "prometheus.yml"
        config.write_text(self.config(), encoding="utf-8")
        self.port = free_port()
        flags = []
        if self.web_config is not None:
            web = self.directory / "web.yml"
            web.write_text(json.dumps(self.web_config), encoding="utf-8")
            flags.append(f"--web.config.file={web}")
        log = open(self.directory / "prometheus.log", "wb")  # noqa: SIM115 - the child keeps writing to it
        self.process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={self.directory / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h",
             "--log.level=warn", "--query.lookback-delta=5m", *flags],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        try:
            self._wait(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _get(self, path: str) -> bytes:
        request = urllib.request.Request(self.url + path, headers=self.check_headers)
        with urllib.request.urlopen(request, timeout=2, context=self.check_tls) as answer:
            return bytes(answer.read())

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.process.returncode}: {self.log()[-2000:]}")
            try:
                self._get("/-/ready")
                if self.scraped() >= len(self.targets):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"prometheus did not scrape its {len(self.targets)} targets in {timeout} s: "
                           f"{self.log()[-2000:]}")

    def scraped(self) -> int:
        """How many targets have been scraped at least once."""
        targets = json.loads(self._get("/api/v1/targets?state=active"))["data"]["activeTargets"]
        return sum(1 for t in targets if not t["lastScrape"].startswith("0001-"))

    def target_health(self) -> dict[str, str]:
        """``instance`` -> ``up``/``down``/``unknown``, as Prometheus sees its targets now."""
        targets = json.loads(self._get("/api/v1/targets?state=active"))["data"]["activeTargets"]
        return {t["labels"]["instance"]: t["health"] for t in targets}

    def log(self) -> str:
        """What the server logged."""
        if self.directory is None:
            return ""
        path = self.directory / "prometheus.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Kill its process group and remove its files."""
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.process.wait(10)
        self.process = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
