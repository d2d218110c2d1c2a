"""The cluster client on the wire: one kept-alive connection per poll (and across polls), answers gzipped.

A counting TCP proxy sits between ``gpusight --cluster`` and a real Prometheus scraping dcgm-exporter's output,
so what is counted is what the network carries. A fake server that closes every connection after its answer
shows that a kept-alive connection the server dropped is replaced silently.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpusight.cluster.prom import PrometheusClient, PrometheusError
from gpusight.cluster.source import ClusterSource
from support.exposition import ExpositionServer
from support.prometheus import PrometheusServer, Target, require_prometheus
from support.tcp_counter import CountingProxy

REPO = Path(__file__).resolve().parents[1]
DCGM_SAMPLE = REPO / "tests" / "data" / "cluster" / "dcgm-exporter-3.3.txt"


@pytest.fixture(scope="module")
def proxied():
    """A counting proxy in front of a real Prometheus scraping eight dcgm-exporter nodes."""
    require_prometheus()
    sample = DCGM_SAMPLE.read_bytes()
    server = ExpositionServer({f"/node{i}": (lambda i=i: sample.replace(b"dgx-a100-01", f"dgx-a100-0{i}".encode()))
                               for i in range(1, 9)})
    targets = [Target(server.address, f"/node{i}", f"10.0.0.{i}:9400") for i in range(1, 9)]
    with PrometheusServer(targets) as prometheus:
        proxy = CountingProxy(("127.0.0.1", prometheus.port))
        yield proxy
        proxy.close()
    server.close()


def requests_seen(proxy: CountingProxy) -> list[str]:
    """The request heads clients sent through ``proxy``."""
    text = proxy.requests.decode("latin-1")
    return [head for head in text.split("\r\n\r\n") if head.startswith("GET ")]


def test_one_poll_is_one_connection_asking_for_gzip(proxied):
    proxied.reset()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "gpusight", "--cluster", f"http://{proxied.address}", "--once"],
                            capture_output=True, text=True, env=env, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "dgx-a100-01" in result.stdout
    heads = requests_seen(proxied)
    assert len(heads) >= 5  # every query of the poll...
    assert proxied.connections == 1  # ...over one connection
    for head in heads:
        assert re.search(r"^Accept-Encoding: gzip$", head, re.M | re.I), head
    # the same requests without gzip, straight to Prometheus: the wire carried far fewer bytes than they take
    plain = sum(len(identity(proxied.upstream, head)) for head in heads)
    assert proxied.received < plain / 2, (proxied.received, plain)


def identity(upstream: tuple[str, int], head: str) -> bytes:
    """The body of the request ``head`` sent again to ``upstream`` without asking for gzip."""
    path = head.split(" ", 2)[1]
    with urllib.request.urlopen(f"http://{upstream[0]}:{upstream[1]}{path}", timeout=10) as answer:
        assert answer.headers.get("Content-Encoding") is None
        return bytes(answer.read())


def test_polls_keep_their_connection_and_read_gzip(proxied):
    source = ClusterSource(f"http://{proxied.address}", history_seconds=20)
    first = source.poll()
    assert not first.problems and first.nodes
    proxied.reset()
    second = source.poll("dgx-a100-01")
    assert not second.problems and [n.host for n in second.nodes] == [n.host for n in first.nodes]
    assert proxied.connections == 0  # the second poll reused the first poll's connection
    assert len(requests_seen(proxied)) >= 5


VECTOR_UP = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"__name__": "up"}, "value": [1.0, "1"]}]}}).encode()


@contextlib.contextmanager
def one_answer_per_connection(hold_first: bool = False) -> Iterator[tuple[str, list[socket.socket]]]:
    """A raw HTTP server answering one query per connection (HTTP/1.1, a length, gzip: a client would keep the
    connection) and then hanging up; with ``hold_first`` the first connection is accepted and never answered.
    Yields its URL and the connections accepted."""
    body = gzip.compress(VECTOR_UP)
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted.append(connection)
            if hold_first and len(accepted) == 1:
                continue
            with connection:
                request = b""
                while b"\r\n\r\n" not in request and (chunk := connection.recv(65536)):
                    request += chunk
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                                   + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    finally:
        listener.close()
        for connection in accepted:
            connection.close()


def test_a_kept_alive_connection_the_server_closed_is_replaced_silently():
    """The server hangs up after each answer, as a server closing idle connections does: every query still
    succeeds, each on a new connection."""
    with one_answer_per_connection() as (url, accepted):
        client = PrometheusClient(url, timeout=5)
        for _ in range(3):
            assert [s.labels for s in client.query("up")] == [{"__name__": "up"}]
        assert len(accepted) == 3


def test_after_a_query_too_slow_the_next_one_gets_a_fresh_connection():
    """The first connection is never answered (the query is too slow); the client must not send the next query
    down that connection, still waiting for its first answer."""
    with one_answer_per_connection(hold_first=True) as (url, accepted):
        client = PrometheusClient(url, timeout=1)
        with pytest.raises(PrometheusError, match="too slow"):
            client.query("up")
        assert [s.labels for s in client.query("up")] == [{"__name__": "up"}]
        assert len(accepted) == 2


def test_a_gzipped_answer_that_trickles_in_hits_the_whole_request_deadline():
    """A gzipped answer sent a byte at a time for up to a minute: each read gets a byte well within the timeout,
    but the answer as a whole takes longer, so the query is 'too slow' (a hang guard, not a timing target)."""
    body = gzip.compress(b" " * (1 << 22))
    listener = socket.create_server(("127.0.0.1", 0))

    def trickle() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                               + f"Content-Length: {len(body)}\r\n\r\n".encode())
            stop = time.monotonic() + 60
            for byte in body:
                if time.monotonic() > stop:
                    return
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    return
                time.sleep(0.05)

    threading.Thread(target=trickle, daemon=True).start()
    started = time.monotonic()
    try:
        with pytest.raises(PrometheusError, match=r"too slow: a query took > 1 s"):
            PrometheusClient(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=1).query("up")
    finally:
        listener.close()
    assert time.monotonic() - started < 30
