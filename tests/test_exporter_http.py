"""``gpusight --serve``'s HTTP side, for real: paths, gzip, TLS, basic auth, addresses, errors, signals, backlog."""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from gpusight import metric_names as names
from gpusight.prometheus_exporter.server import LISTEN_BACKLOG, ExporterServer, ListenAddress
from support.exporter import gpusight_serve_argv, read_announcement, serving
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env


@pytest.fixture
def env(tmp_path: Path, fake_nvml_lib: Path) -> dict[str, str]:
    """The fake NVML with two GPUs."""
    return fake_nvml_env(fake_nvml_lib, FakeScenario(gpus=[FakeGpu(), FakeGpu()]).write(tmp_path / "scenario.txt"))


def _fails(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run gpusight expecting it to stop at once."""
    return subprocess.run([sys.executable, "-m", "gpusight", *argv], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def test_metrics_landing_page_404_and_gzip(env) -> None:
    with serving([], env) as running:
        running.wait_for(names.GPU_UTIL.name)
        status, headers, body = running.get("/")
        assert status == 200 and b'href="/metrics"' in body
        status, _, body = running.get("/secrets")
        assert status == 404
        status, headers, body = running.get("/metrics", {"Accept-Encoding": "gzip"})
        assert status == 200 and headers["Content-Encoding"] == "gzip"
        assert names.GPU_UTIL.name in gzip.decompress(body).decode()
        status, headers, body = running.get("/metrics")
        assert "Content-Encoding" not in headers and body.startswith(b"# HELP")


def test_it_listens_on_loopback_by_default_with_a_long_backlog(env) -> None:
    with serving([], env, listen="0") as running:
        assert running.url.startswith("http://127.0.0.1:")
        port = running.url.rsplit(":", 1)[1]
        if shutil.which("ss") is None:
            pytest.skip("ss (iproute2) is not installed")
        listing = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True,
                                 check=True).stdout.split()
        somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
        assert listing[0] == "LISTEN" and int(listing[2]) == min(LISTEN_BACKLOG, somaxconn)  # Send-Q: the backlog
        assert listing[3] == f"127.0.0.1:{port}"


def test_idle_connections_do_not_hold_up_scrapes(env) -> None:
    with serving([], env) as running:
        host, port = running.url[len("http://"):].rsplit(":", 1)
        idle = [socket.create_connection((host, int(port))) for _ in range(64)]
        try:
            for _ in range(3):
                running.scrape()
        finally:
            for connection in idle:
                connection.close()


def test_ipv6_loopback(env) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this Python")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    with serving([], env, listen="[::1]:0") as running:
        assert running.url.startswith("http://[::1]:")
        assert names.BUILD_INFO.name in running.scrape()


def test_demo_data_is_served_labelled_as_demo_with_the_hostname_given() -> None:
    with serving(["--demo", "--hostname", "node-7"]) as running:
        text = running.wait_for(names.GPU_UTIL.name)
    assert 'source="demo"' in text and 'Hostname="node-7",hostname="node-7"' in text


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 made with the openssl CLI: (cert, key)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   capture_output=True, check=True, timeout=60)
    return cert, key


def test_tls_from_the_certificate_flags(env, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    trust = ssl.create_default_context(cafile=str(cert))
    with serving(["--serve-tls-cert", str(cert), "--serve-tls-key", str(key)], env) as running:
        assert running.url.startswith("https://127.0.0.1:")
        assert names.BUILD_INFO.name in running.scrape(context=trust)
        plain = "http://" + running.url[len("https://"):]
        with pytest.raises(OSError):  # plain HTTP to the TLS port gets no HTTP answer
            urllib.request.urlopen(plain + "/metrics", timeout=10).read()
        running.scrape(context=trust)  # still serving


def test_serve_errors_are_one_line_and_exit_2(env, tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    cases = [
        ([f"127.0.0.1:{port}"], "cannot listen on 127.0.0.1:"),
        (["nine-thousand"], "the port must be a number"),
        (["70000"], "the port must be a number"),
        (["::1:9400"], "expected [ADDR:]PORT"),
        (["no-such-host.invalid:9400"], "cannot listen on 'no-such-host.invalid'"),
        (["0", "--serve-tls-cert", str(tmp_path / "no.pem"), "--serve-tls-key", str(tmp_path / "no.key")],
         "cannot load the TLS certificate"),
    ]
    try:
        for argv, expected in cases:
            result = _fails(["--serve", *argv], env)
            assert result.returncode == 2, (argv, result.stderr)
            lines = result.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("gpusight: ") and expected in lines[0], lines
    finally:
        taken.close()


@pytest.mark.parametrize("argv", [
    ["--serve", "0", "--serve-tls-cert", "cert.pem"],
    ["--hostname", "x"],
    ["--serve-cmdline"],
    ["--serve", "0", "--once"],
    ["--serve", "0", "--json"],
])
def test_usage_errors(env, argv: list[str]) -> None:
    result = _fails(argv, env)
    assert result.returncode == 2 and "error:" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_it_cleanly(env, sig: signal.Signals) -> None:
    proc = subprocess.Popen(gpusight_serve_argv(), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        read_announcement(proc)
        time.sleep(0.3)
        os.kill(proc.pid, sig)
        assert proc.wait(15) == 0
        assert proc.stderr is not None and b"Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _connection_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "gpusight-exporter-connection"]


def test_connection_threads_are_reused_and_a_stalled_client_gets_its_own() -> None:
    def app(environ: dict[str, object], start_response: Callable[..., object]) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok\n"]

    before = set(_connection_threads())
    server = ExporterServer(ListenAddress("127.0.0.1", 0), app)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for _ in range(5):
            with urllib.request.urlopen(server.url + "/", timeout=10) as response:
                assert response.read() == b"ok\n"
            time.sleep(0.05)  # the thread is back to waiting for the next connection
        assert len(set(_connection_threads()) - before) == 1
        with socket.create_connection(("127.0.0.1", server.server_port)) as stalled:  # sends nothing
            time.sleep(0.2)
            with urllib.request.urlopen(server.url + "/", timeout=5) as response:
                assert response.read() == b"ok\n"
            assert len(set(_connection_threads()) - before) == 2
            stalled.close()
    finally:
        server.shutdown()
        server.server_close()
