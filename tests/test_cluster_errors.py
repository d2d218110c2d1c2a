"""``gpusight --cluster URL --once``: every way the server can fail gives one clear line and exit 1, never a hang
or a traceback. The servers here are real sockets: nothing listening, one that never answers, HTTP servers
that are not Prometheus, and a real Prometheus behind a proxy asking for basic auth."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpusight.cluster.prom import PrometheusClient, PrometheusError
from gpusight.cluster.source import ClusterSource
from support.auth_proxy import AuthProxy
from support.exposition import ExpositionServer
from support.prometheus import PrometheusServer, free_port, require_prometheus

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "gpusight", "--cluster", *args], capture_output=True, text=True,
                          env=env, timeout=60, check=False)


def one_line_failure(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("gpusight: ")
    return lines[0]


@pytest.mark.parametrize(("url", "expected"), [
    ("localhost:9090", "bad URL 'localhost:9090': expected http://HOST:PORT"),
    ("http://", "bad URL 'http://': expected http://HOST:PORT"),
    ("ftp://prometheus:9090", "bad URL 'ftp://prometheus:9090'"),
    ("http://prometheus:notaport", "bad URL 'http://prometheus:notaport'"),
    ("http://prometheus:9090/?x=1", "without ?query"),
    ("http://no-such-host.invalid:9090", "cannot reach Prometheus at http://no-such-host.invalid:9090: "
                                         "cannot resolve its host name"),
])
def test_bad_urls(url, expected):
    assert expected in one_line_failure(run_cli(url, "--once"))


def test_nothing_listening():
    port = free_port()
    line = one_line_failure(run_cli(f"http://127.0.0.1:{port}", "--once"))
    assert line == f"gpusight: cannot reach Prometheus at http://127.0.0.1:{port}: connection refused " \
                   "(is Prometheus running there?)"


def test_a_server_that_never_answers_is_slow_not_a_hang():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # accepts connections (the kernel does), never reads or answers
        port = listener.getsockname()[1]
        started = time.monotonic()
        line = one_line_failure(run_cli(f"http://127.0.0.1:{port}", "--once", "--cluster-timeout", "1.5"))
        elapsed = time.monotonic() - started
    assert line == f"gpusight: Prometheus at http://127.0.0.1:{port} is too slow: a query took > 1.5 s"
    assert elapsed < 30  # one timeout, not one per query


@contextmanager
def trickling(head: bytes, drip: bytes, every: float, connections: int) -> Iterator[int]:
    """A loopback server answering each of its first ``connections`` connections with ``head``, then ``drip`` every
    ``every`` seconds until the client hangs up; yields its port."""
    def serve(connection: socket.socket) -> None:
        with connection:
            connection.recv(65536)
            try:
                connection.sendall(head)
                while True:
                    connection.sendall(drip)
                    time.sleep(every)
            except OSError:
                return

    def accept(listener: socket.socket) -> None:
        for _ in range(connections):
            try:
                connection = listener.accept()[0]
            except OSError:  # the listener closed: the test is over
                return
            serve(connection)

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        threading.Thread(target=accept, args=(listener,), daemon=True).start()
        yield listener.getsockname()[1]


def test_a_server_that_trickles_its_answer_hits_the_whole_request_deadline():
    with trickling(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n", b" ", 0.1, 1) as port:
        client = PrometheusClient(f"http://127.0.0.1:{port}", timeout=1.0)
        with pytest.raises(PrometheusError, match=r"too slow: a query took > 1 s"):
            client.query("up")


def test_a_server_that_trickles_its_headers_hits_the_whole_request_deadline():
    """Headers sent a byte at a time, forever: each byte would restart a socket timeout, so only a deadline for the
    whole answer stops the wait (the real binary, one line, exit 1)."""
    with trickling(b"HTTP/1.1 200 OK\r\n", b"X", 0.2, 8) as port:
        line = one_line_failure(run_cli(f"http://127.0.0.1:{port}", "--once", "--cluster-timeout", "1"))
    assert line == f"gpusight: Prometheus at http://127.0.0.1:{port} is too slow: a query took > 1 s"


def test_a_server_that_does_not_speak_http():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = listener.getsockname()[1]

        def banner() -> None:
            for _ in range(8):
                try:
                    connection, _ = listener.accept()
                except OSError:  # the test closed the listener: it has its answer
                    return
                with connection:
                    connection.sendall(b"SSH-2.0-OpenSSH_9.2p1\r\n")

        threading.Thread(target=banner, daemon=True).start()
        line = one_line_failure(run_cli(f"http://127.0.0.1:{port}", "--once"))
    assert line == f"gpusight: http://127.0.0.1:{port} does not answer like a Prometheus server (BadStatusLine)"


def test_an_http_server_that_is_not_prometheus():
    server = ExpositionServer({"/": lambda: b"<html>hello</html>"})
    try:
        line = one_line_failure(run_cli(f"http://{server.address}", "--once"))
    finally:
        server.close()
    assert line == f"gpusight: http://{server.address} is not a Prometheus server (HTTP 404 for /api/v1/query_range)"


def test_a_server_answering_html_everywhere():
    page = b"<html>login</html>"
    server = ExpositionServer({"/api/v1/query_range": lambda: page, "/api/v1/query": lambda: page})
    try:
        line = one_line_failure(run_cli(f"http://{server.address}/", "--once"))
    finally:
        server.close()
    assert line == f"gpusight: http://{server.address} does not answer like a Prometheus server " \
                   "(no API JSON at /api/v1/query_range)"


def test_json_output_still_carries_the_problem():
    port = free_port()
    result = run_cli(f"http://127.0.0.1:{port}", "--json")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert '"problems": [\n    "cannot reach Prometheus' in result.stdout


def test_the_poll_never_raises_and_says_why():
    frame = ClusterSource(f"http://127.0.0.1:{free_port()}").poll("node-a")
    assert frame.nodes == () and len(frame.problems) == 1 and "connection refused" in frame.problems[0]


@pytest.fixture(scope="module")
def prometheus():
    require_prometheus()
    with PrometheusServer([]) as server:
        yield server


def test_query_errors_from_prometheus_are_one_line(prometheus):
    client = PrometheusClient(prometheus.url)
    with pytest.raises(PrometheusError) as caught:
        client.query("sum(")
    assert str(caught.value).startswith("Prometheus refused a query (bad_data: ")
    assert "\n" not in str(caught.value) and not caught.value.fatal


def test_an_empty_prometheus_says_so(prometheus):
    result = run_cli(prometheus.url, "--once")
    assert result.returncode == 0, result.stderr
    assert "0 nodes, 0 GPUs" in result.stdout
    assert "this Prometheus scrapes no targets" in result.stdout


def test_basic_auth_in_the_url(prometheus):
    """A proxy in front of the real Prometheus that wants user:secret; the client sends it, and not in the URL.
    Credentials in the URL still work, with a warning pointing at --cluster-config."""
    expected = "Basic " + base64.b64encode(b"user:s3cr@t").decode()
    seen: list[str] = []

    def forward(path: str, authorization: str | None) -> tuple[int, bytes]:
        seen.append(path)
        if authorization != expected:
            return 401, b"Unauthorized"
        with urllib.request.urlopen(prometheus.url + path, timeout=5) as answer:
            return 200, answer.read()

    proxy = AuthProxy(forward)
    try:
        ok = run_cli(f"http://user:s3cr%40t@{proxy.address}", "--once")
        refused = run_cli(f"http://user:wrong@{proxy.address}", "--once")
        anonymous = one_line_failure(run_cli(f"http://{proxy.address}", "--once"))
    finally:
        proxy.close()
    assert ok.returncode == 0, ok.stderr
    assert f"gpusight --cluster http://{proxy.address} at" in ok.stdout  # no password shown
    assert "s3cr" not in ok.stdout + ok.stderr and "s3cr" not in "".join(seen)
    warning = "gpusight: warning: the --cluster URL holds credentials, which ps and shell history show; " \
              "put them in a --cluster-config file instead (basic_auth with a password_file)"
    assert ok.stderr.splitlines() == [warning]
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.splitlines() == [warning, f"gpusight: Prometheus at http://{proxy.address} refused access "
                                                    "(HTTP 401): the credentials given were not accepted"]
    assert anonymous == f"gpusight: Prometheus at http://{proxy.address} refused access (HTTP 401): " \
                        "give credentials with --cluster-config FILE (see docs/cluster.md)"


@pytest.mark.parametrize("flag", [["--demo"], ["--replay", "x.jsonl"], ["--record", "x.jsonl"], ["--gpus", "0"],
                                  ["--user", "root"], ["--serve", "9400"]])
def test_flags_that_make_no_sense_with_cluster_are_usage_errors(flag):
    result = run_cli("http://127.0.0.1:9", *flag)
    assert result.returncode == 2 and result.stdout == ""
    assert f"--cluster cannot be combined with {flag[0]}" in result.stderr
